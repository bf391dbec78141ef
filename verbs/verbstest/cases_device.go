package verbstest

import (
	"errors"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// Device/Query: what a context reports about its device, port and GID.
func testDeviceQuery(t *testing.T, s *suite) {
	e := s.newEnv(t)
	for _, sd := range []*side{e.a, e.b} {
		dev := sd.ctx.Device()
		if dev == nil || dev.Name() == "" {
			t.Errorf("%s: Context.Device() = %v, want the device it was opened on", sd.name, dev)
		}
		da := sd.devAttr
		for _, l := range []struct {
			name string
			v    int
		}{
			{"max_qp", da.MaxQP}, {"max_qp_wr", da.MaxQPWR}, {"max_sge", da.MaxSGE},
			{"max_cq", da.MaxCQ}, {"max_cqe", da.MaxCQE}, {"max_mr", da.MaxMR},
			{"max_pd", da.MaxPD}, {"max_qp_rd_atom", da.MaxQPRdAtom},
			{"max_qp_init_rd_atom", da.MaxQPInitRdAtom}, {"phys_port_cnt", da.PhysPortCnt},
		} {
			if l.v <= 0 {
				t.Errorf("%s: QueryDevice %s = %d, want > 0", sd.name, l.name, l.v)
			}
		}
		if da.MaxMRSize == 0 {
			t.Errorf("%s: QueryDevice max_mr_size = 0", sd.name)
		}
		if int(sd.port) > da.PhysPortCnt {
			t.Errorf("%s: port %d used but phys_port_cnt = %d", sd.name, sd.port, da.PhysPortCnt)
		}
		pa := sd.portAttr
		if pa.State != verbs.PortActive {
			t.Errorf("%s: port %d state %v, want PORT_ACTIVE", sd.name, sd.port, pa.State)
		}
		if pa.ActiveMTU.Bytes() == 0 || pa.MaxMTU.Bytes() == 0 || pa.ActiveMTU > pa.MaxMTU {
			t.Errorf("%s: port %d active_mtu %v max_mtu %v", sd.name, sd.port, pa.ActiveMTU, pa.MaxMTU)
		}
		if pa.GIDTblLen <= 0 || pa.MaxMsgSz == 0 || pa.PKeyTblLen <= 0 {
			t.Errorf("%s: port %d gid_tbl_len %d max_msg_sz %d pkey_tbl_len %d, want > 0",
				sd.name, sd.port, pa.GIDTblLen, pa.MaxMsgSz, pa.PKeyTblLen)
		}
		if sd.gid.IsZero() {
			t.Errorf("%s: GID %d of port %d is zero", sd.name, sd.gidIndex, sd.port)
		}
		if g, err := sd.ctx.QueryGID(sd.port, sd.gidIndex); err != nil || g != sd.gid {
			t.Errorf("%s: QueryGID(%d, %d) again = %v, %v; want %v", sd.name, sd.port, sd.gidIndex, g, err, sd.gid)
		}
		t.Logf("%s: %s port %d %v active_mtu %v gid[%d] %v", sd.name, dev.Name(), sd.port,
			pa.LinkLayer, pa.ActiveMTU, sd.gidIndex, sd.gid)
		// The contract: ErrNotFound for an unknown port or GID index.
		bad := uint8(da.PhysPortCnt + 1)
		if _, err := sd.ctx.QueryPort(bad); !errors.Is(err, verbs.ErrNotFound) {
			t.Errorf("%s: QueryPort(%d) of a device with %d ports: err %v, want verbs.ErrNotFound",
				sd.name, bad, da.PhysPortCnt, err)
		}
		if _, err := sd.ctx.QueryGID(sd.port, pa.GIDTblLen); !errors.Is(err, verbs.ErrNotFound) {
			t.Errorf("%s: QueryGID(%d, %d) of a table of %d: err %v, want verbs.ErrNotFound",
				sd.name, sd.port, pa.GIDTblLen, pa.GIDTblLen, err)
		}
	}
}

// Device/CapsGranted: a device may grant more than asked (rxe rounds queues
// up to 2^n-1, SEMANTICS.md 8a, 10a, 11a) but never less.
func testDeviceCapsGranted(t *testing.T, s *suite) {
	e := s.newEnv(t)
	for _, typ := range []verbs.QPType{verbs.QPTypeRC, verbs.QPTypeUC, verbs.QPTypeUD} {
		want := verbs.QPCaps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2}
		ep := e.a.newQP(qpOpt{typ: typ, caps: want})
		if ep.qp.Type() != typ {
			t.Errorf("%v: Type() = %v", ep, ep.qp.Type())
		}
		if ep.qp.QPN() <= 1 || ep.qp.QPN() > 0xffffff {
			t.Errorf("%v: QPN %#x is not a valid QP number for a %s QP", ep, ep.qp.QPN(), typ)
		}
		got := ep.caps()
		if got.MaxSendWR < want.MaxSendWR || got.MaxRecvWR < want.MaxRecvWR ||
			got.MaxSendSGE < want.MaxSendSGE || got.MaxRecvSGE < want.MaxRecvSGE || got.MaxInlineData < 0 {
			t.Errorf("%v: granted caps %+v, asked %+v", ep, got, want)
		}
		if st := ep.state(); st != verbs.QPStateReset {
			t.Errorf("%v: a new QP is %v, want RESET", ep, st)
		}
	}
	a1, a2 := e.a.newQP(qpOpt{typ: verbs.QPTypeRC}), e.a.newQP(qpOpt{typ: verbs.QPTypeRC})
	if a1.qp.QPN() == a2.qp.QPN() {
		t.Errorf("two QPs share QPN %#x", a1.qp.QPN())
	}
	for _, n := range []int{1, 4, 100} {
		cq := e.a.newCQ(n, nil)
		if cq.CQE() < n {
			t.Errorf("CreateCQ(%d): CQE() = %d", n, cq.CQE())
		}
		wcs := make([]verbs.WC, 4)
		if k, err := cq.Poll(wcs); k != 0 || err != nil {
			t.Errorf("Poll of a new CQ: %d, %v; want 0, nil", k, err)
		}
	}
}

