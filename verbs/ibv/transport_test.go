package ibv_test

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

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
