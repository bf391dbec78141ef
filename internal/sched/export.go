package sched

import "time"

// SetWakeUpCost sets the learned wake-up of a parked waiter (0: none
// measured yet) and returns what puts the old one back. It is for tests:
// the process shares the figure, so each test that depends on it sets it.
//
// Until restore, the netpoller's wake-up is taken to cost as much, and
// the probe (ProbeNetpoll) learns nothing: a park costs three wake-ups of
// d whatever the probe would measure meanwhile.
func SetWakeUpCost(d time.Duration) (restore func()) {
	old := wakeHop.Swap(int64(d))
	restoreNetpoll := SetNetpollCost(0)
	return func() {
		wakeHop.Store(old)
		restoreNetpoll()
	}
}

// SetNetpollCost sets the learned wake-up by the netpoller (0: taken to
// cost as much as the others) and keeps the probe from learning until
// restore, for tests.
func SetNetpollCost(d time.Duration) (restore func()) {
	netpollPinned.Add(1)
	old := netpollHop.Swap(int64(d))
	return func() {
		netpollHop.Store(old)
		netpollPinned.Add(-1)
	}
}
