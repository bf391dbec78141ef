package verbstest

import (
	"context"
	"errors"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// CQ/Overrun (SEMANTICS.md 10a): a CQ asked for 4 entries (CQE() says
// what was granted) receives more signaled completions than it holds
// without being polled. The requester's context reports EventCQErr for
// that CQ, and one Poll returns at most CQE() completions. rxe drops the
// extra completions and keeps the CQ usable; the IB spec makes it
// unusable: neither is asserted (a Poll error is accepted).
func testCQOverrun(t *testing.T, s *suite) {
	e := s.newEnv(t)
	acq := e.a.newCQ(4, nil)
	n := acq.CQE()
	if n < 4 {
		t.Errorf("CreateCQ(4): CQE() = %d", n)
	}
	writes := max(20, n+8)
	caps := defaultCaps
	caps.MaxSendWR = writes
	a, _ := e.pair(qpOpt{typ: verbs.QPTypeRC, cq: acq, caps: caps}, qpOpt{typ: verbs.QPTypeRC})
	la := e.a.newMem(8, verbs.AccessLocalWrite)
	rb := e.b.newMem(8*writes, verbs.AccessAllRemote)
	drainEvents(e.a)
	wrs := make([]verbs.SendWR, writes)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(1001 + i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: la.sgl(0, 8), RDMA: rb.rdma(8 * i)}
	}
	a.post(wrs...)
	ev := e.waitEvent(e.a, verbs.EventCQErr, "overrun CQ")
	if ev.CQ != acq {
		t.Errorf("EventCQErr names CQ %v, want the overrun one", ev.CQ)
	}
	// One Poll can return no more than the CQ holds.
	buf := make([]verbs.WC, writes)
	k, err := acq.Poll(buf)
	if err != nil {
		t.Logf("Poll of the overrun CQ: %v (accepted)", err)
	}
	if k > n {
		t.Errorf("Poll of an overrun CQ of %d entries returned %d completions", n, k)
	}
	for _, wc := range buf[:k] {
		if wc.QPNum != a.qp.QPN() || wc.WRID < 1001 || wc.WRID >= uint64(1001+writes) {
			t.Errorf("overrun CQ returned %s, not one of A's WRITEs", fmtWC(wc))
		}
	}
}

// channelPair connects an RC pair whose responder's CQ reports to a
// completion channel, with a receive buffer of 4 x 256 bytes on B.
func channelPair(t *testing.T, s *suite) (e *env, a, b *endpoint, ch verbs.CompChannel, la, rq *mem) {
	t.Helper()
	e = s.newEnv(t)
	ch = e.b.newChannel()
	a, b = e.pair(qpOpt{typ: verbs.QPTypeRC}, qpOpt{typ: verbs.QPTypeRC, channel: ch})
	la = e.a.newMem(256, verbs.AccessLocalWrite)
	rq = e.b.newMem(1024, verbs.AccessLocalWrite)
	copy(la.buf, pattern(256, 100))
	return e, a, b, ch, la, rq
}

// wantCQEvent waits for ch to report cq and acknowledges the event.
func (e *env) wantCQEvent(ch verbs.CompChannel, cq verbs.CQ, what string) {
	e.t.Helper()
	got, err := waitCQEvent(e.t, ch, e.cfg.Timeout)
	if err != nil {
		e.t.Fatalf("%s: GetCQEvent: %v", what, err)
	}
	if got == nil {
		e.t.Fatalf("%s: GetCQEvent returned no CQ and no error", what)
	}
	got.AckEvents(1)
	if got != cq {
		e.t.Errorf("%s: GetCQEvent returned CQ %v, want B's", what, got)
	}
}

// noCQEvent checks that ch reports nothing within quiet, a bounded wait
// for something that must not happen.
func (e *env) noCQEvent(ch verbs.CompChannel, what string) {
	e.t.Helper()
	cq, err := waitCQEvent(e.t, ch, quiet)
	if err == nil {
		if cq != nil {
			cq.AckEvents(1)
		}
		e.t.Errorf("%s: unexpected channel event", what)
	} else if !errors.Is(err, context.DeadlineExceeded) {
		e.t.Errorf("%s: GetCQEvent: %v, want context.DeadlineExceeded", what, err)
	}
}

// CompChannel/Notify (SEMANTICS.md 17c): an armed CQ reports its next
// completion on its channel.
func testChannelNotify(t *testing.T, s *suite) {
	e, a, b, ch, la, rq := channelPair(t, s)
	b.recv(rq.recvWR(0xb00, 0, 256))
	if err := b.cq.ReqNotify(false); err != nil {
		t.Fatalf("ReqNotify(false): %v", err)
	}
	a.post(verbs.SendWR{ID: 110, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(0, 16)})
	wantOK(t, e.waitWC(a.cq, "A's SEND"), 110, verbs.WCSend, a.qp.QPN())
	e.wantCQEvent(ch, b.cq, "after a SEND")
	wantRecv(t, e.waitWC(b.cq, "B's RECV"), 0xb00, verbs.WCRecv, b.qp.QPN(), 16, false, 0)
}

// CompChannel/SolicitedOnly (SEMANTICS.md 17b): a CQ armed for solicited
// completions stays quiet on a plain SEND (whose completion is in the CQ)
// and reports the next SEND with SendSolicited.
func testChannelSolicitedOnly(t *testing.T, s *suite) {
	e, a, b, ch, la, rq := channelPair(t, s)
	b.recv(rq.recvWR(0xb01, 0, 256), rq.recvWR(0xb02, 256, 256))
	if err := b.cq.ReqNotify(true); err != nil {
		t.Fatalf("ReqNotify(true): %v", err)
	}
	a.post(verbs.SendWR{ID: 111, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(0, 16)})
	wantOK(t, e.waitWC(a.cq, "A's SEND"), 111, verbs.WCSend, a.qp.QPN())
	wantRecv(t, e.waitWC(b.cq, "B's RECV"), 0xb01, verbs.WCRecv, b.qp.QPN(), 16, false, 0)
	e.noCQEvent(ch, "after a SEND that was not solicited")
	a.post(verbs.SendWR{ID: 112, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendSolicited, SGL: la.sgl(0, 24)})
	wantOK(t, e.waitWC(a.cq, "A's solicited SEND"), 112, verbs.WCSend, a.qp.QPN())
	e.wantCQEvent(ch, b.cq, "after a solicited SEND")
	wantRecv(t, e.waitWC(b.cq, "B's RECV"), 0xb02, verbs.WCRecv, b.qp.QPN(), 24, false, 0)
}

// CompChannel/SolicitedOnlyWakesOnError (SEMANTICS.md 17d): an error
// completion (here the flush of a receive when B goes to ERR) wakes a CQ
// armed for solicited completions only.
func testChannelSolicitedErr(t *testing.T, s *suite) {
	e, _, b, ch, _, rq := channelPair(t, s)
	b.recv(rq.recvWR(0xb03, 0, 256))
	if err := b.cq.ReqNotify(true); err != nil {
		t.Fatalf("ReqNotify(true): %v", err)
	}
	b.toState(verbs.QPStateErr)
	e.wantCQEvent(ch, b.cq, "after B's receive was flushed")
	wantFlushed(t, e.waitWC(b.cq, "B's flushed RECV"), 0xb03, b.qp.QPN())
}
