package ibv_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

func TestProvider(t *testing.T) {
	p := ibv.New()
	if p.Name() != "ibv" {
		t.Errorf("Name() = %q, want ibv", p.Name())
	}
	devs, err := p.Devices()
	if err != nil {
		// A host without RDMA support: the error must say so in verbs terms.
		if !errors.Is(err, verbs.ErrNotSupported) {
			t.Errorf("Devices: %v, want an error matching verbs.ErrNotSupported", err)
		}
		t.Skipf("no RDMA device (%v): run through verbs/ibv/rxevm/run", err)
	}
	for _, d := range devs {
		t.Logf("device %s guid %016x", d.Name(), d.GUID())
	}
}

// TestQuery: device, port and GID queries on every device, rxe's facts where
// the device is rxe in the rxevm guest.
func TestQuery(t *testing.T) {
	for _, dev := range devices(t) {
		ctx, err := dev.Open()
		if err != nil {
			t.Fatalf("Open(%s): %v", dev.Name(), err)
		}
		defer ctx.Close()
		if ctx.Device().Name() != dev.Name() {
			t.Errorf("Device().Name() = %q, want %q", ctx.Device().Name(), dev.Name())
		}
		da, err := ctx.QueryDevice()
		if err != nil {
			t.Fatalf("%s: QueryDevice: %v", dev.Name(), err)
		}
		if da.MaxQP <= 0 || da.MaxQPWR <= 0 || da.MaxCQE <= 0 || da.MaxSGE <= 0 || da.PhysPortCnt < 1 {
			t.Errorf("%s: QueryDevice = %+v", dev.Name(), da)
		}
		if da.NodeGUID != dev.GUID() {
			t.Errorf("%s: node_guid %016x, device GUID %016x", dev.Name(), da.NodeGUID, dev.GUID())
		}
		pa, err := ctx.QueryPort(port)
		if err != nil {
			t.Fatalf("%s: QueryPort: %v", dev.Name(), err)
		}
		if pa.State != verbs.PortActive || pa.GIDTblLen <= 0 || pa.ActiveMTU.Bytes() == 0 {
			t.Errorf("%s: QueryPort = %+v", dev.Name(), pa)
		}
		_, err = ctx.QueryPort(uint8(da.PhysPortCnt + 1))
		wantErr(t, "QueryPort past the last port", err, verbs.ErrNotFound)
		_, err = ctx.QueryGID(port, pa.GIDTblLen)
		wantErr(t, "QueryGID past the table", err, verbs.ErrNotFound)
		t.Logf("%s: fw %q max_qp %d max_qp_wr %d max_sge %d max_cqe %d atomic %v caps %#x; port %v %v mtu %v/%v gids %d",
			dev.Name(), da.FWVer, da.MaxQP, da.MaxQPWR, da.MaxSGE, da.MaxCQE, da.AtomicCap,
			uint64(da.DeviceCapFlags), pa.State, pa.LinkLayer, pa.ActiveMTU, pa.MaxMTU, pa.GIDTblLen)

		// rxevm: rxe0 on 198.18.0.1, rxe1 on .2, GID 1 the IPv4-mapped one.
		want := map[string]string{"rxe0": "198.18.0.1", "rxe1": "198.18.0.2"}[dev.Name()]
		if want == "" {
			continue
		}
		g, err := ctx.QueryGID(port, 1)
		if err != nil {
			t.Fatalf("%s: QueryGID(1, 1): %v", dev.Name(), err)
		}
		if g != verbs.GIDFromAddr(netip.MustParseAddr(want)) {
			t.Errorf("%s: GID 1 = %v, want ::ffff:%s", dev.Name(), g, want)
		}
		if pa.LinkLayer != verbs.LinkLayerEthernet || pa.ActiveMTU != verbs.MTU1024 {
			t.Errorf("%s: link layer %v active MTU %v, want Ethernet 1024", dev.Name(), pa.LinkLayer, pa.ActiveMTU)
		}
		if da.DeviceCapFlags&verbs.DeviceXRC != 0 {
			t.Errorf("%s: rxe reports XRC", dev.Name())
		}
	}
}

