package rocev2

import (
	ctxpkg "context"
	"sync"
	"sync/atomic"

	"github.com/verbsrt/verbsrt/verbs"
)

// Arming states of a CQ (ibv_req_notify_cq).
const (
	notifyNone = iota
	notifyNext
	notifySolicited
)

// queueCapacity rounds a requested queue size the way rxe does: 2^n - 1
// >= req.
func queueCapacity(req int) int {
	c := 2
	for c-1 < req {
		c <<= 1
	}
	return c - 1
}

// usage counts the objects that depend on another, so closing it early
// fails with ErrBusy as the kernel's EBUSY does.
type usage struct{ n atomic.Int64 }

func (u *usage) hold()      { u.n.Add(1) }
func (u *usage) release()   { u.n.Add(-1) }
func (u *usage) busy() bool { return u.n.Load() > 0 }

func errBusy(op, what string) error {
	return verbs.Errorf(op, verbs.ErrBusy, "%s is still in use", what)
}

// cq is a completion queue: a ring the transport's goroutines push into
// and Poll drains. Lock order: a QP's locks, then mu, then the channel's.
type cq struct {
	ctx  *context
	ch   *compChannel
	uses usage // QPs completing here

	mu     sync.Mutex
	cqe    int
	ring   []verbs.WC // grows up to cqe
	head   int
	count  int
	armed  int
	closed bool
	ready  atomic.Int64 // count, for Poll's lock-free empty check
}

func newCQ(c *context, spec verbs.CQSpec) (*cq, error) {
	const op = "ibv_create_cq"
	if spec.CQE < 1 || spec.CQE > maxCQE {
		return nil, verbs.Errorf(op, verbs.ErrInvalidArgument, "cqe %d outside 1..%d", spec.CQE, maxCQE)
	}
	q := &cq{ctx: c, cqe: queueCapacity(spec.CQE)}
	if spec.Channel != nil {
		ch, ok := spec.Channel.(*compChannel)
		if !ok || ch.ctx != c {
			return nil, verbs.NewError(op, verbs.ErrInvalidArgument, "completion channel of another context or provider")
		}
		q.ch = ch
		ch.uses.hold()
	}
	return q, nil
}

func (q *cq) rank() int { return rankCQ }
func (q *cq) CQE() int  { return q.cqe }

// push appends a completion. A full CQ loses it and raises
// IBV_EVENT_CQ_ERR, as rxe does; the CQ stays usable.
func (q *cq) push(wc *verbs.WC, solicited bool) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	if q.count == q.cqe {
		q.mu.Unlock()
		q.ctx.raise(verbs.AsyncEvent{Type: verbs.EventCQErr, CQ: q})
		return
	}
	if q.count == len(q.ring) {
		ring := make([]verbs.WC, min(max(2*len(q.ring), 4), q.cqe))
		for i := range q.count {
			ring[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.count)%len(q.ring)] = *wc
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

var errCQClosed = verbs.NewError("ibv_poll_cq", verbs.ErrClosed, "CQ")

// Poll copies out up to len(wcs) completions, oldest first. When it finds
// none it reads the device's socket itself (Transport.pollSocket), so that
// completions come while the caller spins, whether or not the scheduler
// runs the transport's receive goroutine.
func (q *cq) Poll(wcs []verbs.WC) (int, error) {
	if q.ready.Load() == 0 {
		q.ctx.dev.t.pollSocket()
		if q.ready.Load() == 0 {
			return 0, nil
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, errCQClosed
	}
	n := min(q.count, len(wcs))
	for i := range n {
		wcs[i] = q.ring[q.head]
		q.head = (q.head + 1) % len(q.ring)
	}
	q.count -= n
	q.ready.Add(-int64(n))
	return n, nil
}

func (q *cq) ReqNotify(solicitedOnly bool) error {
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
func (q *cq) AckEvents(int) {}

func (q *cq) destroy() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

func (q *cq) Close() error {
	if q.uses.busy() {
		return errBusy("ibv_destroy_cq", "CQ")
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.mu.Unlock()
	if q.ctx.remove(q) && q.ch != nil {
		q.ch.uses.release()
	}
	return nil
}

// compChannel delivers CQ events: signal queues the CQ and pokes a
// one-slot channel, so the transport never blocks on a slow consumer.
type compChannel struct {
	ctx  *context
	uses usage

	mu     sync.Mutex
	queue  []*cq
	wake   chan struct{}
	done   chan struct{}
	closed bool
}

func newCompChannel(c *context) *compChannel {
	return &compChannel{ctx: c, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (ch *compChannel) rank() int { return rankChannel }

func (ch *compChannel) signal(q *cq) {
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
func (ch *compChannel) GetCQEvent(ctx ctxpkg.Context) (verbs.CQ, error) {
	for {
		ch.mu.Lock()
		if ch.closed {
			ch.mu.Unlock()
			return nil, verbs.NewError("ibv_get_cq_event", verbs.ErrClosed, "completion channel")
		}
		if len(ch.queue) > 0 {
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

func (ch *compChannel) destroy() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.closed {
		ch.closed = true
		close(ch.done)
	}
}

func (ch *compChannel) Close() error {
	if ch.uses.busy() {
		return errBusy("ibv_destroy_comp_channel", "completion channel")
	}
	ch.destroy()
	ch.ctx.remove(ch)
	return nil
}
