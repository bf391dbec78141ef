package verbstest

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// mustClose closes o and fails the test if that fails.
func mustClose(t *testing.T, o *owned) {
	t.Helper()
	if err := o.Close(); err != nil {
		t.Errorf("closing %s: %v", o.what, err)
	}
}

// Resources/ClosePDWithMRBusy: closing a PD that still has an MR fails
// with ErrBusy (the kernel says EBUSY) and leaves the PD working; once the
// MR is closed the PD closes.
func testResClosePDBusy(t *testing.T, s *suite) {
	e := s.newEnv(t)
	pd, err := e.a.ctx.AllocPD()
	if err != nil {
		t.Fatalf("AllocPD: %v", err)
	}
	pdo := own(t, "the second PD", pd)
	ar, err := verbs.NewArena(4096)
	if err != nil {
		t.Fatal(err)
	}
	own(t, "arena", ar)
	mr, err := pd.RegMR(ar.Bytes()[:2048], verbs.AccessLocalWrite)
	if err != nil {
		t.Fatalf("RegMR: %v", err)
	}
	mro := own(t, "the MR", mr)
	if err := pd.Close(); !errors.Is(err, verbs.ErrBusy) || !errors.Is(err, syscall.EBUSY) {
		t.Errorf("closing a PD with an MR: err %v, want verbs.ErrBusy (EBUSY)", err)
	}
	mr2, err := pd.RegMR(ar.Bytes()[2048:], verbs.AccessLocalWrite)
	if err != nil {
		t.Errorf("RegMR on the PD after its refused Close: %v", err)
	} else if err := mr2.Close(); err != nil {
		t.Errorf("closing the second MR: %v", err)
	}
	mustClose(t, mro)
	mustClose(t, pdo)
}

// Resources/CloseCQInUseBusy: closing a CQ that a QP still uses fails with
// ErrBusy (EBUSY); after the QP is closed the CQ closes.
func testResCloseCQBusy(t *testing.T, s *suite) {
	e := s.newEnv(t)
	cq, err := e.a.ctx.CreateCQ(verbs.CQSpec{CQE: 16})
	if err != nil {
		t.Fatalf("CreateCQ: %v", err)
	}
	cqo := own(t, "the CQ", cq)
	qp, err := e.a.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Caps: defaultCaps})
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	qpo := own(t, "the QP", qp)
	if err := cq.Close(); !errors.Is(err, verbs.ErrBusy) || !errors.Is(err, syscall.EBUSY) {
		t.Errorf("closing a CQ a QP uses: err %v, want verbs.ErrBusy (EBUSY)", err)
	}
	mustClose(t, qpo)
	mustClose(t, cqo)
}

// Resources/UnrelatedClose: closing objects (a QP, its CQ, an MR, a PD,
// another context on the same device) leaves the others working.
func testResUnrelatedClose(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := e.rcPair()
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rb := e.b.newMem(256, verbs.AccessAllRemote)
	rq := e.b.newMem(64, verbs.AccessLocalWrite)
	copy(la.buf, pattern(256, 190))

	ctx2, err := s.devA.Open()
	if err != nil {
		t.Fatalf("second Open of A's device: %v", err)
	}
	ctxo := own(t, "A's second context", ctx2)
	pd2, err := e.a.ctx.AllocPD()
	if err != nil {
		t.Fatalf("AllocPD: %v", err)
	}
	pdo := own(t, "A's second PD", pd2)
	xcq, err := e.a.ctx.CreateCQ(verbs.CQSpec{CQE: 16})
	if err != nil {
		t.Fatalf("CreateCQ: %v", err)
	}
	cqo := own(t, "A's extra CQ", xcq)
	xqp, err := e.a.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: xcq, RecvCQ: xcq, Caps: defaultCaps})
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	qpo := own(t, "A's extra QP", xqp)
	ar, err := verbs.NewArena(4096)
	if err != nil {
		t.Fatal(err)
	}
	own(t, "arena", ar)
	xmr, err := e.a.pd.RegMR(ar.Bytes(), verbs.AccessAllRemote)
	if err != nil {
		t.Fatalf("RegMR: %v", err)
	}
	mro := own(t, "A's extra MR", xmr)

	a.post(verbs.SendWR{ID: 190, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(0, 64), RDMA: rb.rdma(0)})
	wantOK(t, e.waitWC(a.cq, "A's WRITE before the closes"), 190, verbs.WCRDMAWrite, a.qp.QPN())
	for _, o := range []*owned{qpo, cqo, mro, pdo, ctxo} {
		mustClose(t, o)
	}
	a.post(verbs.SendWR{ID: 191, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(64, 64), RDMA: rb.rdma(64)})
	wantOK(t, e.waitWC(a.cq, "A's WRITE after the closes"), 191, verbs.WCRDMAWrite, a.qp.QPN())
	b.recv(rq.recvWR(0x1b0, 0, 64))
	a.post(verbs.SendWR{ID: 192, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(128, 32)})
	wantOK(t, e.waitWC(a.cq, "A's SEND after the closes"), 192, verbs.WCSend, a.qp.QPN())
	wantRecv(t, e.waitWC(b.cq, "B's RECV"), 0x1b0, verbs.WCRecv, b.qp.QPN(), 32, false, 0)
	rb.wantOnly(t, "B's memory", 0, la.buf[:128])
	rq.wantOnly(t, "B's receive buffer", 0, la.buf[128:160])
}

