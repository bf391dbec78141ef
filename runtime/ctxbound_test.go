package runtime_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestDialReturnsWithItsContext: a peer that answers with a valid hello
// and then goes silent leaves Dial waiting for its "ready" until ctx ends;
// Dial then undoes the endpoint within ctx, and returns ctx's error,
// without waiting for the goodbye the half-made connection will never
// acknowledge: not for its retries on the wire, nor for Close's bound on
// it (made an hour long here).
func TestDialReturnsWithItsContext(t *testing.T) {
	defer runtime.SetGoodbyeWaitForTest(time.Hour)()
	rt := newRuntime(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := br.ReadString('\n'); err != nil { // the dialer's hello
			return
		}
		c.Write(runtime.HelloLineForTest(rt, 0x7777))
		br.ReadString('\n') // the dialer's "ready": now silent
		cancel()
		br.ReadString('\n') // until the dialer hangs up
	}()
	done := make(chan error, 1)
	go func() {
		ep, err := rt.Dial(ctx, ln.Addr().String())
		if ep != nil {
			ep.Close(context.Background())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("Dial: %v, want context.Canceled", err)
		}
		// The goodbye went to a QP that does not answer: had Dial waited
		// for it, the device would have given up on it by now.
		if n := rt.Stats().Completions[verbs.WCRetryExcErr]; n != 0 {
			t.Errorf("Dial waited for the goodbye's retries to run out (%d RETRY_EXC_ERR) after its context ended", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Dial still waits, 30 s after its context ended")
	}
}

// TestCancelledCountsEndedContexts: an operation given a context that had
// ended already never reaches the device, and Stats.Cancelled counts it as
// it counts one whose context ended while it was queued.
func TestCancelledCountsEndedContexts(t *testing.T) {
	rt, cli, _ := pair(t)
	buf := alloc(t, rt, 64)
	ref := refOf(t, buf)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := rt.Stats().Cancelled
	for _, f := range []runtime.Future{
		cli.Write(ctx, buf.Slice(0, 8), ref),
		cli.Post(ctx, []runtime.Op{{Opcode: verbs.OpWrite, Local: []runtime.Local{buf.Slice(0, 8)}, Remote: ref}}),
	} {
		if _, err := f.Wait(context.Background()); !errors.Is(err, context.Canceled) {
			t.Fatalf("an operation with an ended context: %v, want context.Canceled", err)
		}
	}
	if got := rt.Stats().Cancelled - before; got != 2 {
		t.Errorf("Stats.Cancelled grew by %d, want 2", got)
	}
	if got := cli.Stats().Cancelled; got != 2 {
		t.Errorf("the endpoint's Stats.Cancelled %d, want 2", got)
	}
}