// Device/MRRegistration: an MR describes the memory it was given; remote
// write without local write is refused, as ib_check_mr_access refuses it.
func testDeviceMRRegistration(t *testing.T, s *suite) {
	e := s.newEnv(t)
	m := e.a.newMem(4096, verbs.AccessAllRemote)
	if m.mr.Len() != 4096 || m.mr.Access() != verbs.AccessAllRemote {
		t.Errorf("MR Len %d Access %v, want 4096 %v", m.mr.Len(), m.mr.Access(), verbs.AccessAllRemote)
	}
	if b := m.mr.Bytes(); len(b) != 4096 || unsafe.SliceData(b) != unsafe.SliceData(m.buf) {
		t.Errorf("MR Bytes() is not the registered memory (len %d)", len(b))
	}
	if m.mr.Addr() == 0 {
		t.Errorf("MR Addr() = 0")
	}
	m2 := e.a.newMem(64, verbs.AccessLocalWrite)
	if m2.mr.LKey() == m.mr.LKey() {
		t.Errorf("two MRs share lkey %#x", m.mr.LKey())
	}
	ar, err := verbs.NewArena(4096)
	if err != nil {
		t.Fatal(err)
	}
	own(t, "arena", ar)
	for _, acc := range []verbs.Access{verbs.AccessRemoteWrite, verbs.AccessRemoteAtomic} {
		mr, err := e.a.pd.RegMR(ar.Bytes(), acc)
		if err == nil {
			mr.Close()
			t.Errorf("RegMR(%v) without LOCAL_WRITE succeeded, want EINVAL", acc)
		} else if !errors.Is(err, verbs.ErrInvalidArgument) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("RegMR(%v) without LOCAL_WRITE: %v, want verbs.ErrInvalidArgument (EINVAL)", acc, err)
		}
	}
}

