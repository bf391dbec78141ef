package qpactor_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// actorGoroutines counts the goroutines running an actor's loop.
func actorGoroutines() int { return strings.Count(allStacks(), "qpactor.(*Actor).runAcquired(") }

// allStacks returns the stacks of every goroutine.
func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// settledActorGoroutines waits for the actor goroutines of earlier tests
// to end and returns how many run actors then: 0, since every test closes
// its actors (newRig), but a closed actor's goroutine returns a moment
// after Close does, and under -race that moment was long enough for a
// test that counted it as its base to wait for it forever
// (TestLateCompletionLeavesIdleActorAlone: "0 goroutines run actors, want
// 1").
func settledActorGoroutines(t *testing.T) int {
	t.Helper()
	waitActorGoroutines(t, 0)
	return 0
}

// waitActorGoroutines waits until n goroutines run actors.
func waitActorGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for actorGoroutines() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines run actors, want %d", actorGoroutines(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIdleActorEndsItsGoroutine: an actor with nothing to do ends its
// goroutine (and gives its OS thread back); the next submission starts a
// new one, which posts it. With Park the goroutine stays, parked.
func TestIdleActorEndsItsGoroutine(t *testing.T) {
	base := settledActorGoroutines(t)
	r := newRig(t, 64)
	r.actor.Start()
	waitActorGoroutines(t, base) // idle past its spin: gone
	for i := range 3 {
		op := r.write(i)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		r.poll(t, f)
		if _, err := future.Wait(f, context.Background(), byteLen); err != nil {
			t.Fatal(err)
		}
		waitActorGoroutines(t, base)
	}

	parked := newRig(t, 64, func(c *qpactor.Config) { c.Park = true })
	parked.actor.Start()
	// Past its spin it parks: its goroutine parks.
	for deadline := time.Now().Add(5 * time.Second); !actorParked(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the actor with Park never parked (%d goroutines run actors)", actorGoroutines())
		}
	}
	if n := actorGoroutines(); n != base+1 {
		t.Fatalf("%d goroutines run actors with Park, want %d", n, base+1)
	}
}

// actorParked reports whether a goroutine runs an actor that parks
// holding its run.
func actorParked() bool {
	for _, g := range strings.Split(allStacks(), "\n\n") {
		if strings.Contains(g, "qpactor.(*Actor).runAcquired(") && strings.Contains(g, "qpactor.(*runOwner).park(") {
			return true
		}
	}
	return false
}

// TestLateCompletionLeavesIdleActorAlone: a completion that comes after
// the actor went idle, with nothing queued, does not start it again (on a
// device slower than the spin window, every completion would); one that
// frees a send-queue slot a queued submission waits for does.
func TestLateCompletionLeavesIdleActorAlone(t *testing.T) {
	base := settledActorGoroutines(t)
	r := newRig(t, 1) // one send-queue slot: a second write waits for the first's completion
	r.actor.Start()
	ctx := context.Background()
	op := r.write(0)
	f, err := r.actor.Submit(ctx, &op)
	if err != nil {
		t.Fatal(err)
	}
	waitPostedAndGone(t, r.actor, 1, base) // the completion waits in the CQ
	runs := r.actor.Stats().Ops.Runs.Load()
	r.poll(t, f)
	if _, err := future.Wait(f, ctx, byteLen); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if got := r.actor.Stats().Ops.Runs.Load(); got != runs {
		t.Fatalf("a completion for an idle actor with nothing queued started it: %d runs, want %d", got, runs)
	}

	// Two writes on one slot: the second waits in the inbox for the
	// first's completion, which must wake the idle actor to post it.
	ops := []qpactor.Op{r.write(1), r.write(2)}
	f1, err := r.actor.Submit(ctx, &ops[0])
	if err != nil {
		t.Fatal(err)
	}
	f2, err := r.actor.Submit(ctx, &ops[1])
	if err != nil {
		t.Fatal(err)
	}
	waitPostedAndGone(t, r.actor, 2, base) // the second waits for a slot, the actor left
	r.poll(t, f1, f2)                      // f2 resolves only if the first completion woke the actor
}

// waitPostedAndGone waits until a has made posts PostSend calls and its
// goroutine is gone (n goroutines run actors).
func waitPostedAndGone(t *testing.T, a *qpactor.Actor, posts uint64, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for a.Stats().PostCalls.Load() < posts {
		if time.Now().After(deadline) {
			t.Fatalf("%d PostSend calls, want %d", a.Stats().PostCalls.Load(), posts)
		}
		time.Sleep(time.Millisecond)
	}
	waitActorGoroutines(t, n)
}

// TestActorStartAllocatesNothing: starting the goroutine of an actor that
// went idle (each wake-up of an idle actor) allocates nothing; with its
// spin window near zero, every write below finds it gone and starts it. The futures come
// from a pool, which the race detector empties at random: run without it
// to see 0.
func TestActorStartAllocatesNothing(t *testing.T) {
	r := newRig(t, 64)
	r.actor.Start()
	r.actor.SetSpin(time.Nanosecond)
	ctx := context.Background()
	wcs := make([]verbs.WC, 32)
	write := func() {
		op := r.write(0)
		f, err := r.actor.Submit(ctx, &op)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := future.Result(f, byteLen); errors.Is(err, future.ErrPending); _, err = future.Result(f, byteLen) {
			n, _ := r.cq.Poll(wcs)
			for i := range wcs[:n] {
				r.actor.Complete(&wcs[i])
			}
			r.actor.Polled()
			if n == 0 {
				backOff()
			}
		}
		f.Release()
		for !r.actor.Idle() { // idle past its spin: gone
			backOff()
		}
	}
	for range 100 { // warm the pools
		write()
	}
	runs := r.actor.Stats().Ops.Runs.Load()
	allocs := testing.AllocsPerRun(500, write)
	started := r.actor.Stats().Ops.Runs.Load() - runs
	if started < 500 {
		t.Fatalf("the actor started %d times in 500 writes, want once each", started)
	}
	t.Logf("%.3f allocations a write, %d actor starts in 500 writes", allocs, started)
	if allocs > 0.5 && !raceEnabled {
		t.Errorf("%.2f allocations a write, the actor started %d times in 500; want 0", allocs, started)
	}
}
