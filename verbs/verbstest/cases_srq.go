package verbstest

import (
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// newSRQ creates a basic SRQ on s, skipping the case when the device
// refuses SRQs with ErrNotSupported.
func (s *side) newSRQ(maxWR, maxSGE int) verbs.SRQ {
	s.t.Helper()
	srq, err := s.pd.CreateSRQ(verbs.SRQSpec{MaxWR: maxWR, MaxSGE: maxSGE})
	if errors.Is(err, verbs.ErrNotSupported) {
		s.t.Skipf("%s refused CreateSRQ: %v", s.ctx.Device().Name(), err)
	}
	if err != nil {
		s.t.Fatalf("%s: CreateSRQ(max_wr %d, max_sge %d): %v", s.name, maxWR, maxSGE, err)
	}
	own(s.t, s.name+"'s SRQ", srq)
	return srq
}

// SRQ/Query (SEMANTICS.md 15b): the SRQ grants at least what was asked,
// starts with limit 0, refuses a limit above its size (EINVAL) and has no
// SRQ number unless it is an XRC SRQ.
func testSRQQuery(t *testing.T, s *suite) {
	e := s.newEnv(t)
	srq := e.b.newSRQ(16, 1)
	attr, err := srq.Query()
	if err != nil {
		t.Fatalf("SRQ Query: %v", err)
	}
	if attr.MaxWR < 16 || attr.MaxSGE < 1 || attr.Limit != 0 {
		t.Errorf("SRQ Query = %+v, want max_wr >= 16, max_sge >= 1, limit 0", attr)
	}
	if _, err := srq.SRQN(); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("SRQN of a basic SRQ: err %v, want verbs.ErrNotSupported", err)
	}
	over := attr.MaxWR + 100000
	err = srq.Modify(verbs.SRQAttr{Limit: over}, verbs.SRQAttrLimit)
	if !errors.Is(err, verbs.ErrInvalidArgument) || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("SRQ Modify(limit %d > max_wr %d): err %v, want verbs.ErrInvalidArgument (EINVAL)", over, attr.MaxWR, err)
	}
	if err := srq.Modify(verbs.SRQAttr{Limit: 4}, verbs.SRQAttrLimit); err != nil {
		t.Fatalf("SRQ Modify(limit 4): %v", err)
	}
	if attr, err = srq.Query(); err != nil || attr.Limit != 4 {
		t.Errorf("SRQ Query after Modify(limit 4) = %+v, %v", attr, err)
	}
}

// SRQ/SharedByTwoQPs: two RC QPs on B share one SRQ (and one CQ); a
// message from each of two senders consumes a receive of the SRQ and
// completes on the QP it came to.
func testSRQShared(t *testing.T, s *suite) {
	e := s.newEnv(t)
	srq := e.b.newSRQ(16, 1)
	bcq := e.b.newCQ(64, nil)
	a1, b1 := e.pair(qpOpt{typ: verbs.QPTypeRC}, qpOpt{typ: verbs.QPTypeRC, srq: srq, cq: bcq})
	a2, b2 := e.pair(qpOpt{typ: verbs.QPTypeRC}, qpOpt{typ: verbs.QPTypeRC, srq: srq, cq: bcq})
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rq := e.b.newMem(4*64, verbs.AccessLocalWrite)
	copy(la.buf, pattern(256, 160))
	for k := range 4 {
		srqRecv(t, srq, rq.recvWR(uint64(k), 64*k, 64))
	}
	a1.post(verbs.SendWR{ID: 160, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(0, 40)})
	a2.post(verbs.SendWR{ID: 161, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(64, 48)})
	wantOK(t, e.waitWC(a1.cq, "A1's SEND"), 160, verbs.WCSend, a1.qp.QPN())
	wantOK(t, e.waitWC(a2.cq, "A2's SEND"), 161, verbs.WCSend, a2.qp.QPN())
	seen := map[uint32]bool{}
	used := map[uint64]bool{}
	for _, wc := range e.waitWCs(bcq, 2, "B's SRQ receives") {
		want := map[uint32]struct {
			off, n int
		}{b1.qp.QPN(): {0, 40}, b2.qp.QPN(): {64, 48}}[wc.QPNum]
		if want.n == 0 || seen[wc.QPNum] || wc.WRID >= 4 || used[wc.WRID] {
			t.Errorf("unexpected SRQ completion %s (B1 %#x, B2 %#x)", fmtWC(wc), b1.qp.QPN(), b2.qp.QPN())
			continue
		}
		seen[wc.QPNum], used[wc.WRID] = true, true
		wantRecv(t, wc, wc.WRID, verbs.WCRecv, wc.QPNum, want.n, false, 0)
		off := 64 * int(wc.WRID)
		wantBytes(t, "SRQ receive buffer", rq.buf[off:off+want.n], la.buf[want.off:want.off+want.n])
	}
}

