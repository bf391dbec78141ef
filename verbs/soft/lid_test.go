package soft_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// ibFabric is two InfiniBand devices of two ports each, on one subnet:
// soft0 ports 1 and 2 have LIDs 1 and 2, soft1's LIDs 3 and 4.
func ibFabric(t *testing.T) *soft.Provider {
	t.Helper()
	ib := func(lid uint16) soft.PortModel {
		return soft.PortModel{LinkLayer: verbs.LinkLayerInfiniBand, LID: lid,
			GIDs: []verbs.GIDEntry{{GID: verbs.GID{0xfe, 0x80, 15: byte(lid)}, Type: verbs.GIDTypeIB},
				{GID: verbs.GID{0xfe, 0x80, 14: 1, 15: byte(lid)}, Type: verbs.GIDTypeIB}}}
	}
	p := soft.New(soft.Config{Models: []soft.DeviceModel{
		{Ports: []soft.PortModel{ib(1), ib(2)}},
		{Ports: []soft.PortModel{ib(3), ib(4)}},
	}})
	t.Cleanup(func() { p.Close() })
	return p
}

// ibPair opens a side on each device of ibFabric, on port 2, and connects
// a to b by the LID dlid (b's port 2 is LID 4) and b to a by LID 2.
func ibPair(t *testing.T, dlid uint16) (a, b *side) {
	t.Helper()
	devs, _ := ibFabric(t).Devices()
	o := pairOpts{typ: verbs.QPTypeRC, sendWR: 16, cqe: 64}
	a, b = newSide(t, devs[0], o), newSide(t, devs[1], o)
	for _, c := range []struct {
		s, peer *side
		lid     uint16
	}{{a, b, dlid}, {b, a, 2}} {
		spec := verbs.ConnectSpec{Port: 2, ByLID: true, Explicit: true, Timeout: 1, RetryCnt: 1}
		if err := verbs.Connect(c.s.qp, spec, verbs.PeerInfo{QPN: c.peer.qp.QPN(), LID: c.lid}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// TestLIDRouting connects an RC pair on InfiniBand ports by LID alone (no
// GRH): a WRITE and a SEND arrive, and the receive completion carries no
// GRH and the sender's LID, as on an InfiniBand HCA.
func TestLIDRouting(t *testing.T) {
	a, b := ibPair(t, 4)
	attr, err := a.qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	if attr.AH.IsGlobal || attr.AH.DLID != 4 || attr.AH.PortNum != 2 {
		t.Fatalf("address vector %+v, want is_global 0, DLID 4, port 2", attr.AH)
	}
	copy(a.mr.Bytes(), "by LID alone")
	if _, err := b.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: sge(b.mr, 100, 64)}}); err != nil {
		t.Fatal(err)
	}
	mustPost(t, a.qp, write(2, a, b, 0, 12),
		verbs.SendWR{ID: 3, Opcode: verbs.OpSend, SGL: sge(a.mr, 0, 2), Flags: verbs.SendSignaled})
	for _, wc := range pollN(t, a.cq, 2) {
		if wc.Status != verbs.WCSuccess {
			t.Fatalf("send completion %+v", wc)
		}
	}
	wc := pollN(t, b.cq, 1)[0]
	if wc.Status != verbs.WCSuccess || wc.ByteLen != 2 || wc.Flags&verbs.WCFlagGRH != 0 || wc.SLID != 2 {
		t.Fatalf("receive completion %+v, want success, 2 bytes, no GRH, SLID 2", wc)
	}
	if got := string(b.mr.Bytes()[:12]); got != "by LID alone" {
		t.Errorf("WRITE landed %q", got)
	}
}

// TestLIDUnknownRetryExceeded: a DLID no port of the fabric has, and the
// LID of a port the peer QP is not on, are paths no packet comes back
// from: the RC send retries and fails with RETRY_EXC_ERR, as for a GID no
// device has, and the QP goes to ERR.
func TestLIDUnknownRetryExceeded(t *testing.T) {
	for _, dlid := range []uint16{99, 3} {
		a, b := ibPair(t, dlid)
		mustPost(t, a.qp, write(1, a, b, 0, 8))
		if wc := pollN(t, a.cq, 1)[0]; wc.Status != verbs.WCRetryExcErr {
			t.Errorf("DLID %d: %+v, want RETRY_EXC_ERR", dlid, wc)
		}
		if s := qpState(t, a.qp); s != verbs.QPStateErr {
			t.Errorf("DLID %d: the QP in %s, want ERR", dlid, s)
		}
	}
}

// TestLIDOnRoCERefused: a RoCE port has no LIDs, so an address vector
// without a GRH is refused there, by Modify and by CreateAH.
func TestLIDOnRoCERefused(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	qp, err := a.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq,
		Caps: verbs.QPCaps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	err = verbs.Connect(qp, verbs.ConnectSpec{ByLID: true}, verbs.PeerInfo{QPN: b.qp.QPN(), LID: 1})
	if !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("RTR by LID on RoCE: %v, want ErrInvalidArgument", err)
	}
	if _, err := a.pd.CreateAH(verbs.AHAttr{DLID: 1, PortNum: 1}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("CreateAH by LID on RoCE: %v, want ErrInvalidArgument", err)
	}
}

