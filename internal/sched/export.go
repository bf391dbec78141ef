package sched

import "time"

// SetWakeUpCost sets the learned wake-up of a parked waiter (0: none
// measured yet) and returns what puts the old one back. It is for tests:
// the process shares the figure, so each test that depends on it sets it.
func SetWakeUpCost(d time.Duration) (restore func()) {
	old := wakeHop.Swap(int64(d))
	return func() { wakeHop.Store(old) }
}
