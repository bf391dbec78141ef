package qpactor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/sched"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// TestInlinePostPostsOnCaller: with InlinePost, a submission that finds the
// actor gone idle is posted before Submit returns, by the submitter, and
// no actor goroutine starts for it.
func TestInlinePostPostsOnCaller(t *testing.T) {
	r := newRig(t, 64, func(c *qpactor.Config) { c.InlinePost = true })
	base := startIdle(t, r)
	st := r.actor.Stats()
	runs := st.Ops.Runs.Load()
	for i := range 5 {
		op := r.write(i)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.PostCalls.Load(); got != uint64(i+1) {
			t.Fatalf("write %d: %d PostSend calls when Submit returned, want %d", i, got, i+1)
		}
		r.poll(t, f)
		if _, err := future.Wait(f, context.Background(), byteLen); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.Ops.Runs.Load(); got != runs {
		t.Errorf("%d actor runs started for inline posts, want none", got-runs)
	}
	if got := st.Ops.InlineRuns.Load(); got != 5 {
		t.Errorf("%d inline runs, want 5", got)
	}
	if n := actorGoroutines(); n != base {
		t.Errorf("%d goroutines run actors after inline posts, want %d", n, base)
	}
}

// TestInlinePostLeavesWaitToActor: a submitter that runs the actor inline
// never waits for credits: with one send-queue slot taken, its write stays
// queued, Submit returns, and the completion that frees the slot starts
// an actor goroutine that posts it.
func TestInlinePostLeavesWaitToActor(t *testing.T) {
	r := newRig(t, 1, func(c *qpactor.Config) { c.InlinePost = true })
	startIdle(t, r)
	ctx := context.Background()
	ops := []qpactor.Op{r.write(1), r.write(2)}
	f1, err := r.actor.Submit(ctx, &ops[0])
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var f2 future.Future
	go func() {
		var err error
		f2, err = r.actor.Submit(ctx, &ops[1])
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Submit blocked waiting for a send-queue slot")
	}
	if got := r.actor.Stats().PostCalls.Load(); got != 1 {
		t.Fatalf("%d PostSend calls with one slot, want 1", got)
	}
	r.poll(t, f1, f2)
	for _, f := range []future.Future{f1, f2} {
		if _, err := future.Wait(f, ctx, byteLen); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWaitPollsCQ: with WaitPoll, a waiter handles its completion itself
// through the Driver: here nobody else polls the CQ (the write was posted
// inline and no poller runs), so Wait returns only if it polls.
func TestWaitPollsCQ(t *testing.T) {
	r, d := idleWaitPollRig(t)
	writeAndWait(t, r, 20)
	d.mu.Lock()
	polled := d.polled
	d.mu.Unlock()
	if polled < 20 {
		t.Fatalf("waiters handled %d completions, want 20", polled)
	}
}

// TestFewWaitersPoll: of many goroutines waiting at once with WaitPoll,
// only a few poll the CQ; the others park, and the completions the
// pollers handle resolve their futures too.
func TestFewWaitersPoll(t *testing.T) {
	r := newRig(t, 64, func(c *qpactor.Config) { c.WaitPoll = 5 * time.Second })
	d := &recordingDriver{r: r, wcs: make([]verbs.WC, 32), stalled: true}
	r.actor.SetDriver(d)
	r.actor.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const waiters = 16
	errs := make(chan error, waiters)
	for i := range waiters {
		op := r.write(i)
		f, err := r.actor.Submit(ctx, &op)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := future.Wait(f, ctx, byteLen)
			errs <- err
		}()
	}
	// The waiters refused a poll yield, then park; the pollers poll on.
	for r.actor.Stats().Ops.WaitsParked.Load() < waiters-qpactor.MaxPollingWaiters {
		if ctx.Err() != nil {
			t.Fatalf("%d waiters parked, want %d", r.actor.Stats().Ops.WaitsParked.Load(), waiters-qpactor.MaxPollingWaiters)
		}
		time.Sleep(time.Millisecond)
	}
	d.mu.Lock()
	most := d.maxWaiters
	d.stalled = false
	d.mu.Unlock()
	if most > qpactor.MaxPollingWaiters {
		t.Errorf("%d waiters polled at once, want at most %d", most, qpactor.MaxPollingWaiters)
	}
	for range waiters {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWaiterWithoutSlotLooksAtItsCQ: a waiter that gets no polling-waiter
// slot (all are taken, as by the waiters of other endpoints) still handles
// its completion itself, looking at the CQ once a turn while nobody drives
// it: here the actor is idle and no poller runs, so Wait returns only if
// it does.
func TestWaiterWithoutSlotLooksAtItsCQ(t *testing.T) {
	r, d := idleWaitPollRig(t)
	for range qpactor.MaxPollingWaiters {
		if !sched.AcquirePollingWaiter() {
			t.Fatal("a polling-waiter slot is taken before the test")
		}
		defer sched.ReleasePollingWaiter()
	}
	writeAndWait(t, r, 20)
	d.mu.Lock()
	yielded, most := d.yielded, d.maxWaiters
	d.mu.Unlock()
	if yielded < 20 {
		t.Fatalf("waiters without a slot handled %d completions, want 20", yielded)
	}
	if most > 0 {
		t.Fatalf("%d waiters began a wait, want none: every slot was taken", most)
	}
}

// TestWaiterLeavesCQToDrivingActor: while the actor goroutine drives its
// CQ, a waiter does not poll it: the actor's own polls between drains
// handle the completion it waits for, and the waiter watches its future.
func TestWaiterLeavesCQToDrivingActor(t *testing.T) {
	r := newRig(t, 64, func(c *qpactor.Config) {
		c.WaitPoll = time.Second
		c.Spin = time.Hour // the actor stays up, driving its CQ
	})
	d := &recordingDriver{r: r, wcs: make([]verbs.WC, 32)}
	r.actor.SetDriver(d)
	r.actor.Start()
	d.awaitDriving(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := submitStalled(ctx, t, r, d, 0)
	done := make(chan error, 1)
	go func() {
		_, err := future.Wait(f, ctx, byteLen)
		done <- err
	}()
	for {
		d.mu.Lock()
		waiting := d.waiters
		d.mu.Unlock()
		if waiting > 0 || r.actor.Stats().Ops.WaitsParked.Load() > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the waiter never began its wait")
		}
		time.Sleep(time.Millisecond)
	}
	d.stall(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	polls := d.polls
	d.mu.Unlock()
	if polls != 0 {
		t.Fatalf("a waiter polled a CQ its actor drives %d times", polls)
	}
}

// idleWaitPollRig is an actor with InlinePost and WaitPoll whose CQ is
// polled through a recording driver and no poller: started, gone idle,
// and with its CQ handed back, so that a waiter's own polls alone handle
// the completions of what its submitters post inline.
func idleWaitPollRig(t *testing.T) (*rig, *recordingDriver) {
	t.Helper()
	r := newRig(t, 64, func(c *qpactor.Config) {
		c.InlinePost = true
		c.WaitPoll = time.Second
	})
	d := &recordingDriver{r: r, wcs: make([]verbs.WC, 32)}
	r.actor.SetDriver(d)
	startIdle(t, r)
	d.awaitDriving(t, false)
	return r, d
}

// writeAndWait submits n writes to r's actor one at a time, each waited
// for before the next.
func writeAndWait(t *testing.T, r *rig, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		op := r.write(i)
		f, err := r.actor.Submit(ctx, &op)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := future.Wait(f, ctx, byteLen); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
}

// startIdle starts r's actor and waits until its first run has gone idle
// and ended; it returns how many goroutines run actors then.
func startIdle(t *testing.T, r *rig) int {
	t.Helper()
	base := settledActorGoroutines(t)
	r.actor.Start()
	for deadline := time.Now().Add(5 * time.Second); r.actor.Stats().Ops.Runs.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the actor never ran")
		}
	}
	waitActorGoroutines(t, base)
	return base
}

// TestWaitPollWindow: what Config.WaitPoll becomes: off for 0 and
// negative windows, at least 1 µs for a positive one.
func TestWaitPollWindow(t *testing.T) {
	for _, c := range []struct {
		in   time.Duration
		want uint32
	}{{-time.Second, 0}, {0, 0}, {1, 1}, {time.Microsecond, 1}, {1500 * time.Nanosecond, 2}, {2 * time.Millisecond, 2000}, {1 << 62, 1<<32 - 1}} {
		if got := qpactor.WaitPollMicros(c.in); got != c.want {
			t.Errorf("WaitPoll %v: %d µs, want %d", c.in, got, c.want)
		}
	}
}

// TestLongWaitsDoNotLengthenTheWindow: a waiter whose waits are longer
// than WaitPoll, and whose parks are cheap, parks; it does not spin
// through them, however many long waits it has seen. A waiter spinning
// through long waits takes the CPU that the work it waits for needs,
// which makes its waits longer still.
func TestLongWaitsDoNotLengthenTheWindow(t *testing.T) {
	defer qpactor.SetWakeUpCost(20 * time.Microsecond)()
	r, d, clk, ctx := waitRig(t, 500*time.Microsecond)
	const rounds = 20
	for i := range rounds {
		waitLate(ctx, t, r, d, clk, i, 2*time.Millisecond)
	}
	if parked := r.actor.Stats().Ops.WaitsParked.Load(); parked != rounds {
		t.Errorf("%d of %d waits of 2 ms parked with WaitPoll 500µs and parks costing 60µs, want all", parked, rounds)
	}
}

// TestSlowWakeUpsLengthenTheWindow: a waiter whose wake-ups are slow polls
// as long as a park would cost, longer than WaitPoll: with wake-ups of
// 2 ms, waits of 1 ms (twice WaitPoll) never park, and waits of 8 ms
// (past the park's cost of three wake-ups) do. A parked wait's wake-up is
// measured and reported to what learns the cost.
func TestSlowWakeUpsLengthenTheWindow(t *testing.T) {
	defer qpactor.SetWakeUpCost(0)()
	r, d, clk, ctx := waitRig(t, 500*time.Microsecond)
	_, before := qpactor.WakeUpCost()
	waitParked(ctx, t, r, d, clk, 0)
	if _, after := qpactor.WakeUpCost(); after == before {
		t.Error("a parked wait's wake-up was not measured")
	}
	qpactor.SetWakeUpCost(2 * time.Millisecond)
	parked := r.actor.Stats().Ops.WaitsParked.Load()
	const rounds = 20
	for i := range rounds {
		waitLate(ctx, t, r, d, clk, 100+i, time.Millisecond)
	}
	if n := r.actor.Stats().Ops.WaitsParked.Load() - parked; n != 0 {
		t.Errorf("%d of %d waits of 1 ms parked, with wake-ups learned at 2 ms", n, rounds)
	}
	for i := range 3 {
		waitLate(ctx, t, r, d, clk, 200+i, 8*time.Millisecond)
	}
	if n := r.actor.Stats().Ops.WaitsParked.Load() - parked; n != 3 {
		t.Errorf("%d of 3 waits of 8 ms parked, with parks costing 6 ms, want 3", n)
	}
}

// stepClock is a clock that moves 10 µs each time it is read, never past
// a horizon the test sets: a waiter's idle time then depends on how often
// it looks, not on how a busy machine schedules it, and a wait the test
// means to end at 1 ms never looks longer to the waiter.
type stepClock struct {
	mu       sync.Mutex
	now, end time.Time
}

func newStepClock() *stepClock {
	now := time.Unix(1, 0)
	return &stepClock{now: now, end: now}
}

func (c *stepClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if next := c.now.Add(10 * time.Microsecond); next.Before(c.end) {
		c.now = next
	} else {
		c.now = c.end
	}
	return c.now
}

// allow lets the clock move d past its reading now, and no further.
func (c *stepClock) allow(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.end = c.now.Add(d)
}

// done reports whether the clock has reached what allow let it reach.
func (c *stepClock) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.now.Before(c.end)
}

// waitParked submits write i and waits for it, its completion coming only
// once the waiter parked: then a goroutine of the test polls it, as a
// poller would.
func waitParked(ctx context.Context, t *testing.T, r *rig, d *recordingDriver, clk *stepClock, i int) {
	t.Helper()
	clk.allow(time.Hour)
	parked := r.actor.Stats().Ops.WaitsParked.Load()
	f := submitStalled(ctx, t, r, d, i)
	go func() {
		for r.actor.Stats().Ops.WaitsParked.Load() == parked && ctx.Err() == nil {
			runtime.Gosched()
		}
		d.stall(false)
		d.Poll()
	}()
	if _, err := future.Wait(f, ctx, byteLen); err != nil {
		t.Fatal(err)
	}
}

// submitStalled submits write i with d's polls stalled: its completion is
// found only once the test lets d poll again (d.stall(false)).
func submitStalled(ctx context.Context, t *testing.T, r *rig, d *recordingDriver, i int) future.Future {
	t.Helper()
	d.stall(true)
	op := r.write(i)
	f, err := r.actor.Submit(ctx, &op)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// waitRig is a started actor with WaitPoll waitPoll whose waiters poll
// through a recording driver and measure their wait on a step clock, for
// the tests of the wait window.
func waitRig(t *testing.T, waitPoll time.Duration) (*rig, *recordingDriver, *stepClock, context.Context) {
	clk := newStepClock()
	r := newRig(t, 64, func(c *qpactor.Config) { c.WaitPoll, c.Clock = waitPoll, clk.read })
	d := &recordingDriver{r: r, wcs: make([]verbs.WC, 32)}
	r.actor.SetDriver(d)
	r.actor.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return r, d, clk, ctx
}

// waitLate submits write i and waits for it, its completion coming once
// the waiter's clock has moved late: found by the waiter's next poll if it
// still polls, or, once it parked, by a goroutine of the test, as by a
// poller.
func waitLate(ctx context.Context, t *testing.T, r *rig, d *recordingDriver, clk *stepClock, i int, late time.Duration) {
	t.Helper()
	parked := r.actor.Stats().Ops.WaitsParked.Load()
	f := submitStalled(ctx, t, r, d, i)
	clk.allow(late)
	waited := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for !clk.done() && r.actor.Stats().Ops.WaitsParked.Load() == parked && ctx.Err() == nil {
			runtime.Gosched()
		}
		d.stall(false)
		for {
			select {
			case <-waited:
				return
			default:
				d.Poll()
				runtime.Gosched()
			}
		}
	}()
	_, err := future.Wait(f, ctx, byteLen)
	close(waited)
	<-polled
	if err != nil {
		t.Fatal(err)
	}
}

// TestWritesInFlightAreChained: with inline posting, a submission made
// while others are in flight is left queued, and posted with those queued
// after it in one PostSend by the goroutine that handles the next
// completion (Polled), whether PostSend is cheap (soft) or costly (a
// system call on rxe); one made with nothing in flight is posted inline at
// once. No actor goroutine starts for either.
func TestWritesInFlightAreChained(t *testing.T) {
	for _, cost := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("post-cost=%v", cost), func(t *testing.T) {
			r := newRig(t, 64, func(c *qpactor.Config) { c.InlinePost = true })
			startIdle(t, r)
			// A spin window longer than the test: what is queued waits
			// for the completion, not for the bound of that wait.
			r.actor.SetSpin(time.Hour)
			r.actor.SetPostCost(cost)
			st := r.actor.Stats()
			ctx := context.Background()
			op := r.write(0)
			f0, err := r.actor.Submit(ctx, &op)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Ops.InlineRuns.Load(); got != 1 {
				t.Fatalf("%d inline runs for a write with nothing in flight, want 1", got)
			}
			// f0 is in flight (nobody polled the CQ): the next writes wait
			// for its completion.
			runs, posts := st.Ops.Runs.Load(), st.PostCalls.Load()
			futs := []future.Future{f0}
			const more = 7
			for i := 1; i <= more; i++ {
				op := r.write(i)
				f, err := r.actor.Submit(ctx, &op)
				if err != nil {
					t.Fatal(err)
				}
				futs = append(futs, f)
			}
			if got := st.PostCalls.Load() - posts; got != 0 {
				t.Fatalf("%d PostSends for writes made with one in flight, want 0 before its completion", got)
			}
			for _, f := range futs {
				r.poll(t, f)
				if _, err := future.Wait(f, ctx, byteLen); err != nil {
					t.Fatal(err)
				}
			}
			if got := st.PostCalls.Load() - posts; got != 1 {
				t.Errorf("%d PostSends for the %d writes made with one in flight, want 1", got, more)
			}
			if got := st.Ops.Runs.Load() - runs; got != 0 {
				t.Errorf("%d actor goroutine starts, want 0", got)
			}
		})
	}
}

