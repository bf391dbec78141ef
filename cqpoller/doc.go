// Package cqpoller turns completions into resolved futures: dedicated
// goroutines poll completion queues in batches of up to 32 WCs and hand
// every send completion to the target's SendHandler, the qpactor.Actor
// that posted it (wr_id encodes actor, slot and generation, so a stale or
// unknown completion is counted and dropped, never misdelivered), and every
// receive completion to the runtime's receive handler.
//
// # Which CQs are polled
//
// A poller polls only its active set, not every CQ it has: a target
// enters it when it is added, when its CQ raises an event on the
// completion channel (a second goroutine of the poller waits on the
// channel, acknowledges each event and maps the CQ
// that fired back to its target), and when its actor, abandoned with WRs
// outstanding, needs the poller's rounds. A target whose CQ stays empty
// for its window is armed (ReqNotify), polled once more, to close the race
// with a completion that landed before the arming and raised no event,
// and leaves the set; only those targets are armed, never all. So an idle
// target costs the poller nothing: neither a poll per round nor a
// re-arming per sleep, and Add and Remove cost the same whatever the
// number of targets (Remove waits for the poller goroutine only when the
// target is in the active set).
//
// # Idle policy
//
// What a poller does when a round finds nothing follows its Policy:
//   - Busy spins: lowest latency, one core per poller. Use it only where a
//     core can be given away. Nothing is armed, so every target stays in
//     the active set.
//   - Adaptive (default) spins for Config.Spin, then polls with
//     runtime.Gosched between rounds for Config.Yield, while a target is
//     in its window: Spin+Yield since its last completion, none for a
//     target that had none since it entered (a new target, an event for a
//     completion its actor took first). An empty active set puts the
//     poller to sleep until an event, a new target, a task or Close. An
//     idle runtime costs no CPU. It spins and yields only while it holds a
//     spin slot (sched.SpinSlot: an actor that wants one comes first)
//     or, on one P where there are none, while nobody holds one;
//     otherwise it arms every target of the active set at once and
//     sleeps, since a poller that kept polling would take from the
//     callers the P the slot's holder leaves them.
//   - Event arms a target after its first empty poll.
//
// Waking a parked goroutine costs many times what reaching one that spins
// does, hence the spin phase while traffic flows.
//
// The poller goroutine is not locked to its OS thread, unlike an actor's:
// it yields after every round that handled completions, so the waiters
// they woke, queued on its P, run at once rather than once another P
// steals them, and a locked goroutine's yield would hand its P to another
// thread and sleep until it got one back.
//
// # Actors that drive their own CQ
//
// An actor's goroutine is locked to its thread and cannot give its P away
// cheaply, so on a small machine a busy actor and a busy poller, each
// holding a P, leave the goroutines
// waiting for the futures nowhere to run. Poller.Driver lets the actor of
// a target poll that target's CQ itself between drains while it is awake
// (qpactor.Driver): the poller neither polls nor arms a driven CQ (it
// leaves the active set, and its events wake nobody), and an actor that
// parks arms its CQ, polls it once more and hands it back, so a sleeping
// poller wakes on its next completion. Under Busy, where nothing is
// armed, the CQ handed back enters the active set again. One goroutine
// per busy QP then does both jobs and the poller sleeps.
//
// Waiters (qpactor's Config.WaitPoll) take the CQ the same way while they
// poll it for their own completion (WaitBegin, Poll, WaitEnd): the actor
// and the waiters share one count, and the last to stop hands the CQ back.
// A waiter that parks hands it back at once; one that got its result
// leaves it unwatched for up to 100 µs first, since its caller often
// waits again at once, and arming the CQ after every wait would cost a
// system call and a completion event per wait on rxe. The few waiters
// that poll hold slots (sched.MaxPollingWaiters); a waiter without one
// yields, and looks at its CQ once a turn unless someone drives it
// (PollUndriven), taking no part in who watches it: with an endpoint's
// completion handled by its own waiter, a server with many busy
// endpoints does not wait for the poller's round over all their CQs.
//
// # A failing CQ
//
// A CQ whose Poll fails (a provider's ibv_poll_cq returning a negative
// value: verbs.ErrPollFailed) is neither ignored nor spun on: the poller
// stops polling and arming it and reports it once through
// Target.PollFailed, whose owner fails what waits for its completions (the
// runtime fails the endpoint). An actor already abandoned on that CQ
// still has its outstanding WRs failed every round, as on a healthy one.
//
// # Who handles a CQ
//
// A target's completions are handled by one goroutine at a time: the
// poller, the target's actor while it drives its CQ, or a waiter polling
// for its own completion. Which of them may poll, who arms the CQ and
// when it goes back to the poller is one small state machine, cqOwner
// (owner.go, with its state diagram), the only code that takes the CQ's
// handler lock. Every poll tries the lock and gives way if another
// goroutine handles the CQ; only the last poll before a side stops
// watching the CQ waits for it (the poller's when the target leaves the
// active set, a driver's when it hands the CQ back), since a completion
// that lands between the other side's poll and the arming raises no
// event. DoTarget runs a function on the poller goroutine while nobody
// handles the CQ, so the runtime can fail an actor's outstanding WRs
// without racing completions.
//
// Add, Remove, Do, DoTarget and Close may be called from any goroutine.
//
// # Lock order
//
// Poller.mu and cqOwner.mu rank first in the module's lock order, the one
// table in internal/lockrank (rank.go); built with the lockrank tag, every
// Lock of a ranked lock checks it. Add reopens the target under the
// poller's lock; Remove takes the owner's after releasing it.
//
// Handling completions (pollLocked, under cqOwner.mu) calls out of the
// package, and the chain crosses packages (the locks it takes rank in
// that table too):
//
//	cqOwner.mu -> qpactor.Actor.Complete (no lock: futures resolve, Then
//	              callbacks go to the runtime's executor)
//	cqOwner.mu -> runtime recvStore.mu -> SRQ.PostRecv (the provider's
//	              queue lock)
//	cqOwner.mu -> qpactor.Actor.GrantPeerCredits, Actor.WantReport (a
//	              credit report due, after recvStore.mu is released), or
//	              Actor.Polled after the poll -> an inline drain of what
//	              was queued -> QP.PostSend (the provider's queue lock)
//	              -> Driver.Progress -> cqOwner.mu, tried only (a
//	              TryLock, which the order admits at any rank)
//
// Nothing called under cqOwner.mu waits for a cqOwner.mu (the inline
// drain's poll of the same CQ tries the lock, finds it held by its own
// goroutine, and gives way), for Poller.mu, or for the poller goroutine
// (Do): what must do those (a failed CQ's report, PollFailed) runs on a
// goroutine of its own.
package cqpoller
