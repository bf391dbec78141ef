// Package qpactor runs one actor goroutine per queue pair: callers enqueue
// work requests on a lock-free inbox ring, and the actor, the only code that
// posts to its QP, drains the ring and chains what it found into one
// PostSend.
//
// The actor goroutine is locked to its OS thread and spins while there is
// traffic: waking a parked locked goroutine hands its P to another thread,
// microseconds each time. What keeps that affordable on a small machine:
//   - With a Driver (the runtime gives every actor one, cqpoller's), the
//     actor also polls its own CQ while it is awake, so a busy QP costs one
//     spinning locked goroutine, not an actor and a poller.
//   - SpinSlot bounds the locked goroutines that spin without yielding to
//     GOMAXPROCS-1, so the goroutines they wake always have a P.
//   - Under a stream of submissions from many callers the actor spaces its
//     drains (gatherer), so that one PostSend carries many WRs and its reads
//     of the inbox do not take every producer's cache line; a lone caller
//     meets no wait.
package qpactor
