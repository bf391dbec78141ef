package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestCreditsSurviveFullInbox: with an inbox of 2 and 4 receives a side,
// both ends sending and receiving at once keep going: no credit report is
// lost when the inbox is full (credits stamped into a send that had to wait
// were dropped, and a credit-only report that found the inbox full was
// never retried; both ends then waited for credits forever).
func TestCreditsSurviveFullInbox(t *testing.T) {
	rt, a, b := pair(t, runtime.WithTuning(runtime.Tuning{RingSize: 2}), runtime.WithRecvDepth(4))
	const n = 400
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, ep := range []*runtime.Endpoint{a, b} {
		wg.Add(2)
		go func() { // sender: many sends in flight
			defer wg.Done()
			buf := alloc(t, rt, 16)
			fs := make([]runtime.Future, 0, n)
			for range n {
				fs = append(fs, ep.Send(ctx, buf.Slice(0, 16)))
			}
			for i, f := range fs {
				if _, err := f.Wait(ctx); err != nil {
					errs <- fmt.Errorf("send %d of %d: %w", i, n, err)
					return
				}
			}
		}()
		go func() { // receiver
			defer wg.Done()
			for i := range n {
				m, err := ep.Recv(ctx)
				if err != nil {
					errs <- fmt.Errorf("receive %d of %d: %w", i, n, err)
					return
				}
				m.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPostMoreSendsThanPeerWindow: a batch with more SENDs than the peer's
// receive window can ever grant at once is refused at once, naming the
// limit, and sends after it still go out: it never waits forever with
// every later send behind it.
func TestPostMoreSendsThanPeerWindow(t *testing.T) {
	rt, a, b := pair(t, runtime.WithRecvDepth(4))
	buf := alloc(t, rt, 16)
	ops := make([]runtime.Op, 4)
	for i := range ops {
		ops[i] = runtime.Op{Opcode: verbs.OpSend, Local: []runtime.Local{buf.Slice(0, 16)}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := a.Post(ctx, ops).Wait(ctx)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("a batch of 4 SENDs against a window of 4: %v, want an immediate verbs.ErrInvalidArgument", err)
	}
	t.Logf("refused: %v", err)
	if _, err := a.Post(ctx, ops[:3]).Wait(ctx); err != nil {
		t.Fatalf("a batch of 3 SENDs: %v", err)
	}
	if _, err := a.Send(ctx, buf.Slice(0, 16)).Wait(ctx); err != nil {
		t.Fatalf("a send after the refused batch: %v", err)
	}
	for range 4 {
		m, err := b.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.Release()
	}
}

// TestSendRacingCloseResolves: sends racing Endpoint.Close, with the
// peer's credits used up, all resolve (success or ErrClosed) and Close
// returns: none is left queued after Close failed the queue.
func TestSendRacingCloseResolves(t *testing.T) {
	for round := range 20 {
		rt, a, _ := pair(t, runtime.WithRecvDepth(4))
		buf := alloc(t, rt, 16)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var fs []runtime.Future
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					f := a.Send(ctx, buf.Slice(0, 16))
					mu.Lock()
					fs = append(fs, f)
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
		if err := a.Close(ctx); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		wg.Wait()
		for i, f := range fs {
			if _, err := f.Wait(ctx); err != nil && !errors.Is(err, runtime.ErrClosed) {
				t.Fatalf("round %d: send %d: %v", round, i, err)
			}
		}
		cancel()
	}
}

// TestPeerCloseIsGraceful: when one end closes, the other learns it: its
// Recv returns the messages sent before, then io.EOF; Done closes and Err
// is ErrPeerClosed; its later operations fail with ErrPeerClosed. The end
// that closed reports ErrClosed. (Before, the peer's Recv blocked until its
// context ended and nothing said the connection was over.)
func TestPeerCloseIsGraceful(t *testing.T) {
	rt, a, b := pair(t)
	buf := alloc(t, rt, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		if _, err := a.Send(ctx, buf.Slice(0, 16)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if b.Err() != nil {
		t.Fatalf("Err of an open endpoint: %v", b.Err())
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m, err := b.Recv(ctx)
		if err != nil {
			t.Fatalf("message %d sent before the close: %v", i, err)
		}
		m.Release()
	}
	if _, err := b.Recv(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv after the peer closed: %v, want io.EOF", err)
	}
	select {
	case <-b.Done():
	case <-ctx.Done():
		t.Fatal("Done did not close")
	}
	if !errors.Is(b.Err(), runtime.ErrPeerClosed) {
		t.Errorf("Err: %v, want ErrPeerClosed", b.Err())
	}
	if _, err := b.Send(ctx, buf.Slice(0, 16)).Wait(ctx); !errors.Is(err, runtime.ErrPeerClosed) {
		t.Errorf("Send after the peer closed: %v, want ErrPeerClosed", err)
	}
	if !errors.Is(a.Err(), runtime.ErrClosed) {
		t.Errorf("Err of the closed end: %v, want ErrClosed", a.Err())
	}
}

// TestGrantPostsWaitingSend: with inline posting, a SEND that waits for
// the peer's credits, on an actor gone idle, is posted by the goroutine
// that handles the peer's grant (the poller, or a waiter polling the CQ),
// as a submission that finds the actor idle is by its caller: no actor
// goroutine is started for it (each start costs a locked thread's wake-up,
// which on a one-way stream of SENDs every message would pay). It tests
// the default, so it keeps it when actorOnlyEnv is set.
func TestGrantPostsWaitingSend(t *testing.T) {
	const depth = 8
	rt := newRuntimeAsGiven(t, runtime.WithRecvDepth(depth))
	cli, srv := connect(t, rt)
	ctx := ctxT(t)
	buf := alloc(t, rt, 64)
	// Use up the peer's credits: the receiver does not receive yet.
	var fs []runtime.Future
	for range 4 * depth {
		fs = append(fs, cli.Send(ctx, buf.Slice(0, 8)))
	}
	waitPosted(t, cli)
	pending := 0
	for _, f := range fs {
		if errors.Is(f.Err(), runtime.ErrPending) {
			pending++
		}
	}
	if pending == 0 {
		t.Fatal("every send was posted: the peer's window is larger than the test assumes")
	}
	// Past the spin window the actor goes idle, waiting for credits.
	for !cli.Actor().Idle() {
		if ctx.Err() != nil {
			t.Fatal("the sending endpoint's actor never went idle")
		}
		time.Sleep(time.Millisecond)
	}
	stats := cli.Actor().Stats()
	inline0, runs0 := stats.Ops.InlineRuns.Load(), stats.Ops.Runs.Load()
	for range fs {
		m, err := srv.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.Release()
	}
	for i, f := range fs {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if got := stats.Ops.InlineRuns.Load() - inline0; got == 0 {
		t.Errorf("no run of the actor on a grant's goroutine (%d actor goroutine starts)", stats.Ops.Runs.Load()-runs0)
	}
}

// TestReportPostedByItsGoroutine: a credit report falls due on the
// goroutine that handles a receive (the CQ's handler, reposting the
// receive) or releases a message; with the receiving endpoint's actor
// idle, that goroutine posts the report itself, as a submitter posts its
// own work, instead of starting an actor goroutine for one credit-only
// SEND.
func TestReportPostedByItsGoroutine(t *testing.T) {
	const depth, messages = 8, 64
	rt := newRuntimeAsGiven(t, runtime.WithRecvDepth(depth))
	cli, srv := connect(t, rt)
	ctx := ctxT(t)
	buf := alloc(t, rt, 64)
	stats := srv.Actor().Stats()
	idle := func() {
		t.Helper()
		for !srv.Actor().Idle() {
			if ctx.Err() != nil {
				t.Fatal("the receiving endpoint's actor never went idle")
			}
			time.Sleep(time.Millisecond)
		}
	}
	idle()
	runs, inline, reports := stats.Ops.Runs.Load(), stats.Ops.InlineRuns.Load(), stats.Ops.CreditOnly.Load()
	for i := range messages {
		idle() // nothing but a report could start it now
		if _, err := cli.Send(ctx, buf.Slice(0, 8)).Wait(ctx); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		m, err := srv.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.Release()
	}
	idle()
	reported := stats.Ops.CreditOnly.Load() - reports
	if reported == 0 {
		t.Fatalf("%d messages and no credit report", messages)
	}
	// Not every report need go inline: a PostSend the actor timed as
	// slow (a loaded machine) sends the ones with WRs in flight to the
	// actor, and credits the peer grants beyond the initial window wake
	// it too. But reports alone must not start it each time.
	started, inlined := stats.Ops.Runs.Load()-runs, stats.Ops.InlineRuns.Load()-inline
	if inlined == 0 {
		t.Errorf("none of %d credit reports was posted by the goroutine that found it due (%d actor goroutines started)", reported, started)
	}
	if started >= reported {
		t.Errorf("%d credit reports started %d actor goroutines", reported, started)
	}
}
