package rocev2_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
)

// end is one side of an RC connection built through the verbs API.
type end struct {
	ctx  verbs.Context
	pd   verbs.PD
	cq   verbs.CQ
	qp   verbs.QP
	mem  []byte
	mr   verbs.MR
	port verbs.PortAttr
	gid  verbs.GID
	psn  uint32 // the first send PSN, told to the peer
}

func newEnd(t testing.TB, dev verbs.Device) *end {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	e := &end{psn: verbs.RandomPSN()}
	var err error
	e.ctx, err = dev.Open()
	must(err)
	t.Cleanup(func() { e.ctx.Close() })
	e.port, err = e.ctx.QueryPort(1)
	must(err)
	e.gid, err = e.ctx.QueryGID(1, 0)
	must(err)
	pd, err := e.ctx.AllocPD()
	must(err)
	e.pd = pd
	ar, err := verbs.NewArena(64 << 10)
	must(err)
	t.Cleanup(func() { ar.Close() })
	e.mem = ar.Bytes()
	e.mr, err = pd.RegMR(e.mem, verbs.AccessAllRemote)
	must(err)
	e.cq, err = e.ctx.CreateCQ(verbs.CQSpec{CQE: 64})
	must(err)
	e.qp, err = pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
		Caps: verbs.QPCaps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	must(err)
	return e
}

// connect brings a and b to RTS towards each other as ibv_rc_pingpong
// does, exchanging LID (the UDP port), QPN, PSN and GID.
func connect(t testing.TB, a, b *end) {
	t.Helper()
	const psn = 0xfffff0 // wraps past 2^24
	info := func(e *end) verbs.PeerInfo {
		return verbs.PeerInfo{LID: e.port.LID, QPN: e.qp.QPN(), PSN: psn, GID: e.gid}
	}
	for _, x := range [][2]*end{{a, b}, {b, a}} {
		if err := verbs.Connect(x[0].qp, verbs.ConnectSpec{PSN: psn}, info(x[1])); err != nil {
			t.Fatalf("Connect: %v", err)
		}
	}
}

