package rocev2

import (
	"sync"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// srq is a basic shared receive queue: the responders of the QPs that use
// it take its receive WQEs (recvSource) under their own locks, then its
// mu. XRC SRQs are not supported.
type srq struct {
	pd     *pd
	ctx    *context
	uses   swhca.Usage // QPs receiving through it
	maxWR  int
	maxSGE int

	mu     sync.Mutex
	q      []recvWQE
	limit  int // srq_limit: armed when > 0
	closed bool
}

func newSRQ(p *pd, spec verbs.SRQSpec) (*srq, error) {
	const op = "ibv_create_srq"
	if spec.Type != verbs.SRQTypeBasic {
		return nil, verbs.NewError(op, verbs.ErrNotSupported, "rocev2 has no XRC SRQs")
	}
	if spec.MaxWR < 1 || spec.MaxWR > swhca.MaxSRQWR || spec.MaxSGE < 0 || spec.MaxSGE > swhca.MaxSGE {
		return nil, verbs.Errorf(op, verbs.ErrInvalidArgument, "max_wr %d max_sge %d", spec.MaxWR, spec.MaxSGE)
	}
	s := &srq{pd: p, ctx: p.ctx, maxWR: swhca.QueueCapacity(spec.MaxWR), maxSGE: max(spec.MaxSGE, 1)}
	if spec.Limit < 0 || spec.Limit > s.maxWR {
		return nil, verbs.Errorf(op, verbs.ErrInvalidArgument, "srq_limit %d > max_wr %d", spec.Limit, s.maxWR)
	}
	s.limit = spec.Limit
	if err := p.ctx.Registry().Add(op, s, swhca.RankSRQ, s.destroy); err != nil {
		return nil, err
	}
	p.Uses().Hold()
	return s, nil
}

// PostRecv posts receive WRs with the contract of QP.PostRecv.
func (s *srq) PostRecv(wrs []verbs.RecvWR) (int, error) {
	const op = "ibv_post_srq_recv"
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, verbs.NewError(op, verbs.ErrClosed, "SRQ")
	}
	lim := verbs.RecvLimits{MaxRecvSGE: s.maxSGE}
	for i := range wrs {
		if err := lim.Check(i, &wrs[i]); err != nil {
			return i, err
		}
		if len(s.q) >= s.maxWR {
			return i, verbs.NewError(op, verbs.ErrNoMemory, "SRQ full")
		}
		s.q = append(s.q, resolveRecv(s.ctx.dev, s.pd, &wrs[i]))
	}
	return len(wrs), nil
}

// take pops one receive for an incoming message. When that leaves fewer
// than the armed limit, the limit disarms and SRQ_LIMIT_REACHED is raised
// (SEMANTICS 15c: checked on consumption only).
func (s *srq) take() (recvWQE, bool) {
	s.mu.Lock()
	if s.closed || len(s.q) == 0 {
		s.mu.Unlock()
		return recvWQE{}, false
	}
	r := s.q[0]
	s.q[0] = recvWQE{}
	s.q = s.q[1:]
	fire := s.limit > 0 && len(s.q) < s.limit
	if fire {
		s.limit = 0
	}
	s.mu.Unlock()
	if fire {
		s.ctx.Registry().Raise(verbs.AsyncEvent{Type: verbs.EventSRQLimitReached, SRQ: s})
	}
	return r, true
}

func (s *srq) putBack(r recvWQE) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.q = append([]recvWQE{r}, s.q...)
	}
}

// Modify sets srq_limit; resizing (max_wr) is not supported.
func (s *srq) Modify(attr verbs.SRQAttr, mask verbs.SRQAttrMask) error {
	const op = "ibv_modify_srq"
	if mask&^(verbs.SRQAttrMaxWR|verbs.SRQAttrLimit) != 0 {
		return verbs.Errorf(op, verbs.ErrInvalidArgument, "mask %#x", uint32(mask))
	}
	if mask&verbs.SRQAttrMaxWR != 0 {
		return verbs.NewError(op, verbs.ErrNotSupported, "resizing an SRQ")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if mask&verbs.SRQAttrLimit != 0 {
		if attr.Limit < 0 || attr.Limit > s.maxWR {
			return verbs.Errorf(op, verbs.ErrInvalidArgument, "srq_limit %d > max_wr %d", attr.Limit, s.maxWR)
		}
		s.limit = attr.Limit
	}
	return nil
}

func (s *srq) Query() (verbs.SRQAttr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return verbs.SRQAttr{MaxWR: s.maxWR, MaxSGE: s.maxSGE, Limit: s.limit}, nil
}

// SRQN returns ErrNotSupported: a basic SRQ has no number.
func (s *srq) SRQN() (uint32, error) {
	return 0, verbs.NewError("ibv_get_srq_num", verbs.ErrNotSupported, "a basic SRQ has no number")
}

func (s *srq) destroy() {
	s.mu.Lock()
	s.closed = true
	s.q = nil
	s.mu.Unlock()
}

func (s *srq) Close() error {
	if s.uses.Busy() {
		return swhca.ErrBusy("ibv_destroy_srq", "SRQ")
	}
	swhca.Close(&s.mu, &s.closed, s.destroy, s.ctx.Registry(), s, swhca.Deps{PD: &s.pd.PD})
	return nil
}

// resolveRecv turns a receive WR into a recvWQE: one SGE is placed in
// directly, several through one buffer scattered when the message
// completes. An SGE whose lkey does not resolve leaves a buffer of no
// bytes, so the message meant for it fails with a length error.
func resolveRecv(d *device, p *pd, wr *verbs.RecvWR) recvWQE {
	r := recvWQE{id: wr.ID}
	segs, ok := localSegs(d, p, wr.SGL, verbs.AccessLocalWrite)
	switch {
	case !ok:
		r.buf = []byte{}
	case len(segs) == 1:
		r.buf = segs[0]
	default:
		n := 0
		for _, s := range segs {
			n += len(s)
		}
		r.buf, r.scatter = make([]byte, n), segs
	}
	return r
}
