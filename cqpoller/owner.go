package cqpoller

import (
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/internal/lockrank"
)

// cqOwner says who handles a target's CQ: who may poll it, who arms it,
// and when it goes back to the poller. It is the only code that takes the
// CQ's handler lock.
//
//	           Add                     Drive(true) / WaitBegin
//	REMOVED ─────────▶ POLLER ─────────────────────────────▶ DRIVEN
//	   ▲                 ▲  ▲ handBack: arm, poll once more     │ (drivers > 0:
//	   │                 │  └───────────────────────────────────┤  the actor while
//	   │                 │       last Drive(false), or a        │  awake, waiters
//	   │                 │       waiter that parks              │  while they poll)
//	   │                 │                                      │ last WaitEnd
//	   │                 │ linger over, nobody driving:         │ with a result
//	   │                 │ handBack                             ▼
//	   │                 └────────────────────────────────── LINGER
//	   │                          (unwatched for a linger;     │ WaitBegin /
//	   │                           a wait ending meanwhile     │ Drive(true):
//	   │                           runs the timer again)       └──▶ DRIVEN
//	   └── Remove, from any state: never polled or armed again
//
// In POLLER the poller goroutine polls the CQ while it is in the active
// set and arms it before it leaves the set; in DRIVEN the poller neither
// polls nor arms it (a driven target leaves the active set), and the
// drivers poll it; in LINGER nobody watches it, on purpose, for a short
// while (minLinger at least). A CQ whose Poll failed is polled and armed
// by nobody (failed), whatever the state.
//
// States say who may poll; the handler lock says who polls now. Any
// holder of the role may try to poll at any time (tryPoll), and gives way
// if another handles the CQ; only the last poll before a side stops
// watching the CQ waits for the lock (pollWaiting, handBack): a completion
// that lands between the other side's poll and the arming raises no event,
// so that poll must not be skipped. One handler at a time keeps a QP's
// completions in order.
//
// mu's rank, after Poller.mu, is in internal/lockrank; doc.go follows the
// chain under it through the actor, the runtime and the provider.
type cqOwner struct {
	// mu is held by whoever handles the CQ's completions now.
	mu lockrank.Mutex[lockrank.CQOwner]
	// removed is set, under mu, when Remove took the target from its
	// poller: its CQ may be destroyed next.
	removed bool
	// drivers counts who polls the CQ themselves: the actor while it is
	// awake and waiters while they wait. While it is not zero the poller
	// neither polls nor arms the CQ.
	drivers atomic.Int32
	// failed is set once Poll failed: nobody polls or arms the CQ again.
	failed atomic.Bool

	// linger hands the CQ back once its last waiter has been gone for
	// lingerFor; made (by the poller's afterFunc), reset and stopped
	// under mu. lingering says it is set; lingerEnds counts the waits that
	// ended with a result, and lingerSeen (under mu) is the count the
	// timer saw when it was last set.
	linger     lingerTimer
	back       func() // hands the CQ back to the poller (set by Add)
	lingering  atomic.Bool
	lingerEnds atomic.Uint32
	lingerFor  atomic.Int64
	lingerSeen uint32
}

// tryPoll runs poll, the handling of the CQ's completions, unless another
// goroutine handles them now or the CQ was removed, and returns what poll
// returned (0 when it did not run).
func (o *cqOwner) tryPoll(poll func() int) int {
	if !o.mu.TryLock() {
		return 0
	}
	defer o.mu.Unlock()
	if o.removed {
		return 0
	}
	return poll()
}

// pollWaiting is tryPoll that waits for whoever handles the CQ now: the
// last poll before its caller stops watching the CQ, or one that must see
// every completion that arrived before it (Drain).
func (o *cqOwner) pollWaiting(poll func() int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.removed {
		return 0
	}
	return poll()
}