// TestQueuedWorkDoesNotWaitForASlowWR: what submitters leave queued while
// a WR is in flight (to be posted with the next completion) is posted by
// an actor goroutine after the spin window when that completion is slow
// to come: a WR that takes long (a large WRITE on rxe, a retransmission)
// does not hold back those queued behind it.
func TestQueuedWorkDoesNotWaitForASlowWR(t *testing.T) {
	r := newRig(t, 64, func(c *qpactor.Config) { c.InlinePost = true })
	startIdle(t, r)
	if err := soft.Inject(r.qp, soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var futs []future.Future
	for i := range 6 {
		op := r.write(i)
		f, err := r.actor.Submit(ctx, &op)
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	deadline := time.Now().Add(10 * time.Second) // a way out, not a measurement
	for r.actor.Outstanding() < len(futs) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d writes posted while the first is in flight", r.actor.Outstanding(), len(futs))
		}
		time.Sleep(time.Millisecond)
	}
	if err := futs[0].Err(); !errors.Is(err, future.ErrPending) {
		t.Fatalf("the delayed write: %v, want still pending", err)
	}
}

// TestInlineChainCallsOffTheBound: the submission that fills a chain of
// work left queued while a WR is in flight posts the chain inline, and
// calls off the wake-up the first of them arranged (push): an actor
// goroutine must not start after the spin window for work already posted.
func TestInlineChainCallsOffTheBound(t *testing.T) {
	r := newRig(t, 64, func(c *qpactor.Config) { c.InlinePost = true })
	startIdle(t, r)
	// Longer than the test: the bound must be called off, not fire.
	r.actor.SetSpin(time.Hour)
	st := r.actor.Stats()
	ctx := context.Background()
	posts := st.PostCalls.Load()
	// One in flight (nobody polls the CQ), then a chain's worth left
	// queued behind it; the last of them posts them all.
	var futs []future.Future
	for i := range 1 + qpactor.GatherTarget {
		op := r.write(i)
		f, err := r.actor.Submit(ctx, &op)
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
		if i == 0 {
			// Its PostSend was timed; submitters with WRs in flight
			// post inline where PostSend is cheap.
			r.actor.SetPostCost(0)
		}
		if i == 1 && !r.actor.WakeUpArmed() {
			t.Fatal("the first write left queued arranged no wake-up")
		}
	}
	if got := st.PostCalls.Load() - posts; got != 2 {
		t.Fatalf("%d PostSends, want 2: the first write, then the %d queued behind it", got, qpactor.GatherTarget)
	}
	if r.actor.WakeUpArmed() {
		t.Error("the wake-up for the queued writes is still set after they were posted")
	}
	r.poll(t, futs...)
}

