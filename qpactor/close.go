package qpactor

import (
	"context"

	"github.com/verbsrt/verbsrt/verbs"
)

// FailOutstanding fails every posted WR that has not completed with err:
// for completions that will never come (a CQ overrun lost them, or the
// runtime is shutting down). Later completions for them count as stale.
// Only the goroutine handling the QP's CQ may call it (as Complete).
func (a *Actor) FailOutstanding(err error) int {
	tail, tab := a.postedTail.Load(), a.shadow.Load()
	done := a.retired[:0]
	for ; a.head < tail; a.head++ {
		e := tab.entry(a.head)
		if e == nil || e.seq.Load() != a.head+1 {
			continue
		}
		if a.obs != nil {
			a.observeEnd(a.head, e, verbs.WCWRFlushErr, err)
		}
		done = append(done, retiredWR{fut: e.fut, info: e.info()})
		e.fut = nil
		e.seq.Store(0)
	}
	dropRetiredTables(tab, a.head)
	freed := len(done)
	if freed > 0 {
		// The poller calls this every round for an abandoned actor: wake
		// the actor only when credits came back and it may wait for them.
		a.credits.Add(int64(freed))
		a.resolve(done, err)
		if a.waitsForCredits.Load() {
			a.waker.Wake()
		}
	}
	a.retired = done[:0]
	return freed
}

// Break marks the QP unusable: queued and new operations fail with err.
// What is outstanding stays the device's: the caller moves the QP to ERR,
// and the flush completions resolve those futures once the device gave
// their WRs back.
func (a *Actor) Break(err error) {
	a.broken.CompareAndSwap(nil, err)
	a.waker.Wake()
}

// Abandon is Break for a QP whose completions may never come (a CQ overrun
// lost them, the device died): whoever handles its CQ fails what is
// outstanding with err, now and after every poll (AbandonedErr).
func (a *Actor) Abandon(err error) {
	a.Break(err)
	a.abandoned.CompareAndSwap(nil, err)
}

// AbandonedErr returns the error Abandon recorded, or nil.
func (a *Actor) AbandonedErr() error { return a.abandoned.Load() }

// Close stops accepting operations, posts what is queued while credits
// allow until ctx ends, fails the rest with verbs.ErrClosed and stops the actor
// goroutine. Outstanding WRs are the poller's to finish.
func (a *Actor) Close(ctx context.Context) error {
	a.closing.Store(true)
	a.room.broadcast() // a producer waiting for room fails with verbs.ErrClosed
	if a.started.CompareAndSwap(false, true) {
		// Never started: there is no goroutine to drain the inbox.
		a.exitMu.Lock()
		a.stopped.Store(true)
		a.failQueued(verbs.ErrClosed)
		a.exitMu.Unlock()
		close(a.done)
		return nil
	}
	a.waker.Wake()
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		a.Break(verbs.ErrClosed)
		<-a.done
		return ctx.Err()
	}
}