// TestRC runs every RC operation between A and B (rxe0 and rxe1 in the
// guest) on one connected pair, checking memory contents.
func TestRC(t *testing.T) {
	a, b := pair(t)
	qa, qb := rcPair(t, a, b)

	t.Run("Write", func(t *testing.T) {
		copy(a.mem[0:], bytes.Repeat([]byte("write!"), 100))
		post(t, qa, verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: a.sgl(0, 600), RDMA: b.rdma(1000)})
		wc := waitOK(t, a.cq, 1)[0]
		if wc.WRID != 1 || wc.Opcode != verbs.WCRDMAWrite || wc.QPNum != qa.QPN() {
			t.Errorf("WC %+v", wc)
		}
		if !bytes.Equal(b.mem[1000:1600], a.mem[0:600]) {
			t.Errorf("B's memory after WRITE: %q", b.mem[1000:1016])
		}
	})
	t.Run("Read", func(t *testing.T) {
		copy(b.mem[2000:], bytes.Repeat([]byte("read"), 256))
		post(t, qa, verbs.SendWR{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
			SGL: a.sgl(3000, 1024), RDMA: b.rdma(2000)})
		wc := waitOK(t, a.cq, 1)[0]
		if wc.WRID != 2 || wc.Opcode != verbs.WCRDMARead || wc.ByteLen != 1024 {
			t.Errorf("WC %+v", wc)
		}
		if !bytes.Equal(a.mem[3000:4024], b.mem[2000:3024]) {
			t.Errorf("A's memory after READ: %q", a.mem[3000:3016])
		}
	})
	t.Run("SendImm", func(t *testing.T) {
		postRecv(t, qb, verbs.RecvWR{ID: 30, SGL: b.sgl(8192, 256)})
		copy(a.mem[4096:], "hello, responder")
		const imm = 0x44332211
		post(t, qa, verbs.SendWR{ID: 3, Opcode: verbs.OpSendImm, Flags: verbs.SendSignaled,
			SGL: a.sgl(4096, 16), Imm: imm})
		if wc := waitOK(t, a.cq, 1)[0]; wc.WRID != 3 || wc.Opcode != verbs.WCSend {
			t.Errorf("sender WC %+v", wc)
		}
		wc := waitOK(t, b.cq, 1)[0]
		if wc.WRID != 30 || wc.Opcode != verbs.WCRecv || wc.ByteLen != 16 ||
			wc.Flags&verbs.WCFlagWithImm == 0 || wc.Imm != imm || wc.SrcQP != 0 && wc.SrcQP != qa.QPN() {
			t.Errorf("receiver WC %+v, want RECV of 16 bytes with imm %#x", wc, imm)
		}
		if string(b.mem[8192:8208]) != "hello, responder" {
			t.Errorf("received %q", b.mem[8192:8208])
		}
	})
	t.Run("WriteImm", func(t *testing.T) {
		postRecv(t, qb, verbs.RecvWR{ID: 40})
		copy(a.mem[5000:], "write with imm")
		post(t, qa, verbs.SendWR{ID: 4, Opcode: verbs.OpWriteImm, Flags: verbs.SendSignaled,
			SGL: a.sgl(5000, 14), RDMA: b.rdma(5000), Imm: 0xa1b2c3d4})
		waitOK(t, a.cq, 1)
		wc := waitOK(t, b.cq, 1)[0]
		if wc.Opcode != verbs.WCRecvRDMAWithImm || wc.Imm != 0xa1b2c3d4 || wc.ByteLen != 14 {
			t.Errorf("receiver WC %+v", wc)
		}
		if string(b.mem[5000:5014]) != "write with imm" {
			t.Errorf("B's memory %q", b.mem[5000:5014])
		}
	})
	t.Run("Atomics", func(t *testing.T) {
		target := b.mem[6144:6152] // 8-byte aligned: the arena is page aligned
		binary.NativeEndian.PutUint64(target, 100)
		post(t, qa, verbs.SendWR{ID: 5, Opcode: verbs.OpAtomicFetchAdd, Flags: verbs.SendSignaled,
			SGL: a.sgl(6144, 8), Atomic: verbs.Atomic{RemoteAddr: b.mr.Addr() + 6144, RKey: b.mr.RKey(), CompareAdd: 5}})
		wc := waitOK(t, a.cq, 1)[0]
		if wc.Opcode != verbs.WCFetchAdd || binary.NativeEndian.Uint64(a.mem[6144:]) != 100 ||
			binary.NativeEndian.Uint64(target) != 105 {
			t.Errorf("FETCH_ADD: WC %+v, returned %d, remote %d; want 100, 105", wc,
				binary.NativeEndian.Uint64(a.mem[6144:]), binary.NativeEndian.Uint64(target))
		}
		post(t, qa, verbs.SendWR{ID: 6, Opcode: verbs.OpAtomicCmpSwp, Flags: verbs.SendSignaled,
			SGL: a.sgl(6152, 8), Atomic: verbs.Atomic{RemoteAddr: b.mr.Addr() + 6144, RKey: b.mr.RKey(), CompareAdd: 105, Swap: 777}})
		wc = waitOK(t, a.cq, 1)[0]
		if wc.Opcode != verbs.WCCompSwap || binary.NativeEndian.Uint64(a.mem[6152:]) != 105 ||
			binary.NativeEndian.Uint64(target) != 777 {
			t.Errorf("CMP_SWP: WC %+v, returned %d, remote %d; want 105, 777", wc,
				binary.NativeEndian.Uint64(a.mem[6152:]), binary.NativeEndian.Uint64(target))
		}
		// A compare that does not match is no error and changes nothing.
		post(t, qa, verbs.SendWR{ID: 7, Opcode: verbs.OpAtomicCmpSwp, Flags: verbs.SendSignaled,
			SGL: a.sgl(6160, 8), Atomic: verbs.Atomic{RemoteAddr: b.mr.Addr() + 6144, RKey: b.mr.RKey(), CompareAdd: 1, Swap: 999}})
		waitOK(t, a.cq, 1)
		if got := binary.NativeEndian.Uint64(target); got != 777 {
			t.Errorf("CMP_SWP mismatch changed the remote to %d", got)
		}
	})
	t.Run("InlineFromGoMemory", func(t *testing.T) {
		// The payload is in the Go heap, unregistered, lkey 0: the provider
		// copies it to C memory before libibverbs sees it.
		payload := []byte("inline payload from the Go heap")
		postRecv(t, qb, verbs.RecvWR{ID: 80, SGL: b.sgl(9000, 64)})
		post(t, qa, verbs.SendWR{ID: 8, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendInline,
			SGL: []verbs.SGE{{Addr: uint64(uintptr(unsafe.Pointer(&payload[0]))), Length: uint32(len(payload))}}})
		want := string(payload)
		copy(payload, "overwritten right after the post")
		runtime.KeepAlive(payload)
		waitOK(t, a.cq, 1)
		wc := waitOK(t, b.cq, 1)[0]
		if got := string(b.mem[9000 : 9000+wc.ByteLen]); got != want {
			t.Errorf("received %q, want %q", got, want)
		}
	})
	t.Run("Query", func(t *testing.T) {
		attr, err := qa.Query()
		if err != nil {
			t.Fatal(err)
		}
		if attr.State != verbs.QPStateRTS || attr.DestQPN != qb.QPN() || attr.PathMTU != min(a.mtu, b.mtu) {
			t.Errorf("Query = %v", &attr)
		}
		if c := attr.Cap; c.MaxSendWR < qpCaps.MaxSendWR || c.MaxRecvWR < qpCaps.MaxRecvWR ||
			c.MaxSendSGE < qpCaps.MaxSendSGE || c.MaxInlineData < qpCaps.MaxInlineData {
			t.Errorf("granted caps %+v, asked %+v", c, qpCaps)
		}
	})
}

