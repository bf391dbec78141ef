package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
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

// recoverErr runs f and returns the error it panicked with.
func recoverErr(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err, _ = r.(error)
			if err == nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}
	}()
	f()
	return nil
}

// TestUseAfterFree: a freed buffer's Bytes, Slice and Local panic with an
// error naming it and matching ErrFreed; an operation given a range taken
// before Free fails with ErrFreed and reaches no device; Free twice is a
// no-op.
func TestUseAfterFree(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	buf := alloc(t, rt, 64)
	ref := refOf(t, alloc(t, rt, 64))
	early := buf.Slice(0, 8)
	buf.Free()
	buf.Free()
	for name, f := range map[string]func(){
		"Bytes": func() { buf.Bytes() },
		"Slice": func() { buf.Slice(0, 8) },
		"Local": func() { buf.Local() },
	} {
		err := recoverErr(f)
		if !errors.Is(err, runtime.ErrFreed) || !bytes.Contains([]byte(err.Error()), []byte("buffer of 64 bytes")) {
			t.Errorf("%s after Free: %v, want a panic with ErrFreed naming the buffer", name, err)
		}
	}
	before, _ := verbs.PostedWRs(cli.QP())
	for name, f := range map[string]runtime.Future{
		"Write":  cli.Write(ctx, early, ref),
		"Read":   cli.Read(ctx, early, ref),
		"Send":   cli.Send(ctx, early),
		"WriteV": cli.WriteV(ctx, []runtime.Local{alloc(t, rt, 8).Local(), early}, ref),
		"Post":   cli.Post(ctx, []runtime.Op{{Opcode: verbs.OpWrite, Local: []runtime.Local{early}, Remote: ref}}),
	} {
		if _, err := f.Wait(ctx); !errors.Is(err, runtime.ErrFreed) {
			t.Errorf("%s of a freed buffer: %v, want ErrFreed", name, err)
		}
	}
	if after, _ := verbs.PostedWRs(cli.QP()); after != before {
		t.Errorf("%d WRs of freed memory posted", after-before)
	}
	// A buffer of another runtime: its key is another protection
	// domain's, which would fail the connection at the device.
	other := alloc(t, newRuntime(t), 8)
	if _, err := cli.Write(ctx, other.Local(), ref).Wait(ctx); !errors.Is(err, verbs.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "another runtime") {
		t.Errorf("Write from another runtime's buffer: %v, want ErrInvalidArgument saying so", err)
	}
	if cli.Err() != nil {
		t.Errorf("the endpoint ended: %v", cli.Err())
	}
}

// TestFreeWaitsForTheDevice: a READ whose waiter gave up still owns its
// buffer: Free defers the release, the next Alloc gets other memory, the
// READ's data lands in the freed block and not in the new owner's, and
// the block comes back once the READ completed.
func TestFreeWaitsForTheDevice(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	src := alloc(t, rt, 4096)
	fill(src.Bytes(), 0x5a)
	ref := refOf(t, src)
	dst := alloc(t, rt, 4096)
	addr := runtime.ArenaRef(dst).Addr
	if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	f := cli.Read(ctx, dst.Local(), ref)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := f.Wait(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v, want its deadline", err)
	}
	dst.Free()
	if runtime.Uses(dst) != 1 {
		t.Fatalf("%d uses of the freed buffer, want the READ's", runtime.Uses(dst))
	}
	next := alloc(t, rt, 4096)
	if runtime.ArenaRef(next).Addr == addr {
		t.Fatal("Alloc handed out a block a posted READ still owns")
	}
	if _, err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	wantAll(t, "the new owner's buffer after the READ", next.Bytes(), 0)
	again := alloc(t, rt, 4096)
	if runtime.ArenaRef(again).Addr != addr {
		t.Errorf("the block did not come back after the READ completed")
	}
	wantAll(t, "the block, reused", again.Bytes(), 0)
}

