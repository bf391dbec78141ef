package soft

import (
	"syscall"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// FaultKind selects an injected fault.
type FaultKind int

// Faults the soft device can inject, deterministically, for tests.
const (
	// FaultDelay holds each of the QP's next Count WQEs for Delay before
	// it executes (the queue behind it waits too: RC is in order).
	FaultDelay FaultKind = iota + 1
	// FaultDrop loses the QP's next Count transmissions on the wire. A
	// reliable QP retransmits after its ACK timeout and fails the WR with
	// RETRY_EXC_ERR once retry_cnt retransmissions are lost too; UC and UD
	// lose the message silently.
	FaultDrop
	// FaultRNR makes the QP, as a responder, answer the next Count
	// messages that need a receive with RNR NAK, receives posted or not.
	FaultRNR
	// FaultQPError moves the QP to ERR at once, as a catastrophic error
	// does: outstanding WRs flush and IBV_EVENT_QP_FATAL is raised.
	FaultQPError
	// FaultCQOverrun (InjectCQ only) loses the CQ's next Count completions
	// as if it were full: each raises IBV_EVENT_CQ_ERR.
	FaultCQOverrun
	// FaultPollError (InjectCQ only) fails the CQ's next Count Polls that
	// find completions, as a hardware provider's ibv_poll_cq fails on a
	// CQE it cannot parse: with verbs.ErrPollFailed, the completions left
	// in the CQ.
	FaultPollError
	// FaultEventsLost (InjectContext only) closes the context's
	// AsyncEvents as the ibv provider does when it can no longer read the
	// device's events; AsyncErr then returns an error matching
	// verbs.ErrEventsLost and EIO.
	FaultEventsLost
)

// Fault is one fault to inject.
type Fault struct {
	Kind  FaultKind
	Count int           // how many WQEs, messages or completions; < 1 means 1
	Delay time.Duration // FaultDelay only
}

type faultState struct {
	delayN int
	delay  time.Duration
	dropN  int
	rnrN   int
}

var errNotSoft = verbs.NewError("inject", verbs.ErrNotSupported, "not an object of the soft provider")

// Inject arms a fault on a QP of the soft provider.
func Inject(qpv verbs.QP, f Fault) error {
	q, isSoft := qpv.(*qp)
	if !isSoft {
		return errNotSoft
	}
	n := max(f.Count, 1)
	q.mu.Lock()
	defer q.mu.Unlock()
	switch f.Kind {
	case FaultDelay:
		q.faults.delayN, q.faults.delay = n, f.Delay
	case FaultDrop:
		q.faults.dropN = n
	case FaultRNR:
		q.faults.rnrN = n
	case FaultQPError:
		q.toErrorLocked()
		q.ctx.Registry().Raise(verbs.AsyncEvent{Type: verbs.EventQPFatal, QP: q})
	default:
		return verbs.Errorf("inject", verbs.ErrInvalidArgument, "fault kind %d on a QP", f.Kind)
	}
	return nil
}

// EndDelay ends at once the hold of the WQE that a FaultDelay holds on a
// QP of the soft provider, and the delays still armed: a test holds a
// stream with a Delay longer than it could ever need, and lets it go once
// what it needed queued behind the held WQE is queued, whatever the time
// that took.
func EndDelay(qpv verbs.QP) error {
	q, isSoft := qpv.(*qp)
	if !isSoft {
		return errNotSoft
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults.delayN = 0
	if q.stalled {
		q.timer.Reset(0)
	}
	return nil
}

// InjectCQ arms a fault on a CQ of the soft provider (FaultCQOverrun,
// FaultPollError).
func InjectCQ(cqv verbs.CQ, f Fault) error {
	q, isHCA := cqv.(*swhca.CQ)
	if !isHCA {
		return errNotSoft
	}
	if _, isSoft := q.Owner().(*context); !isSoft {
		return errNotSoft
	}
	switch f.Kind {
	case FaultCQOverrun:
		q.InjectOverruns(int64(max(f.Count, 1)))
	case FaultPollError:
		q.InjectPollErrors(int64(max(f.Count, 1)))
	default:
		return verbs.Errorf("inject", verbs.ErrInvalidArgument, "fault kind %d on a CQ", f.Kind)
	}
	return nil
}

// errEventsLost is what FaultEventsLost leaves in AsyncErr: what the ibv
// provider reports when the device is gone (its async fd reads EIO).
var errEventsLost = &verbs.Error{Op: "ibv_get_async_event", Err: verbs.ErrEventsLost,
	Errno: syscall.EIO, Detail: "fault injected"}

// InjectContext injects a fault into a context of the soft provider
// (FaultEventsLost).
func InjectContext(cv verbs.Context, f Fault) error {
	c, isSoft := cv.(*context)
	if !isSoft {
		return errNotSoft
	}
	if f.Kind != FaultEventsLost {
		return verbs.Errorf("inject", verbs.ErrInvalidArgument, "fault kind %d on a context", f.Kind)
	}
	c.Registry().EndEvents(errEventsLost)
	return nil
}
