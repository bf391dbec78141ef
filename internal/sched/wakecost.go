package sched

import (
	stdatomic "sync/atomic"
	"time"
)

// What a parked waiter pays to be woken, as this process has measured it.
//
// A waiter that parks is woken by what resolves its wait, at the end of a
// chain of goroutine wake-ups: the netpoller wakes the goroutine reading
// the CQ's completion channel, that one wakes the poller, and the poller
// the waiter. Each hop costs little on a quiet machine with
// spare cores and a great deal on a busy or emulated one, so the cost is
// measured, not assumed. A waiter polls at least as long as a park costs
// (ParkCost), as a ski rental buys skis: polling as long as parking would
// cost pays at most twice what the best choice would have, however long
// the wait turns out to be, while a waiter whose wake-ups are cheap keeps
// its configured poll time.
//
// Two wake-ups of the chain are measured as they happen, the poller's and
// the waiter's: whoever wakes the goroutine stamps the time (WakeStamp),
// and the goroutine, once it runs, reports it (WokeUp). Their learned
// figure is the median of the measured wake-ups (one in a while is much
// slower: a time slice lost to another thread). The netpoller's wake-up
// carries no stamp; a probe measures it (netpoll.go), and until it has,
// it is taken to cost as much as the others. The cost is at most
// maxParkWindow.
const (
	stampedHops   = 2
	maxParkWindow = 10 * time.Millisecond
)

var (
	wakeEpoch = time.Now()
	wakeHop   stdatomic.Int64 // learned median wake-up, ns (learnWakeUp)
	wakeUps   stdatomic.Uint64
)

// WakeStamp is the time for WokeUp: a goroutine that wakes another on the
// way to a parked waiter of an actor's completions, outside Future.Wait
// (a poller's goroutine, the runtime's receive path for Recv), stamps what
// it hands over with it. It is never 0, which WokeUp takes as "not
// stamped".
func WakeStamp() int64 { return int64(time.Since(wakeEpoch)) + 1 }

// WokeUp reports a parked waiter running again after a wake-up stamped
// with WakeStamp; a stamp of 0 is ignored.
func WokeUp(stamp int64) {
	if stamp == 0 {
		return
	}
	learnWakeUp(time.Duration(WakeStamp() - stamp))
}

// WakeUpCost reports what a wake-up of a parked waiter takes in this
// process, as learned (the median of those measured), and how many were
// measured.
func WakeUpCost() (wakeUp time.Duration, measured uint64) {
	return time.Duration(wakeHop.Load()), wakeUps.Load()
}

// learnWakeUp moves the learned wake-up towards d by a sixteenth of
// itself, up or down alike, so that it rests at the median; the first one
// measured is taken as it is. Racing callers may lose a step: a sample
// fewer.
func learnWakeUp(d time.Duration) {
	wakeUps.Add(1)
	hop := wakeHop.Load()
	switch {
	case hop == 0:
		hop = int64(d)
	case int64(d) > hop:
		hop += max(hop/16, 1)
	default:
		hop -= hop / 16
	}
	wakeHop.Store(max(hop, 1))
}

// ParkCost is what a waiter that parks should expect to pay for it: the
// chain's stamped wake-ups and the netpoller's.
func ParkCost() time.Duration {
	hop := time.Duration(wakeHop.Load())
	netpoll := NetpollCost()
	if netpoll == 0 {
		netpoll = hop
	}
	return min(stampedHops*hop+netpoll, maxParkWindow)
}