// TestMessageReleaseIsIdempotent: releasing a message twice gives its
// buffer back once (before, the next 100 messages had one duplicated and
// one overwritten); a released message's Bytes panics with ErrFreed.
func TestMessageReleaseIsIdempotent(t *testing.T) {
	rt, a, b := pair(t, runtime.WithRecvDepth(4))
	ctx := ctxT(t)
	buf := alloc(t, rt, 8)
	send := func(i int) {
		t.Helper()
		copy(buf.Bytes(), fmt.Sprintf("m%07d", i))
		if _, err := a.Send(ctx, buf.Slice(0, 8)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	send(0)
	m, err := b.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
	m.Release()
	if err := recoverErr(func() { m.Bytes() }); !errors.Is(err, runtime.ErrFreed) {
		t.Fatalf("Bytes after Release: %v, want a panic with ErrFreed", err)
	}
	var zero runtime.Message // what a failed Recv returns
	zero.Release()
	if err := recoverErr(func() { zero.Bytes() }); !strings.Contains(fmt.Sprint(err), "zero Message") {
		t.Fatalf("Bytes of the zero Message: %v, want a panic saying so", err)
	}
	var held []runtime.Message
	for i := 1; i <= 100; i++ {
		send(i)
		m, err := b.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, m)
		if len(held) == 4 {
			for j, h := range held {
				want := fmt.Sprintf("m%07d", i-3+j)
				if got := string(h.Bytes()); got != want {
					t.Fatalf("message %d: %q, want %q", i-3+j, got, want)
				}
				h.Release()
			}
			held = held[:0]
		}
	}
}

// TestHeldMessageOutlivesItsEndpoint: a message held across its
// endpoint's Close keeps its bytes while other endpoints come and go and
// receive, and is released afterwards without harm.
func TestHeldMessageOutlivesItsEndpoint(t *testing.T) {
	rt, a, b := pair(t, runtime.WithRecvDepth(4))
	ctx := ctxT(t)
	buf := alloc(t, rt, 64)
	fill(buf.Bytes(), 0x77)
	if _, err := a.Send(ctx, buf.Local()).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := b.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fill(buf.Bytes(), 0x88)
	for range 8 {
		c, d := connect(t, rt)
		for range 8 {
			if _, err := c.Send(ctx, buf.Local()).Wait(ctx); err != nil {
				t.Fatal(err)
			}
			n, err := d.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n.Release()
		}
		c.Close(ctx)
		d.Close(ctx)
	}
	wantAll(t, "the held message", m.Bytes(), 0x77)
	m.Release()
	m.Release()
}

// TestAllocSizing: Alloc of no bytes is an invalid argument; the arena
// grows on demand and, at its limit, says which option raises it, for
// Alloc and for a connection's receive buffers.
func TestAllocSizing(t *testing.T) {
	srvRT, rt := twoHosts(t, runtime.WithMemoryLimit(8<<20))
	for _, n := range []int{0, -1} {
		if _, err := rt.Alloc(n); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("Alloc(%d): %v, want ErrInvalidArgument", n, err)
		}
	}
	if got := rt.ArenaSize(); got != 0 {
		t.Errorf("arena of %d bytes before any Alloc", got)
	}
	small := alloc(t, rt, 64)
	if got := rt.ArenaSize(); got != 4<<20 {
		t.Errorf("arena of %d bytes after Alloc(64), want one chunk of 4 MiB", got)
	}
	if _, err := rt.Alloc(16 << 20); !errors.Is(err, runtime.ErrNoMemory) || !bytes.Contains([]byte(err.Error()), []byte("WithMemoryLimit")) {
		t.Errorf("Alloc past the limit: %v, want ErrNoMemory naming WithMemoryLimit", err)
	}
	big := alloc(t, rt, 4<<20) // a chunk of its own
	if got := rt.ArenaSize(); got != 8<<20 {
		t.Errorf("arena of %d bytes, want 8 MiB", got)
	}
	ln, err := srvRT.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			if _, err := ln.Accept(context.Background()); err != nil {
				return
			}
		}
	}()
	// The first chunk has room for a few hundred connections (each takes
	// its scratch and the receive buffers of its initial window from the
	// shared pool, which grows 64 buffers at a time), not for thousands.
	var dialErr error
	for range 4000 {
		if _, dialErr = rt.Dial(ctxT(t), ln.Addr().String()); dialErr != nil {
			break
		}
	}
	if !errors.Is(dialErr, runtime.ErrNoMemory) || !bytes.Contains([]byte(dialErr.Error()), []byte("WithMemoryLimit")) {
		t.Errorf("Dial past the limit: %v, want ErrNoMemory naming WithMemoryLimit", dialErr)
	}
	// The connections that were made keep every credit backed by a
	// posted receive, the pool short of memory as it is.
	if err := runtime.CheckRecvPools(rt); err != nil {
		t.Error(err)
	}
	small.Free()
	big.Free()

	// A limit below one chunk maps the limit, not a chunk it cannot have.
	tiny := newRuntime(t, runtime.WithMemoryLimit(64<<10))
	if _, err := tiny.Alloc(64); err != nil {
		t.Errorf("Alloc(64) under a 64 KiB limit: %v", err)
	}
	if _, err := tiny.Alloc(128 << 10); !errors.Is(err, runtime.ErrNoMemory) {
		t.Errorf("Alloc(128 KiB) under a 64 KiB limit: %v, want ErrNoMemory", err)
	}
	if _, err := runtime.New(runtime.WithMemoryLimit(0)); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("WithMemoryLimit(0): %v, want ErrInvalidArgument", err)
	}
	// (Before, every error of New after its first step was a nil
	// dereference in its own cleanup.)
	if _, err := runtime.New(runtime.WithDevice("no-such-device")); !errors.Is(err, verbs.ErrNotFound) {
		t.Errorf("New on a missing device: %v, want ErrNotFound", err)
	}
}

