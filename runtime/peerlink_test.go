package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// killedNoticeBound bounds how long an endpoint takes to notice a killed
// peer: the FIN or reset of the peer's kernel crosses loopback at once;
// the rest is the watcher's drain and the failing of what is pending,
// slowed by -race on a busy machine (a few hundred ms seen beside a CPU
// burner per core). Half the keepalive's bound (PeerSilenceBound): a
// notice that came from keepalive, not from the peer's kernel, exceeds it.
const killedNoticeBound = runtime.PeerSilenceBound / 2

// TestKilledPeerEndsEndpoint: a peer that vanishes without a goodbye, as a
// killed process does (its kernel closes its end of the handshake's TCP
// connection, with a FIN or a reset, and its QP answers nothing), ends the
// endpoint with ErrPeerLost within killedNoticeBound, though the endpoint
// sends nothing that could fail and show it: idle and blocked in Recv, or
// with WRITEs and SENDs held before they reach the wire and SENDs waiting
// for the peer's credits. Recv returns ErrPeerLost, every pending future
// fails (ErrPeerLost, or the flush of a posted WR), and later operations
// fail at once. Before, nothing ended: Recv and the futures waited for
// their contexts.
func TestKilledPeerEndsEndpoint(t *testing.T) {
	for _, end := range []struct {
		name  string
		reset bool
	}{{"FIN", false}, {"reset", true}} {
		for _, pending := range []bool{false, true} {
			name := end.name + "/idle"
			if pending {
				name = end.name + "/pending"
			}
			t.Run(name, func(t *testing.T) { testKilledPeer(t, end.reset, pending) })
		}
	}
}

func testKilledPeer(t *testing.T, reset, pending bool) {
	rtA, rtB := twoHosts(t, runtime.WithRecvDepth(4))
	a, b := connectRuntimes(t, rtA, rtB)
	ctx := ctxT(t)
	recvErr := make(chan error, 1)
	go func() {
		_, err := a.Recv(ctx)
		recvErr <- err
	}()
	var fs []runtime.Future
	if pending {
		local, remote := alloc(t, rtA, 4096), alloc(t, rtB, 4096)
		// Hold a's stream: its WRs are posted, but none reaches the wire,
		// where going unanswered would fail it.
		if err := soft.Inject(a.QP(), soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			fs = append(fs, a.Write(ctx, local.Slice(8*i, 8), refOf(t, remote).At(8*i)))
		}
		// b grants 4 receive credits and a keeps one back: most of these
		// wait for credits b will never return.
		for i := range 8 {
			fs = append(fs, a.Send(ctx, local.Slice(64+8*i, 8)))
		}
	}

	killed := time.Now()
	if err := runtime.KillForTest(b, reset); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
		t.Logf("Done %v after the kill: %v", time.Since(killed).Round(time.Microsecond), a.Err())
	case <-time.After(killedNoticeBound):
		t.Fatalf("the endpoint did not notice its killed peer within %v", killedNoticeBound)
	}
	if !errors.Is(a.Err(), runtime.ErrPeerLost) {
		t.Errorf("Err: %v, want ErrPeerLost", a.Err())
	}
	select {
	case err := <-recvErr:
		if !errors.Is(err, runtime.ErrPeerLost) {
			t.Errorf("Recv: %v, want ErrPeerLost", err)
		}
	case <-time.After(killedNoticeBound):
		t.Errorf("Recv still blocked %v after Done", killedNoticeBound)
	}
	wctx, cancel := context.WithTimeout(ctx, killedNoticeBound)
	defer cancel()
	for i, f := range fs {
		_, err := f.Wait(wctx)
		if !errors.Is(err, runtime.ErrPeerLost) && !errors.Is(err, verbs.ErrFlushed) {
			t.Errorf("pending operation %d: %v, want ErrPeerLost or a flush", i, err)
		}
	}
	later := alloc(t, rtA, 8)
	if _, err := a.Send(ctx, later.Slice(0, 8)).Wait(ctx); !errors.Is(err, runtime.ErrPeerLost) {
		t.Errorf("Send after the peer was lost: %v, want ErrPeerLost", err)
	}
}

