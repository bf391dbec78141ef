package verbstest

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// Validate/TooManySGEsMidList (SEMANTICS.md 12a): in WRITE(1 SGE),
// WRITE(max_send_sge+1 SGEs), WRITE(1 SGE) the second is refused
// (*WRError, index 1), the first is posted and completes, the third is
// not posted.
func testValidateTooManySGEs(t *testing.T, s *suite) {
	e := s.newEnv(t)
	caps := defaultCaps
	caps.MaxSendSGE = 2
	a, _ := e.pair(qpOpt{typ: verbs.QPTypeRC, caps: caps}, qpOpt{typ: verbs.QPTypeRC})
	g := a.caps().MaxSendSGE
	la := e.a.newMem(8*(g+3), verbs.AccessLocalWrite)
	rb := e.b.newMem(8*(g+3), verbs.AccessAllRemote)
	copy(la.buf, pattern(8*(g+3), 130))
	sgl := make([]verbs.SGE, g+1)
	for i := range sgl {
		sgl[i] = la.sgl(8*(i+1), 8)[0]
	}
	wrs := []verbs.SendWR{
		{ID: 130, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(0, 8), RDMA: rb.rdma(0)},
		{ID: 131, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: sgl, RDMA: rb.rdma(8)},
		{ID: 132, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(8*(g+2), 8), RDMA: rb.rdma(8 * (g + 2))},
	}
	n, err := a.qp.PostSend(wrs)
	wantWRError(t, "WRITE with max_send_sge+1 SGEs", n, err, 1, 131)
	wantOK(t, e.waitWC(a.cq, "A's first WRITE"), 130, verbs.WCRDMAWrite, a.qp.QPN())
	e.noWC(a.cq, quiet, "A after the refused WR")
	rb.wantOnly(t, "B's memory (the first WRITE only)", 0, la.buf[:8])
	wantState(t, a, verbs.QPStateRTS)
}

// Validate/AtomicMisaligned (SEMANTICS.md 5b): an atomic at a remote
// address that is not 8-byte aligned, or with a 4-byte local SGE, is
// refused at post; in a list the valid WR before it executes and the one
// after is not posted. Nothing else changes and the QP stays RTS.
func testValidateAtomic(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, _ := e.rcPair()
	la := e.a.newMem(64, verbs.AccessLocalWrite)
	rb := e.b.newMem(64, verbs.AccessAllRemote)
	const start = 100
	binary.NativeEndian.PutUint64(rb.buf[8:], start)
	at := func(id uint64, op verbs.Opcode, off, sgeLen int) verbs.SendWR {
		return verbs.SendWR{ID: id, Opcode: op, Flags: verbs.SendSignaled, SGL: la.sgl(0, sgeLen),
			Atomic: verbs.Atomic{RemoteAddr: rb.addr(off), RKey: rb.mr.RKey(), CompareAdd: 1, Swap: 2}}
	}
	for _, c := range []struct {
		what string
		wr   verbs.SendWR
	}{
		{"FETCH_ADD at MR+12", at(140, verbs.OpAtomicFetchAdd, 12, 8)},
		{"CMP_SWP at MR+12", at(141, verbs.OpAtomicCmpSwp, 12, 8)},
		{"FETCH_ADD with a 4-byte SGE", at(142, verbs.OpAtomicFetchAdd, 8, 4)},
	} {
		n, err := a.qp.PostSend([]verbs.SendWR{c.wr})
		wantWRError(t, c.what, n, err, 0, c.wr.ID)
	}
	n, err := a.qp.PostSend([]verbs.SendWR{
		at(143, verbs.OpAtomicFetchAdd, 8, 8), at(144, verbs.OpAtomicCmpSwp, 12, 8), at(145, verbs.OpAtomicFetchAdd, 8, 8)})
	wantWRError(t, "CMP_SWP at MR+12 in a list", n, err, 1, 144)
	wc := e.waitWC(a.cq, "A's FETCH_ADD")
	if wantOK(t, wc, 143, verbs.WCFetchAdd, a.qp.QPN()) {
		wantLen(t, wc, 8)
	}
	e.noWC(a.cq, quiet, "A after the refused WRs")
	if got := binary.NativeEndian.Uint64(rb.buf[8:]); got != start+1 {
		t.Errorf("remote value %d, want %d (one FETCH_ADD of 1)", got, start+1)
	}
	if got := binary.NativeEndian.Uint64(la.buf); got != start {
		t.Errorf("FETCH_ADD returned %d, want %d", got, start)
	}
	wantState(t, a, verbs.QPStateRTS)
}

// RecvQueue/TooManySGEsMidList: receive WRs follow the same bad_wr rule:
// in a list whose second WR has max_recv_sge+1 entries, the first is
// posted (and takes the next message), the second is refused with a
// *WRError at index 1, the third is not posted.
func testRecvTooManySGEs(t *testing.T, s *suite) {
	e := s.newEnv(t)
	caps := defaultCaps
	caps.MaxRecvSGE = 2
	a, b := e.pair(qpOpt{typ: verbs.QPTypeRC}, qpOpt{typ: verbs.QPTypeRC, caps: caps})
	g := b.caps().MaxRecvSGE
	la := e.a.newMem(64, verbs.AccessLocalWrite)
	rq := e.b.newMem(64*(g+3), verbs.AccessLocalWrite)
	copy(la.buf, pattern(64, 14))
	sgl := make([]verbs.SGE, g+1)
	for i := range sgl {
		sgl[i] = rq.sgl(64*(i+1), 64)[0]
	}
	n, err := b.qp.PostRecv([]verbs.RecvWR{rq.recvWR(0x140, 0, 64), {ID: 0x141, SGL: sgl}, rq.recvWR(0x142, 64*(g+2), 64)})
	wantWRError(t, "receive with max_recv_sge+1 SGEs", n, err, 1, 0x141)
	a.post(verbs.SendWR{ID: 14, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(0, 32)})
	wantOK(t, e.waitWC(a.cq, "A's SEND"), 14, verbs.WCSend, a.qp.QPN())
	wantRecv(t, e.waitWC(b.cq, "B's RECV"), 0x140, verbs.WCRecv, b.qp.QPN(), 32, false, 0)
	rq.wantOnly(t, "B's receive buffers", 0, la.buf[:32])
}

// RecvQueue/Overflow: a list of receives longer than the receive queue
// (the granted max_recv_wr) stops at index capacity with ENOMEM, the
// prefix posted.
func testRecvOverflow(t *testing.T, s *suite) {
	e := s.newEnv(t)
	caps := defaultCaps
	caps.MaxRecvWR = 16
	b := e.b.newQP(qpOpt{typ: verbs.QPTypeRC, caps: caps})
	b.toInit()
	capacity := b.caps().MaxRecvWR
	if capacity < 16 {
		t.Fatalf("granted max_recv_wr %d, asked 16", capacity)
	}
	rq := e.b.newMem(8, verbs.AccessLocalWrite)
	wrs := make([]verbs.RecvWR, capacity+4)
	for i := range wrs {
		wrs[i] = rq.recvWR(uint64(0x150+i), 0, 8)
	}
	n, err := b.qp.PostRecv(wrs)
	if n != capacity || !errors.Is(err, verbs.ErrNoMemory) || !errors.Is(err, syscall.ENOMEM) {
		t.Errorf("PostRecv of %d WRs on a receive queue of %d: posted %d, err %v; "+
			"want %d posted and an error matching verbs.ErrNoMemory and ENOMEM", len(wrs), capacity, n, err, capacity)
	}
}
