package cqpoller

import (
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// Drain handles every completion in t's CQ now, waiting for whoever
// handles it: for a caller that must have seen what arrived before some
// event outside the CQ (the runtime, before it takes an rdma_cm disconnect
// for a lost peer, looks for the peer's goodbye).
func (p *Poller) Drain(t *Target) {
	wcs := p.wcPool.Get().(*[]verbs.WC)
	defer p.wcPool.Put(wcs)
	d := TargetDriver{p, t}
	for d.poll(true, *wcs) > 0 {
	}
}

// TryDrain handles every completion in t's CQ now, unless another
// goroutine is handling them at this moment, and reports whether it found
// the CQ empty in the end: for a caller about to decide something a
// completion may explain, which leaves the decision to whoever handles the
// CQ now when it returns false (the runtime's check of its QPs' states,
// before it calls a QP's error unexplained). A nil t (an endpoint that
// never started) has nothing to drain.
func (p *Poller) TryDrain(t *Target) bool {
	if t == nil {
		return true
	}
	wcs := p.wcPool.Get().(*[]verbs.WC)
	defer p.wcPool.Put(wcs)
	for {
		ran := false
		got := t.own.tryPoll(func() int {
			ran = true
			return p.pollLocked(t, *wcs)
		})
		if !ran {
			return false
		}
		if got == 0 {
			return true
		}
	}
}

// Driver returns what t's actor calls to poll t's CQ itself while it is
// awake (qpactor.Driver).
func (p *Poller) Driver(t *Target) TargetDriver { return TargetDriver{p, t} }

// TargetDriver lets an actor handle its own CQ: with a busy actor and a
// busy poller each holding one of a small machine's Ps, the goroutines
// that wait for the futures get neither, and an actor, locked to its
// thread, cannot yield its P cheaply. An actor that polls its CQ between drains keeps one
// P for everything else and hands the CQ back when it parks.
type TargetDriver struct {
	p *Poller
	t *Target
}

func (d TargetDriver) Drive(on bool) {
	t := d.t
	if on {
		if t.driveWCs == nil {
			t.driveWCs = d.p.wcPool.Get().(*[]verbs.WC)
		}
		t.own.drive()
		return
	}
	wcs := t.driveWCs
	if wcs == nil {
		wcs = d.p.wcPool.Get().(*[]verbs.WC)
	}
	t.driveWCs = nil
	defer d.p.wcPool.Put(wcs)
	if t.own.undrive() {
		d.handBack(*wcs)
	}
}

// WaitBegin is Drive(true) for a waiter polling the CQ (Poll): while the
// actor or any waiter polls it, the poller neither polls nor arms it, so
// the completions they poll for raise no events that wake the poller for
// nothing.
func (d TargetDriver) WaitBegin() { d.t.own.drive() }

// WaitEnd is Drive(false) for a waiter. The last waiter to stop hands the
// CQ back at once when it parks (parking), since the completion it waits
// for must wake it. One that got its result leaves the CQ unwatched for
// linger (at least minLinger) instead, since its caller often waits again
// soon (the reply to the request it sent): a wait that begins meanwhile
// finds the CQ as it was, and none pays the arming (a system call on rxe)
// and the completion event that follows it, which wakes the poller's
// thread.
func (d TargetDriver) WaitEnd(parking bool, linger time.Duration) {
	t := d.t
	if !t.own.undrive() {
		return
	}
	if parking || d.p.cfg.Policy == Busy {
		d.handBack(nil)
		return
	}
	t.own.lingerFrom(linger, d.p.afterFunc)
}

// minLinger is the shortest a CQ whose last waiter got its result stays
// unwatched (WaitEnd): a completion that comes meanwhile with no waiter
// polling waits up to a linger or two to be handled.
const minLinger = 100 * time.Microsecond

// handBack gives the CQ back to the poller when its last driver let go.
// Under Busy, where nothing is armed, it goes back to the active set,
// which the poller polls whatever happens. Otherwise it is armed and
// polled once more (a completion that came before the arming raises no
// event): a sleeping poller wakes on the CQ's next completion, without
// being woken now for nothing. The poll waits for the CQ: the poller,
// having seen the last driver go, may be polling it right now, in the
// last poll before it lets it go, and a completion that lands after that
// poll and before the arming would be missed by both if this poll gave
// way. A failed CQ is armed by nobody, a removed one (a waiter that
// outlived its endpoint's CQ) not touched. wcs nil: the target's own
// waiter batch.
func (d TargetDriver) handBack(wcs []verbs.WC) {
	t := d.t
	if d.p.cfg.Policy == Busy {
		d.p.wakeTarget(t)
		return
	}
	if wcs == nil {
		wcs = t.waitWCs[:]
	}
	armFailed, got := t.own.handBack(func() bool {
		d.p.stats.Armed.Inc()
		// Cannot arm: the poller takes the CQ back, and polls it until
		// it can.
		return t.CQ.ReqNotify(false) != nil
	}, func() int { return d.p.pollLocked(t, wcs) })
	if got > 0 {
		d.p.stats.PollsHit.Inc()
	}
	if armFailed || needsRounds(t) {
		d.p.wakeTarget(t)
	}
}

func (d TargetDriver) Progress() int {
	wcs := d.t.driveWCs
	if wcs == nil { // Progress without Drive(true): not the protocol, but harmless
		wcs = d.p.wcPool.Get().(*[]verbs.WC)
		defer d.p.wcPool.Put(wcs)
	}
	return d.poll(false, *wcs)
}

// Poll polls the CQ once for any goroutine (a waiter, qpactor's
// Config.WaitPoll), unless someone else handles it now or the target was
// removed. It polls into the target's own small batch, which only the
// holder of the target's mutex uses: a waiter polls many times a wait,
// and a batch from the pool each time would be an allocation whenever
// the pool drops one (as it does at random under the race detector).
func (d TargetDriver) Poll() int {
	t := d.t
	got := t.own.tryPoll(func() int { return d.p.pollLocked(t, t.waitWCs[:]) })
	if got > 0 {
		d.p.stats.PollsHit.Inc()
	}
	return got
}

// PollUndriven is Poll for a waiter that yields without polling the CQ
// in between (qpactor.Driver): it polls only a CQ nobody drives, since
// the actor or a polling waiter that drives one polls it already, and a
// crowd of waiters on one CQ would only take its lock from them. It takes
// no part in who watches the CQ: it handles what is there, of a CQ the
// poller polls, one that lingers or one that is armed, whose event, raised
// by the completion it took, then wakes the poller to find nothing, as
// the actor's Progress may.
func (d TargetDriver) PollUndriven() int {
	if d.t.own.driven() {
		return 0
	}
	return d.Poll()
}

// poll polls the CQ once into wcs, waiting for whoever handles it with
// wait, else only if nobody does now, and returns how many completions it
// handled.
func (d TargetDriver) poll(wait bool, wcs []verbs.WC) int {
	t := d.t
	poll := func() int { return d.p.pollLocked(t, wcs) }
	var got int
	if wait {
		got = t.own.pollWaiting(poll)
	} else {
		got = t.own.tryPoll(poll)
	}
	if got > 0 {
		d.p.stats.PollsHit.Inc()
	}
	return got
}