// TestRegisterOwnMemory: memory of the application's own (here a mapped
// file) is registered, used as an operation's buffer and exposed, and
// stays the application's after Free.
func TestRegisterOwnMemory(t *testing.T) {
	rtA, rtB := twoHosts(t)
	ctx := ctxT(t)
	f, err := os.CreateTemp(t.TempDir(), "region")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(8192); err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8192, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	file, err := rtB.Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := file.ExposeRange(4096, 4096, runtime.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	cli, srv := connectRuntimes(t, rtA, rtB)
	src := alloc(t, rtA, 4096)
	fill(src.Bytes(), 0x42)
	if _, err := cli.Write(ctx, src.Local(), exp.RemoteRef()).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// And as a local buffer: SEND the first page from the file.
	copy(mem, "from the file")
	if _, err := srv.Send(ctx, file.Slice(0, 13)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := cli.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Bytes()) != "from the file" {
		t.Fatalf("received %q", m.Bytes())
	}
	m.Release()
	file.Free()
	got := make([]byte, 4096)
	if _, err := f.ReadAt(got, 4096); err != nil {
		t.Fatal(err)
	}
	wantAll(t, "the file's second page", got, 0x42)
	mem[0] = 1 // still the application's, still mapped

	if _, err := rtB.Register(nil); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("Register(nil): %v, want ErrInvalidArgument", err)
	}
	// Go's heap is refused: the collector may reuse it under the device.
	if _, err := rtB.Register(make([]byte, 4096)); !errors.Is(err, verbs.ErrGoMemory) {
		t.Errorf("Register of Go heap memory: %v, want verbs.ErrGoMemory", err)
	} else {
		t.Logf("Register of Go heap memory: %v", err)
	}
}