// TestBatchOneDoorbell: 64 WRs posted with one PostSend reach libibverbs in
// one ibv_post_send.
func TestBatchOneDoorbell(t *testing.T) {
	a, b := pair(t)
	qa, _ := rcPair(t, a, b)
	before, ok := verbs.PostCalls(qa)
	if !ok {
		t.Fatal("the ibv QP does not count its ibv_post_send calls")
	}
	wrs := make([]verbs.SendWR, 64)
	for i := range wrs {
		copy(a.mem[i*8:], []byte{byte(i), 1, 2, 3, 4, 5, 6, 7})
		wrs[i] = verbs.SendWR{ID: uint64(100 + i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: a.sgl(i*8, 8), RDMA: b.rdma(20000 + i*8)}
	}
	wrsBefore, _ := verbs.PostedWRs(qa)
	post(t, qa, wrs...)
	if after, _ := verbs.PostCalls(qa); after != before+1 {
		t.Errorf("PostCalls went from %d to %d for one batch of 64, want +1", before, after)
	}
	if after, _ := verbs.PostedWRs(qa); after != wrsBefore+64 {
		t.Errorf("PostedWRs went from %d to %d for one batch of 64, want +64", wrsBefore, after)
	}
	for i, wc := range waitOK(t, a.cq, 64) {
		if wc.WRID != uint64(100+i) {
			t.Errorf("completion %d has wr_id %d, want %d (in order)", i, wc.WRID, 100+i)
		}
	}
	if !bytes.Equal(b.mem[20000:20000+64*8], a.mem[:64*8]) {
		t.Error("B's memory does not hold the 64 writes")
	}
}

// TestInvalidWRInBatch: a WR that breaks a rule is refused in Go, before
// ibv_post_send: the prefix goes down in one call, the count says where the
// list stopped, nothing after it is posted.
func TestInvalidWRInBatch(t *testing.T) {
	a, b := pair(t)
	qa, _ := rcPair(t, a, b)
	attr, err := qa.Query()
	if err != nil {
		t.Fatal(err)
	}
	write := func(id uint64, off int) verbs.SendWR {
		return verbs.SendWR{ID: id, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: a.sgl(off, 8), RDMA: b.rdma(30000 + off)}
	}
	tooMany := write(3, 16)
	for len(tooMany.SGL) <= attr.Cap.MaxSendSGE {
		tooMany.SGL = append(tooMany.SGL, a.sgl(0, 1)...)
	}
	cases := []struct {
		name string
		bad  verbs.SendWR
	}{
		{"TooManySGEs", tooMany},
		{"InlineTooLong", verbs.SendWR{ID: 3, Opcode: verbs.OpSend, Flags: verbs.SendInline,
			SGL: a.sgl(0, attr.Cap.MaxInlineData+1)}},
		{"MisalignedAtomic", verbs.SendWR{ID: 3, Opcode: verbs.OpAtomicFetchAdd,
			SGL: a.sgl(0, 8), Atomic: verbs.Atomic{RemoteAddr: b.mr.Addr() + 4, RKey: b.mr.RKey()}}},
		{"UnknownOpcode", verbs.SendWR{ID: 3, Opcode: 99}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, _ := verbs.PostCalls(qa)
			wrsBefore, _ := verbs.PostedWRs(qa)
			wrs := []verbs.SendWR{write(1, 0), write(2, 8), c.bad, write(4, 24)}
			n, err := qa.PostSend(wrs)
			if after, _ := verbs.PostedWRs(qa); after != wrsBefore+2 {
				t.Errorf("PostedWRs went from %d to %d, want +2 (the prefix only)", wrsBefore, after)
			}
			if n != 2 {
				t.Errorf("posted %d, want 2", n)
			}
			var we *verbs.WRError
			if !errors.As(err, &we) || we.Index != 2 || we.WRID != 3 {
				t.Errorf("err %v, want a *verbs.WRError for index 2 (wr_id 3)", err)
			}
			wantErr(t, "invalid WR", err, verbs.ErrInvalidWR, syscall.EINVAL)
			if after, _ := verbs.PostCalls(qa); after != before+1 {
				t.Errorf("PostCalls went from %d to %d, want +1 (the prefix only)", before, after)
			}
			wcs := waitOK(t, a.cq, 2)
			if wcs[0].WRID != 1 || wcs[1].WRID != 2 {
				t.Errorf("completions %d, %d; want 1, 2", wcs[0].WRID, wcs[1].WRID)
			}
		})
	}
	t.Run("FirstInvalid", func(t *testing.T) {
		before, _ := verbs.PostCalls(qa)
		n, err := qa.PostSend([]verbs.SendWR{cases[0].bad, write(9, 0)})
		if n != 0 || err == nil {
			t.Errorf("PostSend = %d, %v; want 0 and an error", n, err)
		}
		if after, _ := verbs.PostCalls(qa); after != before {
			t.Errorf("PostCalls went from %d to %d: libibverbs was called for nothing", before, after)
		}
	})
}

