package verbstest

import (
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// ucPair connects two UC QPs.
func ucPair(e *env) (a, b *endpoint) {
	e.t.Helper()
	return e.pair(qpOpt{typ: verbs.QPTypeUC}, qpOpt{typ: verbs.QPTypeUC})
}

// ucMarker sends a 16-byte SEND from A into a receive posted on B and
// waits for both completions. UC is not acknowledged and delivers in
// order, so once B has received it, everything A sent before has been
// handled by B.
func ucMarker(t *testing.T, e *env, a, b *endpoint, id uint64, la, rq *mem, rqOff int) {
	t.Helper()
	b.recv(rq.recvWR(id, rqOff, 64))
	a.post(verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(0, 16)})
	wantOK(t, e.waitWC(a.cq, "A's marker SEND"), id, verbs.WCSend, a.qp.QPN())
	wantRecv(t, e.waitWC(b.cq, "B's marker RECV"), id, verbs.WCRecv, b.qp.QPN(), 16, false, 0)
}

// UC/Write (SEMANTICS.md 14a): a 3000-byte WRITE (several packets)
// arrives whole; B completes nothing for it.
func testUCWrite(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := ucPair(e)
	la := e.a.newMem(4096, verbs.AccessLocalWrite)
	rb := e.b.newMem(4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	rq := e.b.newMem(64, verbs.AccessLocalWrite)
	data := pattern(3000, 150)
	copy(la.buf[100:], data)
	a.post(verbs.SendWR{ID: 150, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(100, 3000), RDMA: rb.rdma(50)})
	wantOK(t, e.waitWC(a.cq, "A's UC WRITE"), 150, verbs.WCRDMAWrite, a.qp.QPN())
	e.emptyNow(b.cq, "B's CQ after a WRITE")
	ucMarker(t, e, a, b, 151, la, rq, 0)
	rb.wantOnly(t, "B's memory", 50, data)
}

// UC/ReadRejected (SEMANTICS.md 14b): verbsrt's Validate refuses an RDMA
// READ on UC at post (*WRError), where rxe accepted it and failed the QP
// with LOC_QP_OP_ERR. The WRITE before it is posted and executes, the one
// after is not posted, the QP stays RTS.
func testUCReadRejected(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := ucPair(e)
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rb := e.b.newMem(256, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	rq := e.b.newMem(64, verbs.AccessLocalWrite)
	copy(la.buf, pattern(256, 152))
	n, err := a.qp.PostSend([]verbs.SendWR{
		{ID: 152, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(0, 64), RDMA: rb.rdma(0)},
		{ID: 153, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: la.sgl(64, 64), RDMA: rb.rdma(64)},
		{ID: 154, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(128, 64), RDMA: rb.rdma(128)},
	})
	wantWRError(t, "RDMA_READ on UC", n, err, 1, 153)
	wantOK(t, e.waitWC(a.cq, "A's UC WRITE"), 152, verbs.WCRDMAWrite, a.qp.QPN())
	ucMarker(t, e, a, b, 155, la, rq, 0)
	rb.wantOnly(t, "B's memory (the first WRITE only)", 0, la.buf[:64])
	wantState(t, a, verbs.QPStateRTS)
}

// UC/SendNoRecvDropped (SEMANTICS.md 14c): a SEND that finds no receive is
// dropped silently (A: SUCCESS, B stays RTS); a receive posted later gets
// nothing until the next SEND, which is delivered.
func testUCSendNoRecv(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := ucPair(e)
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rq := e.b.newMem(256, verbs.AccessLocalWrite)
	copy(la.buf, pattern(256, 156))
	a.post(verbs.SendWR{ID: 156, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(64, 100)})
	wantOK(t, e.waitWC(a.cq, "A's UC SEND"), 156, verbs.WCSend, a.qp.QPN())
	// UC is not acknowledged: nothing tells when B has dropped the message.
	// This bounded wait gives it the time (B must complete nothing
	// meanwhile), then a receive posted afterwards must stay empty for
	// another bounded wait.
	e.noWC(b.cq, quiet, "B without a receive")
	b.recv(rq.recvWR(0xe00, 0, 256))
	e.noWC(b.cq, quiet, "B's receive posted after the message")
	wantState(t, b, verbs.QPStateRTS)
	a.post(verbs.SendWR{ID: 157, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(0, 40)})
	wantOK(t, e.waitWC(a.cq, "A's second UC SEND"), 157, verbs.WCSend, a.qp.QPN())
	wantRecv(t, e.waitWC(b.cq, "B's RECV"), 0xe00, verbs.WCRecv, b.qp.QPN(), 40, false, 0)
	rq.wantOnly(t, "B's receive buffer", 0, la.buf[:40])
}

// UC/WriteNoRemoteWrite (SEMANTICS.md 14d): a WRITE to an MR without
// REMOTE_WRITE completes with SUCCESS at A (UC has no NAK), writes
// nothing, and B stays RTS and receives the next SEND.
func testUCWriteNoRemoteWrite(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := ucPair(e)
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rb := e.b.newMem(256, verbs.AccessLocalWrite)
	rq := e.b.newMem(64, verbs.AccessLocalWrite)
	copy(la.buf, pattern(256, 158))
	a.post(verbs.SendWR{ID: 158, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(0, 64), RDMA: rb.rdma(0)})
	wantOK(t, e.waitWC(a.cq, "A's UC WRITE"), 158, verbs.WCRDMAWrite, a.qp.QPN())
	ucMarker(t, e, a, b, 159, la, rq, 0)
	rb.wantOnly(t, "B's memory", 0, nil)
	wantState(t, a, verbs.QPStateRTS)
	wantState(t, b, verbs.QPStateRTS)
}

// UC/WriteWithImm: on UC too a WRITE_WITH_IMM lands in the target MR and
// completes a receive as RECV_RDMA_WITH_IMM with the immediate data and
// the payload length.
func testUCWriteWithImm(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := ucPair(e)
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rb := e.b.newMem(256, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	rq := e.b.newMem(64, verbs.AccessLocalWrite)
	data := pattern(200, 159)
	copy(la.buf, data)
	const imm = 0xcafe0001
	b.recv(rq.recvWR(0xe01, 0, 64))
	a.post(verbs.SendWR{ID: 160, Opcode: verbs.OpWriteImm, Flags: verbs.SendSignaled, SGL: la.sgl(0, 200),
		RDMA: rb.rdma(8), Imm: imm})
	wantOK(t, e.waitWC(a.cq, "A's UC WRITE_WITH_IMM"), 160, verbs.WCRDMAWrite, a.qp.QPN())
	wantRecv(t, e.waitWC(b.cq, "B's RECV"), 0xe01, verbs.WCRecvRDMAWithImm, b.qp.QPN(), 200, true, imm)
	rb.wantOnly(t, "B's target MR", 8, data)
	rq.wantOnly(t, "B's receive buffer", 0, nil)
}