// SRQ/LimitEvent (SEMANTICS.md 15c): with 8 receives posted and the limit
// set to 4, EventSRQLimitReached comes once fewer than 4 are left (after
// the 5th is consumed, not the 4th), and the limit then reads 0: the
// event is disarmed and does not come again.
func testSRQLimitEvent(t *testing.T, s *suite) {
	e := s.newEnv(t)
	srq := e.b.newSRQ(16, 1)
	a, b := e.pair(qpOpt{typ: verbs.QPTypeRC}, qpOpt{typ: verbs.QPTypeRC, srq: srq})
	la := e.a.newMem(64, verbs.AccessLocalWrite)
	rq := e.b.newMem(8*256, verbs.AccessLocalWrite)
	for k := range 8 {
		srqRecv(t, srq, rq.recvWR(uint64(0xf00+k), 256*k, 256))
	}
	if err := srq.Modify(verbs.SRQAttr{Limit: 4}, verbs.SRQAttrLimit); err != nil {
		t.Fatalf("SRQ Modify(limit 4): %v", err)
	}
	if attr, err := srq.Query(); err != nil || attr.Limit != 4 {
		t.Fatalf("SRQ Query after Modify(limit 4) = %+v, %v", attr, err)
	}
	drainEvents(e.b)
	consume := func(k int) {
		t.Helper()
		a.post(verbs.SendWR{ID: uint64(170 + k), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(0, 32)})
		wantOK(t, e.waitWC(a.cq, "A's SEND"), uint64(170+k), verbs.WCSend, a.qp.QPN())
		wantRecv(t, e.waitWC(b.cq, "B's SRQ receive"), uint64(0xf00+k-1), verbs.WCRecv, b.qp.QPN(), 32, false, 0)
	}
	for k := 1; k <= 4; k++ {
		consume(k)
	}
	// 4 left: not below the limit. Any event from the first 4 would still
	// be in the channel; the bounded wait also covers a late one.
	e.noEvent(e.b, verbs.EventSRQLimitReached, quiet, "4 receives left")
	consume(5)
	ev := e.waitEvent(e.b, verbs.EventSRQLimitReached, "3 receives left")
	if ev.SRQ != srq {
		t.Errorf("EventSRQLimitReached names SRQ %v, want B's", ev.SRQ)
	}
	if attr, err := srq.Query(); err != nil || attr.Limit != 0 {
		t.Errorf("SRQ Query after the event = %+v, %v; want limit 0 (disarmed)", attr, err)
	}
	consume(6)
	e.noEvent(e.b, verbs.EventSRQLimitReached, quiet, "2 receives left, limit disarmed")
}