// TestPostBeforeRTS (SEMANTICS.md 1a-1d): sends before RTS are refused in Go
// with ErrQPState, never reach rxe (which would keep and later replay them),
// and receives are refused in RESET only.
func TestPostBeforeRTS(t *testing.T) {
	a, b := pair(t)
	qa, qb := a.newQP(verbs.QPTypeRC, nil), b.newQP(verbs.QPTypeRC, nil)
	wr := verbs.SendWR{ID: 101, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: a.sgl(0, 64), RDMA: b.rdma(40000)}
	copy(a.mem, bytes.Repeat([]byte{0xab}, 64))
	try := func(state string) {
		t.Helper()
		n, err := qa.PostSend([]verbs.SendWR{wr})
		if n != 0 {
			t.Errorf("PostSend in %s posted %d", state, n)
		}
		wantErr(t, "PostSend in "+state, err, verbs.ErrQPState, syscall.EINVAL)
		if calls, _ := verbs.PostCalls(qa); calls != 0 {
			t.Errorf("PostSend in %s reached ibv_post_send (%d calls)", state, calls)
		}
	}
	try("RESET")
	_, err := qa.PostRecv([]verbs.RecvWR{{ID: 1, SGL: a.sgl(100, 8)}})
	wantErr(t, "PostRecv in RESET", err, verbs.ErrQPState, syscall.EINVAL)
	toInit(t, qa)
	toInit(t, qb)
	try("INIT")
	postRecv(t, qa, verbs.RecvWR{ID: 1, SGL: a.sgl(100, 8)})
	toRTR(t, a, qa, b, qb)
	toRTR(t, b, qb, a, qa)
	try("RTR")
	toRTS(t, qa)
	toRTS(t, qb)
	// The refused WRs must not run now that the QP is in RTS (rxe replays
	// WRs it refused with EINVAL, case 1d): only this one completes.
	post(t, qa, verbs.SendWR{ID: 200, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: a.sgl(0, 8), RDMA: b.rdma(41000)})
	wc := waitOK(t, a.cq, 1)[0]
	if wc.WRID != 200 {
		t.Errorf("first completion after RTS is wr %d, want 200", wc.WRID)
	}
	if n, _ := a.cq.Poll(make([]verbs.WC, 4)); n != 0 {
		t.Errorf("%d more completions: refused WRs ran", n)
	}
	if !bytes.Equal(b.mem[40000:40064], make([]byte, 64)) {
		t.Error("a refused WRITE reached B's memory")
	}
}

