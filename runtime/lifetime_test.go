package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

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
		"gather": cli.Post(ctx, []runtime.Op{{Opcode: verbs.OpWrite, Local: []runtime.Local{alloc(t, rt, 8).Local(), early}, Remote: ref}}),
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
	// The READ is held by the device until the test lets it go.
	if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	f := cli.Read(ctx, dst.Local(), ref)
	over, cancel := context.WithDeadline(ctx, time.Now()) // a caller that gave up waiting
	_, err := f.Wait(over)
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
	if err := soft.EndDelay(cli.QP()); err != nil {
		t.Fatal(err)
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

// TestArenaReleasedWhenUnreachable: after Close, the arena's memory keeps
// its contents while a Buffer reaches it, and goes back to the system
// once none does; its addresses stay mapped, so a slice kept past the
// Buffer reads zeros instead of faulting.
func TestArenaReleasedWhenUnreachable(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("the arena's pages are dropped (and read zeros) on Linux only")
	}
	rt, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := rt.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	addr := runtime.ArenaRef(buf).Addr
	kept := buf.Bytes()
	kept[0] = 1
	rt.Close(context.Background())
	rt = nil
	for range 3 {
		goruntime.GC()
	}
	if !mapped(t, addr) || buf.Bytes()[0] != 1 {
		t.Fatal("the arena lost its contents while a Buffer still reached it")
	}
	buf = nil
	deadline := time.Now().Add(10 * time.Second)
	for kept[0] != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the arena still holds its pages 10 s after its last Buffer became unreachable")
		}
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if !mapped(t, addr) {
		t.Fatal("the arena was unmapped under a slice of it")
	}
	kept[1] = 2
}

func init() { children["keptslice"] = keptSliceChild }

