package qpactor

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/verbs"
)

// Submit queues op and returns its future. When the inbox is full it waits
// for room until ctx ends. Errors about op itself (a rule of
// ibv_post_send(3) it breaks) come through the future, as a *verbs.WRError.
//
// ctx also bounds the wait in the inbox: if it ends before the actor takes
// op, op is removed and never reaches the QP, and its future fails with
// ctx.Err(). Once taken, op is posted and its future resolves with its
// completion, whatever ctx does: a posted WR cannot be recalled, and its
// memory is the device's until it completes. The actor checks ctx when it
// takes op, and watches it (context.AfterFunc, so the future fails as
// soon as ctx ends) only while it sleeps with op still queued: an op taken
// without waiting costs nothing more.
func (a *Actor) Submit(ctx context.Context, op *Op) (future.Future, error) {
	sub := submission{one: [1]Op{*op}}
	return a.submitNew(ctx, &sub, 1, nil)
}

// SubmitBatch queues ops to be posted together (in one PostSend when
// credits allow) with one future for all. The actor reads ops until it
// has posted them all: the caller must not modify them until the future
// succeeded, and never again after it failed (a batch failed while
// queued may still be taken). giveBack, if not nil, runs when the
// future is consumed after it succeeded, for the caller to reuse ops
// (future.State.SetGiveBack).
func (a *Actor) SubmitBatch(ctx context.Context, ops []Op, giveBack func()) (future.Future, error) {
	if len(ops) == 0 {
		return future.Future{}, fmt.Errorf("verbsrt: empty batch: %w", verbs.ErrInvalidArgument)
	}
	sub := submission{batch: ops}
	return a.submitNew(ctx, &sub, len(ops), giveBack)
}

// submitNew queues sub, of n WRs, with a new future that calls giveBack
// (SubmitBatch); a submission that never reached the inbox gives its
// future's state back to the pool.
func (a *Actor) submitNew(ctx context.Context, sub *submission, n int, giveBack func()) (future.Future, error) {
	if ctx == nil {
		if h := sub.hold(); h != nil {
			h.Release()
		}
		return future.Future{}, future.ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		if h := sub.hold(); h != nil {
			h.Release()
		}
		a.stats.Ops.Cancelled.Inc()
		return future.Future{}, err
	}
	if a.obs != nil {
		a.observeStarted(sub)
	}
	st, f := future.New(n, a.exec)
	f = f.WithWaiter(a)
	sub.fut = st
	st.SetHold(sub.hold())
	if giveBack != nil {
		st.SetGiveBack(giveBack)
	}
	if ctx.Done() != nil {
		sub.ctx = ctx
	}
	if err := a.push(ctx, sub, n); err != nil {
		if a.obs != nil {
			a.observeUnposted(sub, err)
		}
		if h := st.TakeHold(); h != nil {
			h.Release()
		}
		st.Recycle()
		return future.Future{}, err
	}
	return f, nil
}

// hold returns the one hold standing for the uses of memory the
// submission's ops took (Op.Hold).
func (s *submission) hold() *future.Hold {
	if s.batch == nil {
		return s.one[0].Hold
	}
	var hs future.Holds
	for i := range s.batch {
		if h := s.batch[i].Hold; h != nil {
			hs.Add(h)
		}
	}
	return hs.One()
}

// take claims the submission s at the head of the inbox for the actor,
// which then posts or fails it. It reports false when s's context ended
// first: s is then resolved with the context's error (by the watch on the
// context, or here) and the actor only drops it.
func (a *Actor) take(s *submission) bool {
	if s.ctx == nil {
		return true
	}
	f := s.fut
	if a.headWatched() && f.Watched() {
		// The context's end may be resolving it right now.
		if f.Take() {
			return true
		}
		if a.obs != nil {
			a.observeUnposted(s, s.ctx.Err())
		}
		return false
	}
	if err := s.ctx.Err(); err != nil {
		if a.obs != nil {
			a.observeUnposted(s, err)
		}
		f.FailN(a.submissionError(s, err), len(s.ops()))
		return false
	}
	return true
}

// headCancelled reports whether the context of s, the head of the inbox,
// ended while it was queued; take then resolves it, if the watch on the
// context has not.
func (a *Actor) headCancelled(s *submission) bool {
	if s.ctx == nil {
		return false
	}
	if a.headWatched() && s.fut.Watched() {
		return s.fut.CancelledWhileQueued()
	}
	return s.ctx.Err() != nil
}

