// Package cqpoller turns completions into resolved futures: dedicated
// goroutines, each locked to its OS thread, poll completion queues in
// batches of up to 32 WCs and hand every send completion to the qpactor.Actor
// that posted it (wr_id encodes actor, slot and generation, so a stale or
// unknown completion is counted and dropped, never misdelivered) and every
// receive completion to the runtime's receive handler.
//
// # Idle policy
//
// A poller that finds its CQs empty follows its Policy:
//   - Busy spins: lowest latency, one core per poller. Use it only where a
//     core can be given away.
//   - Adaptive (default) spins for Config.Spin, then polls with
//     runtime.Gosched between rounds for Config.Yield, then arms every CQ
//     (ReqNotify), polls once more to close the race with a completion that
//     arrived before the arming, and sleeps on the completion channel. An
//     idle runtime costs no CPU. It spins and yields only after finding
//     completions since it last woke, and only while it holds a spin slot
//     (qpactor.SpinSlot: an actor that wants one comes first) or, on one P
//     where there are none, while nobody holds one; otherwise it goes
//     straight to the arming and the sleep, since a locked goroutine that
//     yields hands its P to another thread each time.
//   - Event arms and sleeps after the first empty poll.
//
// Waking a parked locked goroutine costs about 15 µs on the development
// machine (see the design notes), against ~90 ns for one that spins, hence
// the spin phase while traffic flows.
//
// # Actors that drive their own CQ
//
// A locked goroutine cannot give its P away cheaply, so on a small machine
// a busy actor and a busy poller, each holding a P, leave the goroutines
// waiting for the futures nowhere to run. Poller.Driver lets the actor of
// a target poll that target's CQ itself between drains while it is awake
// (qpactor.Driver): the poller neither polls nor arms a driven CQ, and an
// actor that parks arms its CQ, polls it once more and hands it back, so
// a sleeping poller wakes on its next completion. One locked goroutine per
// busy QP then does both jobs and the poller sleeps.
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
// # Concurrency
//
// Add, Remove, Do, DoTarget and Close may be called from any goroutine. A
// target's completions are handled by one goroutine at a time, the poller
// or the target's driving actor (a mutex per target, taken with TryLock on
// the polling paths, and waited for in the last poll before a side stops
// watching a CQ: the poller's before it sleeps, an actor's when it hands
// its CQ back; a completion that lands between the other side's poll and
// the arming raises no event, so that poll must not be skipped); DoTarget
// runs a function on the poller goroutine while neither handles them, so
// the runtime can fail an actor's outstanding WRs without racing
// completions.
package cqpoller