// TestGatherAndSendBytes: a header and a block in one WRITE and in one
// SEND; a small []byte sent as a copy; more ranges than MaxGather refused.
func TestGatherAndSendBytes(t *testing.T) {
	rt, a, b := pair(t)
	ctx := ctxT(t)
	hdr, blk := alloc(t, rt, 16), alloc(t, rt, 100)
	copy(hdr.Bytes(), "header:")
	fill(blk.Bytes(), 'x')
	dst := alloc(t, rt, 256)
	c, err := a.WriteV(ctx, []runtime.Local{hdr.Slice(0, 7), blk.Local()}, refOf(t, dst)).Wait(ctx)
	if err != nil || c.ByteLen != 107 {
		t.Fatalf("WriteV: %+v, %v", c, err)
	}
	want := "header:" + string(bytes.Repeat([]byte{'x'}, 100))
	if got := string(dst.Bytes()[:107]); got != want {
		t.Fatalf("WriteV wrote %q", got)
	}
	if _, err := a.SendV(ctx, []runtime.Local{hdr.Slice(0, 7), blk.Slice(0, 3)}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SendBytes(ctx, []byte("a copy")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"header:xxx", "a copy"} {
		m, err := b.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Bytes()) != want {
			t.Fatalf("received %q, want %q", m.Bytes(), want)
		}
		m.Release()
	}
	back := alloc(t, rt, 107)
	if _, err := a.ReadV(ctx, []runtime.Local{back.Slice(0, 7), back.Slice(7, 100)}, refOf(t, dst).Slice(0, 107)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if string(back.Bytes()) != want {
		t.Fatalf("ReadV read %q", back.Bytes())
	}
	many := make([]runtime.Local, runtime.MaxGather+1)
	for i := range many {
		many[i] = blk.Slice(i, 1)
	}
	if _, err := a.WriteV(ctx, many, refOf(t, dst)).Wait(ctx); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("WriteV of %d ranges: %v, want ErrInvalidArgument", len(many), err)
	}
	if runtime.Uses(blk) != 0 {
		t.Errorf("%d uses of a buffer left after every operation resolved", runtime.Uses(blk))
	}
}

// TestRemoteRefEncoding: a reference round-trips through bytes; a wrong
// length, an unknown version and a wrapping range are refused; At and
// Slice refuse to leave the reference.
func TestRemoteRefEncoding(t *testing.T) {
	ref := runtime.RemoteRef{Addr: 0x7f00_0000_1000, RKey: 0xabcdef, Len: 5 << 30}
	b, err := ref.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got runtime.RemoteRef
	if err := got.UnmarshalBinary(b); err != nil || got != ref {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	bad := map[string][]byte{
		"short":   b[:len(b)-1],
		"long":    append(bytes.Clone(b), 0),
		"version": append([]byte{9}, b[1:]...),
		"wraps":   func() []byte { r := ref; r.Addr = ^uint64(0) - 4; e, _ := r.MarshalBinary(); return e }(),
	}
	for name, enc := range bad {
		if err := got.UnmarshalBinary(enc); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if r := ref.At(4096); r.Addr != ref.Addr+4096 || r.Len != ref.Len-4096 {
		t.Errorf("At: %+v", r)
	}
	// A decoded reference of any length works with At (a peer's bytes
	// cannot make it panic).
	huge := runtime.RemoteRef{Addr: 0, RKey: 1, Len: 1 << 63}
	enc, _ := huge.MarshalBinary()
	if err := got.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	if r := got.At(0); r != huge {
		t.Errorf("At(0) of a reference of 2^63 bytes: %+v", r)
	}
	for name, f := range map[string]func(){
		"At past the end":      func() { ref.At(int(ref.Len) + 1) },
		"At negative":          func() { ref.At(-1) },
		"Slice past the end":   func() { ref.Slice(int(ref.Len)-4, 8) },
		"Slice negative count": func() { ref.Slice(0, -1) },
	} {
		if recoverErr(f) == nil {
			t.Errorf("%s did not panic", name)
		}
	}
}

func init() { children["touch"] = touchChild }

// touchChild touches Buffers and Messages after Runtime.Close, after Free
// and Release, and from a Then callback still running when Close tore the
// runtime down. Each touch either works (the memory stays mapped while
// reachable) or panics with ErrFreed, recovered here; it ends with one
// such panic left unrecovered, which must end the process as a Go panic.
func touchChild() int {
	ctx := context.Background()
	rt, err := runtime.New()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cli, srv := examplePair(ctx, rt)
	buf, _ := rt.Alloc(4096)
	fill(buf.Bytes(), 1)
	exp, _ := buf.Expose(runtime.RemoteWrite)
	if _, err := cli.Send(ctx, buf.Slice(0, 64)).Wait(ctx); err != nil {
		fmt.Println(err)
		return 1
	}
	m, err := srv.Recv(ctx)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	touched := make(chan byte, 1)
	cli.Write(ctx, buf.Slice(0, 8), exp.RemoteRef().Slice(64, 8)).Then(func(runtime.Completion, error) {
		time.Sleep(300 * time.Millisecond) // past Close
		buf.Bytes()[100] = 2
		touched <- buf.Bytes()[0]
	})
	closeCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	rt.Close(closeCtx)
	cancel()
	for range 3 {
		goruntime.GC()
	}
	buf.Bytes()[0] = 3
	fmt.Println("after Close: buffer", buf.Bytes()[0], "message", m.Bytes()[0], "callback", <-touched)
	if _, err := cli.Write(ctx, buf.Slice(0, 8), exp.RemoteRef()).Wait(ctx); err == nil {
		fmt.Println("Write after Close:", err)
		return 1
	}
	m.Release()
	fmt.Println("message after Release:", recoverErr(func() { m.Bytes() }))
	buf.Free()
	fmt.Println("buffer after Free:", recoverErr(func() { buf.Bytes() }))
	buf.Bytes()[0] = 4 // unrecovered: a Go panic, not a fault
	return 0
}

// TestTouchAfterCloseInChild runs touchChild in a process of its own: it
// must end with a Go panic about the freed buffer, never a fault signal
// (before, touching a Buffer after Close was "fatal error: fault",
// SIGSEGV).
func TestTouchAfterCloseInChild(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=touch")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	t.Logf("child's output:\n%s", out.String())
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v, want an exit status; stderr:\n%s", err, stderr.String())
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("child killed by %v; stderr:\n%s", ws.Signal(), stderr.String())
	}
	for _, want := range []string{"after Close: buffer 3 message 1 callback", "message after Release: verbsrt: Message.Bytes",
		"buffer after Free: verbsrt: Buffer.Bytes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("child's output lacks %q", want)
		}
	}
	if ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "panic: verbsrt: Buffer.Bytes: buffer of 4096 bytes") ||
		strings.Contains(stderr.String(), "fatal error") || strings.Contains(stderr.String(), "SIGSEGV") {
		t.Fatalf("child exited with %d, want a Go panic about the freed buffer (2); stderr:\n%s", ee.ExitCode(), stderr.String())
	}
}