// goGlobal is Go memory outside the heap: a package-level array.
var goGlobal [4096]byte

// Device/RegMRRefusesGoMemory: memory the Go runtime owns, from the heap
// or a package-level variable, is refused with verbs.ErrGoMemory (and
// ErrInvalidArgument, EINVAL) on every provider, whatever the access; the
// kernel would pin it and accept it.
func testDeviceRegMRRefusesGoMemory(t *testing.T, s *suite) {
	e := s.newEnv(t)
	heap := make([]byte, 4096)
	for _, tc := range []struct {
		what string
		buf  []byte
	}{{"make([]byte, 4096)", heap}, {"a package-level [4096]byte", goGlobal[:]}} {
		for _, acc := range []verbs.Access{verbs.AccessLocalWrite, verbs.AccessAllRemote, 0} {
			mr, err := e.a.pd.RegMR(tc.buf, acc)
			if err == nil {
				mr.Close()
				t.Errorf("RegMR(%s, %v) succeeded, want verbs.ErrGoMemory", tc.what, acc)
			} else if !errors.Is(err, verbs.ErrGoMemory) || !errors.Is(err, verbs.ErrInvalidArgument) ||
				!errors.Is(err, syscall.EINVAL) {
				t.Errorf("RegMR(%s, %v): %v, want verbs.ErrGoMemory (ErrInvalidArgument, EINVAL)", tc.what, acc, err)
			}
		}
	}
	runtime.KeepAlive(heap)
}

// QPState/PostSendBeforeRTS (SEMANTICS.md 1a-1c): a send posted in RESET,
// INIT or RTR is refused with nothing posted. What becomes of it later is
// not asserted: rxe kept such WRs and ran them after RTS (1d), which a
// provider should not copy; the case never takes the QP to RTS.
func testQPStatePostSendBeforeRTS(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := e.a.newQP(qpOpt{typ: verbs.QPTypeRC}), e.b.newQP(qpOpt{typ: verbs.QPTypeRC})
	la := e.a.newMem(64, verbs.AccessLocalWrite)
	rb := e.b.newMem(64, verbs.AccessAllRemote)
	wr := verbs.SendWR{ID: 101, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(0, 64), RDMA: rb.rdma(0)}
	try := func(st string) {
		t.Helper()
		n, err := a.qp.PostSend([]verbs.SendWR{wr})
		wantStateErr(t, "PostSend in "+st, n, err)
		wr.ID++
	}
	try("RESET")
	a.toInit()
	try("INIT")
	b.toInit()
	a.toRTR(b, e.mtu, defaultLink)
	try("RTR")
	wantState(t, a, verbs.QPStateRTR)
}

// QPState/PostRecvResetAndInit (SEMANTICS.md 1a, 1b): receives are refused
// in RESET and accepted from INIT on.
func testQPStatePostRecv(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a := e.a.newQP(qpOpt{typ: verbs.QPTypeRC})
	m := e.a.newMem(256, verbs.AccessLocalWrite)
	n, err := a.qp.PostRecv([]verbs.RecvWR{m.recvWR(1, 0, 64)})
	wantStateErr(t, "PostRecv in RESET", n, err)
	a.toInit()
	if n, err := a.qp.PostRecv([]verbs.RecvWR{m.recvWR(2, 0, 64), m.recvWR(3, 64, 64)}); n != 2 || err != nil {
		t.Errorf("PostRecv of 2 WRs in INIT: posted %d, err %v; want 2, nil", n, err)
	}
	e.emptyNow(a.cq, "A's CQ")
}

