package ibv_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

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
