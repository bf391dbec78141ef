package swhca

import (
	ctxpkg "context"
	"sync/atomic"

	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/verbs"
)

// Arming states of a CQ (ibv_req_notify_cq).
const (
	notifyNone = iota
	notifyNext
	notifySolicited
)

// QueueCapacity rounds a requested queue size the way rxe does: the ring
// has 2^n slots with one kept empty, so the usable size is 2^n - 1 >= req.
func QueueCapacity(req int) int {
	c := 2
	for c-1 < req {
		c <<= 1
	}
	return c - 1
}

// cqStart is the room a CQ gets for its first completion (grow).
const cqStart = 4

// CQ is a completion queue: a ring an engine pushes into and Poll drains.
// Safe for concurrent use.
type CQ struct {
	reg *Registry
	ch  *CompChannel
	// onEmpty, when set, runs when a Poll finds the CQ empty, before it
	// looks again: an engine that makes progress in the poller's time.
	onEmpty func()

	mu lockrank.Mutex[lockrank.CQ]
	// cqe is the CQ's size (ibv_cq.cqe, as rxe rounds it); ring has room
	// for the most completions it has held at once, doubled as needed up
	// to cqe (Push): a CQ that is polled as it fills never allocates room
	// for cqe of them.
	cqe    int
	ring   []verbs.WC
	head   int
	count  int
	armed  int
	closed bool

	// ready mirrors count for Poll's lock-free fast path: a poller that
	// spins on an empty CQ must not take the lock the engine pushes under.
	ready atomic.Int64

	uses Usage // QPs and SRQs completing here
	// forcedOverruns makes the next pushes behave as if the CQ were full
	// (fault injection).
	forcedOverruns atomic.Int64
	// forcedPollErrors makes the next Polls that find completions fail
	// (fault injection).
	forcedPollErrors atomic.Int64
	// lost counts completions dropped by overruns.
	lost atomic.Uint64
}

// CreateCQ is ibv_create_cq on the context of reg: spec.CQE within
// 1..maxCQE, the channel one of the same context. onEmpty may be nil.
func CreateCQ(reg *Registry, spec verbs.CQSpec, maxCQE int, onEmpty func()) (*CQ, error) {
	const op = "ibv_create_cq"
	if spec.CQE < 1 || spec.CQE > maxCQE {
		return nil, verbs.Errorf(op, verbs.ErrInvalidArgument, "cqe %d outside 1..%d", spec.CQE, maxCQE)
	}
	q := &CQ{reg: reg, cqe: QueueCapacity(spec.CQE), onEmpty: onEmpty}
	if spec.Channel != nil {
		ch, ok := spec.Channel.(*CompChannel)
		if !ok || ch.reg != reg {
			return nil, verbs.NewError(op, verbs.ErrInvalidArgument, "completion channel of another context or provider")
		}
		q.ch = ch
		ch.uses.Hold()
	}
	if err := reg.Add(op, q, RankCQ, q.destroy); err != nil {
		return nil, err
	}
	return q, nil
}

// Owner is the context the CQ belongs to (Registry.Owner).
func (q *CQ) Owner() any { return q.reg.owner }

// Uses counts the QPs and SRQs completing on the CQ.
func (q *CQ) Uses() *Usage { return &q.uses }

// CQE is the CQ's size.
func (q *CQ) CQE() int { return q.cqe }

// Lost counts the completions overruns dropped.
func (q *CQ) Lost() uint64 { return q.lost.Load() }

// InjectOverruns makes the next n pushes lose their completion as on a
// full CQ.
func (q *CQ) InjectOverruns(n int64) { q.forcedOverruns.Add(n) }

// InjectPollErrors makes the next n Polls that find completions fail.
func (q *CQ) InjectPollErrors(n int64) { q.forcedPollErrors.Add(n) }

// Push appends a completion. A full CQ loses it and raises
// IBV_EVENT_CQ_ERR, one event per lost completion, as rxe does (SEMANTICS
// 10a); the CQ stays usable.
func (q *CQ) Push(wc *verbs.WC, solicited bool) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	if q.count == q.cqe || q.forcedOverruns.Load() > 0 && q.forcedOverruns.Add(-1) >= 0 {
		q.mu.Unlock()
		q.lost.Add(1)
		q.reg.Raise(verbs.AsyncEvent{Type: verbs.EventCQErr, CQ: q})
		return
	}
	if q.count == len(q.ring) {
		q.grow()
	}
	i := q.head + q.count
	if i >= len(q.ring) {
		i -= len(q.ring)
	}
	q.ring[i] = *wc
	q.count++
	q.ready.Add(1)
	fire := q.armed == notifyNext ||
		q.armed == notifySolicited && (solicited || wc.Status != verbs.WCSuccess)
	if fire {
		q.armed = notifyNone
	}
	q.mu.Unlock()
	if fire && q.ch != nil {
		q.ch.signal(q)
	}
}