// QPState/MissingAttribute: a transition without an attribute the kernel
// requires (ib_modify_qp_is_ok) is refused with EINVAL and changes nothing.
func testQPStateMissingAttribute(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := e.a.newQP(qpOpt{typ: verbs.QPTypeRC}), e.b.newQP(qpOpt{typ: verbs.QPTypeRC})
	refused := func(what string, attr *verbs.QPAttr, mask verbs.QPAttrMask, st verbs.QPState) {
		t.Helper()
		err := a.qp.Modify(attr, mask)
		if !errors.Is(err, verbs.ErrInvalidArgument) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s (mask %v): err %v, want verbs.ErrInvalidArgument (EINVAL)", what, mask, err)
		}
		wantState(t, a, st)
	}
	attr, mask := initAttr(verbs.QPTypeRC, e.a.port)
	refused("RESET->INIT without ACCESS_FLAGS", attr, mask&^verbs.QPAttrAccessFlags, verbs.QPStateReset)
	refused("RESET->INIT without PORT", attr, mask&^verbs.QPAttrPort, verbs.QPStateReset)
	a.toInit()
	b.toInit()
	attr, mask = rtrAttr(verbs.QPTypeRC, a.pathTo(b, e.mtu), defaultLink, 1)
	refused("INIT->RTR without DEST_QPN", attr, mask&^verbs.QPAttrDestQPN, verbs.QPStateInit)
	refused("INIT->RTR without AV", attr, mask&^verbs.QPAttrAV, verbs.QPStateInit)
	refused("INIT->RTR without MIN_RNR_TIMER", attr, mask&^verbs.QPAttrMinRNRTimer, verbs.QPStateInit)
	a.toRTR(b, e.mtu, defaultLink)
	attr, mask = rtsAttr(verbs.QPTypeRC, a.psn, defaultLink, 1)
	refused("RTR->RTS without SQ_PSN", attr, mask&^verbs.QPAttrSQPSN, verbs.QPStateRTR)
	refused("RTR->RTS without RETRY_CNT", attr, mask&^verbs.QPAttrRetryCnt, verbs.QPStateRTR)
	a.toRTS(defaultLink)
	wantState(t, a, verbs.QPStateRTS)
}

// QPState/ExtraAttribute: an attribute a transition does not take is
// refused too (EINVAL), as the kernel refuses it.
func testQPStateExtraAttribute(t *testing.T, s *suite) {
	e := s.newEnv(t)
	rc, ud := e.a.newQP(qpOpt{typ: verbs.QPTypeRC}), e.a.newQP(qpOpt{typ: verbs.QPTypeUD})
	for _, c := range []struct {
		ep    *endpoint
		extra verbs.QPAttrMask
	}{
		{rc, verbs.QPAttrQKey},        // Q_Key is for UD
		{ud, verbs.QPAttrAccessFlags}, // access flags are for connected QPs
		{rc, verbs.QPAttrSQPSN},       // SQ PSN belongs to RTR->RTS
	} {
		attr, mask := initAttr(c.ep.typ, e.a.port)
		attr.QKey = udQKey
		err := c.ep.qp.Modify(attr, mask|c.extra)
		if !errors.Is(err, verbs.ErrInvalidArgument) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%v: RESET->INIT with %v: err %v, want verbs.ErrInvalidArgument (EINVAL)", c.ep, c.extra, err)
		}
		wantState(t, c.ep, verbs.QPStateReset)
	}
}

// QPState/IllegalTransition: a transition the state machine lacks is
// refused with ErrQPState and changes nothing.
func testQPStateIllegalTransition(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := e.a.newQP(qpOpt{typ: verbs.QPTypeRC}), e.b.newQP(qpOpt{typ: verbs.QPTypeRC})
	illegal := func(what string, attr *verbs.QPAttr, mask verbs.QPAttrMask, st verbs.QPState) {
		t.Helper()
		if err := a.qp.Modify(attr, mask); !errors.Is(err, verbs.ErrQPState) {
			t.Errorf("%s: err %v, want verbs.ErrQPState", what, err)
		}
		wantState(t, a, st)
	}
	attr, mask := rtrAttr(verbs.QPTypeRC, a.pathTo(b, e.mtu), defaultLink, 1)
	illegal("RESET->RTR", attr, mask, verbs.QPStateReset)
	attr, mask = rtsAttr(verbs.QPTypeRC, a.psn, defaultLink, 1)
	illegal("RESET->RTS", attr, mask, verbs.QPStateReset)
	a.toInit()
	illegal("INIT->RTS", attr, mask, verbs.QPStateInit)
	illegal("INIT->SQD", &verbs.QPAttr{State: verbs.QPStateSQD}, verbs.QPAttrState, verbs.QPStateInit)
	b.toInit()
	a.toRTR(b, e.mtu, defaultLink)
	attr, mask = initAttr(verbs.QPTypeRC, e.a.port)
	illegal("RTR->INIT", attr, mask, verbs.QPStateRTR)
}

