package rocev2

import (
	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// srq is a basic shared receive queue: the responders of the QPs that use
// it take its receive WQEs (recvSource) under their own locks, so mu ranks
// after those (internal/lockrank). XRC SRQs are not supported.
type srq struct {
	pd   *swhca.PD
	ctx  *context
	uses swhca.Usage // QPs receiving through it

	mu     lockrank.Mutex[lockrank.RoCESRQ]
	size   swhca.SRQSize // its limit is guarded by mu
	q      []recvWQE
	closed bool
}

func newSRQ(c *context, p *swhca.PD, spec verbs.SRQSpec) (*srq, error) {
	const op = "ibv_create_srq"
	if spec.Type != verbs.SRQTypeBasic {
		return nil, verbs.NewError(op, verbs.ErrNotSupported, "rocev2 has no XRC SRQs")
	}
	size, err := swhca.NewSRQSize(spec)
	if err != nil {
		return nil, err
	}
	s := &srq{pd: p, ctx: c, size: size}
	if err := c.Registry().Add(op, s, swhca.RankSRQ, s.destroy); err != nil {
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
	lim := verbs.RecvLimits{MaxRecvSGE: s.size.MaxSGE}
	for i := range wrs {
		if err := lim.Check(i, &wrs[i]); err != nil {
			return i, err
		}
		if len(s.q) >= s.size.MaxWR {
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
	fire := s.size.Consumed(len(s.q))
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size.Modify(attr, mask)
}

func (s *srq) Query() (verbs.SRQAttr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size.Attr(), nil
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
	swhca.Close(&s.mu, &s.closed, s.destroy, s.ctx.Registry(), s, swhca.Deps{PD: s.pd})
	return nil
}

// resolveRecv turns a receive WR into a recvWQE: one SGE is placed in
// directly, several through one buffer scattered when the message
// completes. An SGE whose lkey does not resolve leaves a buffer of no
// bytes, so the message meant for it fails with a length error.
func resolveRecv(d *device, p *swhca.PD, wr *verbs.RecvWR) recvWQE {
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

// createSRQ is PD.CreateSRQ over the transport.
func (c *context) createSRQ(p *swhca.PD, spec verbs.SRQSpec) (verbs.SRQ, error) {
	return newSRQ(c, p, spec)
}
