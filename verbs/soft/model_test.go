package soft_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

var (
	v4a = netip.MustParseAddr("192.0.2.10")
	v6a = netip.MustParseAddr("2001:db8::10")
	ll  = netip.MustParseAddr("fe80::1")
)

// TestModelTables checks that a device shows the ports, link layers, MTUs,
// LIDs and GID tables its model gives it, through the core verbs and the
// GIDTabler extension, and the default model where none is given.
func TestModelTables(t *testing.T) {
	mlx := append(soft.RoCEPairs("eth1", ll, v4a), verbs.GIDEntry{}, verbs.GIDEntry{})
	mlx = append(mlx, soft.RoCEPairs("eth9", v6a)...)
	var ibGID verbs.GID
	ibGID[0], ibGID[1], ibGID[15] = 0xfe, 0x80, 7
	p := soft.New(soft.Config{Devices: 3, Models: []soft.DeviceModel{
		{PCIAddress: "0000:3b:00.0", Ports: []soft.PortModel{
			{GIDs: mlx, ActiveMTU: 1024},
			{LinkLayer: verbs.LinkLayerInfiniBand, LID: 7, GIDs: []verbs.GIDEntry{{GID: ibGID, Type: verbs.GIDTypeIB}}},
		}},
	}})
	defer p.Close()
	devs, _ := p.Devices()
	if len(devs) != 3 {
		t.Fatalf("%d devices, want 3", len(devs))
	}
	if got := verbs.PCIAddress(devs[0]); got != "0000:3b:00.0" {
		t.Errorf("PCIAddress = %q", got)
	}
	if got := verbs.PCIAddress(devs[1]); got != "" {
		t.Errorf("default model's PCIAddress = %q, want none", got)
	}
	type port struct {
		n       uint8
		ll      verbs.LinkLayer
		mtu     verbs.MTU
		lid     uint16
		tblLen  int
		entries []verbs.GIDEntry
	}
	def := func(i byte) []verbs.GIDEntry {
		c, _ := devs[i].Open()
		defer c.Close()
		g0, _ := c.QueryGID(1, 0)
		return []verbs.GIDEntry{{Index: 0, GID: g0, Type: verbs.GIDTypeRoCEv2},
			{Index: 1, GID: verbs.GIDFromAddr(netip.AddrFrom4([4]byte{10, 77, 0, i + 1})), Type: verbs.GIDTypeRoCEv2}}
	}
	for _, tc := range []struct {
		dev   int
		ports []port
	}{
		{0, []port{
			{1, verbs.LinkLayerEthernet, verbs.MTU1024, 0, 8, []verbs.GIDEntry{
				ge(0, verbs.GIDFromAddr(ll), verbs.GIDTypeRoCEv1, "eth1"), ge(1, verbs.GIDFromAddr(ll), verbs.GIDTypeRoCEv2, "eth1"),
				ge(2, verbs.GIDFromAddr(v4a), verbs.GIDTypeRoCEv1, "eth1"), ge(3, verbs.GIDFromAddr(v4a), verbs.GIDTypeRoCEv2, "eth1"),
				ge(6, verbs.GIDFromAddr(v6a), verbs.GIDTypeRoCEv1, "eth9"), ge(7, verbs.GIDFromAddr(v6a), verbs.GIDTypeRoCEv2, "eth9")}},
			{2, verbs.LinkLayerInfiniBand, verbs.MTU4096, 7, 1, []verbs.GIDEntry{ge(0, ibGID, verbs.GIDTypeIB, "")}},
		}},
		{1, []port{{1, verbs.LinkLayerEthernet, verbs.MTU4096, 0, 2, def(1)}}},
		{2, []port{{1, verbs.LinkLayerEthernet, verbs.MTU4096, 0, 2, def(2)}}},
	} {
		c, err := devs[tc.dev].Open()
		if err != nil {
			t.Fatal(err)
		}
		da, _ := c.QueryDevice()
		if da.PhysPortCnt != len(tc.ports) {
			t.Errorf("dev %d: PhysPortCnt %d, want %d", tc.dev, da.PhysPortCnt, len(tc.ports))
		}
		for _, want := range tc.ports {
			pa, err := c.QueryPort(want.n)
			if err != nil {
				t.Fatalf("dev %d QueryPort(%d): %v", tc.dev, want.n, err)
			}
			if pa.LinkLayer != want.ll || pa.ActiveMTU != want.mtu || pa.LID != want.lid || pa.GIDTblLen != want.tblLen {
				t.Errorf("dev %d port %d: %+v, want link layer %s MTU %s LID %d table %d",
					tc.dev, want.n, pa, want.ll, want.mtu, want.lid, want.tblLen)
			}
			got, typed, err := verbs.QueryGIDTable(c, want.n)
			if err != nil || !typed || !slices.Equal(got, want.entries) {
				t.Errorf("dev %d port %d: QueryGIDTable = %v, %v, %v; want %v", tc.dev, want.n, got, typed, err, want.entries)
			}
			for _, e := range want.entries {
				if g, err := c.QueryGID(want.n, e.Index); err != nil || g != e.GID {
					t.Errorf("dev %d port %d: QueryGID(%d) = %v, %v; want %v", tc.dev, want.n, e.Index, g, err, e.GID)
				}
			}
		}
		bad := uint8(len(tc.ports) + 1)
		if _, err := c.QueryPort(bad); !errors.Is(err, verbs.ErrNotFound) {
			t.Errorf("dev %d: QueryPort(%d): %v, want ErrNotFound", tc.dev, bad, err)
		}
		if _, err := c.(verbs.GIDTabler).QueryGIDTable(bad); !errors.Is(err, verbs.ErrNotFound) {
			t.Errorf("dev %d: QueryGIDTable(%d): %v, want ErrNotFound", tc.dev, bad, err)
		}
		c.Close()
	}
}

