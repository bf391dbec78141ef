package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// wantRemoteAccessError checks that err is the failure of an access the
// peer's device refused: REM_ACCESS_ERR, which ends the connection.
func wantRemoteAccessError(t *testing.T, what string, err error) {
	t.Helper()
	var wce *verbs.WCError
	if !errors.As(err, &wce) || wce.Status != verbs.WCRemAccessErr || !errors.Is(err, verbs.ErrRemoteAccess) {
		t.Fatalf("%s: %v, want REM_ACCESS_ERR from the peer's device", what, err)
	}
}

// fill sets every byte of b to v.
func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

// wantAll checks every byte of b is v.
func wantAll(t *testing.T, what string, b []byte, v byte) {
	t.Helper()
	for i, c := range b {
		if c != v {
			t.Fatalf("%s: byte %d is %#x, want %#x", what, i, c, v)
		}
	}
}

// TestExposureIsEnforcedByTheDevice: an exposure's key reaches exactly its
// range with exactly its rights. Each access outside them (a byte past
// either end, a right not granted, another buffer's address, the arena's
// own key, a receive buffer) fails at the peer with REM_ACCESS_ERR and
// leaves every byte of the peer's memory as it was. The references are
// forged as a careless or hostile peer would: the local check of a
// reference's length is not what stops them.
func TestExposureIsEnforcedByTheDevice(t *testing.T) {
	rtA, rtB := twoHosts(t)
	testExposureEnforced(t, ctxT(t), rtA, rtB)
}

