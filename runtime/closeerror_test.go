package runtime_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// peerEnd waits for ep to be over and returns its Err and what Recv
// returns then.
func peerEnd(t *testing.T, ep *runtime.Endpoint) (err, recvErr error) {
	t.Helper()
	ctx := ctxT(t)
	select {
	case <-ep.Done():
	case <-ctx.Done():
		t.Fatal("the peer's endpoint never ended")
	}
	_, recvErr = ep.Recv(ctx)
	return ep.Err(), recvErr
}

// TestCloseWithErrorTellsThePeer: the peer of an endpoint closed with
// CloseWithError reads the code and reason from its Err, a
// *PeerCloseError that matches ErrPeerClosed, and its Recv returns
// io.EOF as after a Close.
func TestCloseWithErrorTellsThePeer(t *testing.T) {
	_, cli, srv := pair(t)
	ctx := ctxT(t)
	reason := "shutting down for maintenance: ünïcode too"
	if err := cli.CloseWithError(ctx, 42, reason); err != nil {
		t.Fatal(err)
	}
	err, recvErr := peerEnd(t, srv)
	var pce *runtime.PeerCloseError
	if !errors.As(err, &pce) || pce.Code != 42 || pce.Reason != reason {
		t.Fatalf("the peer's Err is %v, want a *PeerCloseError of code 42 and reason %q", err, reason)
	}
	if !errors.Is(err, runtime.ErrPeerClosed) {
		t.Errorf("%v does not match ErrPeerClosed", err)
	}
	if !errors.Is(recvErr, io.EOF) {
		t.Errorf("the peer's Recv: %v, want io.EOF", recvErr)
	}
	if s := err.Error(); !strings.Contains(s, "42") || !strings.Contains(s, "maintenance") {
		t.Errorf("the error %q shows neither code nor reason", s)
	}
}

// TestPeerCloseErrorIsBounded: the peer's reason, whatever bytes it
// holds, makes an error of bounded length.
func TestPeerCloseErrorIsBounded(t *testing.T) {
	err := &runtime.PeerCloseError{Code: 1, Reason: strings.Repeat("\x00", 256)}
	if n := len(err.Error()); n > maxErrorText {
		t.Errorf("an error of %d bytes, want at most %d", n, maxErrorText)
	}
}

// TestCloseTellsThePeerNoCode: Close, and CloseWithError with code 0 and
// no reason, leave the peer's Err ErrPeerClosed itself.
func TestCloseTellsThePeerNoCode(t *testing.T) {
	for name, closeIt := range map[string]func(*runtime.Endpoint) error{
		"Close":          func(ep *runtime.Endpoint) error { return ep.Close(ctxT(t)) },
		"CloseWithError": func(ep *runtime.Endpoint) error { return ep.CloseWithError(ctxT(t), 0, "") },
	} {
		t.Run(name, func(t *testing.T) {
			_, cli, srv := pair(t)
			if err := closeIt(cli); err != nil {
				t.Fatal(err)
			}
			if err, _ := peerEnd(t, srv); err != runtime.ErrPeerClosed {
				t.Fatalf("the peer's Err is %v, want ErrPeerClosed", err)
			}
		})
	}
}

// TestCloseWithErrorRefusesBadReasons: a reason longer than 256 bytes or
// not UTF-8 is refused with ErrInvalidArgument naming the rule, and the
// endpoint stays open.
func TestCloseWithErrorRefusesBadReasons(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	for _, c := range []struct{ reason, rule string }{
		{strings.Repeat("x", 257), "256"},
		{"\xff\xfe", "UTF-8"},
	} {
		err := cli.CloseWithError(ctx, 1, c.reason)
		if !errors.Is(err, verbs.ErrInvalidArgument) || !strings.Contains(err.Error(), c.rule) {
			t.Errorf("CloseWithError(%q...): %v, want ErrInvalidArgument naming %q", c.reason[:2], err, c.rule)
		}
	}
	if err := cli.Err(); err != nil {
		t.Fatalf("the endpoint ended: %v", err)
	}
	local, remote := alloc(t, rt, 8), refOf(t, alloc(t, rt, 8))
	if _, err := cli.Write(ctx, local.Local(), remote).Wait(ctx); err != nil {
		t.Fatalf("a WRITE after the refusals: %v", err)
	}
	if err := cli.CloseWithError(ctx, 1, strings.Repeat("x", 256)); err != nil {
		t.Fatalf("a reason of 256 bytes: %v", err)
	}
}

// TestCloseWithErrorFitsThePeersMessages: a peer whose messages are
// smaller than the reason reads as much of it as they hold, cut at a
// whole character.
func TestCloseWithErrorFitsThePeersMessages(t *testing.T) {
	rtA, rtB := twoHosts(t, runtime.WithMessageSize(16))
	cli, srv := connectRuntimes(t, rtA, rtB)
	// 12 bytes of room after the code: the 12th is the first of "é".
	if err := cli.CloseWithError(ctxT(t), 7, "0123456789aéz"); err != nil {
		t.Fatal(err)
	}
	err, _ := peerEnd(t, srv)
	var pce *runtime.PeerCloseError
	if !errors.As(err, &pce) || pce.Code != 7 || pce.Reason != "0123456789a" {
		t.Fatalf("the peer's Err is %v, want code 7 and reason %q", err, "0123456789a")
	}
}
