package soft_test

import (
	"bytes"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

func TestSmokeRCWriteSendRead(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	copy(a.mr.Bytes(), "hello, remote memory")
	n, err := a.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: sge(a.mr, 0, 20), RDMA: verbs.RDMA{RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()}}})
	if n != 1 || err != nil {
		t.Fatal(n, err)
	}
	wc := pollN(t, a.cq, 1)[0]
	if wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRDMAWrite || wc.ByteLen != 20 || wc.WRID != 1 {
		t.Fatalf("%+v", wc)
	}
	if got := b.mr.Bytes()[100:120]; !bytes.Equal(got, []byte("hello, remote memory")) {
		t.Fatalf("remote memory %q", got)
	}
	if _, err := b.qp.PostRecv([]verbs.RecvWR{{ID: 7, SGL: sge(b.mr, 1000, 64)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpSendImm, Imm: 0x11223344, Flags: verbs.SendSignaled, SGL: sge(a.mr, 0, 5)}}); err != nil {
		t.Fatal(err)
	}
	rw := pollN(t, b.cq, 1)[0]
	if rw.Status != verbs.WCSuccess || rw.Opcode != verbs.WCRecv || rw.ByteLen != 5 || rw.Imm != 0x11223344 ||
		rw.Flags&verbs.WCFlagWithImm == 0 || rw.SrcQP != a.qp.QPN() || rw.QPNum != b.qp.QPN() {
		t.Fatalf("%+v", rw)
	}
	if s := pollN(t, a.cq, 1)[0]; s.Status != verbs.WCSuccess || s.Opcode != verbs.WCSend {
		t.Fatalf("%+v", s)
	}
	if _, err := a.qp.PostSend([]verbs.SendWR{{ID: 3, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: sge(a.mr, 5000, 20), RDMA: verbs.RDMA{RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()}}}); err != nil {
		t.Fatal(err)
	}
	if s := pollN(t, a.cq, 1)[0]; s.Status != verbs.WCSuccess || s.Opcode != verbs.WCRDMARead || s.ByteLen != 20 {
		t.Fatalf("%+v", s)
	}
	if got := a.mr.Bytes()[5000:5020]; !bytes.Equal(got, []byte("hello, remote memory")) {
		t.Fatalf("read back %q", got)
	}
}

// An MR without a remote right has rkey 0, as on rxe; one with any has
// its lkey for rkey.
func TestRKeyOnlyWithRemoteAccess(t *testing.T) {
	a, _ := newPair(t, pairOpts{})
	for _, tc := range []struct {
		access verbs.Access
		remote bool
	}{
		{verbs.AccessLocalWrite, false},
		{0, false},
		{verbs.AccessRemoteRead, true},
		{verbs.AccessLocalWrite | verbs.AccessRemoteWrite, true},
		{verbs.AccessLocalWrite | verbs.AccessRemoteAtomic, true},
	} {
		mr, err := a.pd.RegMR(a.mr.Bytes()[:64], tc.access)
		if err != nil {
			t.Fatal(err)
		}
		if tc.remote && mr.RKey() != mr.LKey() || !tc.remote && mr.RKey() != 0 {
			t.Errorf("MR with %v: lkey %#x rkey %#x", tc.access, mr.LKey(), mr.RKey())
		}
		mr.Close()
	}
}
