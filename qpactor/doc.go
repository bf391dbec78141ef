// Package qpactor runs one actor goroutine per queue pair: callers enqueue
// work requests on a lock-free inbox ring, and the actor, the only code that
// posts to its QP, drains the ring and chains what it found into one
// PostSend.
//
// The actor owns the QP's flow control, in one place with one way to wait:
// its send-queue credits (a submission is taken only when the send queue
// has room for all of it) and, with EnablePeerCredits, the peer's receive
// credits (a SEND waits until the peer has a receive posted for it), with
// the credit reports of its own receive side stamped, as its SENDs are
// chained, into a header it gathers in front of their data from its own
// registered scratch (the immediate data stays the caller's). Completions,
// granted credits and Close kick the actor; what waits does so in the
// inbox, in order, bounded by its size.
//
// Who may post is one owner type, runOwner (owner.go): one state word
// holds who has the run (the right to drain and post) and the actor's
// lifecycle (started, closing, stopped, broken). drain, post and
// failQueued panic when no run is held. Every goroutine that changed what
// a run looks at calls one entry, kick (kick.go), with its reason; one
// pure function of the actor's state, decideKick, chooses between posting
// on the calling goroutine, leaving the work to coalesce and waking an
// actor goroutine.
//
// Every wr_id it posts follows the one layout in wrid.go, which the pollers
// and the runtime's receive side read too. No future resolves before the
// device has given its WR back (its completion, or its flush once the QP
// is in ERR), unless the completions are known lost (Abandon).
//
// The actor goroutine is locked to its OS thread while it runs, and spins
// while there is traffic, since waking it costs microseconds. Once idle past
// its spin it gives its run up and ends, giving the thread back, and the
// next kick (a submission, a completion, credits, Close) takes the run and
// starts a new one: an idle actor holds no thread and no goroutine, and
// starting a goroutine wakes faster than handing a parked locked goroutine
// its thread back (Config.Park keeps the parked one; BenchmarkWakeup).
// What keeps the spinning affordable on a small machine:
//   - With a Driver (the runtime gives every actor one, cqpoller's), the
//     actor also polls its own CQ while it is awake, so a busy QP costs one
//     spinning locked goroutine, not an actor and a poller.
//   - SpinSlot bounds the goroutines (actors, pollers) that spin without
//     yielding to GOMAXPROCS-1, so the goroutines they wake always have a
//     P.
//   - Under a stream of submissions from many callers the actor spaces its
//     drains (gatherer), so that one PostSend carries many WRs and its reads
//     of the inbox do not take every producer's cache line; a lone caller
//     meets no wait.
//
// Two options move work onto the caller's goroutine where a hand-off
// between threads would cost more than the work (a request/response
// caller, one operation at a time):
//   - Config.InlinePost: a submission that finds the actor gone idle runs
//     one drain on the submitting goroutine (its kick takes the run that
//     would otherwise have gone to a new goroutine), locked to its thread while it
//     posts, and leaves as an idle actor does. What that drain cannot take
//     (credits), or work that came meanwhile, goes to an actor goroutine,
//     so the submitter never waits in the actor's place. The actor stays
//     the only code that posts: the submitter is its run. A submission
//     made while WRs are in flight stays queued (coalesces): the goroutine
//     that handles the next completion (Polled) or a waiter that finds
//     none runs the drain, which posts everything queued in one chain,
//     so a caller streaming operations rings one doorbell per chain, not
//     one per WR.
//   - Config.WaitPoll: a goroutine waiting for a future (or, in the
//     runtime, a message) polls the CQ through the Driver itself, so the
//     completion is handled on the thread that waits for it, for
//     WaitPoll, or longer where a park costs more (the process measures
//     its goroutine wake-ups: WakeUpCost). At most a few goroutines poll
//     at once, process-wide; the other waiters yield and park as without
//     it.
//
// The runtime turns both on by default.
package qpactor
