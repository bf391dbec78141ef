package sched

import (
	"runtime"

	"go.uber.org/atomic"
)

// A waiter (Future.Wait, the runtime's Recv) yields before it parks. A
// waiter that parks is woken by the goroutine that resolves its wait (an
// actor or a poller) onto that goroutine's own P, which a spinning actor,
// locked to its thread, does not give up: the waiter then runs only once
// another P runs dry and steals it (a poller yields after handling
// completions). A yielding waiter instead waits in the global run
// queue, which every P serves. A lone waiter yields longer, being cheap to
// run; in a crowd each yields less, since every yield is a trip through the
// scheduler that the others pay for too.
const (
	spinChecks    = 64 // yields before parking, while few spin
	crowdedChecks = 32 // yields before parking, when many spin
	maxSpinners   = 4  // "few"
)

// spinners counts goroutines in a waiter's spin phase (YieldUntil),
// process-wide.
var spinners atomic.Int32

// YieldUntil yields the processor until ready reports true or the spin
// budget runs out (spinChecks yields while few goroutines spin,
// crowdedChecks when more do), and reports whether ready did. It is how a
// waiter spins before it parks.
func YieldUntil(ready func() bool) bool {
	checks := crowdedChecks
	if spinners.Inc() <= maxSpinners {
		checks = spinChecks
	}
	defer spinners.Dec()
	for range checks {
		if ready() {
			return true
		}
		runtime.Gosched()
	}
	return ready()
}

// MaxPollingWaiters is how many goroutines may poll a CQ while they wait,
// process-wide. Beyond a few, polling waiters only take the CQ from each
// other and from the actor, and the CPU from the callers; the rest yield
// and park, and a completion one of the few handles resolves their futures
// as well. (A waiter without a slot may still look at a CQ nobody polls
// once a turn: qpactor's WaitUntil.)
const MaxPollingWaiters = maxSpinners

// pollingWaiters counts the goroutines holding a polling-waiter slot.
var pollingWaiters atomic.Int32

// AcquirePollingWaiter reports whether the caller may poll a CQ while it
// waits, taking one of MaxPollingWaiters slots; it then calls
// ReleasePollingWaiter when its wait ends.
func AcquirePollingWaiter() bool { return takeSlot(&pollingWaiters, MaxPollingWaiters) }

// ReleasePollingWaiter gives back a slot AcquirePollingWaiter gave.
func ReleasePollingWaiter() { pollingWaiters.Dec() }
