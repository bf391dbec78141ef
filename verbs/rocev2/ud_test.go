package rocev2

import (
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"net/netip"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

type udPair struct {
	ta, tb   *Transport
	a, b     *udQP
	wcA, wcB chan verbs.WC
}

const qkeyB = 0x11111111

func newUDPair(t *testing.T) *udPair {
	p := &udPair{wcA: make(chan verbs.WC, 64), wcB: make(chan verbs.WC, 64)}
	p.ta, p.tb = listenPair(t, nil)
	// A's MTU is larger than B's, so B sees datagrams it must drop.
	p.a = newUDQP(p.ta, udConfig{QPN: 0x31, QKey: qkeyB, MTU: 4096, Complete: func(w verbs.WC) { p.wcA <- w }})
	p.b = newUDQP(p.tb, udConfig{QPN: 0x32, QKey: qkeyB, MTU: 1024, Complete: func(w verbs.WC) { p.wcB <- w }})
	t.Cleanup(func() { p.a.close(); p.b.close() })
	return p
}

func (p *udPair) send(id uint64, data []byte, qkey uint32) {
	p.a.postSend(&udSend{id: id, data: data, signaled: true, remote: p.tb.LocalAddr(), remoteQPN: 0x32, remoteQKey: qkey})
}

// TestUDSend sends datagrams with and without immediate data and checks
// the GRH, the payload and the receive completion.
func TestUDSend(t *testing.T) {
	p := newUDPair(t)
	buf := make([]byte, GRHLen+100)
	p.b.postRecv(recvWQE{id: 100, buf: buf})
	p.a.postSend(&udSend{id: 1, data: []byte("datagram"), imm: 0x1234, hasImm: true, signaled: true,
		remote: p.tb.LocalAddr(), remoteQPN: 0x32, remoteQKey: qkeyB})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	wc := expectWC(t, p.wcB, 100, verbs.WCSuccess)
	if wc.ByteLen != GRHLen+8 || wc.SrcQP != 0x31 || wc.Flags != verbs.WCFlagGRH|verbs.WCFlagWithImm || wc.Imm != 0x1234 {
		t.Fatalf("completion %+v", wc)
	}
	if string(buf[GRHLen:GRHLen+8]) != "datagram" {
		t.Fatalf("payload %q", buf[GRHLen:GRHLen+8])
	}
	src, dst := netip.AddrFrom16([16]byte(buf[8:24])), netip.AddrFrom16([16]byte(buf[24:40]))
	// UDP header 8 + BTH 12 + DETH 8 + ImmDt 4 + payload 8 + ICRC 4.
	if buf[0]>>4 != 6 || buf[6] != 17 || buf[4] != 0 || buf[5] != 44 || src != p.ta.LocalAddr().Addr() || dst != p.tb.LocalAddr().Addr() {
		t.Fatalf("GRH % x", buf[:GRHLen])
	}
}

// TestUDDrops checks what a UD receiver drops silently, each proven by a
// good datagram sent after it taking the receive: a wrong Q_Key, a
// datagram larger than the MTU, one with no receive posted. The sender
// completes successfully every time. A Q_Key with the high bit set is
// replaced by the sender's own, here B's.
func TestUDDrops(t *testing.T) {
	p := newUDPair(t)
	seen := make(chan struct{}, 16)
	p.b.mu.Lock()
	p.b.cfg.observe = func(*wire.Packet) { seen <- struct{}{} }
	p.b.mu.Unlock()
	recv := func(id uint64) []byte {
		buf := make([]byte, GRHLen+64)
		p.b.postRecv(recvWQE{id: id, buf: buf})
		return buf
	}
	got := func(id uint64, buf []byte, want string) {
		t.Helper()
		wc := expectWC(t, p.wcB, id, verbs.WCSuccess)
		if s := string(buf[GRHLen:wc.ByteLen]); s != want {
			t.Fatalf("receive %d got %q, want %q", id, s, want)
		}
	}

	p.send(1, []byte("no receive"), qkeyB)
	next(t, seen)
	b := recv(100)
	p.send(2, []byte("wrong qkey"), qkeyB+1)
	p.send(3, make([]byte, 1025), qkeyB)
	p.send(4, []byte("proof"), qkeyB)
	got(100, b, "proof")
	b = recv(101)
	p.send(5, []byte("own qkey"), 0x8000_0000)
	got(101, b, "own qkey")
	for id := uint64(1); id <= 5; id++ {
		expectWC(t, p.wcA, id, verbs.WCSuccess)
	}
	noWC(t, p.wcB)
}

// TestUDRecvTooShort checks that a receive shorter than the GRH and the
// datagram completes with LOC_LEN_ERR and moves the QP to ERR, as on rxe
// (SEMANTICS 13e): the next receive is flushed, and so is one posted
// later.
func TestUDRecvTooShort(t *testing.T) {
	p := newUDPair(t)
	p.b.postRecv(recvWQE{id: 100, buf: make([]byte, GRHLen+3)})
	p.b.postRecv(recvWQE{id: 101, buf: make([]byte, GRHLen+4)})
	p.send(1, []byte("four"), qkeyB)
	expectWC(t, p.wcB, 100, verbs.WCLocLenErr)
	expectWC(t, p.wcB, 101, verbs.WCWRFlushErr)
	p.b.postRecv(recvWQE{id: 102, buf: make([]byte, GRHLen+4)})
	expectWC(t, p.wcB, 102, verbs.WCWRFlushErr)
}