// TestArenaUnmappedWhenUnreachable: after Close, the arena's memory is
// unmapped once no Buffer reaches it (and not before).
func TestArenaUnmappedWhenUnreachable(t *testing.T) {
	rt, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := rt.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	addr := runtime.ArenaRef(buf).Addr
	rt.Close(context.Background())
	rt = nil
	for range 3 {
		goruntime.GC()
	}
	if !mapped(t, addr) {
		t.Fatal("the arena was unmapped while a Buffer still reached it")
	}
	buf.Bytes()[0] = 1
	buf = nil
	deadline := time.Now().Add(10 * time.Second)
	for mapped(t, addr) {
		if time.Now().After(deadline) {
			t.Fatal("the arena is still mapped 10 s after its last Buffer became unreachable")
		}
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// mapped reports whether addr is in a mapping of this process.
func mapped(t *testing.T, addr uint64) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		var lo, hi uint64
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			return true
		}
	}
	return false
}

// TestExposeRacingFree: an exposure made while its buffer is being freed
// either fails with ErrFreed or is revoked with the others: after Free no
// key of the buffer works.
func TestExposeRacingFree(t *testing.T) {
	rtA, rtB := twoHosts(t)
	ctx := ctxT(t)
	local := alloc(t, rtA, 8)
	for i := range 50 {
		buf := alloc(t, rtB, 64)
		made := make(chan *runtime.Exposure, 1)
		go func() {
			e, err := buf.Expose(runtime.RemoteWrite)
			if err != nil && !errors.Is(err, runtime.ErrFreed) {
				t.Errorf("Expose racing Free: %v", err)
			}
			made <- e
		}()
		if i%2 == 0 {
			goruntime.Gosched()
		}
		buf.Free()
		e := <-made
		if e == nil {
			continue
		}
		cli, _ := connectRuntimes(t, rtA, rtB)
		_, err := cli.Write(ctx, local.Local(), e.RemoteRef().Slice(0, 8)).Wait(ctx)
		wantRemoteAccessError(t, "WRITE with the key of an exposure made while its buffer was freed", err)
	}
}