func testExposureEnforced(t *testing.T, ctx context.Context, rtA, rtB *runtime.Runtime) {
	// Three neighbouring 4 KiB blocks at the server; the middle one is
	// exposed for READ and WRITE.
	mem := alloc(t, rtB, 3*4096)
	fill(mem.Bytes(), 0xee)
	exp, err := mem.ExposeRange(4096, 4096, runtime.RemoteRead|runtime.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	ref := exp.RemoteRef()
	if ref.Len != 4096 {
		t.Fatalf("exposure of %d bytes", ref.Len)
	}
	other := alloc(t, rtB, 64)
	fill(other.Bytes(), 0xdd)
	local := alloc(t, rtA, 8192)
	fill(local.Bytes(), 0x11)

	cli, _ := connectRuntimes(t, rtA, rtB)
	if _, err := cli.Write(ctx, local.Slice(0, 4096), ref).Wait(ctx); err != nil {
		t.Fatalf("WRITE of the exposed range: %v", err)
	}
	if _, err := cli.Read(ctx, local.Slice(4096, 4096), ref).Wait(ctx); err != nil {
		t.Fatalf("READ of the exposed range: %v", err)
	}
	wantAll(t, "exposed range after the WRITE", mem.Bytes()[4096:8192], 0x11)
	fill(mem.Bytes()[4096:8192], 0xee)

	forged := func(addr uint64, rkey uint32, n uint64) runtime.RemoteRef {
		return runtime.RemoteRef{Addr: addr, RKey: rkey, Len: n}
	}
	for _, tc := range []struct {
		name string
		op   func(cli *runtime.Endpoint) runtime.Future
	}{
		{"WRITE one byte past the end", func(cli *runtime.Endpoint) runtime.Future {
			return cli.Write(ctx, local.Slice(0, 8), forged(ref.Addr+4096-7, ref.RKey, 8))
		}},
		{"WRITE one byte before the start", func(cli *runtime.Endpoint) runtime.Future {
			return cli.Write(ctx, local.Slice(0, 8), forged(ref.Addr-1, ref.RKey, 8))
		}},
		{"READ one byte past the end", func(cli *runtime.Endpoint) runtime.Future {
			return cli.Read(ctx, local.Slice(0, 8), forged(ref.Addr+4096-7, ref.RKey, 8))
		}},
		{"atomic without RemoteAtomic", func(cli *runtime.Endpoint) runtime.Future {
			return cli.FetchAdd(ctx, ref.Slice(0, 8), 1)
		}},
		{"WRITE to another buffer with the key", func(cli *runtime.Endpoint) runtime.Future {
			return cli.Write(ctx, local.Slice(0, 8), forged(runtime.ArenaRef(other).Addr, ref.RKey, 8))
		}},
		{"WRITE with the arena's own key", func(cli *runtime.Endpoint) runtime.Future {
			return cli.Write(ctx, local.Slice(0, 8), runtime.ArenaRef(other).Slice(0, 8))
		}},
		{"READ with the arena's own key", func(cli *runtime.Endpoint) runtime.Future {
			return cli.Read(ctx, local.Slice(0, 8), runtime.ArenaRef(other).Slice(0, 8))
		}},
		{"atomic with the arena's own key", func(cli *runtime.Endpoint) runtime.Future {
			return cli.FetchAdd(ctx, runtime.ArenaRef(other).Slice(0, 8), 1)
		}},
	} {
		cli, _ := connectRuntimes(t, rtA, rtB)
		_, err := tc.op(cli).Wait(ctx)
		wantRemoteAccessError(t, tc.name, err)
		wantAll(t, tc.name+": the server's blocks", mem.Bytes(), 0xee)
		wantAll(t, tc.name+": another buffer", other.Bytes(), 0xdd)
	}

	// A receive buffer of a live endpoint is reachable by no key: not the
	// arena's, not an exposure's.
	cli, srv := connectRuntimes(t, rtA, rtB)
	rb := runtime.RecvBuffer(srv)
	before := bytes.Clone(rb.Bytes())
	_, err = cli.Write(ctx, local.Slice(0, 8), runtime.ArenaRef(rb).Slice(0, 8)).Wait(ctx)
	wantRemoteAccessError(t, "WRITE into a receive buffer with the arena's key", err)
	if !bytes.Equal(rb.Bytes(), before) {
		t.Fatal("a receive buffer changed")
	}
	cli, srv = connectRuntimes(t, rtA, rtB)
	rb = runtime.RecvBuffer(srv)
	before = bytes.Clone(rb.Bytes())
	_, err = cli.Write(ctx, local.Slice(0, 8), forged(runtime.ArenaRef(rb).Addr, ref.RKey, 8)).Wait(ctx)
	wantRemoteAccessError(t, "WRITE into a receive buffer with an exposure's key", err)
	if !bytes.Equal(rb.Bytes(), before) {
		t.Fatal("a receive buffer changed")
	}
}

// TestRevokedKeyStopsWorking: after Exposure.Close the key reaches
// nothing; after Free, not even the block's next owner, whose bytes stay
// as they were.
func TestRevokedKeyStopsWorking(t *testing.T) {
	rtA, rtB := twoHosts(t)
	testRevokedKey(t, ctxT(t), rtA, rtB)
}

func testRevokedKey(t *testing.T, ctx context.Context, rtA, rtB *runtime.Runtime) {
	local := alloc(t, rtA, 64)
	fill(local.Bytes(), 0x22)

	buf := alloc(t, rtB, 256)
	exp, err := buf.Expose(runtime.RemoteRead | runtime.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	ref := exp.RemoteRef()
	cli, _ := connectRuntimes(t, rtA, rtB)
	if _, err := cli.Write(ctx, local.Local(), ref.Slice(0, 64)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := exp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := exp.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	fill(buf.Bytes(), 0)
	_, err = cli.Write(ctx, local.Local(), ref.Slice(0, 64)).Wait(ctx)
	wantRemoteAccessError(t, "WRITE after Exposure.Close", err)
	wantAll(t, "the buffer after a revoked WRITE", buf.Bytes(), 0)

	// Free revokes what is left exposed; the block's next owner is out of
	// the old key's reach.
	exp2, err := buf.Expose(runtime.RemoteRead | runtime.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	ref2 := exp2.RemoteRef()
	buf.Free()
	next := alloc(t, rtB, 256)
	if runtime.ArenaRef(next).Addr != ref2.Addr {
		t.Fatalf("the next Alloc got %#x, not the freed block %#x: the test proves nothing", runtime.ArenaRef(next).Addr, ref2.Addr)
	}
	fill(next.Bytes(), 0x33)
	for _, op := range []string{"WRITE", "READ"} {
		cli, _ := connectRuntimes(t, rtA, rtB)
		var f runtime.Future
		if op == "WRITE" {
			f = cli.Write(ctx, local.Local(), ref2.Slice(0, 64))
		} else {
			f = cli.Read(ctx, local.Local(), ref2.Slice(0, 64))
		}
		_, err := f.Wait(ctx)
		wantRemoteAccessError(t, op+" with the key of a freed buffer", err)
		wantAll(t, "the block's next owner", next.Bytes(), 0x33)
	}
	wantAll(t, "the READ's local buffer", local.Bytes(), 0x22)
}

// TestExposeRefusesBadArguments: rights outside the three, an empty or
// out-of-range span, and a freed buffer are refused with errors that say
// so.
func TestExposeRefusesBadArguments(t *testing.T) {
	rt := newRuntime(t)
	buf := alloc(t, rt, 64)
	for name, err := range map[string]error{
		"no rights":       func() error { _, err := buf.Expose(0); return err }(),
		"unknown rights":  func() error { _, err := buf.Expose(0x80); return err }(),
		"empty range":     func() error { _, err := buf.ExposeRange(0, 0, runtime.RemoteRead); return err }(),
		"past the end":    func() error { _, err := buf.ExposeRange(1, 64, runtime.RemoteRead); return err }(),
		"negative offset": func() error { _, err := buf.ExposeRange(-1, 8, runtime.RemoteRead); return err }(),
	} {
		if !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	buf.Free()
	if _, err := buf.Expose(runtime.RemoteRead); !errors.Is(err, runtime.ErrFreed) {
		t.Errorf("Expose after Free: %v, want ErrFreed", err)
	}
	exp, _ := buf.Expose(0) // nil, with its error ignored
	if err := exp.Close(); err != nil {
		t.Errorf("Close of a nil Exposure: %v", err)
	}
}

// TestAllocIsZeroed: a block handed out again holds none of its previous
// owner's bytes.
func TestAllocIsZeroed(t *testing.T) {
	rt := newRuntime(t)
	a := alloc(t, rt, 1000)
	addr := runtime.ArenaRef(a).Addr
	fill(a.Bytes(), 0xab)
	a.Free()
	b := alloc(t, rt, 1000)
	if runtime.ArenaRef(b).Addr != addr {
		t.Fatal("the next Alloc did not reuse the block: the test proves nothing")
	}
	wantAll(t, "a reused block", b.Bytes(), 0)
}
