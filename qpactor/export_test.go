package qpactor

import (
	"time"

	"github.com/verbsrt/verbsrt/internal/sched"
	"github.com/verbsrt/verbsrt/verbs"
)

// WaitPollMicros is waitPollMicros, for the external tests.
var WaitPollMicros = waitPollMicros

// SetPostCost sets what the actor learned a PostSend takes, for the
// external tests.
func (a *Actor) SetPostCost(d time.Duration) { a.postCost.Store(uint32(d)) }

// SetSpin sets the spin window of an actor that has gone idle (no
// goroutine of it runs), for the external tests.
func (a *Actor) SetSpin(d time.Duration) { a.spin.Store(d) }

// SetWakeUpCost is sched.SetWakeUpCost, for the external tests.
var SetWakeUpCost = sched.SetWakeUpCost

// WakeUpCost is sched.WakeUpCost, for the external tests.
var WakeUpCost = sched.WakeUpCost

// MaxPollingWaiters is sched.MaxPollingWaiters, for the external tests.
const MaxPollingWaiters = sched.MaxPollingWaiters

// GatherTarget is how many submissions fill a chain (coalesces).
const GatherTarget = gatherTarget

// WakeUpArmed reports whether a bounded wake-up of the actor goroutine
// (runOwner.wakeAfter) is set and neither called off nor fired.
func (a *Actor) WakeUpArmed() bool { return a.run.boundArmed.Load() }

// DrainUnheld, PostUnheld and FailQueuedUnheld call what only the run's
// holder may, from a test that holds no run.
func (a *Actor) DrainUnheld()      { a.drain() }
func (a *Actor) PostUnheld()       { a.post() }
func (a *Actor) FailQueuedUnheld() { a.failQueued(verbs.ErrClosed) }

// QueuedInView is the queued count a kick's view reads (decideKick).
func (a *Actor) QueuedInView() int { return a.view().queued }
