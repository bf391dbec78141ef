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
			a.kick(kickWake)
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
	if a.broken.CompareAndSwap(nil, err) {
		a.run.set(lifeBroken) // after the error, which brokenErr reads once this is set
	}
	a.kick(kickWake)
}

// brokenErr returns what Break recorded, or nil while the QP takes work.
func (a *Actor) brokenErr() error {
	if !a.run.has(lifeBroken) {
		return nil
	}
	return a.broken.Load()
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
	a.run.set(lifeClosing)
	a.room.broadcast() // a producer waiting for room fails with verbs.ErrClosed
	if a.run.start() {
		// Never started: no run drains the inbox but this one.
		a.stop()
		close(a.done)
		return nil
	}
	a.kick(kickWake)
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		a.Break(verbs.ErrClosed)
		<-a.done
		return ctx.Err()
	}
}

// stop ends the actor for good, on the run's holder: no run starts after
// it, and it fails what is queued. A submitter that queues after this
// sweep fails what it queued itself (sweepStopped).
func (a *Actor) stop() {
	a.run.set(lifeStopped)
	a.failQueued(verbs.ErrClosed)
	a.run.release()
	a.sweepStopped()
}

// sweepStopped fails what was queued after a stopped actor's last sweep:
// it would otherwise wait forever. Whoever finds the run free takes it
// for the sweep; one that finds it held leaves its submission to the
// holder, which looks at the inbox again after it released the run.
// Against a submitter: it publishes its submission, then reads the state
// (sweep); the holder releases the run, then reads the inbox. One of the
// two sees the other's write.
func (a *Actor) sweepStopped() {
	for a.inbox.Len() > 0 && a.run.sweep() {
		a.failQueued(verbs.ErrClosed)
		a.run.release()
	}
}
