package runtime_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/hostile"
	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// TestAcceptSkipsAFailedHandshake: a client that speaks no verbsrt hello,
// or one with a field out of range, is told why and dropped; Accept
// returns the next client's endpoint, not the failure (a server's usual
// "if err != nil { return }" loop keeps serving), and the failures are
// counted.
func TestAcceptSkipsAFailedHandshake(t *testing.T) {
	rt := newRuntime(t)
	ctx := ctxT(t)
	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		ep, err := ln.Accept(ctx)
		if err == nil {
			ep.Close(ctx)
		}
		accepted <- err
	}()
	for _, c := range []struct{ send, want string }{
		{"GET / HTTP/1.0\r\n\r\n", "hello"},
		{`{"version":4,"qpn":17,"psn":0,"lid":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4611686018427387904,"mtu":4096,"max_rd_atomic":16,"max_dest_rd_atomic":16}` + "\n", "msg_size"},
		{`{"version":4,"qpn":4294967295,"psn":0,"lid":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4096,"mtu":4096,"max_rd_atomic":16,"max_dest_rd_atomic":16}` + "\n", "qpn"},
	} {
		junk, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		junk.SetDeadline(time.Now().Add(10 * time.Second))
		junk.Write([]byte(c.send))
		line, err := bufio.NewReader(junk).ReadString('\n')
		junk.Close()
		if err != nil || !strings.Contains(line, `"error"`) || !strings.Contains(line, c.want) {
			t.Errorf("the listener answered %q with %q, %v; want a refusal naming %s", c.send, line, err, c.want)
		}
	}
	ep, err := rt.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close(ctx)
	if err := <-accepted; err != nil {
		t.Fatalf("Accept after failed handshakes: %v, want the next client's endpoint", err)
	}
	if n := ln.FailedHandshakes(); n != 3 {
		t.Errorf("FailedHandshakes: %d, want 3", n)
	}
}

// TestCancelledAcceptsLeaveOtherAcceptsAndClientsAlone: Accepts whose
// context is cancelled, beside an Accept(context.Background()) loop, make
// that loop fail with nothing ("i/o timeout" of a deadline set on the
// shared socket), and drop no client connecting in the race: every Dial
// succeeds and its endpoint goes to some Accept, open.
func TestCancelledAcceptsLeaveOtherAcceptsAndClientsAlone(t *testing.T) {
	rt := newRuntime(t)
	ctx := ctxT(t)
	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const clients = 20
	var mu sync.Mutex
	var got []*runtime.Endpoint
	var bgErr error
	take := func(ep *runtime.Endpoint) {
		mu.Lock()
		got = append(got, ep)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the background loop: Accept until Close
		defer wg.Done()
		for {
			ep, err := ln.Accept(context.Background())
			if err != nil {
				if !errors.Is(err, runtime.ErrClosed) {
					mu.Lock()
					bgErr = err
					mu.Unlock()
				}
				return
			}
			take(ep)
		}
	}()
	stop := make(chan struct{})
	var stopOnce sync.Once
	halt := func() {
		stopOnce.Do(func() {
			close(stop)
			ln.Close()
			wg.Wait()
		})
	}
	defer halt()
	for range 3 { // the impatient: each Accept cancelled while it waits
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				actx, cancel := context.WithCancel(context.Background())
				go cancel()
				ep, err := ln.Accept(actx)
				switch {
				case err == nil:
					take(ep)
				case !errors.Is(err, context.Canceled):
					select {
					case <-stop: // the listener closed
					default:
						t.Errorf("a cancelled Accept: %v, want context.Canceled", err)
					}
					return
				}
				goruntime.Gosched()
			}
		}()
	}
	var dialed []*runtime.Endpoint
	for i := range clients {
		ep, err := rt.Dial(ctx, ln.Addr().String())
		if err != nil {
			t.Fatalf("Dial %d beside cancelled Accepts: %v", i, err)
		}
		dialed = append(dialed, ep)
	}
	// Every client's endpoint reaches an Accept; then the loops stop.
	for {
		mu.Lock()
		n, e := len(got), bgErr
		mu.Unlock()
		if n == clients || e != nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	halt()
	if bgErr != nil {
		t.Errorf("Accept(context.Background()) beside cancelled Accepts: %v", bgErr)
	}
	if len(got) != clients {
		t.Fatalf("%d endpoints accepted for %d clients", len(got), clients)
	}
	for i, ep := range got {
		if err := ep.Err(); err != nil {
			t.Errorf("accepted endpoint %d is over: %v", i, err)
		}
	}
	for i, ep := range dialed {
		if err := ep.Err(); err != nil {
			t.Errorf("client %d's endpoint is over: %v", i, err)
		}
	}
}