// TestBadLKey: a SEND whose SGE names a key that is no MR completes with an
// error that matches verbs.ErrQPError and takes the QP to ERR. The IB status
// is LOC_PROT_ERR; rxe in Linux 6.1 reports LOC_QP_OP_ERR, and the provider
// passes the device's status through unchanged.
func TestBadLKey(t *testing.T) {
	a, b := pair(t)
	qa, qb := rcPair(t, a, b)
	postRecv(t, qb, verbs.RecvWR{ID: 1, SGL: b.sgl(0, 64)})
	sgl := a.sgl(0, 16)
	sgl[0].LKey ^= 0x5a5a00
	post(t, qa, verbs.SendWR{ID: 77, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: sgl})
	wc := waitWCs(t, a.cq, 1)[0]
	err := wc.Err()
	t.Logf("SEND with a bad lkey: %v", err)
	if wc.WRID != 77 || (wc.Status != verbs.WCLocProtErr && wc.Status != verbs.WCLocQPOpErr) {
		t.Errorf("WC %+v, want wr 77 with LOC_PROT_ERR (or rxe's LOC_QP_OP_ERR)", wc)
	}
	wantErr(t, "bad lkey completion", err, verbs.ErrQPError)
	attr, qerr := qa.Query()
	if qerr != nil || attr.State != verbs.QPStateErr {
		t.Errorf("QP after the error: %v, %v; want ERR", attr.State, qerr)
	}
}

