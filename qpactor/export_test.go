package qpactor

import "time"

// WaitPollMicros is waitPollMicros, for the external tests.
var WaitPollMicros = waitPollMicros

// MaxPollingWaiters is maxPollingWaiters, for the external tests.
const MaxPollingWaiters = maxPollingWaiters

// SetPostCost sets what the actor learned a PostSend takes, for the
// external tests.
func (a *Actor) SetPostCost(d time.Duration) { a.postCost.Store(uint32(d)) }

// SetWakeUpCost sets the learned wake-up of a parked waiter (0: none
// measured yet), for the tests; the process shares it, so each test that
// depends on it sets it, and puts the old one back with the returned func.
func SetWakeUpCost(d time.Duration) (restore func()) {
	old := wakeHop.Swap(int64(d))
	return func() { wakeHop.Store(old) }
}