// TestRuntimesOnSeparateSoftProvidersDoNotConnectToThemselves: two soft
// providers are two fabrics numbering alike (the same GIDs, the same QP
// numbers), so a client's QP and the listener's have the same address; a
// QP connected to that address is connected to itself, and its
// application's messages come back to it. Dial refuses it with
// ErrProtocol, without the addresses soft makes up for its GIDs, and the
// listener hands no endpoint to Accept.
func TestRuntimesOnSeparateSoftProvidersDoNotConnectToThemselves(t *testing.T) {
	ctx := ctxT(t)
	newOn := func() *runtime.Runtime {
		p := soft.New(soft.Config{})
		t.Cleanup(func() { p.Close() })
		return newRuntime(t, runtime.WithProvider(p))
	}
	cliRT, srvRT := newOn(), newOn()
	ln, err := srvRT.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *runtime.Endpoint, 2)
	go func() {
		for {
			ep, err := ln.Accept(ctx)
			if err != nil {
				close(accepted)
				return
			}
			accepted <- ep
		}
	}()
	ep, err := cliRT.Dial(ctx, ln.Addr().String())
	if err == nil {
		ep.Close(ctx)
		t.Fatalf("Dial across two soft providers connected %v to %v", ep.LocalAddr(), ep.RemoteAddr())
	}
	if !errors.Is(err, runtime.ErrProtocol) || !strings.Contains(err.Error(), "itself") {
		t.Fatalf("Dial across two soft providers: %v, want ErrProtocol saying the peer is the endpoint itself", err)
	}
	if strings.Contains(err.Error(), "10.77.") {
		t.Errorf("Dial across two soft providers: %q names an address soft made up", err)
	}
	// The next client (of the listener's own fabric) is the first
	// endpoint Accept returns.
	own := newRuntime(t, runtime.WithProvider(srvRT.Provider()))
	cli, err := own.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close(ctx)
	srv := <-accepted
	if srv == nil {
		t.Fatal("Accept failed")
	}
	if srv.RemoteAddr() != cli.LocalAddr() {
		t.Errorf("Accept returned the endpoint of %v, want the second client's %v", srv.RemoteAddr(), cli.LocalAddr())
	}
}

func init() { children["emfile"] = emfileChild }

// TestDialFailsAtOnceWhenTheListenerIsOutOfDescriptors: in a process at
// its open-file limit, a Dial whose TCP connection is made but that the
// listener cannot accept (accept4: EMFILE) fails at once with an error
// matching ErrRefused and syscall.EMFILE, not after its context's
// timeout; once descriptors are free again the listener serves the next
// Dial. In a child process, whose RLIMIT_NOFILE it lowers.
func TestDialFailsAtOnceWhenTheListenerIsOutOfDescriptors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=emfile")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

// emfileChild is the child of
// TestDialFailsAtOnceWhenTheListenerIsOutOfDescriptors.
func emfileChild() int {
	fail := func(format string, args ...any) int {
		fmt.Printf(format+"\n", args...)
		return 1
	}
	rt, err := runtime.New(runtime.WithLogger(slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		return fail("New: %v", err)
	}
	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		return fail("Listen: %v", err)
	}
	go acceptUntilClosed(ln)
	// The Dial's context is long: a Dial that waits for it fails the test
	// by the error it returns.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := rt.Dial(ctx, ln.Addr().String()); err != nil {
		return fail("Dial before the limit: %v", err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fail("Getrlimit: %v", err)
	}
	lim.Cur = min(lim.Max, 256)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fail("Setrlimit: %v", err)
	}
	// Every descriptor taken, then one given back: the client's socket
	// takes it, and the listener's accept4 finds none.
	var fillers []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				return fail("filling the descriptor table: %v", err)
			}
			break
		}
		fillers = append(fillers, f)
	}
	fillers[len(fillers)-1].Close()
	fillers = fillers[:len(fillers)-1]
	start := time.Now()
	_, err = rt.Dial(ctx, ln.Addr().String())
	took := time.Since(start)
	if !errors.Is(err, runtime.ErrRefused) || !errors.Is(err, syscall.EMFILE) || !strings.Contains(err.Error(), "too many open files") {
		return fail("Dial to a listener out of descriptors: %v after %v; want ErrRefused and EMFILE, at once", err, took)
	}
	fmt.Printf("Dial to a listener out of descriptors: %v (after %v)\n", err, took)
	for _, f := range fillers {
		f.Close()
	}
	ep, err := rt.Dial(ctx, ln.Addr().String())
	if err != nil {
		return fail("Dial once descriptors are free again: %v", err)
	}
	ep.Close(ctx)
	if err := rt.Close(ctx); err != nil {
		return fail("Close: %v", err)
	}
	return 0
}

// acceptUntilClosed accepts on ln until it is closed; the runtime's Close
// closes the endpoints it accepted.
func acceptUntilClosed(ln *runtime.Listener) {
	for {
		if _, err := ln.Accept(context.Background()); err != nil {
			return
		}
	}
}

// TestClosedListenerTakesNoConnection: once Accept has returned ErrClosed,
// or a second Close has, the listening socket is closed: a TCP client
// that connects then is refused, as by a net.Listener after Close.
func TestClosedListenerTakesNoConnection(t *testing.T) {
	rt := newRuntime(t)
	hostile.ClosedListenerTakesNoConnection(t, func() (string, func() error, func() error) {
		ln, err := rt.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		accept := func() error {
			_, err := ln.Accept(context.Background())
			return err
		}
		return ln.Addr().String(), accept, ln.Close
	}, runtime.ErrClosed)
}