// XRC/SendToSRQ (SEMANTICS.md 15a: rxe has no XRC and the case skips
// there): an XRC_SEND QP on A reaches an XRC_RECV QP on B; each message
// lands in the XRC SRQ its remote_srqn names, completing on that SRQ's CQ.
func testXRCSend(t *testing.T, s *suite) {
	e := s.newEnv(t)
	xrcd, err := e.b.ctx.OpenXRCD()
	if errors.Is(err, verbs.ErrNotSupported) {
		t.Skipf("%s refused OpenXRCD: %v", e.b.ctx.Device().Name(), err)
	}
	if err != nil {
		t.Fatalf("B: OpenXRCD: %v", err)
	}
	own(t, "B's XRCD", xrcd)
	acq := e.a.newCQ(16, nil)
	sqp, err := e.a.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeXRCSend, SendCQ: acq,
		Caps: verbs.QPCaps{MaxSendWR: 16, MaxSendSGE: 1}})
	if errors.Is(err, verbs.ErrNotSupported) {
		t.Skipf("%s refused an XRC_SEND QP: %v", e.a.ctx.Device().Name(), err)
	}
	if err != nil {
		t.Fatalf("A: CreateQP(XRC_SEND): %v", err)
	}
	own(t, "A's XRC_SEND QP", sqp)
	var cqs [2]verbs.CQ
	var srqs [2]verbs.SRQ
	var srqns [2]uint32
	for i := range srqs {
		cqs[i] = e.b.newCQ(16, nil)
		srq, err := e.b.pd.CreateSRQ(verbs.SRQSpec{MaxWR: 16, MaxSGE: 1, Type: verbs.SRQTypeXRC, XRCD: xrcd, CQ: cqs[i]})
		if err != nil {
			t.Fatalf("B: CreateSRQ(XRC): %v", err)
		}
		own(t, "B's XRC SRQ", srq)
		srqs[i] = srq
		if srqns[i], err = srq.SRQN(); err != nil {
			t.Fatalf("B: SRQN of an XRC SRQ: %v", err)
		}
	}
	rqp, err := e.b.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeXRCRecv, XRCD: xrcd})
	if err != nil {
		t.Fatalf("B: CreateQP(XRC_RECV): %v", err)
	}
	own(t, "B's XRC_RECV QP", rqp)
	a := &endpoint{s: e.a, qp: sqp, cq: acq, typ: verbs.QPTypeXRCSend, psn: rand.Uint32() & 0xffffff}
	b := &endpoint{s: e.b, qp: rqp, typ: verbs.QPTypeXRCRecv, psn: rand.Uint32() & 0xffffff}
	a.toInit()
	b.toInit()
	a.toRTR(b, e.mtu, defaultLink)
	b.toRTR(a, e.mtu, defaultLink)
	a.toRTS(defaultLink)

	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rq := e.b.newMem(512, verbs.AccessLocalWrite)
	copy(la.buf, pattern(256, 180))
	srqRecv(t, srqs[0], rq.recvWR(0x1a0, 0, 256))
	srqRecv(t, srqs[1], rq.recvWR(0x1a1, 256, 256))
	a.post(
		verbs.SendWR{ID: 180, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(0, 32), RemoteSRQN: srqns[1]},
		verbs.SendWR{ID: 181, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(64, 48), RemoteSRQN: srqns[0]})
	wcs := e.waitWCs(acq, 2, "A's XRC SENDs")
	wantOK(t, wcs[0], 180, verbs.WCSend, a.qp.QPN())
	wantOK(t, wcs[1], 181, verbs.WCSend, a.qp.QPN())
	for i, want := range []struct {
		id      uint64
		off, n  int
		srcOff  int
		srqName string
	}{{0x1a0, 0, 48, 64, "the first XRC SRQ"}, {0x1a1, 256, 32, 0, "the second XRC SRQ"}} {
		wc := e.waitWC(cqs[i], want.srqName)
		if wc.WRID != want.id || wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRecv {
			t.Errorf("%s: got %s, want {wr %#x SUCCESS op RECV}", want.srqName, fmtWC(wc), want.id)
			continue
		}
		wantLen(t, wc, want.n)
		wantBytes(t, want.srqName+"'s buffer", rq.buf[want.off:want.off+want.n], la.buf[want.srcOff:want.srcOff+want.n])
	}
	for i := range cqs {
		e.emptyNow(cqs[i], "XRC SRQ CQ")
	}
}
