// Package sched holds the runtime's process-wide scheduling state: what
// every actor, poller and waiter of the process shares, whichever runtime
// it belongs to, because they share the process's Ps and OS threads.
//
//   - Spin slots (SpinSlot): at most GOMAXPROCS-1 actors and pollers spin
//     without yielding, so the goroutines they wake always have a P.
//   - Waiters (YieldUntil, AcquirePollingWaiter): how long a goroutine
//     waiting for a completion yields before it parks, and how many may
//     poll a CQ while they wait.
//   - Wake-up cost (WakeStamp, WokeUp, ProbeNetpoll, ParkCost): what a
//     parked waiter pays to be woken, as this process measures it (the
//     netpoller's hop by a probe, since the CQ's event carries no time); a
//     waiter polls at least as long as a park would cost.
//   - IdleClock: how long a spinning goroutine has found nothing to do,
//     reading the clock only now and then.
//
// This state is global on purpose: a second runtime in the process
// competes for the same cores, and a bound per runtime would let two of
// them spin every P away.
package sched