// TestPeerCloseNeverTakenForLost: a graceful Close ends its link to the
// peer right after the peer acknowledged its goodbye, so on the peer the
// end of the link races the goodbye's receive completion. The peer must
// take it for the close it is, whether idle or blocked in Recv: Err is
// ErrPeerClosed and Recv returns the message sent before, then io.EOF;
// never ErrPeerLost. 50 closes, each side on its own runtime and poller.
func TestPeerCloseNeverTakenForLost(t *testing.T) {
	rtA, rtB := twoHosts(t)
	ctx := ctxT(t)
	msg := alloc(t, rtA, 8)
	copy(msg.Bytes(), "last one")
	for i := range 50 {
		a, b := connectRuntimes(t, rtA, rtB)
		blocked := i%2 == 0
		recvEnd := make(chan error, 1)
		if blocked {
			go func() { recvEnd <- recvToEOF(ctx, b) }()
		}
		if _, err := a.Send(ctx, msg.Slice(0, 8)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-b.Done():
		case <-ctx.Done():
			t.Fatalf("close %d: the peer never learned", i)
		}
		if !errors.Is(b.Err(), runtime.ErrPeerClosed) {
			t.Fatalf("close %d (peer blocked in Recv: %v): Err %v, want ErrPeerClosed", i, blocked, b.Err())
		}
		if !blocked {
			recvEnd <- recvToEOF(ctx, b)
		}
		if err := <-recvEnd; err != nil {
			t.Fatalf("close %d (peer blocked in Recv: %v): %v", i, blocked, err)
		}
		if err := b.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// recvToEOF receives the message "last one", then expects io.EOF.
func recvToEOF(ctx context.Context, ep *runtime.Endpoint) error {
	m, err := ep.Recv(ctx)
	if err != nil {
		return fmt.Errorf("Recv of the message sent before the close: %w", err)
	}
	got := string(m.Bytes())
	m.Release()
	if got != "last one" {
		return fmt.Errorf("Recv: %q, want %q", got, "last one")
	}
	if _, err := ep.Recv(ctx); !errors.Is(err, io.EOF) {
		return fmt.Errorf("Recv after the close: %v, want io.EOF", err)
	}
	return nil
}

// TestPeerClosesRightAfterHandshake: a peer that closes its endpoint as
// soon as it has it (a server that accepts and hangs up, a client that
// dials and gives up) may have its goodbye arrive while this side still
// finishes the handshake. The connection was made: Dial and Accept return
// the endpoint, which reports ErrPeerClosed, as a TCP dial to a server
// that closes at once succeeds and then reads io.EOF. Neither may fail
// because this side ended its own link on the goodbye. 100 rounds each
// way.
func TestPeerClosesRightAfterHandshake(t *testing.T) {
	rtA, rtB := twoHosts(t)
	ctx := ctxT(t)
	ln, err := rtB.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for i := range 200 {
		serverCloses := i%2 == 0
		accepted := make(chan error, 1)
		go func() {
			ep, err := ln.Accept(ctx)
			if err == nil {
				err = closeOrAwaitPeer(ctx, ep, serverCloses)
			}
			accepted <- err
		}()
		ep, err := rtA.Dial(ctx, ln.Addr().String())
		if err == nil {
			err = closeOrAwaitPeer(ctx, ep, !serverCloses)
		}
		if err != nil {
			t.Fatalf("round %d (server closes: %v): Dial: %v", i, serverCloses, err)
		}
		if err := <-accepted; err != nil {
			t.Fatalf("round %d (server closes: %v): Accept: %v", i, serverCloses, err)
		}
	}
}

// closeOrAwaitPeer closes ep at once, or waits for its peer to have closed
// it (ErrPeerClosed) and then closes it.
func closeOrAwaitPeer(ctx context.Context, ep *runtime.Endpoint, closeNow bool) error {
	if !closeNow {
		select {
		case <-ep.Done():
		case <-ctx.Done():
			return fmt.Errorf("the peer's close never arrived")
		}
		if !errors.Is(ep.Err(), runtime.ErrPeerClosed) {
			return fmt.Errorf("Err %v, want ErrPeerClosed", ep.Err())
		}
	}
	return ep.Close(ctx)
}
