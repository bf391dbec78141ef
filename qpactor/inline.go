package qpactor

import (
	"math"
	"runtime"
	"time"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/sched"
)

// inlineWorthIt reports whether a submission that finds the actor idle
// should be posted by its submitter (Config.InlinePost): always when a
// PostSend is cheap, and otherwise only when nothing is in flight. Where
// PostSend is a system call that runs the protocol (rxe), a caller that
// keeps operations in flight and posts each itself rings a doorbell per
// WR, while the actor goroutine it hands them to chains what comes while
// it posts into the next PostSend. A caller that waits for each operation
// (request/response) has nothing in flight when it submits, and keeps
// posting inline.
func (a *Actor) inlineWorthIt() bool {
	return time.Duration(a.postCost.Load()) < costlyPost || a.Outstanding() == 0
}

// coalesces reports whether work queued on an actor that posts inline may
// stay queued until the next completion is handled (Polled) or a caller
// waits (WaitUntil): while WRs are in flight a completion is sure to come
// (the last WR of every post is signaled), and what is queued until then
// goes in one PostSend instead of one each. A submitter that finds nothing
// in flight, the request of a request/response caller, posts at once; so
// does the one whose submission fills a chain of gatherTarget. The first
// submission left queued bounds the wait (push): a completion slow to
// come leaves what is queued to an actor goroutine after the spin window.
func (a *Actor) coalesces() bool {
	return a.inline && a.Outstanding() > 0 && a.inbox.Len() < min(gatherTarget, a.inbox.Cap()) &&
		!a.run.hasAny(lifeClosing|lifeBroken)
}

// costlyPost is the PostSend time beyond which a submitter with
// operations in flight hands its submission to the actor goroutine
// (inlineWorthIt): PostSend is a fraction of a µs on soft and on NICs
// that map their doorbell into the process, tens of µs or more where it
// is a system call.
const costlyPost = 10 * time.Microsecond

// postCostEvery is how often PostSend is timed: the first call, then one
// in this many (two clock reads each).
const postCostEvery = 64

// learnPostCost moves the learned PostSend time a quarter of the way to d.
func (a *Actor) learnPostCost(d time.Duration) {
	cost := time.Duration(a.postCost.Load())
	if cost == 0 {
		cost = d
	} else {
		cost += (d - cost) / 4
	}
	a.postCost.Store(uint32(min(max(cost, 0), math.MaxUint32)))
}

// runInline is a run of the actor on a goroutine that found it gone idle
// (Config.InlinePost) and took its run (kick, actInline): one drain,
// posted from the submitter's thread, then the actor leaves as an idle one
// does. Work that came meanwhile, or a close, goes to an actor goroutine,
// so a submitter never becomes the actor of a crowd; work that waits for
// credits waits for the grant or completion that brings them, which runs
// the actor again (GrantPeerCredits, on the goroutine that handles it),
// or for an actor goroutine started after the spin window. A submitter
// never waits for credits itself.
func (a *Actor) runInline() {
	a.run.stopBound() // this drain posts what the bound was for
	a.stats.Ops.InlineRuns.Inc()
	runtime.LockOSThread()
	a.drain()
	runtime.UnlockOSThread()
	switch {
	case a.finished():
		a.handOff()
	case a.inbox.Peek() == nil:
		if !a.rest(nil) {
			a.handOff()
		}
	case a.coalesces():
		// Work that came during the drain, left for the next completion
		// or the bound its first submitter set (push): resting does not
		// watch its contexts, as a watch allocates.
		if !a.restWatching(nil, false) {
			a.handOff()
		}
	default:
		// The drain left work waiting for credits, usually a moment
		// away: the peer's grant (GrantPeerCredits) or a completion that
		// brings them runs the actor again. An actor goroutine started
		// now would often take the caller's P for its spin, on a small
		// machine the one its caller needs; one starts after the
		// spin window if they have not come, and watches the contexts of
		// what waits, which this rest leaves unwatched (a watch
		// allocates).
		a.run.wakeAfter(a.spin.Load())
		if !a.restWatching(nil, false) {
			a.run.stopBound()
			a.handOff()
		}
	}
}

// WaitFor is WaitUntil for a future's state: what Future.Wait polls
// through.
func (a *Actor) WaitFor(s *future.State) bool { return a.WaitUntil(s.Resolved) }

// WaitUntil is how a goroutine waiting for this actor's completions spins
// before it parks (Future.Wait, and the runtime's Recv): with WaitPoll set
// and a Driver, it polls the actor's CQ itself until ready reports true or
// the wait window has passed (waitWindow), yielding between polls (the
// goroutines its completions wake may need its P); otherwise it yields as
// YieldUntil does. It reports whether ready did.
//
// While the actor goroutine drives the CQ, a waiter only watches its
// future for the window: the actor polls the CQ between drains, and a
// waiter polling too would only take the CQ's lock from it. Only a few
// waiters poll at once (sched.AcquirePollingWaiter). One that gets no
// slot still looks at the CQ once a turn (Driver.PollUndriven) unless the
// actor or a polling waiter drives it: many endpoints with a waiter each
// (a server's connections) leave most waiters without a slot, and a
// completion on an endpoint nobody drives would otherwise wait for the
// poller, which polls each CQ once a round of them all, and then for the
// waiter's next turn, a pass through every runnable goroutine.
//
// What it waits for may be queued, left for the next completion
// (coalesces): a waiter whose poll finds no completion, or one that does
// not poll, posts what is queued first.
func (a *Actor) WaitUntil(ready func() bool) bool {
	d := a.driver
	if a.waitPollMicros == 0 || d == nil || !sched.AcquirePollingWaiter() {
		a.kick(kickWaiter)
		look := ready
		if d != nil && a.waitPollMicros != 0 {
			look = func() bool { return ready() || d.PollUndriven() > 0 && ready() }
		}
		if sched.YieldUntil(look) {
			return true
		}
		a.stats.Ops.WaitsParked.Inc()
		return false
	}
	defer sched.ReleasePollingWaiter()
	if ready() {
		return true
	}
	window := a.waitWindow()
	d.WaitBegin()
	idle := sched.IdleClock{Now: a.clock}
	for {
		// Poll, then look: the look before parking follows the last poll
		// (the actor's, while it drives the CQ).
		n := 0
		if !a.driving.Load() {
			n = d.Poll()
		}
		if ready() {
			d.WaitEnd(false, window)
			return true
		}
		if n > 0 {
			idle.Busy()
			continue
		}
		a.kick(kickWaiter)
		if idle.Idle() >= window {
			d.WaitEnd(true, 0)
			a.stats.Ops.WaitsParked.Inc()
			return false
		}
		runtime.Gosched()
	}
}

// waitWindow is how long a waiter polls before it parks: Config.WaitPoll,
// or what a park is expected to cost where that is more (sched.ParkCost),
// as a ski rental buys skis once renting has cost their price.
//
// A waiter that parks pays a chain of goroutine wake-ups: cheap on a quiet
// machine with cores to spare, and on a busy or emulated one more than the
// round trip it waited for; there the window grows to cover a park.
//
// The window is not learned from how long the waits take: a reader faster
// than its writer would then poll through its long waits, on the CPU the
// writer's side needs, which makes the waits longer and the window with
// them. Polling longer than a park costs buys latency with CPU the machine
// may not have.
func (a *Actor) waitWindow() time.Duration {
	return max(time.Duration(a.waitPollMicros)*time.Microsecond, sched.ParkCost())
}
