package rocev2

import (
	"bytes"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// newUCPair is newPair with UC QPs: A sends, B receives.
func newUCPair(t *testing.T, mtu int) *pair {
	t.Helper()
	p := newPair(t, mtu, 7, 7)
	for _, q := range []*rcQP{p.a, p.b} {
		q.mu.Lock()
		q.cfg.UC = true
		q.mu.Unlock()
	}
	return p
}

// TestUCLostPacketDropsMessage sends a three-packet UC SEND whose middle
// packet is lost, then a whole one: the first message never completes at
// B, its receive WQE takes the second, and A completes both at once (UC
// has no ACK to wait for).
func TestUCLostPacketDropsMessage(t *testing.T) {
	p := newUCPair(t, 256)
	p.ta.Inject(Fault{Action: FaultDrop, Match: isOp(wire.RCSendMiddle | wire.ServiceUC), Hit: p.hit})
	buf := p.postRecv(t, 100, 1024)
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: pattern(700, 1)})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	p.waitHit(t)
	msg := pattern(300, 9)
	p.post(t, &sendWQE{id: 2, op: verbs.OpSend, data: msg})
	expectWC(t, p.wcA, 2, verbs.WCSuccess)
	wc := expectWC(t, p.wcB, 100, verbs.WCSuccess)
	if wc.ByteLen != 300 {
		t.Fatalf("B received %d bytes, want the second message's 300", wc.ByteLen)
	}
	p.b.mu.Lock()
	got := append([]byte(nil), buf[:300]...)
	p.b.mu.Unlock()
	if !bytes.Equal(got, msg) {
		t.Fatal("B's receive does not hold the second message")
	}
	noWC(t, p.wcB)
}

// TestUCNoReceiveDropped sends a UC SEND with no receive posted and a
// WRITE with a bad rkey: both are dropped without a NAK, B stays usable,
// and the SEND after them is delivered.
func TestUCNoReceiveDropped(t *testing.T) {
	p := newUCPair(t, 256)
	seen := make(chan struct{}, 8)
	p.b.mu.Lock()
	p.b.cfg.observe = func(*wire.Packet) { seen <- struct{}{} }
	p.b.mu.Unlock()
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: pattern(400, 1)}) // 2 packets
	p.post(t, &sendWQE{id: 2, op: verbs.OpWrite, data: pattern(10, 2), raddr: vaB, rkey: rkeyB + 1})
	for range 3 {
		next(t, seen)
	}
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	expectWC(t, p.wcA, 2, verbs.WCSuccess)
	p.postRecv(t, 100, 64)
	p.post(t, &sendWQE{id: 3, op: verbs.OpSend, data: pattern(40, 3)})
	expectWC(t, p.wcA, 3, verbs.WCSuccess)
	if wc := expectWC(t, p.wcB, 100, verbs.WCSuccess); wc.ByteLen != 40 {
		t.Fatalf("B received %d bytes, want 40", wc.ByteLen)
	}
	if st := p.tb.Stats(); st.Sent != 0 {
		t.Fatalf("B sent %d packets; UC acknowledges nothing", st.Sent)
	}
}