// keptSliceChild keeps a slice of a Buffer's Bytes and one of a received
// Message's Bytes, drops the Buffer and the Message without Free or
// Release, closes both runtimes, and touches the slices once their
// memory went back to the system (they read zeros then).
func keptSliceChild() int {
	ctx := context.Background()
	fabric := soft.New(soft.Config{Devices: 2})
	rtA, errA := runtime.New(runtime.WithProvider(fabric), runtime.WithDevice("soft0"))
	rtB, errB := runtime.New(runtime.WithProvider(fabric), runtime.WithDevice("soft1"))
	if err := errors.Join(errA, errB); err != nil {
		fmt.Println(err)
		return 1
	}
	s, ms, err := keptSlices(ctx, rtA, rtB)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	rtA.Close(ctx)
	rtB.Close(ctx)
	fabric.Close()
	deadline := time.Now().Add(20 * time.Second)
	for s[0] != 0 || ms[0] != 0 {
		if time.Now().After(deadline) {
			fmt.Println("the arenas hold their pages 20 s after the last Buffer and Message became unreachable")
			return 1
		}
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	s[1], ms[1] = 1, 2
	fmt.Println("kept slices after Close and GC:", s[0], s[1], ms[0], ms[1])
	return 0
}

// keptSlices returns the Bytes of a Buffer of rtA and of a Message rtB
// received, both filled with 0x5a, and drops the Buffer and the Message.
func keptSlices(ctx context.Context, rtA, rtB *runtime.Runtime) (buf, msg []byte, err error) {
	cli, srv, err := runtime.Pipe(ctx, rtA, rtB)
	if err != nil {
		return nil, nil, err
	}
	b, err := rtA.Alloc(64)
	if err != nil {
		return nil, nil, err
	}
	fill(b.Bytes(), 0x5a)
	if _, err := cli.Send(ctx, b.Local()).Wait(ctx); err != nil {
		return nil, nil, err
	}
	m, err := srv.Recv(ctx)
	if err != nil {
		return nil, nil, err
	}
	return b.Bytes(), m.Bytes(), nil
}

// TestKeptSliceAfterCloseInChild runs keptSliceChild in a process of its
// own: a slice of Buffer.Bytes or Message.Bytes kept past its Buffer or
// Message, its runtime's Close and a collection must read and write
// without faulting (before, "unexpected fault address", SIGSEGV).
func TestKeptSliceAfterCloseInChild(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("the arena's pages are dropped (and read zeros) on Linux only")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=keptslice")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	t.Logf("child's output:\n%s", out.String())
	if err != nil {
		t.Fatalf("child: %v; stderr:\n%s", err, stderr.String())
	}
	if want := "kept slices after Close and GC: 0 1 0 2"; !strings.Contains(out.String(), want) {
		t.Errorf("child's output lacks %q", want)
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

// TestPostHoldsEachBufferOnce: a batch takes one use of each buffer its
// ops name, however many of their ranges are slices of it, and gives them
// back when its future resolves; a batch refused for one op's memory
// gives back the uses it took for the others.
func TestPostHoldsEachBufferOnce(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	a, b := alloc(t, rt, 16*8), alloc(t, rt, 8)
	ref := refOf(t, alloc(t, rt, 18*8))
	ops := make([]runtime.Op, 17)
	for i := range 16 {
		ops[i] = runtime.Op{Opcode: verbs.OpWrite, Local: []runtime.Local{a.Slice(i*8, 8)}, Remote: ref.Slice(i*8, 8)}
	}
	ops[16] = runtime.Op{Opcode: verbs.OpWrite, Local: []runtime.Local{b.Local(), a.Slice(0, 8)}, Remote: ref.Slice(16*8, 16)}
	// The device holds the batch until the test looked at its uses.
	if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	f := cli.Post(ctx, ops)
	awaitOutstanding(t, ctx, cli, len(ops))
	if ua, ub := runtime.Uses(a), runtime.Uses(b); ua != 1 || ub != 1 {
		t.Errorf("a batch in flight holds %d uses of one buffer and %d of the other, want 1 each", ua, ub)
	}
	if err := soft.EndDelay(cli.QP()); err != nil {
		t.Fatal(err)
	}
	if c, err := f.Wait(ctx); err != nil || c.WRs != len(ops) {
		t.Fatalf("Wait: %+v, %v", c, err)
	}
	if ua, ub := runtime.Uses(a), runtime.Uses(b); ua != 0 || ub != 0 {
		t.Errorf("after the batch: %d and %d uses, want none", ua, ub)
	}

	freed := alloc(t, rt, 8)
	early := freed.Local()
	freed.Free()
	refused := []runtime.Op{ops[0], ops[16], {Opcode: verbs.OpWrite, Local: []runtime.Local{early}, Remote: ref.Slice(0, 8)}}
	_, err := cli.Post(ctx, refused).Wait(ctx)
	if !errors.Is(err, runtime.ErrFreed) {
		t.Fatalf("a batch with a freed buffer's range: %v, want ErrFreed", err)
	}
	t.Log(err)
	if ua, ub := runtime.Uses(a), runtime.Uses(b); ua != 0 || ub != 0 {
		t.Errorf("a refused batch left %d and %d uses, want none", ua, ub)
	}
}

// TestPostBatchesReusedSafely: Posts from several goroutines, each batch
// writing its own pattern, consumed by Wait or Then, cancelled soon after
// Post or released unread: every batch that reported success wrote
// exactly its own bytes. Post's copy of a batch goes to the next Post once
// its future reported success; one handed on before the actor was done
// with it would write another batch's bytes or addresses.
func TestPostBatchesReusedSafely(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	const callers, rounds, n = 4, 400, 8
	src, dst := alloc(t, rt, callers*n*8), alloc(t, rt, callers*n*8)
	ref := refOf(t, dst)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			ops := make([]runtime.Op, n)
			for r := range rounds {
				off := c * n * 8
				for i := range n {
					binary.LittleEndian.PutUint64(src.Bytes()[off+i*8:], uint64(c)<<32|uint64(r)<<8|uint64(i))
					ops[i] = runtime.Op{Opcode: verbs.OpWrite, Local: []runtime.Local{src.Slice(off+i*8, 8)}, Remote: ref.Slice(off+i*8, 8)}
				}
				var err error
				switch r % 4 {
				case 0:
					_, err = cli.Post(ctx, ops).Wait(ctx)
				case 1:
					done := make(chan error, 1)
					cli.Post(ctx, ops).Then(func(_ runtime.Completion, err error) { done <- err })
					err = <-done
				case 2:
					early, cancel := context.WithCancel(ctx)
					f := cli.Post(early, ops)
					cancel()
					if _, err = f.Wait(ctx); errors.Is(err, context.Canceled) {
						continue
					}
				case 3:
					cli.Post(ctx, ops).Release()
					continue
				}
				if err != nil {
					t.Errorf("caller %d round %d: %v", c, r, err)
					return
				}
				for i := range n {
					if got, want := binary.LittleEndian.Uint64(dst.Bytes()[off+i*8:]), uint64(c)<<32|uint64(r)<<8|uint64(i); got != want {
						t.Errorf("caller %d round %d op %d wrote %#x, want %#x", c, r, i, got, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
