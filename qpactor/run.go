package qpactor

import (
	"runtime"

	"github.com/verbsrt/verbsrt/internal/sched"
)

// runAcquired is the body of a run on an actor goroutine, locked to its
// OS thread: Start's, and every one a kick or handOff starts.
func (a *Actor) runAcquired() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a.run.stopBound() // this run is the wake-up a bound arranged, or makes it moot
	a.stats.Ops.Runs.Inc()
	if a.loop() {
		close(a.done)
	}
}

// loop runs the actor, holding its run, until it stops for good (true)
// or, unless it parks, until it goes idle and gives the run up (false):
// then nothing of this run may touch the actor any more, since a kick may
// already have started the next. It drains, posts, handles completions
// while a Driver is set, and rests when idle.
func (a *Actor) loop() (stopped bool) {
	d := a.driver
	if d != nil {
		a.driving.Store(true)
		d.Drive(true)
	}
	var (
		idle   sched.IdleClock
		gather gatherer
		spin   sched.SpinSlot
	)
	for {
		worked, took := false, false
		waited := !gather.due(a.inbox)
		if !waited {
			k := a.drain()
			gather.drained(k)
			took = k > 0
			worked = took
		}
		if d != nil && d.Progress() > 0 {
			worked = true
		}
		// An actor that took its callers' submissions while they post
		// inline leaves at once (leftToCallers): the callers post what
		// comes next themselves, and an actor that stayed up would take
		// their submissions and their CQ polls from them, across
		// threads. What is queued waits for the next completion, bounded
		// as push bounds it; that rest does not watch its contexts (a
		// watch allocates), and an ended one is dropped when a drain
		// meets it.
		leave := took && a.leftToCallers()
		switch {
		case leave: // to the rest below, now
		case worked || waited:
			idle.Busy()
			if waited && !spin.Acquire() {
				// Gathering is spinning too: without a slot, yield, so
				// that the callers filling the inbox get the P.
				runtime.Gosched()
			}
			continue
		case a.finished():
			spin.Release()
			a.postGoodbye()
			if d != nil {
				a.driving.Store(false)
				d.Drive(false) // before done closes: Close's caller finds the poller watching
			}
			a.stop()
			return true
		case idle.Idle() < a.spin.Load():
			if !spin.Acquire() {
				runtime.Gosched()
			}
			continue
		}
		spin.Release()
		if leave && a.inbox.Len() > 0 {
			a.run.wakeAfter(a.spin.Load())
		}
		if a.restWatching(d, !leave) {
			return false // the next kick starts the next run
		}
		if d != nil {
			a.driving.Store(true)
			d.Drive(true)
		}
		idle.Busy()
	}
}

// rest is what an actor with nothing to do does: it gives back the peer's
// credits it holds beyond its window, hands its CQ back to the poller (d),
// and parks (Config.Park) or gives its run up and reports true: the run is
// over, and nothing of it may touch the actor any more. It reports false
// when it finds work again (or wakes).
func (a *Actor) rest(d Driver) (left bool) {
	return a.restWatching(d, true)
}

// restWatching is rest; with watch false it leaves the contexts of what
// stays queued unwatched (watching one allocates), for a run that
// arranged a wake-up (runOwner.wakeAfter) whose actor goroutine watches them.
func (a *Actor) restWatching(d Driver, watch bool) (left bool) {
	extra := a.peer.s.HoldsExtra() && a.inbox.Peek() == nil
	if extra {
		a.returnIdle()
	}
	if d != nil {
		a.driving.Store(false)
		d.Drive(false)
	}
	// Watch the contexts of what stays queued (waiting for credits), so
	// that their ends wake the actor; anything queued after this look is
	// seen by the second look below, or wakes it.
	if watch {
		a.watchQueued()
	}
	a.looked = max(a.looked, a.watched)
	for a.inbox.PeekAt(a.looked) != nil {
		a.looked++
	}
	seen := a.looked
	// Before the second look, which reads the credits of both kinds.
	a.waitsForCredits.Store(a.sleepsOnCredits())
	a.run.prepareLeave()
	// A closing actor with submissions waiting for credits sleeps too:
	// returning credits (Complete), Break and Close wake it.
	// Work left for the next completion (coalesces) does not keep it up.
	// Credits the peer granted beyond the initial window since the first
	// look keep it up too: their grant's kick (GrantPeerCredits) may have
	// come before prepareLeave, and only a rest gives them back.
	if ((a.canDrain() || a.inbox.PeekAt(seen) != nil) && !a.coalesces()) || a.finished() ||
		(!extra && a.peer.s.HoldsExtra() && a.inbox.Peek() == nil) {
		a.run.cancelLeave()
	} else if !a.run.parks {
		return a.run.leave()
	} else {
		a.run.park()
	}
	return false
}

// leftToCallers reports whether an actor that just took submissions from
// its inbox may go idle at once, without its spin window: it posts
// inline, its callers post their own work (inlineWorthIt), and what is
// queued, if anything, waits for the next completion (coalesces), whose
// handler posts it. The spin window spares the next submission an
// actor's wake-up; these callers never pay one. Work only a wake-up
// brings (a credit report, a grant) keeps the window.
func (a *Actor) leftToCallers() bool {
	return a.inline && a.inlineWorthIt() && (a.inbox.Len() == 0 || a.coalesces()) && !a.run.has(lifeClosing)
}

// sleepsOnCredits reports whether the actor, going to sleep, may wait for
// credits of either kind (send-queue slots that completions give back,
// receives the peer reports): something is queued, a credit report is
// wanted, or what it holds beyond its initial window is still to be given
// back (postReturn needs a send-queue slot).
//
// Only such an actor is woken by a completion. A completion that comes
// after the actor went idle (on a device slower than the spin window: an
// RDMA WRITE of 64 KiB takes milliseconds on rxe) would otherwise start a
// goroutine on a locked OS thread (about 15 µs) and spin it for the spin
// window, to find nothing to do. Against the actor going to sleep: it
// stores waitsForCredits, then looks at the credits once more (rest's
// second look); a completion adds credits, then loads waitsForCredits.
// One of the two sees the other's write. (A peer's grant wakes any actor:
// GrantPeerCredits says why.)
func (a *Actor) sleepsOnCredits() bool {
	return a.inbox.Peek() != nil || a.peer.s.Pending()
}

// finished reports whether a closing actor may stop: nothing is queued, or
// the QP is broken and what is queued fails.
func (a *Actor) finished() bool {
	return a.run.has(lifeClosing) && (a.inbox.Peek() == nil || a.run.has(lifeBroken))
}