// handBack is the way from DRIVEN or LINGER back to POLLER: it arms the
// CQ (arm reports whether that failed) unless it failed before, then polls
// it once more, waiting for whoever handles it now, since a completion
// that came before the arming raises no event. It reports whether arming
// failed and how many completions the poll handled; a removed CQ is left
// alone.
func (o *cqOwner) handBack(arm func() bool, poll func() int) (armFailed bool, got int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.removed {
		return false, 0
	}
	if !o.failed.Load() {
		armFailed = arm()
	}
	return armFailed, poll()
}

// exclusive runs fn while nobody handles the CQ's completions (DoTarget).
func (o *cqOwner) exclusive(fn func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fn()
}

// open is Add: the CQ may be polled (again, after a Remove), and back is
// how it returns to the poller.
func (o *cqOwner) open(back func()) {
	o.mu.Lock()
	o.removed = false
	o.back = back
	o.mu.Unlock()
}

// lingerTimer is the linger's timer: a *time.Timer, or a test's.
type lingerTimer interface {
	Reset(time.Duration) bool
	Stop() bool
}

// timeAfterFunc is the poller's afterFunc: the time package's.
func timeAfterFunc(d time.Duration, f func()) lingerTimer { return time.AfterFunc(d, f) }

// remove is Remove: after any poll running now (a waiter's), the CQ is
// polled and armed by nobody, and a linger timer that fires anyway finds
// it removed.
func (o *cqOwner) remove() {
	o.mu.Lock()
	o.removed = true
	if o.linger != nil {
		o.linger.Stop()
	}
	o.mu.Unlock()
}

// drive enters DRIVEN, or stays there with one driver more.
func (o *cqOwner) drive() { o.drivers.Inc() }

// undrive takes a driver away and reports whether it was the last: its
// caller then hands the CQ back, or lingers.
func (o *cqOwner) undrive() (last bool) { return o.drivers.Dec() == 0 }

// driven reports whether the actor or a waiter polls the CQ now.
func (o *cqOwner) driven() bool { return o.drivers.Load() > 0 }

// lingerFrom enters LINGER after the last waiter's wait ended with a
// result: the timer hands the CQ back (o.back) unless a wait ended since
// or someone drives it (lingerOver). A wait that ends while the timer runs
// only counts itself (lingerEnds): the timer, firing, sees the count moved
// and runs again, instead of every wait resetting it, which would cost a
// timer reset per wait. afterFunc (the poller's) makes the timer the first
// time.
func (o *cqOwner) lingerFrom(d time.Duration, afterFunc func(time.Duration, func()) lingerTimer) {
	if l := int64(max(d, minLinger)); o.lingerFor.Load() != l {
		o.lingerFor.Store(l)
	}
	o.lingerEnds.Inc()
	if o.lingering.Swap(true) {
		return // the running timer sees this end
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lingerSeen = o.lingerEnds.Load()
	switch {
	case o.removed:
		o.lingering.Store(false)
	case o.linger == nil:
		o.linger = afterFunc(time.Duration(o.lingerFor.Load()), func() {
			if o.lingerOver() {
				o.back()
			}
		})
	default:
		o.linger.Reset(time.Duration(o.lingerFor.Load()))
	}
}

// lingerOver is the linger timer firing. It runs the timer again if a
// wait ended since it was set, and otherwise reports whether the CQ goes
// back to the poller: it is not removed and nobody drives it now (a driver
// hands it back when done).
func (o *cqOwner) lingerOver() (handBack bool) {
	o.mu.Lock()
	if o.removed {
		o.mu.Unlock()
		return false
	}
	if ends := o.lingerEnds.Load(); ends != o.lingerSeen {
		o.lingerSeen = ends
		o.linger.Reset(time.Duration(o.lingerFor.Load()))
		o.mu.Unlock()
		return false
	}
	// Cleared before the look at drivers: a wait that ends after this
	// starts a timer of its own.
	o.lingering.Store(false)
	o.mu.Unlock()
	return !o.driven()
}