// TestWokenInlineActorLeavesTheStreamToCallers: an actor goroutine that
// the bound of queued work started (push) posts that work and goes idle at
// once when its callers post inline, instead of spinning for its spin
// window: staying up, it would take the callers' next submissions and
// completions from them, across threads, while they would post and poll
// them themselves.
func TestWokenInlineActorLeavesTheStreamToCallers(t *testing.T) {
	r := newRig(t, 64, func(c *qpactor.Config) { c.InlinePost = true })
	startIdle(t, r)
	st := r.actor.Stats()
	ctx := context.Background()
	op := r.write(0)
	f0, err := r.actor.Submit(ctx, &op)
	if err != nil {
		t.Fatal(err)
	}
	r.actor.SetPostCost(0) // that PostSend was timed; keep callers inline
	runs := st.Ops.Runs.Load()
	// Left queued behind f0 (nobody polls the CQ); its bound wakes an
	// actor goroutine after a short spin window. The window then becomes
	// longer than the test: the woken actor must not spin it out.
	r.actor.SetSpin(time.Millisecond)
	op = r.write(1)
	f1, err := r.actor.Submit(ctx, &op)
	if err != nil {
		t.Fatal(err)
	}
	r.actor.SetSpin(time.Hour)
	for deadline := time.Now().Add(10 * time.Second); st.Ops.Runs.Load() == runs; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no actor goroutine started for the write left queued")
		}
	}
	for deadline := time.Now().Add(10 * time.Second); !r.actor.Idle(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the woken actor is still up: it spins out its window instead of leaving the stream to its callers")
		}
	}
	if r.actor.Outstanding() != 2 {
		t.Errorf("%d WRs outstanding, want 2: the woken actor posts what was queued", r.actor.Outstanding())
	}
	r.poll(t, f0, f1)
}

