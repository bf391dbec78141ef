package verbstest

import (
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// splitWCs separates completions of receive WRs (IDs in recv) from those
// of send WRs, keeping the order of each.
func splitWCs(wcs []verbs.WC, isRecv func(id uint64) bool) (sends, recvs []verbs.WC) {
	for _, wc := range wcs {
		if isRecv(wc.WRID) {
			recvs = append(recvs, wc)
		} else {
			sends = append(sends, wc)
		}
	}
	return sends, recvs
}

// Flush/ModifyToErr (SEMANTICS.md 9a): A is in RTS towards a B left in
// INIT, so its packets go unanswered (a 1 s ACK timeout and 7 retries keep
// anything from completing first). 8 WRITEs (4 unsignaled) and 4 receives
// are outstanding when A is moved to ERR: all 12 complete with
// WR_FLUSH_ERR, the unsignaled ones included. The order between the send
// and receive queues is not asserted, the order within each is.
func testFlushModifyToErr(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := e.a.newQP(qpOpt{typ: verbs.QPTypeRC}), e.b.newQP(qpOpt{typ: verbs.QPTypeRC})
	la := e.a.newMem(8192, verbs.AccessLocalWrite)
	rb := e.b.newMem(8192, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	l := link{Timeout: 18, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12}
	a.toInit()
	b.toInit()
	a.toRTR(b, e.mtu, l)
	a.toRTS(l)
	for k := range 4 {
		a.recv(la.recvWR(uint64(951+k), 4096+64*k, 64))
	}
	wrs := make([]verbs.SendWR, 8)
	for k := range wrs {
		var f verbs.SendFlags
		if k%2 == 0 {
			f = verbs.SendSignaled
		}
		wrs[k] = verbs.SendWR{ID: uint64(901 + k), Opcode: verbs.OpWrite, Flags: f, SGL: la.sgl(64*k, 64), RDMA: rb.rdma(64 * k)}
	}
	a.post(wrs...)
	a.toState(verbs.QPStateErr)
	sends, recvs := splitWCs(e.waitWCs(a.cq, 12, "A's flushed WRs"), func(id uint64) bool { return id >= 951 })
	if len(sends) != 8 || len(recvs) != 4 {
		t.Fatalf("flushed %d sends and %d receives, want 8 and 4: %s %s", len(sends), len(recvs), fmtWCs(sends), fmtWCs(recvs))
	}
	for k, wc := range sends {
		wantFlushed(t, wc, uint64(901+k), a.qp.QPN())
	}
	for k, wc := range recvs {
		wantFlushed(t, wc, uint64(951+k), a.qp.QPN())
	}
	e.noWC(a.cq, quiet, "A after its 12 flushes")
	wantState(t, a, verbs.QPStateErr)
	rb.wantOnly(t, "B's memory", 0, nil)
}

// Flush/PostInErr (SEMANTICS.md 9b): sends posted to a QP already in ERR
// are accepted and complete with WR_FLUSH_ERR, signaled or not. A receive
// posted there is accepted; rxe never completes it, the IB spec flushes
// it: either is accepted.
func testFlushPostInErr(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, _ := e.rcPair()
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rb := e.b.newMem(256, verbs.AccessAllRemote)
	a.toState(verbs.QPStateErr)
	a.post(
		verbs.SendWR{ID: 910, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(0, 64), RDMA: rb.rdma(0)},
		verbs.SendWR{ID: 911, Opcode: verbs.OpWrite, SGL: la.sgl(0, 64), RDMA: rb.rdma(64)})
	a.post(verbs.SendWR{ID: 912, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(0, 64)})
	for k, wc := range e.waitWCs(a.cq, 3, "A's sends posted in ERR") {
		wantFlushed(t, wc, uint64(910+k), a.qp.QPN())
	}
	if n, err := a.qp.PostRecv([]verbs.RecvWR{la.recvWR(960, 128, 64)}); n != 1 || err != nil {
		t.Errorf("PostRecv in ERR: posted %d, err %v; want 1, nil", n, err)
	}
	// Bounded wait: the receive may be flushed (IB spec) or never complete
	// (rxe); nothing else may appear.
	deadline := time.Now().Add(quiet)
	buf := make([]verbs.WC, 4)
	var b backoff
	for time.Now().Before(deadline) {
		k, err := a.cq.Poll(buf)
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		for _, wc := range buf[:k] {
			wantFlushed(t, wc, 960, a.qp.QPN())
		}
		b.wait()
	}
	rb.wantOnly(t, "B's memory", 0, nil)
}

// Flush/ErrorMidList (SEMANTICS.md 9c): in 901U 902S 903U(bad rkey) 904S
// 905U 906S 907U 908S, the good prefix executes (902 completes), the bad
// WR reports REM_ACCESS_ERR although unsignaled, and everything after it
// is flushed, unsignaled WRs and the two posted receives included. B's
// memory holds the prefix's writes only.
func testFlushErrorMidList(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := e.rcPair()
	la := e.a.newMem(8192, verbs.AccessLocalWrite)
	rb := e.b.newMem(8192, verbs.AccessAllRemote)
	copy(la.buf, pattern(512, 90))
	a.recv(la.recvWR(971, 4096, 64), la.recvWR(972, 4160, 64))
	wrs := make([]verbs.SendWR, 8)
	for k := range wrs {
		var f verbs.SendFlags
		if k%2 == 1 {
			f = verbs.SendSignaled
		}
		wrs[k] = verbs.SendWR{ID: uint64(901 + k), Opcode: verbs.OpWrite, Flags: f, SGL: la.sgl(64*k, 64), RDMA: rb.rdma(64 * k)}
	}
	wrs[2].RDMA.RKey ^= 0xff
	a.post(wrs...)
	sends, recvs := splitWCs(e.waitWCs(a.cq, 9, "A's completions"), func(id uint64) bool { return id >= 971 })
	if len(sends) != 7 || len(recvs) != 2 {
		t.Fatalf("%d send and %d receive completions, want 7 (902-908) and 2: %s %s",
			len(sends), len(recvs), fmtWCs(sends), fmtWCs(recvs))
	}
	wantOK(t, sends[0], 902, verbs.WCRDMAWrite, a.qp.QPN())
	wantErrWC(t, sends[1], 903, a.qp.QPN(), verbs.WCRemAccessErr)
	for k, wc := range sends[2:] {
		wantFlushed(t, wc, uint64(904+k), a.qp.QPN())
	}
	for k, wc := range recvs {
		wantFlushed(t, wc, uint64(971+k), a.qp.QPN())
	}
	e.noWC(a.cq, quiet, "A after 9 completions")
	e.waitState(a, verbs.QPStateErr)
	e.waitState(b, verbs.QPStateErr)
	rb.wantOnly(t, "B's memory (901 and 902 only)", 0, la.buf[:128])
}