// TestXRC: rxe has no XRC (SEMANTICS.md 15a): ErrNotSupported, EOPNOTSUPP.
func TestXRC(t *testing.T) {
	a, _ := pair(t)
	da, _ := a.ctx.QueryDevice()
	x, err := a.ctx.OpenXRCD()
	if da.DeviceCapFlags&verbs.DeviceXRC != 0 {
		if err != nil {
			t.Fatalf("OpenXRCD on a device with XRC: %v", err)
		}
		x.Close()
		t.Skip("the device has XRC")
	}
	if x != nil {
		x.Close()
	}
	wantErr(t, "OpenXRCD", err, verbs.ErrNotSupported, syscall.EOPNOTSUPP)
	_, err = a.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeXRCSend, SendCQ: a.cq, Caps: qpCaps})
	if err == nil {
		t.Error("an XRC_SEND QP was created on a device without XRC")
	}
	t.Logf("XRC_SEND QP: %v", err)
}

// TestSRQ: an SRQ is rounded up, serves a QP's receives and raises
// SRQ_LIMIT_REACHED once below its armed limit (SEMANTICS.md 15b, 15c).
func TestSRQ(t *testing.T) {
	a, b := pair(t)
	srq, err := b.pd.CreateSRQ(verbs.SRQSpec{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := srq.Query()
	if err != nil || got.MaxWR < 16 || got.MaxSGE < 1 {
		t.Fatalf("SRQ Query = %+v, %v", got, err)
	}
	if _, err := srq.SRQN(); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("SRQN of a basic SRQ: %v, want ErrNotSupported", err)
	}
	qa, qb := a.newQP(verbs.QPTypeRC, nil), b.newQP(verbs.QPTypeRC, srq)
	if _, err := qb.PostRecv([]verbs.RecvWR{{ID: 1}}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("PostRecv on a QP with an SRQ: %v, want ErrInvalidArgument", err)
	}
	connect(t, a, qa, b, qb)

	wrs := make([]verbs.RecvWR, 8)
	for i := range wrs {
		wrs[i] = verbs.RecvWR{ID: uint64(500 + i), SGL: b.sgl(i*64, 64)}
	}
	if n, err := srq.PostRecv(wrs); n != 8 || err != nil {
		t.Fatalf("SRQ PostRecv: %d, %v", n, err)
	}
	if err := srq.Modify(verbs.SRQAttr{Limit: 4}, verbs.SRQAttrLimit); err != nil {
		t.Fatalf("SRQ Modify(limit 4): %v", err)
	}
	if got, _ := srq.Query(); got.Limit != 4 {
		t.Errorf("SRQ limit %d after Modify, want 4", got.Limit)
	}
	for i := range 5 {
		copy(a.mem[i*16:], []byte{'m', byte('0' + i)})
		post(t, qa, verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: a.sgl(i*16, 16)})
	}
	waitOK(t, a.cq, 5)
	for i, wc := range waitOK(t, b.cq, 5) {
		if wc.WRID != uint64(500+i) || wc.ByteLen != 16 || wc.QPNum != qb.QPN() {
			t.Errorf("receive %d: %+v", i, wc)
		}
	}
	ev := waitEvent(t, b.ctx, verbs.EventSRQLimitReached)
	if ev.SRQ != srq {
		t.Errorf("SRQ_LIMIT_REACHED names SRQ %v, want the one created", ev.SRQ)
	}
	if err := srq.Close(); !errors.Is(err, verbs.ErrBusy) {
		t.Errorf("closing an SRQ a QP uses: %v, want ErrBusy", err)
	}
}

// TestUD: a UD SEND through an address handle arrives behind the 40-byte
// GRH area (SEMANTICS.md 13a).
func TestUD(t *testing.T) {
	a, b := pair(t)
	qa, qb := a.newQP(verbs.QPTypeUD, nil), b.newQP(verbs.QPTypeUD, nil)
	for _, q := range []verbs.QP{qa, qb} {
		toInit(t, q)
		modify(t, q, &verbs.QPAttr{State: verbs.QPStateRTR}, verbs.QPAttrState)
		modify(t, q, &verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: 1}, verbs.QPAttrState|verbs.QPAttrSQPSN)
	}
	ah, err := a.pd.CreateAH(a.av(b))
	if err != nil {
		t.Fatal(err)
	}
	postRecv(t, qb, verbs.RecvWR{ID: 9, SGL: b.sgl(0, 40+100)})
	copy(a.mem[1000:], bytes.Repeat([]byte("ud"), 50))
	post(t, qa, verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: a.sgl(1000, 100),
		UD: verbs.UD{AH: ah, RemoteQPN: qb.QPN(), RemoteQKey: udQKey}})
	waitOK(t, a.cq, 1)
	wc := waitOK(t, b.cq, 1)[0]
	if wc.ByteLen != 140 || wc.Flags&verbs.WCFlagGRH == 0 || wc.SrcQP != qa.QPN() {
		t.Errorf("UD receive %+v, want 140 bytes with GRH from QP %#x", wc, qa.QPN())
	}
	if !bytes.Equal(b.mem[40:140], a.mem[1000:1100]) {
		t.Error("UD payload differs")
	}
	// An AH of another provider, or a closed one, is a bad WR, not a crash.
	ah.Close()
	_, err = qa.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpSend, SGL: a.sgl(1000, 10),
		UD: verbs.UD{AH: ah, RemoteQPN: qb.QPN(), RemoteQKey: udQKey}}})
	wantErr(t, "send through a closed AH", err, verbs.ErrInvalidWR)
}