// poll waits for one completion; the bound is a way out of a broken
// test, not a measurement.
func poll(t *testing.T, cq verbs.CQ) verbs.WC {
	t.Helper()
	wc := make([]verbs.WC, 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("no completion")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestProviderRetransmitsDroppedWrite drops the only packet of an RDMA
// WRITE on its way out of device 0; nothing completes until the local
// ACK timeout passes on the provider's clock, then the retransmission
// lands and the WRITE completes.
func TestProviderRetransmitsDroppedWrite(t *testing.T) {
	clock := rocev2.NewManualClock()
	lo := netip.IPv6Loopback()
	p, err := rocev2.New(rocev2.Config{Addrs: []netip.Addr{lo, lo}, Clock: clock})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer p.Close()
	devs, _ := p.Devices()
	a, b := newEnd(t, devs[0]), newEnd(t, devs[1])
	connect(t, a, b)
	hits := make(chan wire.Packet, 1)
	p.Transport(0).Inject(rocev2.Fault{Action: rocev2.FaultDrop, Hit: func(pk wire.Packet) { hits <- pk },
		Match: func(pk *wire.Packet) bool { return pk.BTH.Opcode == wire.RCWriteOnly }})
	data := []byte("dropped once, then retransmitted")
	copy(a.mem, data)
	if _, err := a.qp.PostSend([]verbs.SendWR{{ID: 7, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL:  []verbs.SGE{{Addr: a.mr.Addr(), Length: uint32(len(data)), LKey: a.mr.LKey()}},
		RDMA: verbs.RDMA{RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hits:
	case <-time.After(10 * time.Second):
		t.Fatal("the WRITE never left")
	}
	if n, _ := a.cq.Poll(make([]verbs.WC, 1)); n != 0 {
		t.Fatal("the WRITE completed before its retransmission")
	}
	timeout := verbs.AckTimeoutDuration(verbs.ConnectSpec{}.WithDefaults(verbs.QPTypeRC).Timeout)
	clock.WaitTimer(timeout)
	clock.Advance(timeout)
	if wc := poll(t, a.cq); wc.WRID != 7 || wc.Status != verbs.WCSuccess {
		t.Fatalf("completion %+v", wc)
	}
	if !bytes.Equal(b.mem[100:100+len(data)], data) {
		t.Fatal("B's memory does not hold the WRITE")
	}
	if st := p.Transport(0).Stats(); st.Faulted != 1 {
		t.Fatalf("stats %+v: want exactly one packet dropped", st)
	}
}

// TestProviderRemoteAccessError writes with an rkey B never gave: A's
// WRITE fails with REM_ACCESS_ERR, B's responder raises
// IBV_EVENT_QP_ACCESS_ERR for its QP, and both QPs end in ERR.
func TestProviderRemoteAccessError(t *testing.T) {
	p := newProvider(t)
	devs, _ := p.Devices()
	a, b := newEnd(t, devs[0]), newEnd(t, devs[1])
	connect(t, a, b)
	if _, err := a.qp.PostSend([]verbs.SendWR{{ID: 8, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL:  []verbs.SGE{{Addr: a.mr.Addr(), Length: 16, LKey: a.mr.LKey()}},
		RDMA: verbs.RDMA{RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() + 1}}}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, a.cq); wc.WRID != 8 || wc.Status != verbs.WCRemAccessErr {
		t.Fatalf("completion %+v, want REM_ACCESS_ERR", wc)
	}
	select {
	case ev := <-b.ctx.AsyncEvents():
		if ev.Type != verbs.EventQPAccessErr || ev.QP != b.qp {
			t.Fatalf("event %v on QP %v, want %v on B's QP", ev.Type, ev.QP, verbs.EventQPAccessErr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no async event on B")
	}
	for name, e := range map[string]*end{"A": a, "B": b} {
		if attr, err := e.qp.Query(); err != nil || attr.State != verbs.QPStateErr {
			t.Errorf("%s's QP is %v (%v), want ERR", name, attr.State, err)
		}
	}
}

// regMore registers another n bytes on e's PD.
func (e *end) regMore(t *testing.T, n int, acc verbs.Access) verbs.MR {
	t.Helper()
	ar, err := verbs.NewArena(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ar.Close() })
	mr, err := e.pd.RegMR(ar.Bytes()[:n], acc)
	if err != nil {
		t.Fatal(err)
	}
	return mr
}

// TestProviderInvalidate checks both ways of invalidating a key: a
// SEND_WITH_INV names one of B's rkeys, which B's receive reports
// (WITH_INV) and which a later WRITE then finds invalid; a LOCAL_INV of
// one of A's own keys completes as LOCAL_INV, and a gather entry through
// that key then fails with LOC_PROT_ERR.
func TestProviderInvalidate(t *testing.T) {
	p := newProvider(t)
	devs, _ := p.Devices()
	a, b := newEnd(t, devs[0]), newEnd(t, devs[1])
	connect(t, a, b)
	victim := b.regMore(t, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	sgl := []verbs.SGE{{Addr: a.mr.Addr(), Length: 16, LKey: a.mr.LKey()}}
	if _, err := b.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: b.mr.Addr(), Length: 64, LKey: b.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.qp.PostSend([]verbs.SendWR{
		{ID: 2, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: sgl, RDMA: verbs.RDMA{RemoteAddr: victim.Addr(), RKey: victim.RKey()}},
		{ID: 3, Opcode: verbs.OpSendInv, Flags: verbs.SendSignaled, SGL: sgl, InvalidateRKey: victim.RKey()},
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{2, 3} {
		if wc := poll(t, a.cq); wc.WRID != id || wc.Status != verbs.WCSuccess {
			t.Fatalf("completion %+v, want %d to succeed", wc, id)
		}
	}
	if wc := poll(t, b.cq); wc.WRID != 1 || wc.Status != verbs.WCSuccess || wc.Flags != verbs.WCFlagWithInv ||
		wc.Imm != victim.RKey() || wc.ByteLen != 16 {
		t.Fatalf("B's receive %+v, want WITH_INV of rkey %#x", wc, victim.RKey())
	}

	mine := a.regMore(t, 4096, verbs.AccessLocalWrite)
	if _, err := a.qp.PostSend([]verbs.SendWR{
		{ID: 4, Opcode: verbs.OpLocalInv, Flags: verbs.SendSignaled, InvalidateRKey: mine.LKey()},
		{ID: 5, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{{Addr: mine.Addr(), Length: 8, LKey: mine.LKey()}},
			RDMA: verbs.RDMA{RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}},
	}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, a.cq); wc.WRID != 4 || wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCLocalInv {
		t.Fatalf("completion %+v, want LOCAL_INV 4 to succeed", wc)
	}
	if wc := poll(t, a.cq); wc.WRID != 5 || wc.Status != verbs.WCLocProtErr {
		t.Fatalf("completion %+v, want 5 to fail with LOC_PROT_ERR", wc)
	}

	// A fresh pair: the WRITE through the rkey B's SEND_WITH_INV
	// invalidated fails remotely.
	a2, b2 := newEnd(t, devs[0]), newEnd(t, devs[1])
	connect(t, a2, b2)
	v2 := b2.regMore(t, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if _, err := b2.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: b2.mr.Addr(), Length: 64, LKey: b2.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	sgl2 := []verbs.SGE{{Addr: a2.mr.Addr(), Length: 16, LKey: a2.mr.LKey()}}
	if _, err := a2.qp.PostSend([]verbs.SendWR{
		{ID: 6, Opcode: verbs.OpSendInv, Flags: verbs.SendSignaled, SGL: sgl2, InvalidateRKey: v2.RKey()},
		{ID: 7, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: sgl2, RDMA: verbs.RDMA{RemoteAddr: v2.Addr(), RKey: v2.RKey()}},
	}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, a2.cq); wc.WRID != 6 || wc.Status != verbs.WCSuccess {
		t.Fatalf("completion %+v, want 6 to succeed", wc)
	}
	if wc := poll(t, a2.cq); wc.WRID != 7 || wc.Status != verbs.WCRemAccessErr {
		t.Fatalf("completion %+v, want 7 to fail with REM_ACCESS_ERR", wc)
	}
}

// TestNumbersAreUnpredictable: QPNs and memory keys are drawn at random,
// so that a third party cannot aim at the next QP or key from the ones
// it saw: they are distinct, valid, and not a counting sequence.
func TestNumbersAreUnpredictable(t *testing.T) {
	p := newProvider(t)
	devs, _ := p.Devices()
	e := newEnd(t, devs[0])
	const n = 32
	qpns, keys := map[uint32]bool{}, map[uint32]bool{}
	qpnSteps, keySteps := map[int64]bool{}, map[int64]bool{}
	var lastQPN, lastKey uint32
	for i := range n {
		qp, err := e.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
			Caps: verbs.QPCaps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer qp.Close()
		mr, err := e.pd.RegMR(e.mem[:4096], verbs.AccessAllRemote)
		if err != nil {
			t.Fatal(err)
		}
		defer mr.Close()
		q, k := qp.QPN(), mr.RKey()
		if q <= 1 || q >= 0xffffff || k == 0 || qpns[q] || keys[k] {
			t.Fatalf("QPN %#x or key %#x reserved or handed out twice", q, k)
		}
		qpns[q], keys[k] = true, true
		if i > 0 {
			qpnSteps[int64(q)-int64(lastQPN)] = true
			keySteps[int64(k)-int64(lastKey)] = true
		}
		lastQPN, lastKey = q, k
	}
	if len(qpnSteps) < n/2 || len(keySteps) < n/2 {
		t.Fatalf("QPNs took %d distinct steps and keys %d in %d draws: predictable", len(qpnSteps), len(keySteps), n-1)
	}
}
