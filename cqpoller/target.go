package cqpoller

import (
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/verbs"
)

// Target is a CQ and who its completions go to. A Target belongs to one
// poller at a time, from Add until Remove returns.
type Target struct {
	// CQ is the CQ to poll. The poller finds the target of an event by the
	// CQ the completion channel returns, the provider's own: a CQ that
	// wraps another (a decorator, a test's counter) must say so with an
	// Unwrap() verbs.CQ method, or its events are taken for another CQ's.
	CQ verbs.CQ
	// Send receives the send completions (wr_id without wrid.RecvBit);
	// nil when the CQ has none.
	Send SendHandler
	// Recv handles receive completions (wr_id with wrid.RecvBit); nil when the
	// CQ has none.
	Recv func(wc *verbs.WC)
	// Failed, when set, is told of every completion with an error status
	// other than WR_FLUSH_ERR (a WR that moved its QP to the error state),
	// before Send or Recv handles it.
	Failed func(wc *verbs.WC)
	// PollFailed, when set, is called once if the CQ's Poll fails (a
	// provider's ibv_poll_cq failing: verbs.ErrPollFailed), with that
	// error, on a goroutine of its own: it may call DoTarget and Remove.
	// The CQ is polled no more, since polling a CQ that fails would spin
	// on the error and a CQ that failed once can no longer be trusted;
	// its completions are lost, so the owner should fail what waits for
	// them (the runtime fails the endpoint). Nil: the failure is only
	// logged, at error level.
	PollFailed func(err error)

	// own says who handles the CQ's completions now, and holds the lock
	// that makes one handler at a time (owner.go).
	own cqOwner
	// waitWCs is the batch waiters poll into (Driver.Poll), used only by
	// the handler of the moment.
	waitWCs [32]verbs.WC
	// driveWCs is the batch the driving actor polls into, taken from the
	// poller's pool by Drive(true) and given back by Drive(false), so that
	// an idle target holds none. The actor's goroutine alone uses it.
	driveWCs *[]verbs.WC

	// Under Poller.mu.
	added  bool // between Add and Remove
	queued bool // in Poller.woken
	wokeAt int  // its index there

	// inSet is set, under Poller.mu, when the target enters the poller's
	// active set, and cleared by the poller goroutine after its last touch
	// of the target when it leaves: Remove waits for the poller only while
	// it is set.
	inSet atomic.Bool

	// The poller goroutine's own.
	setAt   int           // index in Poller.active
	hot     bool          // completions found since it entered the active set
	lastHit time.Duration // Poller.now when it last had completions
}

// SendHandler is what a target's send completions go to: the QP's owner
// (qpactor.Actor). Every method is called by the goroutine that handles
// the CQ at that moment (the poller, a waiter or the driving actor), one
// at a time, in the CQ's order.
type SendHandler interface {
	// Complete handles one send completion and reports whether its wr_id
	// matched an outstanding WR (false: stale, dropped).
	Complete(wc *verbs.WC) bool
	// Polled is told after each poll that handled completions: the
	// room they made may let queued work be posted.
	Polled()
	// FailOutstanding fails every WR still outstanding with err, for
	// completions that will never come, and returns how many it failed.
	FailOutstanding(err error) int
	// Outstanding returns how many WRs are posted and not completed.
	Outstanding() int
	// AbandonedErr returns why the handler was abandoned with WRs
	// outstanding (its QP's completions may never come), or nil.
	AbandonedErr() error
}

// providerCQ returns the CQ that cq wraps, if it does (Target.CQ), else
// cq.
func providerCQ(cq verbs.CQ) verbs.CQ {
	for {
		w, ok := cq.(interface{ Unwrap() verbs.CQ })
		if !ok {
			return cq
		}
		cq = w.Unwrap()
	}
}

// needsRounds reports whether t's actor was abandoned with WRs still
// outstanding: then its CQ's completions may never come, and whoever
// handles it fails what is outstanding after every poll.
func needsRounds(t *Target) bool {
	return t.Send != nil && t.Send.AbandonedErr() != nil && t.Send.Outstanding() > 0
}

// driven reports whether the actor or a waiter polls t's CQ now.
func (t *Target) driven() bool { return t.own.driven() }