// headWatched reports whether the head of the inbox may carry a watch on
// its context: watchQueued, the one code that sets watches, visited it.
// Only then need the actor read the head's future before it takes it. A
// submission's future is the caller's cache line until it resolves, and
// a drain that took many would otherwise fetch each from the callers'
// cores on the way.
func (a *Actor) headWatched() bool { return a.watched > 0 }

// watchQueued watches the contexts of the queued submissions not yet
// watched: the actor is about to sleep, and a submission waiting behind a
// head that waits for credits must fail when its context ends, not when
// the actor reaches it. Submissions the actor takes without sleeping are
// never watched, so a cancellable context costs no allocation then.
func (a *Actor) watchQueued() {
	for s := a.inbox.PeekAt(a.watched); s != nil; s = a.inbox.PeekAt(a.watched) {
		a.watched++
		if s.ctx == nil || s.fut.Watched() {
			continue
		}
		info, n := infoOf(&s.ops()[0]), len(s.ops())
		// The end of ctx fails the future unless the actor took the
		// submission first, and wakes the actor, which drops it when it
		// meets it: one waiting for credits at the head of the inbox must
		// not hold back those behind it.
		s.fut.WatchContext(s.ctx, func(err error) error { return a.opError(info, n, err) }, a.wakeOnCancel)
	}
}

// wakeOnCancel is what a queued submission's context ending calls, after
// it failed the submission: the actor drops it when it meets it.
func (a *Actor) wakeOnCancel() { a.kick(kickWake) }

// pop releases the head of the inbox.
func (a *Actor) pop() {
	a.inbox.Pop()
	if a.watched > 0 {
		a.watched--
	}
	if a.looked > 0 {
		a.looked--
	}
}

func (a *Actor) push(ctx context.Context, sub *submission, n int) error {
	if a.run.has(lifeClosing) {
		return verbs.ErrClosed
	}
	if err := a.brokenErr(); err != nil {
		return err
	}
	if n > int(a.sqDepth) {
		// It could never be posted as one.
		return fmt.Errorf("verbsrt: a batch may carry at most %d WRs (the send queue's depth), not %d: %w", a.sqDepth, n, verbs.ErrInvalidArgument)
	}
	if err := a.checkPeerWindow(sub.ops()); err != nil {
		return err
	}
	for !a.inbox.TryPush(sub) {
		if err := a.waitRoom(ctx); err != nil {
			return err
		}
	}
	v := a.view()
	v.ctxCanEnd = sub.ctx != nil
	a.kickWith(kickSubmit, v)
	if a.run.has(lifeStopped) {
		// The actor made its last sweep: whatever we queued after it
		// would wait forever.
		a.sweepStopped()
	}
	return nil
}

// roomSignal wakes the producers waiting for room in a full inbox: the
// actor closes the channel they wait on when it takes something, if any
// wait.
type roomSignal struct {
	waiting atomic.Int32
	mu      sync.Mutex
	ch      chan struct{}
}

// listen registers a waiter and returns the channel to wait on; leave
// undoes the registration.
func (r *roomSignal) listen() <-chan struct{} {
	r.waiting.Inc()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ch == nil {
		r.ch = make(chan struct{})
	}
	return r.ch
}

func (r *roomSignal) leave() { r.waiting.Dec() }

// broadcast wakes every waiter.
func (r *roomSignal) broadcast() {
	r.mu.Lock()
	if r.ch != nil {
		close(r.ch)
		r.ch = nil
	}
	r.mu.Unlock()
}

// roomMade tells producers waiting for room that the actor took
// submissions from the inbox.
func (a *Actor) roomMade() {
	if a.room.waiting.Load() > 0 {
		a.room.broadcast()
	}
}

// waitRoom waits until the actor takes something from the full inbox, the
// actor closes or ctx ends. The waiter registers before it looks at the
// inbox again, and the actor looks for waiters after it took something:
// one of the two sees the other, so no wake-up is lost.
func (a *Actor) waitRoom(ctx context.Context) error {
	ch := a.room.listen()
	defer a.room.leave()
	if a.run.has(lifeClosing) {
		return verbs.ErrClosed
	}
	if !a.inbox.Full() {
		return nil
	}
	select {
	case <-ch:
		if a.run.has(lifeClosing) {
			return verbs.ErrClosed
		}
		return nil
	case <-ctx.Done():
		a.stats.Ops.Cancelled.Inc() // never queued, as if it had been and left
		return ctx.Err()
	}
}