// TestLIDRoutingUD sends a datagram by LID: it reaches the UD QP on the
// port of that LID with no GRH in front (the completion says so), and a
// QP on the other port of the device does not receive it.
func TestLIDRoutingUD(t *testing.T) {
	devs, _ := ibFabric(t).Devices()
	o := pairOpts{typ: verbs.QPTypeUD, sendWR: 4, cqe: 16}
	a, b, other := newSide(t, devs[0], o), newSide(t, devs[1], o), newSide(t, devs[1], o)
	for _, c := range []struct {
		s    *side
		port uint8
	}{{a, 2}, {b, 2}, {other, 1}} {
		if err := verbs.Connect(c.s.qp, verbs.ConnectSpec{Port: c.port, QKey: 7}, verbs.PeerInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []*side{b, other} {
		if _, err := r.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: sge(r.mr, 0, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	ah, err := a.pd.CreateAH(verbs.AHAttr{DLID: 4, PortNum: 2})
	if err != nil {
		t.Fatal(err)
	}
	copy(a.mr.Bytes(), "datagram")
	for _, qpn := range []uint32{b.qp.QPN(), other.qp.QPN()} {
		mustPost(t, a.qp, verbs.SendWR{ID: uint64(qpn), Opcode: verbs.OpSend, SGL: sge(a.mr, 0, 8), Flags: verbs.SendSignaled,
			UD: verbs.UD{AH: ah, RemoteQPN: qpn, RemoteQKey: 7}})
	}
	for _, wc := range pollN(t, a.cq, 2) {
		if wc.Status != verbs.WCSuccess {
			t.Fatalf("send completion %+v", wc)
		}
	}
	wc := pollN(t, b.cq, 1)[0]
	if wc.Status != verbs.WCSuccess || wc.ByteLen != 40+8 || wc.Flags&verbs.WCFlagGRH != 0 || wc.SLID != 2 {
		t.Fatalf("receive completion %+v, want 48 bytes, no GRH, SLID 2", wc)
	}
	if got := string(b.mr.Bytes()[40:48]); got != "datagram" {
		t.Errorf("received %q after the 40 bytes of the GRH's place", got)
	}
	// The datagram to the QP on port 1 went to port 2's LID: dropped.
	var buf [1]verbs.WC
	if n, _ := other.cq.Poll(buf[:]); n != 0 {
		t.Errorf("the QP on port 1 received %+v by port 2's LID", buf[0])
	}
}

// TestLIDRouted: InfiniBand within one subnet prefix goes by LID; another
// subnet, and RoCE always, by the global route.
func TestLIDRouted(t *testing.T) {
	sub := func(prefix byte, id byte) verbs.GID { return verbs.GID{0xfe, 0x80, 7: prefix, 15: id} }
	v4 := verbs.GIDFromAddr(netip.MustParseAddr("192.0.2.1"))
	for _, c := range []struct {
		ll         verbs.LinkLayer
		sgid, dgid verbs.GID
		want       bool
	}{
		{verbs.LinkLayerInfiniBand, sub(0, 1), sub(0, 2), true},
		{verbs.LinkLayerInfiniBand, sub(0, 1), sub(1, 2), false},
		{verbs.LinkLayerEthernet, sub(0, 1), sub(0, 2), false},
		{verbs.LinkLayerEthernet, v4, v4, false},
		{verbs.LinkLayerUnspecified, sub(0, 1), sub(0, 2), false},
	} {
		if got := verbs.LIDRouted(c.ll, c.sgid, c.dgid); got != c.want {
			t.Errorf("LIDRouted(%s, %s, %s) = %v, want %v", c.ll, c.sgid, c.dgid, got, c.want)
		}
	}
}

// TestModelRdAtomic: a model's read/atomic depths are what the device
// reports, and a QP asking more of either is refused with EINVAL.
func TestModelRdAtomic(t *testing.T) {
	p := soft.New(soft.Config{Models: []soft.DeviceModel{{MaxQPRdAtom: 4, MaxQPInitRdAtom: 8}, {}}})
	t.Cleanup(func() { p.Close() })
	devs, _ := p.Devices()
	o := pairOpts{typ: verbs.QPTypeRC, sendWR: 4, cqe: 16}
	a, b := newSide(t, devs[0], o), newSide(t, devs[1], o)
	da, err := a.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if da.MaxQPRdAtom != 4 || da.MaxQPInitRdAtom != 8 {
		t.Fatalf("max_qp_rd_atom %d, max_qp_init_rd_atom %d; want 4 and 8", da.MaxQPRdAtom, da.MaxQPInitRdAtom)
	}
	peer := verbs.PeerInfo{QPN: b.qp.QPN(), GID: b.gid}
	for _, c := range []struct{ init, dest uint8 }{{8, 5}, {9, 4}} {
		qp, err := a.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq,
			Caps: verbs.QPCaps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		err = verbs.Connect(qp, verbs.ConnectSpec{GIDIndex: 1, MaxRdAtomic: c.init, MaxDestRdAtomic: c.dest}, peer)
		if !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("max_rd_atomic %d, max_dest_rd_atomic %d: %v, want ErrInvalidArgument", c.init, c.dest, err)
		}
		qp.Close()
	}
	if err := verbs.Connect(a.qp, verbs.ConnectSpec{GIDIndex: 1, MaxRdAtomic: 8, MaxDestRdAtomic: 4}, peer); err != nil {
		t.Fatal(err)
	}
	if attr, _ := a.qp.Query(); attr.MaxRdAtomic != 8 || attr.MaxDestRdAtomic != 4 {
		t.Errorf("max_rd_atomic %d, max_dest_rd_atomic %d; want 8 and 4", attr.MaxRdAtomic, attr.MaxDestRdAtomic)
	}
	defer func() {
		if recover() == nil {
			t.Error("MaxQPRdAtom 17 accepted")
		}
	}()
	soft.New(soft.Config{Models: []soft.DeviceModel{{MaxQPRdAtom: 17}}})
}
