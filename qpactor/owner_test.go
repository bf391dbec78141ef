package qpactor

import (
	"runtime"
	"strings"
	"sync"
	stdatomic "sync/atomic"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/ring"
)

// TestDecideKick is the table of the one choice between posting on the
// kicking goroutine, leaving work to coalesce and waking the actor.
func TestDecideKick(t *testing.T) {
	inline := kickView{inline: true, worthInline: true}
	with := func(v kickView, f func(*kickView)) kickView { f(&v); return v }
	for _, tc := range []struct {
		name string
		r    kickReason
		v    kickView
		want kickAction
	}{
		{"submit, idle actor, inline worth it", kickSubmit, inline, actInline},
		{"submit, inline not worth it (costly post, WRs in flight)", kickSubmit, with(inline, func(v *kickView) { v.worthInline = false }), actWake},
		{"submit, no inline posting", kickSubmit, kickView{worthInline: true}, actWake},
		{"submit, first to coalesce: bounded", kickSubmit, with(inline, func(v *kickView) { v.coalesces, v.queued = true, 1 }), actBound},
		{"submit, later ones coalesce under the first's bound", kickSubmit, with(inline, func(v *kickView) { v.coalesces, v.queued = true, 2 }), actNone},
		{"submit behind a head waiting for credits", kickSubmit, with(inline, func(v *kickView) { v.headWaits, v.queued = true, 3 }), actNone},
		{"submit behind a waiting head, context can end: bounded", kickSubmit, with(inline, func(v *kickView) { v.headWaits, v.ctxCanEnd = true, true }), actBound},
		{"submit behind a waiting head, bound already set", kickSubmit, with(inline, func(v *kickView) { v.headWaits, v.ctxCanEnd, v.boundArmed = true, true, true }), actNone},
		{"submit behind a waiting head wins over coalescing", kickSubmit, with(inline, func(v *kickView) { v.headWaits, v.coalesces, v.queued = true, true, 1 }), actNone},
		{"submit behind a waiting head, no inline posting", kickSubmit, kickView{headWaits: true}, actNone},
		{"completion, nothing queued, nothing waits", kickCompleted, inline, actNone},
		{"completion, work queued, inline", kickCompleted, with(inline, func(v *kickView) { v.queued = 4 }), actInline},
		{"completion, work queued, no inline posting", kickCompleted, kickView{queued: 4}, actWake},
		{"completion, actor waits for credits, inline", kickCompleted, with(inline, func(v *kickView) { v.waitsForCredits = true }), actInline},
		{"completion, actor waits for credits, no inline posting", kickCompleted, kickView{waitsForCredits: true}, actWake},
		{"completion, inline not worth it still flushes", kickCompleted, kickView{inline: true, queued: 1}, actInline},
		{"waiter, work queued, inline", kickWaiter, with(inline, func(v *kickView) { v.queued = 1 }), actInline},
		{"waiter, nothing queued", kickWaiter, inline, actNone},
		{"waiter, no inline posting", kickWaiter, kickView{queued: 5}, actNone},
		{"grant, no inline posting", kickGrant, kickView{}, actWake},
		{"grant, inline, nothing waits, within the window", kickGrant, inline, actNone},
		{"grant, inline, actor waits for credits", kickGrant, with(inline, func(v *kickView) { v.waitsForCredits = true }), actInline},
		{"grant, inline, beyond the window", kickGrant, with(inline, func(v *kickView) { v.beyondWindow = true }), actWake},
		{"grant, inline, waits and beyond the window", kickGrant, with(inline, func(v *kickView) { v.waitsForCredits, v.beyondWindow = true, true }), actInline},
		{"report, inline worth it", kickReport, inline, actInline},
		{"report, inline not worth it", kickReport, with(inline, func(v *kickView) { v.worthInline = false }), actWake},
		{"report, no inline posting", kickReport, kickView{}, actWake},
		{"wake, any view", kickWake, kickView{}, actWake},
		{"wake, inline view", kickWake, inline, actWake},
	} {
		if got := decideKick(tc.r, tc.v); got != tc.want {
			t.Errorf("%s: decideKick = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func heldOwner(parks bool) *runOwner {
	o := newRunOwner(parks, func() {})
	if !o.start() {
		panic("start")
	}
	return o
}

// TestOwnerMisusePanics: leaving, parking or releasing without the run,
// or preparing to leave twice, panics naming the state.
func TestOwnerMisusePanics(t *testing.T) {
	free := func() *runOwner { o := heldOwner(false); o.release(); return o }
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"leave without the run", func() { free().leave() }, "leave in state lifeStarted"},
		{"prepareLeave without the run", func() { free().prepareLeave() }, "prepareLeave in state lifeStarted"},
		{"prepareLeave twice", func() { o := heldOwner(false); o.prepareLeave(); o.prepareLeave() }, "runHeld|runLeaving"},
		{"cancelLeave without the run", func() { free().cancelLeave() }, "cancelLeave"},
		{"release twice", func() { free().release() }, "release in state lifeStarted"},
		{"park on an owner that leaves", func() { heldOwner(false).park() }, "park in state runHeld|lifeStarted"},
		{"leave on an owner that parks", func() { o := heldOwner(true); o.prepareLeave(); o.leave() }, "leave"},
		{"sweep before the actor stopped", func() { free().sweep() }, "sweep before the last one"},
		{"drain without the run", func() { free().mustHold("drain") }, "drain without the run in state lifeStarted"},
	} {
		msg := panicMessage(tc.f)
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: panic %q, want one containing %q", tc.name, msg, tc.want)
		}
	}
}

