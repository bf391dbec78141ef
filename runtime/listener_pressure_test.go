package runtime_test

import (
	"context"
	"errors"
	"io"
	"net"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/hostile"
	"github.com/verbsrt/verbsrt/internal/testhook"
	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// Sizes of the hostile-clients tests: as the issue that asked for them.
const (
	hostileN   = 1000
	realN      = 100
	heapBound  = 64 << 20
	fdsForTest = 2*(hostileN+realN) + 200
)

// stallWait bounds the hostile-clients test: with the listener's hello
// timeout set beyond it, a real client held up by a silent one waits
// until it ends, and fails. It is no bound on how fast real clients
// connect: only a stalled listener reaches it.
const stallWait = 2 * time.Minute

// TestHostileClientsDoNotStallTheListener: 1,000 TCP clients that connect
// and stay silent or send garbage (random bytes, a line of 64 MiB, hellos
// out of range) while 100 real clients Dial: every real client connects,
// the heap does not grow by the garbage (less than 64 MiB), every hostile
// client is counted as a failed handshake once it hangs up, and the
// listener serves a Dial afterwards. The listener's hello timeout is set
// beyond the test's end (testhook), so no silent client leaves before
// the test lets it: a real client that waited for one (a handshake
// holding up the accept loop or another's) would wait until the test's
// context ends and fail, however fast or slow the machine.
func TestHostileClientsDoNotStallTheListener(t *testing.T) {
	if testing.Short() {
		t.Skip("2,200 sockets")
	}
	hostile.NeedDescriptors(t, fdsForTest)
	t.Cleanup(testhook.SetListenHandshakeTimeout(time.Hour))
	srvRT := newRuntime(t)
	cliRT := newRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), stallWait)
	defer cancel()
	ln, err := srvRT.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted sync.WaitGroup
	accepted.Add(1)
	go func() {
		defer accepted.Done()
		acceptUntilClosed(ln)
	}()
	heapBefore := hostile.HeapInUse()
	stop := make(chan struct{})
	waitHostile := hostile.Clients(t, ln.Addr().String(), hostileN, stop)
	// The real clients Dial ten at a time, one after the other in each of
	// ten goroutines, while every hostile client holds its connection.
	var wg sync.WaitGroup
	for g := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < realN; i += 10 {
				ep, err := cliRT.Dial(ctx, ln.Addr().String())
				if err != nil {
					t.Errorf("real client %d among hostile ones: %v (a silent client held it up)", i, err)
					continue
				}
				ep.Close(ctx)
			}
		}()
	}
	wg.Wait()
	if grown := int64(hostile.HeapInUse()) - int64(heapBefore); grown >= heapBound {
		t.Errorf("the heap grew by %d MiB among hostile clients, want less than %d", grown>>20, heapBound>>20)
	}
	close(stop)
	waitHostile()
	for ln.FailedHandshakes() < hostileN && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	if n := ln.FailedHandshakes(); n != hostileN {
		t.Errorf("FailedHandshakes: %d, want the %d hostile clients", n, hostileN)
	}
	ep, err := cliRT.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatalf("Dial after the hostile clients: %v", err)
	}
	ep.Close(ctx)
	ln.Close()
	accepted.Wait()
}

// TestListenerCloseEndsWhatNoAcceptTook: Dials complete while nobody calls
// Accept (the listener handshakes on its own); Close then closes those
// endpoints (their clients see the goodbye: ErrPeerClosed) and the
// connections still in their handshake (a silent client reads EOF), and
// every Accept, and a second Close, fail with an error matching ErrClosed
// and net.ErrClosed. goleak (TestMain) checks that no goroutine of the
// listener is left.
func TestListenerCloseEndsWhatNoAcceptTook(t *testing.T) {
	rt := newRuntime(t)
	ctx := ctxT(t)
	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var eps []*runtime.Endpoint
	for range 3 {
		ep, err := rt.Dial(ctx, ln.Addr().String())
		if err != nil {
			t.Fatalf("Dial with nobody in Accept: %v", err)
		}
		eps = append(eps, ep)
	}
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	blocked := make(chan error, 1)
	go func() {
		ep, err := ln.Accept(context.Background())
		if err == nil { // it took one before Close: its client sees the goodbye all the same
			ep.Close(ctx)
		}
		blocked <- err
	}()
	if err := ln.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-blocked; err != nil && (!errors.Is(err, runtime.ErrClosed) || !errors.Is(err, net.ErrClosed)) {
		t.Errorf("Accept blocked at Close: %v, want an endpoint or ErrClosed and net.ErrClosed", err)
	}
	_, acceptErr := ln.Accept(ctx)
	for _, err := range []error{acceptErr, ln.Close()} {
		if !errors.Is(err, runtime.ErrClosed) || !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept or Close after Close: %v, want ErrClosed and net.ErrClosed", err)
		}
	}
	for i, ep := range eps {
		select {
		case <-ep.Done():
			if !errors.Is(ep.Err(), runtime.ErrPeerClosed) {
				t.Errorf("client %d: %v, want ErrPeerClosed", i, ep.Err())
			}
		case <-ctx.Done():
			t.Fatalf("client %d still connected after its listener closed without accepting it", i)
		}
	}
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a silent client's read after Close: %d bytes, %v; want EOF", n, err)
	}
}