// grow doubles the ring's room, up to cqe, keeping the completions in
// order from its start.
func (q *CQ) grow() {
	ring := make([]verbs.WC, min(max(2*len(q.ring), cqStart), q.cqe))
	for i := range q.count {
		ring[i] = q.ring[(q.head+i)%len(q.ring)]
	}
	q.ring, q.head = ring, 0
}

// Poll copies out up to len(wcs) completions, oldest first.
func (q *CQ) Poll(wcs []verbs.WC) (int, error) {
	if q.ready.Load() == 0 {
		if q.onEmpty == nil {
			return 0, nil
		}
		q.onEmpty()
		if q.ready.Load() == 0 {
			return 0, nil
		}
	}
	// After the empty fast path, which spinning pollers take: an injected
	// failure costs them nothing, and it fails a Poll with a completion to
	// report, as a provider fails on a CQE it cannot parse.
	if q.forcedPollErrors.Load() > 0 && q.forcedPollErrors.Add(-1) >= 0 {
		return 0, errPollFault
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, errCQClosed
	}
	n := min(q.count, len(wcs))
	for i := range n {
		wcs[i] = q.ring[q.head]
		q.head++
		if q.head == len(q.ring) {
			q.head = 0
		}
	}
	q.count -= n
	q.ready.Add(-int64(n))
	return n, nil
}

var (
	errCQClosed  = verbs.NewError("ibv_poll_cq", verbs.ErrClosed, "CQ")
	errPollFault = verbs.NewError("ibv_poll_cq", verbs.ErrPollFailed, "fault injected")
)

// ReqNotify arms the CQ: the next completion, or with solicitedOnly the
// next solicited or failed one, signals the CQ's channel.
func (q *CQ) ReqNotify(solicitedOnly bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return verbs.NewError("ibv_req_notify_cq", verbs.ErrClosed, "CQ")
	}
	switch {
	case !solicitedOnly:
		q.armed = notifyNext
	case q.armed == notifyNone:
		q.armed = notifySolicited
	}
	return nil
}

// AckEvents is a no-op: the CQ keeps no event count to drain.
func (q *CQ) AckEvents(int) {}

func (q *CQ) destroy() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// Close destroys the CQ; ErrBusy while a QP or SRQ completes on it.
func (q *CQ) Close() error {
	if q.uses.Busy() {
		return ErrBusy("ibv_destroy_cq", "CQ")
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.mu.Unlock()
	if q.reg.Remove(q) && q.ch != nil {
		q.ch.uses.Release()
	}
	return nil
}

// CompChannel delivers CQ events. An engine never blocks on it: signal
// queues the CQ and pokes a one-slot channel. Safe for concurrent use.
type CompChannel struct {
	reg  *Registry
	uses Usage

	mu     lockrank.Mutex[lockrank.CompChannel]
	queue  []*CQ
	wake   chan struct{}
	done   chan struct{}
	closed bool
}

// CreateCompChannel is ibv_create_comp_channel on the context of reg.
func CreateCompChannel(reg *Registry) (*CompChannel, error) {
	ch := &CompChannel{reg: reg, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if err := reg.Add("ibv_create_comp_channel", ch, RankChannel, ch.destroy); err != nil {
		return nil, err
	}
	return ch, nil
}

func (ch *CompChannel) signal(q *CQ) {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return
	}
	ch.queue = append(ch.queue, q)
	ch.mu.Unlock()
	select {
	case ch.wake <- struct{}{}:
	default:
	}
}

// GetCQEvent waits for the next CQ event, the channel's close or the end
// of ctx (then it returns ctx.Err()).
func (ch *CompChannel) GetCQEvent(ctx ctxpkg.Context) (verbs.CQ, error) {
	for {
		ch.mu.Lock()
		if ch.closed {
			ch.mu.Unlock()
			return nil, verbs.NewError("ibv_get_cq_event", verbs.ErrClosed, "completion channel")
		}
		if len(ch.queue) > 0 {
			// Shift rather than reslice: the queue keeps its array, so
			// signal's append allocates nothing in the steady state.
			q := ch.queue[0]
			n := copy(ch.queue, ch.queue[1:])
			ch.queue[n] = nil
			ch.queue = ch.queue[:n]
			ch.mu.Unlock()
			return q, nil
		}
		ch.mu.Unlock()
		select {
		case <-ch.wake:
		case <-ch.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (ch *CompChannel) destroy() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.closed {
		ch.closed = true
		close(ch.done)
	}
}

// Close destroys the channel; ErrBusy while a CQ reports to it.
func (ch *CompChannel) Close() error {
	if ch.uses.Busy() {
		return ErrBusy("ibv_destroy_comp_channel", "completion channel")
	}
	ch.destroy()
	ch.reg.Remove(ch)
	return nil
}