// TestQueuedBehindWaitingHeadRunsNoDrain: once a drain stopped at a head
// that waits for credits, what is submitted behind it stays queued without
// a drain of its own, which could post nothing before the head; the
// completion that brings the credits posts them all. A submission whose
// context ends while it waits there still fails with the context's error.
func TestQueuedBehindWaitingHeadRunsNoDrain(t *testing.T) {
	r := newRig(t, 1, func(c *qpactor.Config) { c.InlinePost = true })
	startIdle(t, r)
	r.actor.SetSpin(time.Hour) // no actor goroutine takes over meanwhile
	ctx := context.Background()
	st := r.actor.Stats()
	var fs []future.Future
	submit := func(ctx context.Context, i int) future.Future {
		t.Helper()
		op := r.write(i)
		f, err := r.actor.Submit(ctx, &op)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// The first takes the one send-queue slot; those up to a chain's worth
	// coalesce behind it; the next finds the inbox full enough to drain,
	// and its drain stops at the head, which waits for the slot.
	for i := range qpactor.GatherTarget + 1 {
		fs = append(fs, submit(ctx, i))
		// Its submitters post themselves (inlineWorthIt), whatever the
		// first PostSend, which is timed, took.
		r.actor.SetPostCost(100 * time.Nanosecond)
	}
	if got := st.PostCalls.Load(); got != 1 {
		t.Fatalf("%d PostSend calls with one slot, want 1", got)
	}
	drains := func() uint64 { return st.Ops.InlineRuns.Load() + st.Ops.Runs.Load() }
	before := drains()
	cancelled, cancel := context.WithCancel(ctx)
	late := submit(cancelled, 100)
	for i := range 8 {
		fs = append(fs, submit(ctx, qpactor.GatherTarget+1+i))
	}
	if got := drains() - before; got != 0 {
		t.Errorf("%d drains run for submissions behind a head waiting for credits, want none", got)
	}
	cancel()
	r.poll(t, append(fs, late)...)
	for i, f := range fs {
		if _, err := future.Wait(f, ctx, byteLen); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if _, err := future.Wait(late, ctx, byteLen); !errors.Is(err, context.Canceled) {
		t.Errorf("the write whose context ended while queued: %v, want context.Canceled", err)
	}
}