// Resources/ReverseClose: every kind of object, created on a fresh
// context, closes without error in the reverse order of creation.
func testResReverseClose(t *testing.T, s *suite) {
	ctx, err := s.devA.Open()
	if err != nil {
		t.Fatalf("Open(%s): %v", s.devA.Name(), err)
	}
	var stack []*owned
	push := func(what string, c closer) { stack = append(stack, own(t, what, c)) }
	push("context", ctx)
	pa, err := ctx.QueryPort(s.cfg.Port)
	if err != nil {
		t.Fatalf("QueryPort: %v", err)
	}
	gidIndex, gid, err := pickGID(s.cfg.GIDIndex, pa.GIDTblLen,
		func(i int) (verbs.GID, error) { return ctx.QueryGID(s.cfg.Port, i) })
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatalf("AllocPD: %v", err)
	}
	push("PD", pd)
	ch, err := ctx.CreateCompChannel()
	if err != nil {
		t.Fatalf("CreateCompChannel: %v", err)
	}
	push("completion channel", ch)
	cq, err := ctx.CreateCQ(verbs.CQSpec{CQE: 16, Channel: ch})
	if err != nil {
		t.Fatalf("CreateCQ: %v", err)
	}
	push("CQ", cq)
	ar, err := verbs.NewArena(4096)
	if err != nil {
		t.Fatal(err)
	}
	push("arena", ar)
	mr, err := pd.RegMR(ar.Bytes(), verbs.AccessAllRemote)
	if err != nil {
		t.Fatalf("RegMR: %v", err)
	}
	push("MR", mr)
	srq, err := pd.CreateSRQ(verbs.SRQSpec{MaxWR: 8, MaxSGE: 1})
	switch {
	case errors.Is(err, verbs.ErrNotSupported):
		t.Logf("no SRQ: %v", err)
		srq = nil
	case err != nil:
		t.Fatalf("CreateSRQ: %v", err)
	default:
		push("SRQ", srq)
	}
	caps := verbs.QPCaps{MaxSendWR: 8, MaxSendSGE: 1}
	if srq == nil {
		caps.MaxRecvWR, caps.MaxRecvSGE = 8, 1
	}
	qp, err := pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq, Caps: caps})
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	push("QP", qp)
	ah, err := pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: s.cfg.Port, DLID: pa.LID,
		GRH: verbs.GlobalRoute{DGID: gid, SGIDIndex: uint8(gidIndex), HopLimit: 64}})
	if err != nil {
		t.Fatalf("CreateAH: %v", err)
	}
	push("AH", ah)
	for i := len(stack) - 1; i >= 0; i-- {
		mustClose(t, stack[i])
	}
}

// Resources/ContextCloseEndsAsyncEvents: closing a context closes its
// AsyncEvents channel with no AsyncErr (the end was asked for, nothing was
// lost), and the closed context refuses new objects with ErrClosed.
func testResContextClose(t *testing.T, s *suite) {
	ctx, err := s.devA.Open()
	if err != nil {
		t.Fatalf("Open(%s): %v", s.devA.Name(), err)
	}
	o := own(t, "context", ctx)
	evs := ctx.AsyncEvents()
	mustClose(t, o)
	timer := time.NewTimer(s.cfg.Timeout)
	defer timer.Stop()
	for open := true; open; {
		select {
		case _, open = <-evs:
		case <-timer.C:
			t.Fatalf("AsyncEvents still open %v after Close", s.cfg.Timeout)
		}
	}
	if err := ctx.AsyncErr(); err != nil {
		t.Errorf("AsyncErr after Close: %v, want nil", err)
	}
	if pd, err := ctx.AllocPD(); !errors.Is(err, verbs.ErrClosed) {
		if err == nil {
			pd.Close()
		}
		t.Errorf("AllocPD on a closed context: err %v, want verbs.ErrClosed", err)
	}
}
