package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

func TestEndpointOperations(t *testing.T) {
	rt, cli, srv := pair(t)
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 4096), alloc(t, rt, 4096)
	copy(local.Bytes(), "one-sided write, then read back")

	if c, err := cli.Write(ctx, local.Slice(0, 31), remote.RemoteRef()).Wait(ctx); err != nil || c.ByteLen != 31 || c.Opcode != verbs.WCRDMAWrite {
		t.Fatalf("write: %+v %v", c, err)
	}
	if got := string(remote.Bytes()[:31]); got != "one-sided write, then read back" {
		t.Fatalf("remote %q", got)
	}
	if _, err := cli.Read(ctx, local.Slice(100, 31), remote.RemoteRef()).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(local.Bytes()[100:131], remote.Bytes()[:31]) {
		t.Fatal("read back differs")
	}

	binary.LittleEndian.PutUint64(remote.Bytes()[512:], 10)
	c, err := cli.FetchAdd(ctx, remote.RemoteRef().At(512), 5).Wait(ctx)
	if err != nil || c.Value != 10 || binary.LittleEndian.Uint64(remote.Bytes()[512:]) != 15 {
		t.Fatalf("fetch-add: %+v %v", c, err)
	}
	c, err = cli.CompareAndSwap(ctx, remote.RemoteRef().At(512), 15, 99).Wait(ctx)
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

	if _, err := cli.WriteImm(ctx, local.Slice(0, 8), remote.RemoteRef().At(2048), 0xabc).Wait(ctx); err != nil {
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