func panicMessage(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg, _ = p.(string)
		}
	}()
	f()
	return ""
}

// TestKickLifecycle: no kick takes a run before Start or after the actor
// stopped; one that finds the run free takes it, once.
func TestKickLifecycle(t *testing.T) {
	o := newRunOwner(false, func() {})
	if o.kick() {
		t.Fatal("a kick before Start took the run")
	}
	if !o.start() || o.start() {
		t.Fatal("start: want the first run once")
	}
	if o.kick() {
		t.Fatal("a kick took a run that is held")
	}
	o.prepareLeave()
	if !o.leave() {
		t.Fatal("leave with no kick since prepareLeave kept the run")
	}
	if !o.idle() {
		t.Fatalf("idle false after leave, state %s", stateString(o.state.Load()))
	}
	if !o.kick() {
		t.Fatal("a kick of an idle actor did not take the run")
	}
	if o.kick() {
		t.Fatal("a second kick took the run too")
	}
	o.set(lifeStopped)
	o.release()
	if o.kick() || o.idle() {
		t.Fatal("a kick took the run of a stopped actor")
	}
	if !o.sweep() || o.sweep() {
		t.Fatal("sweep: want one sweeper at a time")
	}
}

// TestKickKeepsLeavingHolder: a kick between prepareLeave and leave keeps
// the holder's run (leave fails), and costs no token without Park.
func TestKickKeepsLeavingHolder(t *testing.T) {
	o := heldOwner(false)
	o.prepareLeave()
	if o.kick() {
		t.Fatal("a kick took the run from a holder about to leave")
	}
	if o.leave() {
		t.Fatal("leave succeeded after a kick since prepareLeave")
	}
	if !o.has(runHeld) || o.has(runLeaving) {
		t.Fatalf("state %s after a failed leave, want runHeld alone of the run's bits", stateString(o.state.Load()))
	}
}

// TestKickFastPath: while the holder runs, a kick sends no token; while it
// parks, a burst of kicks sends one, and the parked holder returns.
func TestKickFastPath(t *testing.T) {
	o := heldOwner(true)
	for range 1000 {
		o.kick()
	}
	if n := o.tokensSent.Load(); n != 0 {
		t.Fatalf("kicks of a running holder: %d tokens, want 0", n)
	}
	o.prepareLeave()
	o.cancelLeave()
	o.kick()
	if n := o.tokensSent.Load(); n != 0 {
		t.Fatalf("kick after cancelLeave: %d tokens, want 0", n)
	}
	o.prepareLeave()
	for range 1000 {
		o.kick()
	}
	if n := o.tokensSent.Load(); n != 1 {
		t.Fatalf("1000 kicks of a parking holder: %d tokens, want 1", n)
	}
	o.park() // the token sent before it is kept: returns at once
	o.kick()
	if n := o.tokensSent.Load(); n != 1 {
		t.Fatalf("kick after the holder woke: %d tokens, want 1", n)
	}
}

// TestStaleTokenReturnsPark: a kick that raced with cancelLeave leaves a
// token; the next park returns at once, and kicks stay on the fast path.
func TestStaleTokenReturnsPark(t *testing.T) {
	o := heldOwner(true)
	o.prepareLeave()
	o.kick() // the holder's second look found work too
	o.cancelLeave()
	o.prepareLeave()
	o.park()
	if o.has(runLeaving) {
		t.Fatal("runLeaving still set after park returned")
	}
	o.kick()
	if n := o.tokensSent.Load(); n != 1 {
		t.Fatalf("kick after a spurious return: %d tokens, want 1", n)
	}
}