// TestCompChannel: a completion wakes GetCQEvent through the netpoller; a
// cancelled or expired context ends the wait.
func TestCompChannel(t *testing.T) {
	a, b := pair(t)
	ch, err := b.ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := b.ctx.CreateCQ(verbs.CQSpec{CQE: 16, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); !errors.Is(err, verbs.ErrBusy) {
		t.Errorf("closing a channel a CQ uses: %v, want ErrBusy", err)
	}
	qa := a.newQP(verbs.QPTypeRC, nil)
	qb, err := b.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: b.cq, RecvCQ: cq, Caps: qpCaps})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, a, qa, b, qb)

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	start := time.Now()
	_, err = ch.GetCQEvent(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("GetCQEvent with nothing armed: %v after %v, want DeadlineExceeded soon", err, time.Since(start))
	}
	gone, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := ch.GetCQEvent(gone); !errors.Is(err, context.Canceled) {
		t.Errorf("GetCQEvent cancelled: %v, want context.Canceled", err)
	}

	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	postRecv(t, qb, verbs.RecvWR{ID: 5, SGL: b.sgl(0, 64)})
	post(t, qa, verbs.SendWR{ID: 6, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: a.sgl(0, 32)})
	wait, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	got, err := ch.GetCQEvent(wait)
	if err != nil {
		t.Fatalf("GetCQEvent: %v", err)
	}
	if got != cq {
		t.Errorf("event for CQ %v, want the armed one", got)
	}
	got.AckEvents(1)
	if wc := waitOK(t, cq, 1)[0]; wc.WRID != 5 {
		t.Errorf("receive %+v", wc)
	}
	waitOK(t, a.cq, 1)
	// Closing with an event read but left unacknowledged must not hang
	// (ibv_destroy_cq waits for acknowledgements): Close acknowledges it.
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	postRecv(t, qb, verbs.RecvWR{ID: 7, SGL: b.sgl(0, 64)})
	post(t, qa, verbs.SendWR{ID: 8, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: a.sgl(0, 32)})
	if _, err := ch.GetCQEvent(wait); err != nil {
		t.Fatalf("second GetCQEvent: %v", err)
	}
	waitOK(t, a.cq, 1)
	if err := qb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cq.Close(); err != nil {
		t.Fatalf("closing the CQ with an unacknowledged event: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("closing the channel after its CQ: %v", err)
	}
}

// TestCQOverrun: rxe drops completions that do not fit and raises one
// CQ_ERR per lost one (SEMANTICS.md 10a); the event names the CQ.
func TestCQOverrun(t *testing.T) {
	a, b := pair(t)
	small, err := a.ctx.CreateCQ(verbs.CQSpec{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	qa, err := a.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: small, RecvCQ: a.cq, Caps: qpCaps})
	if err != nil {
		t.Fatal(err)
	}
	qb := b.newQP(verbs.QPTypeRC, nil)
	connect(t, a, qa, b, qb)
	wrs := make([]verbs.SendWR, small.CQE()+4)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: a.sgl(0, 8), RDMA: b.rdma(0)}
	}
	post(t, qa, wrs...)
	ev := waitEvent(t, a.ctx, verbs.EventCQErr)
	if ev.CQ != small {
		t.Errorf("CQ_ERR names CQ %v, want the small one", ev.CQ)
	}
}