// TestListenerStopsAcceptingWhenNobodyAccepts: with nobody in Accept, the
// listener makes at most ListenUnaccepted endpoints, as a TCP listener
// holds at most its backlog, and the next Dial waits; Accept then takes
// them all, and the waiting Dial connects.
func TestListenerStopsAcceptingWhenNobodyAccepts(t *testing.T) {
	rt := newRuntime(t)
	ctx := ctxT(t)
	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	for i := range runtime.ListenUnaccepted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := rt.Dial(ctx, ln.Addr().String()); err != nil {
				t.Errorf("Dial %d, within the listener's backlog: %v", i, err)
			}
		}()
	}
	wg.Wait()
	// One more waits: its context ends first.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if ep, err := rt.Dial(short, ln.Addr().String()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial past the backlog with nobody in Accept: %v, %v; want it to wait", ep, err)
	}
	next := make(chan error, 1)
	go func() {
		_, err := rt.Dial(ctx, ln.Addr().String())
		next <- err
	}()
	for i := range runtime.ListenUnaccepted + 1 {
		if _, err := ln.Accept(ctx); err != nil {
			t.Fatalf("Accept %d: %v", i, err)
		}
	}
	if err := <-next; err != nil {
		t.Errorf("Dial once Accept took the backlog: %v", err)
	}
}

// TestDialSaysTheListenerIsOutOfMemory: a listener whose runtime cannot
// give a connection its receive buffers (WithMemoryLimit) refuses the
// client with the cause, and Dial fails with ErrRefused and ErrNoMemory
// naming the option, instead of a protocol error or a timeout.
func TestDialSaysTheListenerIsOutOfMemory(t *testing.T) {
	fabric := soft.New(soft.Config{Devices: 2})
	t.Cleanup(func() { fabric.Close() })
	srvRT := newRuntime(t, runtime.WithProvider(fabric), runtime.WithDevice("soft0"), runtime.WithMemoryLimit(8<<20))
	cliRT := newRuntime(t, runtime.WithProvider(fabric), runtime.WithDevice("soft1"))
	ctx := ctxT(t)
	ln, err := srvRT.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptUntilClosed(ln)
	alloc(t, srvRT, 4<<20) // the whole limit, in two chunks
	alloc(t, srvRT, 4<<20)
	ep, err := cliRT.Dial(ctx, ln.Addr().String())
	if !errors.Is(err, runtime.ErrRefused) || !errors.Is(err, runtime.ErrNoMemory) || !strings.Contains(err.Error(), "WithMemoryLimit") {
		if err == nil {
			ep.Close(ctx)
		}
		t.Fatalf("Dial to a listener out of memory: %v, want ErrRefused and ErrNoMemory naming WithMemoryLimit", err)
	}
}

// TestSilentClientsAreCutOffWhenTheListenerIsFull: when as many clients as
// the listener admits at once connect and say nothing, a real client is
// not held up until their handshakes time out (5 s): the oldest silent
// client is cut off to make room for it, and counted.
func TestSilentClientsAreCutOffWhenTheListenerIsFull(t *testing.T) {
	rt := newRuntime(t)
	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const admitted = 8
	runtime.SetListenAdmitted(ln, admitted)
	var silent []net.Conn
	for range admitted {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	go acceptUntilClosed(ln)
	// Well inside the handshake's timeout, which a Dial waiting for a
	// silent client to time out would reach.
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	ep, err := rt.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatalf("Dial with the listener full of silent clients: %v", err)
	}
	ep.Close(ctx)
	if n := ln.FailedHandshakes(); n < 1 {
		t.Errorf("FailedHandshakes: %d, want the silent clients cut off", n)
	}
	silent[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := silent[0].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the oldest silent client reads %v, want EOF: cut off", err)
	}
}

// TestListenerCloseEndsItsBacklogWithoutReset: clients the accept loop
// has not taken yet, waiting in the kernel's backlog when the listener
// closes, see the connection end (EOF), not a reset; a client whose bytes
// nobody read as well. Admission at 0 keeps them all in the backlog.
func TestListenerCloseEndsItsBacklogWithoutReset(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("the backlog is taken at Close where accept4 is at hand (linux)")
	}
	rt := newRuntime(t)
	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runtime.SetListenAdmitted(ln, 0)
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	talker, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer talker.Close()
	if _, err := talker.Write([]byte("{\"not\":\"read\"}\n")); err != nil {
		t.Fatal(err)
	}
	if err := ln.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, c := range map[string]net.Conn{"silent": silent, "talking": talker} {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("a %s client in the backlog, its read after Close: %d bytes, %v; want EOF", name, n, err)
		}
	}
}
