package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

func TestEndpointOperations(t *testing.T) {
	rt, cli, srv := pair(t)
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 4096), alloc(t, rt, 4096)
	copy(local.Bytes(), "one-sided write, then read back")

	if c, err := cli.Write(ctx, local.Slice(0, 31), refOf(t, remote)).Wait(ctx); err != nil || c.ByteLen != 31 || c.Opcode != verbs.WCRDMAWrite {
		t.Fatalf("write: %+v %v", c, err)
	}
	if got := string(remote.Bytes()[:31]); got != "one-sided write, then read back" {
		t.Fatalf("remote %q", got)
	}
	if _, err := cli.Read(ctx, local.Slice(100, 31), refOf(t, remote)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(local.Bytes()[100:131], remote.Bytes()[:31]) {
		t.Fatal("read back differs")
	}

	binary.LittleEndian.PutUint64(remote.Bytes()[512:], 10)
	c, err := cli.FetchAdd(ctx, refOf(t, remote).At(512), 5).Wait(ctx)
	if err != nil || c.Value != 10 || binary.LittleEndian.Uint64(remote.Bytes()[512:]) != 15 {
		t.Fatalf("fetch-add: %+v %v", c, err)
	}
	c, err = cli.CompareAndSwap(ctx, refOf(t, remote).At(512), 15, 99).Wait(ctx)
	if err != nil || c.Value != 15 || binary.LittleEndian.Uint64(remote.Bytes()[512:]) != 99 {
		t.Fatalf("cas: %+v %v", c, err)
	}

	copy(local.Bytes()[1000:], "a message")
	if _, err := cli.Send(ctx, local.Slice(1000, 9)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := srv.Recv(ctx)
	if err != nil || string(m.Bytes()) != "a message" {
		t.Fatalf("recv %v", err)
	}
	m.Release()

	if _, err := cli.WriteImm(ctx, local.Slice(0, 8), refOf(t, remote).At(2048), 0xabc).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	m, err = srv.Recv(ctx)
	if imm, ok := m.Imm(); err != nil || !ok || imm != 0xabc || len(m.Bytes()) != 0 {
		t.Fatalf("write-imm notification %v %v %v", imm, ok, err)
	}
	m.Release()
}

// TestConnManagerNotSupported: on a provider without a connection manager
// (soft), ListenCM and DialCM say so, naming the way that works.
func TestConnManagerNotSupported(t *testing.T) {
	rt, _, _ := pair(t)
	if _, err := rt.ListenCM("127.0.0.1:0"); !errors.Is(err, verbs.ErrNotSupported) || !strings.Contains(err.Error(), "Listen and Dial") {
		t.Errorf("ListenCM on soft: %v, want verbs.ErrNotSupported naming Listen and Dial", err)
	}
	if _, err := rt.DialCM(context.Background(), "127.0.0.1:1"); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("DialCM on soft: %v, want verbs.ErrNotSupported", err)
	}
}

// TestDefaultRuntimesReachEachOther: two runtimes made without a provider
// share the process's soft fabric, so one's endpoint writes into the
// other's memory (with a fabric each, both would have the same GIDs and QP
// numbers: the "connection" would lead to a QP of its own fabric and the
// write would be flushed).
func TestDefaultRuntimesReachEachOther(t *testing.T) {
	a, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	b, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	cli, srv := connectRuntimes(t, a, b)
	ctx := ctxT(t)
	src, dst := alloc(t, a, 64), alloc(t, b, 64)
	copy(src.Bytes(), "written from runtime a into runtime b's memory")
	if _, err := cli.Write(ctx, src.Local(), refOf(t, dst)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if string(dst.Bytes()[:46]) != "written from runtime a into runtime b's memory" {
		t.Errorf("b's memory holds %q", dst.Bytes()[:46])
	}
	if cli.RemoteAddr().String() != srv.LocalAddr().String() {
		t.Errorf("the client's peer is %v, the server is %v", cli.RemoteAddr(), srv.LocalAddr())
	}
}