// TestClose: Context.Close destroys what is still open, ends AsyncEvents,
// stops its goroutine and leaves the objects answering ErrClosed.
func TestClose(t *testing.T) {
	devs := devices(t)
	ctx, err := devs[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(verbs.CQSpec{CQE: 8})
	ch, _ := ctx.CreateCompChannel()
	if pd == nil || cq == nil || ch == nil {
		t.Fatal("creating objects failed")
	}
	q, err := pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Caps: qpCaps})
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); !errors.Is(err, verbs.ErrBusy) {
		t.Errorf("closing a PD with a QP: %v, want ErrBusy", err)
	}
	// A waiter on the channel is woken by the close.
	waiting := make(chan error, 1)
	go func() {
		_, err := ch.GetCQEvent(context.Background())
		waiting <- err
	}()
	if err := ctx.Close(); err != nil {
		t.Fatalf("Context.Close: %v", err)
	}
	select {
	case err := <-waiting:
		wantErr(t, "GetCQEvent across Close", err, verbs.ErrClosed)
	case <-time.After(waitFor):
		t.Fatal("GetCQEvent still waiting after Context.Close")
	}
	if _, ok := <-ctx.AsyncEvents(); ok {
		t.Error("AsyncEvents still open after Close")
	}
	_, err = q.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}})
	wantErr(t, "PostSend after Close", err, verbs.ErrClosed)
	_, err = cq.Poll(make([]verbs.WC, 1))
	wantErr(t, "Poll after Close", err, verbs.ErrClosed)
	_, err = ctx.AllocPD()
	wantErr(t, "AllocPD after Close", err, verbs.ErrClosed)
	if err := q.Close(); err != nil {
		t.Errorf("QP Close after Context.Close: %v, want nil (already destroyed)", err)
	}
	if err := ctx.Close(); err != nil {
		t.Errorf("second Context.Close: %v", err)
	}
	goleak.VerifyNone(t)
}

// TestSendQueueFull (SEMANTICS.md 8b): a list longer than the send queue
// stops at the granted max_send_wr with ENOMEM, as one ibv_post_send does,
// however the provider chunks it.
func TestSendQueueFull(t *testing.T) {
	a, b := pair(t)
	qa, err := a.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq,
		Caps: verbs.QPCaps{MaxSendWR: 16, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	qb := b.newQP(verbs.QPTypeRC, nil)
	connect(t, a, qa, b, qb)
	attr, err := qa.Query()
	if err != nil {
		t.Fatal(err)
	}
	capacity := attr.Cap.MaxSendWR
	wrs := make([]verbs.SendWR, capacity+8)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, SGL: a.sgl(i*8, 8), RDMA: b.rdma(i * 8)}
	}
	n, err := qa.PostSend(wrs)
	if n != capacity {
		t.Errorf("posted %d of %d on a send queue of %d", n, len(wrs), capacity)
	}
	wantErr(t, "PostSend past the send queue", err, verbs.ErrNoMemory, syscall.ENOMEM)
	if calls, _ := verbs.PostCalls(qa); calls != 1 {
		t.Errorf("%d ibv_post_send calls, want 1", calls)
	}
}

// TestHotPathAllocs: posting a batch and polling its completion allocate
// nothing: the WRs go into C arrays made at QP creation, the completions
// into the caller's slice.
func TestHotPathAllocs(t *testing.T) {
	a, b := pair(t)
	qa, _ := rcPair(t, a, b)
	wrs := []verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: a.sgl(0, 64), RDMA: b.rdma(0)},
		{ID: 2, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: a.sgl(64, 64), RDMA: b.rdma(64)},
	}
	wcs := make([]verbs.WC, 4)
	var failed error
	allocs := testing.AllocsPerRun(50, func() {
		if n, err := qa.PostSend(wrs); n != len(wrs) || err != nil {
			failed = err
			return
		}
		deadline := time.Now().Add(waitFor)
		for {
			n, err := a.cq.Poll(wcs)
			if err != nil || n > 0 || time.Now().After(deadline) {
				if n != 1 || wcs[0].Status != verbs.WCSuccess {
					failed = errors.New("no single successful completion")
				}
				return
			}
			runtime.Gosched()
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	if allocs != 0 {
		t.Errorf("PostSend + Poll allocate %.1f times per batch, want 0", allocs)
	}
}