// QPState/QueryReportsState: Query follows the QP through its states and
// reports the attributes it was given.
func testQPStateQuery(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := e.a.newQP(qpOpt{typ: verbs.QPTypeRC}), e.b.newQP(qpOpt{typ: verbs.QPTypeRC})
	l := link{Timeout: 15, RetryCnt: 6, RNRRetry: 5, MinRNRTimer: 11}
	wantState(t, a, verbs.QPStateReset)
	a.toInit()
	wantState(t, a, verbs.QPStateInit)
	b.toInit()
	a.toRTR(b, e.mtu, l)
	wantState(t, a, verbs.QPStateRTR)
	a.toRTS(l)
	got, err := a.qp.Query()
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	if got.State != verbs.QPStateRTS || got.DestQPN != b.qp.QPN() || got.PathMTU != e.mtu ||
		got.Timeout != l.Timeout || got.RetryCnt != l.RetryCnt || got.RNRRetry != l.RNRRetry ||
		got.MinRNRTimer != l.MinRNRTimer || got.SQPSN != a.psn || got.RQPSN != b.psn || got.PortNum != e.a.port {
		t.Errorf("Query in RTS = %v (sq_psn %#x rq_psn %#x port %d min_rnr %d); want state RTS dest_qpn %#x mtu %v "+
			"timeout %d retry %d rnr_retry %d min_rnr %d sq_psn %#x rq_psn %#x port %d", &got, got.SQPSN, got.RQPSN,
			got.PortNum, got.MinRNRTimer, b.qp.QPN(), e.mtu, l.Timeout, l.RetryCnt, l.RNRRetry, l.MinRNRTimer,
			a.psn, b.psn, e.a.port)
	}
	a.toState(verbs.QPStateErr)
	wantState(t, a, verbs.QPStateErr)
	a.toState(verbs.QPStateReset)
	wantState(t, a, verbs.QPStateReset)
	a.toInit() // a QP taken back to RESET starts over
	wantState(t, a, verbs.QPStateInit)

	u := e.a.newQP(qpOpt{typ: verbs.QPTypeUD})
	u.toInit()
	if got, err := u.qp.Query(); err != nil || got.State != verbs.QPStateInit || got.QKey != udQKey {
		t.Errorf("UD Query in INIT = %v qkey %#x, %v; want INIT qkey %#x", &got, got.QKey, err, udQKey)
	}
}

// QPState/RecoverFromErr: a QP in ERR goes back to RESET and, connected
// again (new PSNs), carries traffic.
func testQPStateRecover(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b := e.rcPair()
	la := e.a.newMem(128, verbs.AccessLocalWrite)
	rb := e.b.newMem(128, verbs.AccessAllRemote)
	copy(la.buf, pattern(128, 13))
	for _, ep := range []*endpoint{a, b} {
		ep.toState(verbs.QPStateErr)
		ep.toState(verbs.QPStateReset)
		wantState(t, ep, verbs.QPStateReset)
		ep.psn = (ep.psn + 0x1000) & 0xffffff
	}
	e.connect(a, b, defaultLink, defaultLink)
	a.post(verbs.SendWR{ID: 13, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: la.sgl(0, 128), RDMA: rb.rdma(0)})
	wantOK(t, e.waitWC(a.cq, "A's WRITE after the reconnect"), 13, verbs.WCRDMAWrite, a.qp.QPN())
	rb.wantOnly(t, "B's memory", 0, la.buf)
}
