package soft

import (
	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// recvWQE is a posted receive. Its SGE storage is allocated with its slot.
type recvWQE struct {
	id  uint64
	n   int
	sgl []verbs.SGE
}

// recvQueue is a ring of receive WQEs (a QP's RQ or an SRQ). Its owner
// locks it. It holds capacity receives (max_recv_wr or max_wr, as rxe
// rounds them); slots has room for the most it has held at once, doubled
// as needed up to capacity (grow): 64 receives posted to a queue that
// rounds to 127 take 64 slots.
type recvQueue struct {
	slots      []recvWQE
	capacity   int
	head, tail uint64
	maxSGE     int
}

func newRecvQueue(capacity, maxSGE int) recvQueue {
	return recvQueue{capacity: capacity, maxSGE: maxSGE}
}

// recvStart is the room a receive queue gets for its first receive.
const recvStart = 4

// grow doubles the room, up to capacity, moving the posted receives to
// their places in the bigger ring.
func (q *recvQueue) grow() {
	n := min(max(2*len(q.slots), recvStart), q.capacity)
	slots := make([]recvWQE, n)
	backing := make([]verbs.SGE, n*q.maxSGE)
	for i := range slots {
		slots[i].sgl = backing[i*q.maxSGE : (i+1)*q.maxSGE : (i+1)*q.maxSGE]
	}
	for p := q.head; p < q.tail; p++ {
		old, s := &q.slots[p%uint64(len(q.slots))], &slots[p%uint64(n)]
		s.id = old.id
		s.n = copy(s.sgl, old.sgl[:old.n])
	}
	q.slots = slots
}

func (q *recvQueue) len() int { return int(q.tail - q.head) }

// post appends wrs; it stops at the first that breaks a rule or finds the
// queue full, with bad_wr semantics.
func (q *recvQueue) post(wrs []verbs.RecvWR) (int, error) {
	lim := verbs.RecvLimits{MaxRecvSGE: q.maxSGE}
	for i := range wrs {
		if err := lim.Check(i, &wrs[i]); err != nil {
			return i, err
		}
		if q.len() == len(q.slots) {
			if len(q.slots) >= q.capacity {
				return i, errRQFull
			}
			q.grow()
		}
		s := &q.slots[q.tail%uint64(len(q.slots))]
		s.id = wrs[i].ID
		s.n = copy(s.sgl, wrs[i].SGL)
		q.tail++
	}
	return len(wrs), nil
}

var errRQFull = verbs.NewError("ibv_post_recv", verbs.ErrNoMemory, "receive queue full")

// pop moves the oldest receive into dst (whose SGL must have room for
// maxSGE entries) and reports whether there was one.
func (q *recvQueue) pop(dst *recvWQE) bool {
	if q.head == q.tail {
		return false
	}
	s := &q.slots[q.head%uint64(len(q.slots))]
	dst.id = s.id
	dst.n = copy(dst.sgl[:cap(dst.sgl)], s.sgl[:s.n])
	q.head++
	return true
}

// drain removes every receive, calling fn for each (to flush it).
func (q *recvQueue) drain(fn func(id uint64)) {
	for ; q.head != q.tail; q.head++ {
		fn(q.slots[q.head%uint64(len(q.slots))].id)
	}
}

type srq struct {
	pd   *swhca.PD
	ctx  *context
	xrcd *xrcd
	cq   *swhca.CQ // XRC SRQs: where their receives complete
	srqn uint32
	uses swhca.Usage

	mu     lockrank.Mutex[lockrank.SoftSRQ]
	rq     recvQueue
	size   swhca.SRQSize // its limit is guarded by mu
	closed bool
}

func newSRQ(c *context, p *swhca.PD, spec verbs.SRQSpec) (*srq, error) {
	const op = "ibv_create_srq"
	size, err := swhca.NewSRQSize(spec)
	if err != nil {
		return nil, err
	}
	s := &srq{pd: p, ctx: c, size: size, rq: newRecvQueue(size.MaxWR, size.MaxSGE)}
	switch spec.Type {
	case verbs.SRQTypeBasic:
	case verbs.SRQTypeXRC:
		x, ok := spec.XRCD.(*xrcd)
		q, okCQ := spec.CQ.(*swhca.CQ)
		if !ok || !okCQ || x.ctx != c || q.Owner() != c {
			return nil, verbs.NewError(op, verbs.ErrInvalidArgument, "XRC SRQs need an XRCD and a CQ of this context")
		}
		s.xrcd, s.cq = x, q
		s.srqn = c.dev.nextSRQN.Add(1)
	default:
		return nil, verbs.Errorf(op, verbs.ErrNotSupported, "SRQ type %d", spec.Type)
	}
	if err := c.Registry().Add(op, s, swhca.RankSRQ, s.destroy); err != nil {
		return nil, err
	}
	p.Uses().Hold()
	if s.cq != nil {
		s.cq.Uses().Hold()
		c.dev.srqs.put(s.srqn, s)
	}
	return s, nil
}

func (s *srq) PostRecv(wrs []verbs.RecvWR) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, verbs.NewError("ibv_post_srq_recv", verbs.ErrClosed, "SRQ")
	}
	return s.rq.post(wrs)
}

// consume pops one receive for an incoming message. When that leaves fewer
// than the armed limit, the limit disarms and SRQ_LIMIT_REACHED is raised
// (SEMANTICS 15c, 15d: checked on consumption only).
func (s *srq) consume(dst *recvWQE) bool {
	s.mu.Lock()
	if s.closed || !s.rq.pop(dst) {
		s.mu.Unlock()
		return false
	}
	fire := s.size.Consumed(s.rq.len())
	s.mu.Unlock()
	if fire {
		s.ctx.Registry().Raise(verbs.AsyncEvent{Type: verbs.EventSRQLimitReached, SRQ: s})
	}
	return true
}

// Modify sets srq_limit; resizing (max_wr) is not supported.
func (s *srq) Modify(attr verbs.SRQAttr, mask verbs.SRQAttrMask) error {
	s.mu.Lock()
	err := s.size.Modify(attr, mask)
	s.mu.Unlock()
	return err
}

// Query reports the SRQ's size and limit.
func (s *srq) Query() (verbs.SRQAttr, error) {
	s.mu.Lock()
	a := s.size.Attr()
	s.mu.Unlock()
	return a, nil
}

func (s *srq) SRQN() (uint32, error) {
	if s.xrcd == nil {
		return 0, verbs.NewError("ibv_get_srq_num", verbs.ErrNotSupported, "a basic SRQ has no number")
	}
	return s.srqn, nil
}

func (s *srq) destroy() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.xrcd != nil {
		s.ctx.dev.srqs.del(s.srqn)
	}
}

func (s *srq) Close() error {
	if s.uses.Busy() {
		return swhca.ErrBusy("ibv_destroy_srq", "SRQ")
	}
	swhca.Close(&s.mu, &s.closed, s.destroy, s.ctx.Registry(), s, swhca.Deps{PD: s.pd, RecvCQ: s.cq})
	return nil
}

// createSRQ is PD.CreateSRQ on the soft engine.
func (c *context) createSRQ(p *swhca.PD, spec verbs.SRQSpec) (verbs.SRQ, error) {
	return newSRQ(c, p, spec)
}