// TestNoLostKick: push, then wait for the holder to take the value, many
// times, with the holder pausing a random while between the steps of
// giving the run up, so that pushes land before prepareLeave, between it
// and the second look, and between that and parking or leaving. A lost
// kick leaves a value in the ring with no run to take it: the round hangs.
func TestNoLostKick(t *testing.T) {
	for _, parks := range []bool{true, false} {
		name := "leave"
		if parks {
			name = "park"
		}
		t.Run(name, func(t *testing.T) { noLostKick(t, parks) })
	}
}

func noLostKick(t *testing.T, parks bool) {
	rounds := 20000
	if testing.Short() {
		rounds = 2000
	}
	r := ring.New[int](4)
	var got, leaves, cancels stdatomic.Int64
	var running stdatomic.Int32
	var stop stdatomic.Bool
	exited := make(chan struct{})
	var o *runOwner
	run := func() {
		runtime.LockOSThread() // as the actor is
		defer runtime.UnlockOSThread()
		if running.Add(1) != 1 {
			panic("two runs at once")
		}
		rnd := uint32(got.Load()) | 1
		pause := func() {
			rnd ^= rnd << 13
			rnd ^= rnd >> 17
			rnd ^= rnd << 5
			switch n := rnd % 128; {
			case n < 64:
				for range n {
					got.Load()
				}
			case n >= 120:
				runtime.Gosched() // on one P the producer runs only then
			}
		}
		for {
			if stop.Load() {
				close(exited)
				return
			}
			for p := r.Peek(); p != nil; p = r.Peek() {
				got.Store(int64(*p))
				r.Pop()
			}
			pause()
			o.prepareLeave()
			pause()
			// The second look covers all a kick announces: the stop too.
			if r.Peek() != nil || stop.Load() {
				o.cancelLeave()
				cancels.Add(1)
				continue
			}
			pause()
			if parks {
				o.park()
				continue
			}
			running.Add(-1)
			if o.leave() {
				leaves.Add(1)
				return
			}
			running.Add(1)
		}
	}
	o = newRunOwner(parks, func() {})
	o.start()
	go run()
	for i := 1; i <= rounds; i++ {
		v := i
		for !r.TryPush(&v) {
			runtime.Gosched()
		}
		if o.kick() {
			go run()
		}
		for got.Load() != int64(i) {
			runtime.Gosched() // a lost kick hangs here: the test's timeout names it
		}
	}
	t.Logf("%d rounds: %d leaves, %d cancels, %d tokens", rounds, leaves.Load(), cancels.Load(), o.tokensSent.Load())
	if parks {
		stop.Store(true)
		o.kick()
		<-exited
	}
}

// TestOneRunAtATime: several producers kick an owner whose holder leaves
// when it runs dry; every value is taken and no two runs overlap.
func TestOneRunAtATime(t *testing.T) {
	const producers, perProducer = 4, 20000
	r := ring.New[int](64)
	var o *runOwner
	var running, overlaps, runs, taken stdatomic.Int64
	run := func() {
		runs.Add(1)
		if running.Add(1) != 1 {
			overlaps.Add(1)
		}
		for {
			for p := r.Peek(); p != nil; p = r.Peek() {
				r.Pop()
				taken.Add(1)
			}
			o.prepareLeave()
			if r.Peek() != nil {
				o.cancelLeave()
				continue
			}
			running.Add(-1) // before leave: the next run may start at once
			if o.leave() {
				return
			}
			if running.Add(1) != 1 {
				overlaps.Add(1)
			}
		}
	}
	o = newRunOwner(false, func() {})
	o.start()
	go run()
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for i := range perProducer {
				for v := i; !r.TryPush(&v); {
					runtime.Gosched()
				}
				if o.kick() {
					go run()
				}
				if i%8 == 0 {
					time.Sleep(time.Microsecond) // let the holder run dry and leave
				}
			}
		})
	}
	wg.Wait()
	for taken.Load() != producers*perProducer {
		runtime.Gosched() // a lost kick hangs here
	}
	if overlaps.Load() != 0 {
		t.Fatalf("%d runs overlapped another", overlaps.Load())
	}
	t.Logf("%d runs", runs.Load())
}