// TestModelBadMTU checks that New refuses a port MTU that is not one.
func TestModelBadMTU(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("ActiveMTU 1500 accepted")
		}
	}()
	soft.New(soft.Config{Models: []soft.DeviceModel{{Ports: []soft.PortModel{{ActiveMTU: 1500}}}}})
}

// TestPort2 connects an RC QP pair through port 2 of two-port devices,
// with GIDs that only port 2 has, and carries a WRITE and a SEND over it.
func TestPort2(t *testing.T) {
	model := func(last byte) soft.DeviceModel {
		return soft.DeviceModel{Ports: []soft.PortModel{
			{GIDs: soft.RoCEPairs("eth0", netip.AddrFrom4([4]byte{192, 0, 2, last}))},
			{GIDs: soft.RoCEPairs("eth1", netip.AddrFrom4([4]byte{198, 51, 100, last}))},
		}}
	}
	p := soft.New(soft.Config{Models: []soft.DeviceModel{model(1), model(2)}})
	t.Cleanup(func() { p.Close() })
	devs, _ := p.Devices()
	o := pairOpts{typ: verbs.QPTypeRC, sendWR: 16, cqe: 64, timeout: 10}
	a, b := newSide(t, devs[0], o), newSide(t, devs[1], o)
	for _, s := range []*side{a, b} {
		var err error
		if s.gid, err = s.ctx.QueryGID(2, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, pr := range [][2]*side{{a, b}, {b, a}} {
		spec := verbs.ConnectSpec{Port: 2, GIDIndex: 1}
		if err := verbs.Connect(pr[0].qp, spec, verbs.PeerInfo{QPN: pr[1].qp.QPN(), GID: pr[1].gid}); err != nil {
			t.Fatal(err)
		}
	}
	if attr, _ := a.qp.Query(); attr.PortNum != 2 || attr.AH.PortNum != 2 {
		t.Fatalf("QP port %d, AV port %d; want 2", attr.PortNum, attr.AH.PortNum)
	}
	copy(a.mr.Bytes(), "over port two")
	if _, err := b.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: sge(b.mr, 100, 64)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.qp.PostSend([]verbs.SendWR{
		{ID: 2, Opcode: verbs.OpWrite, SGL: sge(a.mr, 0, 13), RDMA: verbs.RDMA{RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}, Flags: verbs.SendSignaled},
		{ID: 3, Opcode: verbs.OpSend, SGL: sge(a.mr, 0, 4), Flags: verbs.SendSignaled},
	}); err != nil {
		t.Fatal(err)
	}
	for _, wc := range pollN(t, a.cq, 2) {
		if wc.Status != verbs.WCSuccess {
			t.Fatalf("send completion %+v", wc)
		}
	}
	if wc := pollN(t, b.cq, 1)[0]; wc.Status != verbs.WCSuccess || wc.ByteLen != 4 {
		t.Fatalf("receive completion %+v", wc)
	}
	if got := string(b.mr.Bytes()[:13]); got != "over port two" {
		t.Errorf("WRITE landed %q", got)
	}
	if got := string(b.mr.Bytes()[100:104]); got != "over" {
		t.Errorf("SEND landed %q", got)
	}
	// Port 3 does not exist: the QP cannot be moved there.
	qp, _ := a.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq,
		Caps: verbs.QPCaps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	defer qp.Close()
	if err := verbs.Init(qp, verbs.ConnectSpec{Port: 3}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("INIT on port 3: %v, want ErrInvalidArgument", err)
	}
}

func ge(i int, g verbs.GID, t verbs.GIDType, netdev string) verbs.GIDEntry {
	return verbs.GIDEntry{Index: i, GID: g, Type: t, Netdev: netdev}
}

// TestPathMTUAbovePeerPort checks that packets larger than the receiving
// port's active MTU are lost, as a NIC drops them: a requester whose path
// MTU is above its peer's port MTU gets RETRY_EXC_ERR for a message of
// more than the peer's MTU, and carries 64 KiB at the peer's MTU.
func TestPathMTUAbovePeerPort(t *testing.T) {
	for _, tc := range []struct {
		pathMTU verbs.MTU
		n       int
		want    verbs.WCStatus
	}{
		{verbs.MTU4096, 4096, verbs.WCRetryExcErr},
		{verbs.MTU4096, 1024, verbs.WCSuccess}, // one packet of 1024 bytes
		{verbs.MTU1024, 64 << 10, verbs.WCSuccess},
	} {
		p := soft.New(soft.Config{Models: []soft.DeviceModel{
			{Ports: []soft.PortModel{{GIDs: soft.RoCEPairs("eth0", netip.MustParseAddr("192.0.2.1"))}}},
			{Ports: []soft.PortModel{{GIDs: soft.RoCEPairs("eth0", netip.MustParseAddr("192.0.2.2")), ActiveMTU: 1024}}},
		}})
		devs, _ := p.Devices()
		o := pairOpts{typ: verbs.QPTypeRC, sendWR: 4, cqe: 16, timeout: 8}
		a, b := newSide(t, devs[0], o), newSide(t, devs[1], o)
		for _, pr := range [][2]*side{{a, b}, {b, a}} {
			spec := verbs.ConnectSpec{GIDIndex: 1, PathMTU: tc.pathMTU, Explicit: true, Timeout: 8}
			if err := verbs.Connect(pr[0].qp, spec, verbs.PeerInfo{QPN: pr[1].qp.QPN(), GID: pr[1].gid}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, SGL: sge(a.mr, 0, tc.n),
			RDMA: verbs.RDMA{RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}, Flags: verbs.SendSignaled}}); err != nil {
			t.Fatal(err)
		}
		if wc := pollN(t, a.cq, 1)[0]; wc.Status != tc.want {
			t.Errorf("path MTU %s, %d bytes to a port of MTU 1024: %s, want %s", tc.pathMTU, tc.n, wc.Status, tc.want)
		}
		a.ctx.Close()
		b.ctx.Close()
		p.Close()
	}
}
