package rocev2

import (
	"bytes"
	"encoding/binary"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"sync"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// region is a registered range for the test Memory.
type region struct {
	va  uint64
	buf []byte
	acc verbs.Access
}

type testMemory struct {
	mu   sync.Mutex
	keys map[uint32]region
}

func (m *testMemory) Remote(rkey uint32, va uint64, n int, acc verbs.Access) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.keys[rkey]
	if !ok || r.acc&acc != acc || va < r.va || n < 0 || va-r.va+uint64(n) > uint64(len(r.buf)) {
		return nil, false
	}
	off := va - r.va
	return r.buf[off : off+uint64(n)], true
}

const (
	testTimeout = 100 * time.Millisecond
	testRNRCode = 14 // 1.28 ms
	rkeyB       = 0x5555
	vaB         = 0x10000
)

// pair is two RC QPs connected over two transports on ::1, with a manual
// clock: A (QPN 0x11) is the requester in the tests, B (QPN 0x22) the
// responder.
type pair struct {
	clock    *ManualClock
	ta, tb   *Transport
	a, b     *rcQP
	wcA, wcB chan verbs.WC
	memB     []byte
	hits     chan wire.Packet
}

func newPair(t *testing.T, mtu, retry, rnrRetry int) *pair {
	t.Helper()
	m := NewManualClock()
	return newPairClock(t, m, m, mtu, retry, rnrRetry)
}

// newPairClock is newPair with the clock the QPs and transports use; p.clock
// is the manual clock tests advance, ignored when clock is another.
func newPairClock(t *testing.T, manual *ManualClock, clock Clock, mtu, retry, rnrRetry int) *pair {
	t.Helper()
	p := &pair{clock: manual, wcA: make(chan verbs.WC, 256), wcB: make(chan verbs.WC, 256),
		memB: make([]byte, 256<<10), hits: make(chan wire.Packet, 256)}
	p.ta, p.tb = listenPair(t, clock)
	memA := &testMemory{keys: map[uint32]region{}}
	memB := &testMemory{keys: map[uint32]region{rkeyB: {va: vaB, buf: p.memB, acc: verbs.AccessAllRemote}}}
	cfg := func(qpn, rqpn uint32, tr *Transport, mem Memory, wc chan verbs.WC) rcConfig {
		return rcConfig{QPN: qpn, RemoteQPN: rqpn, Remote: tr.LocalAddr(), MTU: mtu,
			SQPSN: 0xfffffe, RQPSN: 0xfffffe, // both wrap past 2^24 in every test
			Timeout: testTimeout, RetryCnt: retry, RNRRetry: rnrRetry, MinRNRTimer: testRNRCode,
			Memory: mem, Clock: clock, Complete: func(w verbs.WC) { wc <- w }}
	}
	p.a = newRCQP(p.ta, cfg(0x11, 0x22, p.tb, memA, p.wcA))
	p.b = newRCQP(p.tb, cfg(0x22, 0x11, p.ta, memB, p.wcB))
	t.Cleanup(func() { p.a.close(); p.b.close() })
	return p
}

// hit is a Fault.Hit that reports the packet to the test.
func (p *pair) hit(pk wire.Packet) { p.hits <- pk }

// waitHit waits until a fault acted on a packet and returns it.
func (p *pair) waitHit(t *testing.T) wire.Packet {
	t.Helper()
	select {
	case pk := <-p.hits:
		return pk
	case <-time.After(10 * time.Second):
		t.Fatal("fault never hit")
		return wire.Packet{}
	}
}

// next receives from ch; the bound is only a way out of a broken test,
// never a measurement.
func next[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("event never came")
		panic("unreachable")
	}
}

func waitWC(t *testing.T, ch chan verbs.WC) verbs.WC {
	t.Helper()
	select {
	case wc := <-ch:
		return wc
	case <-time.After(10 * time.Second):
		t.Fatal("no completion")
		return verbs.WC{}
	}
}

func expectWC(t *testing.T, ch chan verbs.WC, id uint64, status verbs.WCStatus) verbs.WC {
	t.Helper()
	wc := waitWC(t, ch)
	if wc.WRID != id || wc.Status != status {
		t.Fatalf("completion %d %v, want %d %v", wc.WRID, wc.Status, id, status)
	}
	return wc
}

// noWC checks that no completion is queued. It is used only where no
// packet is in flight that could produce one.
func noWC(t *testing.T, ch chan verbs.WC) {
	t.Helper()
	select {
	case wc := <-ch:
		t.Fatalf("unexpected completion %+v", wc)
	default:
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// readB returns a copy of B's registered memory, read under B's lock, the
// lock its responder writes under: the network gives the race detector no
// happens-before edge between the responder's writes and the test.
func (p *pair) readB(off, n int) []byte {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	return append([]byte(nil), p.memB[off:off+n]...)
}

// writeB fills B's registered memory under B's lock.
func (p *pair) writeB(off int, b []byte) {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	copy(p.memB[off:], b)
}

func (p *pair) postRecv(t *testing.T, id uint64, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	if err := p.b.postRecv(recvWQE{id: id, buf: buf}); err != nil {
		t.Fatal(err)
	}
	return buf
}

func (p *pair) post(t *testing.T, w *sendWQE) {
	t.Helper()
	w.signaled = true
	if err := p.a.postSend(w); err != nil {
		t.Fatal(err)
	}
}

func isOp(op wire.Opcode) func(*wire.Packet) bool {
	return func(p *wire.Packet) bool { return p.BTH.Opcode == op }
}

func isPSN(psn wire.PSN) func(*wire.Packet) bool {
	return func(p *wire.Packet) bool { return p.BTH.PSN == psn }
}

// TestRCOperations runs SEND, SEND with immediate, WRITE, WRITE with
// immediate and READ, each across several MTU-sized packets, and checks
// the data and both sides' completions.
func TestRCOperations(t *testing.T) {
	p := newPair(t, 256, 7, 7)
	msg := pattern(1000, 1) // 4 packets at MTU 256
	r1 := p.postRecv(t, 101, 1024)
	r2 := p.postRecv(t, 102, 1024)
	r3 := p.postRecv(t, 103, 0)
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: msg})
	p.post(t, &sendWQE{id: 2, op: verbs.OpSendImm, data: msg[:256], imm: 0xabcd})
	p.post(t, &sendWQE{id: 3, op: verbs.OpWrite, data: msg, raddr: vaB + 8, rkey: rkeyB})
	p.post(t, &sendWQE{id: 4, op: verbs.OpWriteImm, data: msg[:10], raddr: vaB + 4096, rkey: rkeyB, imm: 7})
	rd := make([]byte, 1000)
	p.post(t, &sendWQE{id: 5, op: verbs.OpRead, data: rd, raddr: vaB + 8, rkey: rkeyB})
	for id, op := range []verbs.WCOpcode{verbs.WCSend, verbs.WCSend, verbs.WCRDMAWrite, verbs.WCRDMAWrite, verbs.WCRDMARead} {
		wc := expectWC(t, p.wcA, uint64(id+1), verbs.WCSuccess)
		if wc.Opcode != op {
			t.Fatalf("wr %d opcode %v, want %v", id+1, wc.Opcode, op)
		}
	}
	wc := expectWC(t, p.wcB, 101, verbs.WCSuccess)
	if wc.ByteLen != 1000 || wc.Opcode != verbs.WCRecv || !bytes.Equal(r1[:1000], msg) {
		t.Fatalf("recv 101 %+v", wc)
	}
	wc = expectWC(t, p.wcB, 102, verbs.WCSuccess)
	if wc.ByteLen != 256 || wc.Flags&verbs.WCFlagWithImm == 0 || wc.Imm != 0xabcd || !bytes.Equal(r2[:256], msg[:256]) {
		t.Fatalf("recv 102 %+v", wc)
	}
	wc = expectWC(t, p.wcB, 103, verbs.WCSuccess)
	if wc.Opcode != verbs.WCRecvRDMAWithImm || wc.Imm != 7 || wc.ByteLen != 10 || len(r3) != 0 {
		t.Fatalf("recv 103 %+v", wc)
	}
	if !bytes.Equal(p.readB(8, 1000), msg) || !bytes.Equal(p.readB(4096, 10), msg[:10]) {
		t.Fatal("WRITE data wrong")
	}
	if !bytes.Equal(rd, msg) {
		t.Fatal("READ data wrong")
	}
}

// TestRCAckCoalescing feeds a burst straight to a responder and checks
// that the burst's end sends one ACK, for its last PSN, and that packets
// without the ACK request bit are not acknowledged by themselves.
func TestRCAckCoalescing(t *testing.T) {
	p := newPair(t, 256, 7, 7)
	var mu sync.Mutex
	var acks []wire.Packet
	p.tb.Inject(Fault{Action: FaultDrop, Count: 1 << 30, Match: func(pk *wire.Packet) bool {
		mu.Lock()
		acks = append(acks, *pk)
		mu.Unlock()
		return true
	}})
	for i := range 4 {
		p.postRecv(t, uint64(i), 16)
	}
	psn := wire.PSN(0xfffffe)
	for i := range 4 {
		pk := wire.Packet{BTH: wire.BTH{Opcode: wire.RCSendOnly, DestQP: 0x22, PSN: psn.Add(i), AckReq: i != 1}, Payload: []byte{1}}
		p.b.Receive(p.ta.LocalAddr(), &pk)
	}
	mu.Lock()
	n := len(acks)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d ACKs before the burst ended", n)
	}
	p.b.Flush()
	p.b.Flush()
	mu.Lock()
	defer mu.Unlock()
	if len(acks) != 1 || acks[0].BTH.Opcode != wire.RCAcknowledge || acks[0].BTH.PSN != psn.Add(3) ||
		!acks[0].AETH.Syndrome.IsACK() || acks[0].AETH.MSN != 4 {
		t.Fatalf("ACKs %v", acks)
	}
	for range 4 {
		waitWC(t, p.wcB)
	}
	// Without the ACK request bit, a burst's end sends nothing.
	p.postRecv(t, 9, 16)
	pk := wire.Packet{BTH: wire.BTH{Opcode: wire.RCSendOnly, DestQP: 0x22, PSN: psn.Add(4)}, Payload: []byte{1}}
	mu.Unlock()
	p.b.Receive(p.ta.LocalAddr(), &pk)
	p.b.Flush()
	mu.Lock()
	if len(acks) != 1 {
		t.Fatalf("ACK without AckReq: %v", acks[1:])
	}
}

// TestRCRetransmitAfterTimeout loses a SEND, checks nothing completes
// until the ACK timeout passes, then that the retransmission delivers it.
func TestRCRetransmitAfterTimeout(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	p.ta.Inject(Fault{Action: FaultDrop, Match: isOp(wire.RCSendOnly), Hit: p.hit})
	r := p.postRecv(t, 100, 64)
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: []byte("lost once")})
	p.waitHit(t)
	noWC(t, p.wcA)
	p.clock.Advance(testTimeout)
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	expectWC(t, p.wcB, 100, verbs.WCSuccess)
	if string(r[:9]) != "lost once" {
		t.Fatalf("received %q", r[:9])
	}
}

// TestRCCorruptRetransmitted corrupts a WRITE: the responder drops it for
// its ICRC, and the timeout retransmits it.
func TestRCCorruptRetransmitted(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	p.ta.Inject(Fault{Action: FaultCorrupt, Match: isOp(wire.RCWriteOnly), Hit: p.hit})
	p.post(t, &sendWQE{id: 1, op: verbs.OpWrite, data: []byte("abcd"), raddr: vaB, rkey: rkeyB})
	p.waitHit(t)
	// A second write queued behind proves the first was dropped: its
	// out-of-sequence arrival is what makes B answer, with a NAK.
	p.post(t, &sendWQE{id: 2, op: verbs.OpWrite, data: []byte("efgh"), raddr: vaB + 4, rkey: rkeyB})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	expectWC(t, p.wcA, 2, verbs.WCSuccess)
	if m := p.readB(0, 8); string(m) != "abcdefgh" {
		t.Fatalf("memory %q", m)
	}
	if p.tb.Stats().BadICRC != 1 {
		t.Fatalf("stats %+v", p.tb.Stats())
	}
}

// TestRCLostACK loses the responder's ACK: the requester retransmits
// after the timeout, the responder sees a duplicate, does not deliver it
// again, and acknowledges it again.
func TestRCLostACK(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	p.tb.Inject(Fault{Action: FaultDrop, Match: isOp(wire.RCAcknowledge), Hit: p.hit})
	p.postRecv(t, 100, 64)
	p.postRecv(t, 101, 64)
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: []byte("once")})
	expectWC(t, p.wcB, 100, verbs.WCSuccess)
	p.waitHit(t)
	noWC(t, p.wcA)
	p.clock.Advance(testTimeout)
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	// The next message takes the next receive: the duplicate took none.
	p.post(t, &sendWQE{id: 2, op: verbs.OpSend, data: []byte("twice")})
	expectWC(t, p.wcA, 2, verbs.WCSuccess)
	expectWC(t, p.wcB, 101, verbs.WCSuccess)
}

// TestRCRetryExceeded loses every transmission: after the first send and
// retry_cnt retransmissions of the oldest packet the WR fails with
// RETRY_EXC_ERR and the rest of the queue flushes.
func TestRCRetryExceeded(t *testing.T) {
	const retry = 2
	p := newPair(t, 256, retry, 7)
	p.ta.Inject(Fault{Action: FaultDrop, Count: 1 << 30, Match: isOp(wire.RCSendOnly), Hit: p.hit})
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: []byte("x")})
	p.post(t, &sendWQE{id: 2, op: verbs.OpSend, data: []byte("y")})
	p.waitHit(t) // 1
	p.waitHit(t) // 2
	for i := range retry {
		p.clock.Advance(testTimeout)
		// A timeout resends the oldest unacknowledged packet alone, and
		// asks for an ACK.
		if pk := p.waitHit(t); pk.BTH.PSN != 0xfffffe || !pk.BTH.AckReq {
			t.Fatalf("retry %d resent %v", i, &pk)
		}
		select {
		case pk := <-p.hits:
			t.Fatalf("retry %d resent %v too", i, &pk)
		default:
		}
		noWC(t, p.wcA)
	}
	p.clock.Advance(testTimeout)
	expectWC(t, p.wcA, 1, verbs.WCRetryExcErr)
	expectWC(t, p.wcA, 2, verbs.WCWRFlushErr)
	if err := p.a.postSend(&sendWQE{id: 3, op: verbs.OpSend}); err == nil {
		t.Fatal("post to a QP in ERR succeeded")
	}
}

// TestRCSequenceNAK loses a middle packet: the responder NAKs the gap
// once (PSN sequence error) and the requester goes back to it.
func TestRCSequenceNAK(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	start := wire.PSN(0xfffffe)
	p.ta.Inject(Fault{Action: FaultDrop, Match: isPSN(start.Add(1)), Hit: p.hit})
	naks := make(chan wire.Packet, 16)
	p.tb.Inject(Fault{Action: FaultObserve, Count: 1 << 30, Match: func(pk *wire.Packet) bool {
		return pk.BTH.Opcode == wire.RCAcknowledge && pk.AETH.Syndrome.IsNAK()
	}, Hit: func(pk wire.Packet) { naks <- pk }})
	r := p.postRecv(t, 100, 1024)
	msg := pattern(1024, 3) // 4 packets, the second lost
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: msg})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	expectWC(t, p.wcB, 100, verbs.WCSuccess)
	if !bytes.Equal(r, msg) {
		t.Fatal("data wrong")
	}
	nak := next(t, naks)
	if nak.AETH.Syndrome != wire.NAK(wire.NAKPSNSequenceError) || nak.BTH.PSN != start.Add(1) {
		t.Fatalf("NAK %v %#x", &nak, nak.AETH.Syndrome)
	}
	// Packets 3 and 4 both arrived out of sequence; only one NAK went out.
	select {
	case pk := <-naks:
		t.Fatalf("second NAK %v", &pk)
	default:
	}
}

// TestRCDuplicatePacket duplicates a SEND: the responder delivers it once.
func TestRCDuplicatePacket(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	p.ta.Inject(Fault{Action: FaultDuplicate, Match: isOp(wire.RCSendOnly)})
	p.postRecv(t, 100, 64)
	p.postRecv(t, 101, 64)
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: []byte("a")})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	expectWC(t, p.wcB, 100, verbs.WCSuccess)
	p.post(t, &sendWQE{id: 2, op: verbs.OpSend, data: []byte("b")})
	expectWC(t, p.wcA, 2, verbs.WCSuccess)
	expectWC(t, p.wcB, 101, verbs.WCSuccess)
}

// TestRCReorder swaps two packets of a WRITE: the responder NAKs the gap,
// takes the late packet in sequence, and the go-back-N copies arrive as
// duplicates.
func TestRCReorder(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	start := wire.PSN(0xfffffe)
	p.ta.Inject(Fault{Action: FaultReorder, Match: isPSN(start.Add(1))})
	msg := pattern(768, 9)
	p.post(t, &sendWQE{id: 1, op: verbs.OpWrite, data: msg, raddr: vaB, rkey: rkeyB})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	if !bytes.Equal(p.readB(0, 768), msg) {
		t.Fatal("data wrong")
	}
}

// TestRCRNR sends to a responder with no receive posted: RNR NAK, the
// requester waits the responder's RNR timer, and succeeds once a receive
// is there.
func TestRCRNR(t *testing.T) {
	p := newPair(t, 256, 3, 2)
	rnrs := make(chan wire.Packet, 16)
	p.tb.Inject(Fault{Action: FaultObserve, Count: 1 << 30, Match: func(pk *wire.Packet) bool {
		return pk.BTH.Opcode == wire.RCAcknowledge && pk.AETH.Syndrome.IsRNRNAK()
	}, Hit: func(pk wire.Packet) { rnrs <- pk }})
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: []byte("wait")})
	if pk := next(t, rnrs); pk.AETH.Syndrome.Value() != testRNRCode {
		t.Fatalf("RNR timer %d", pk.AETH.Syndrome.Value())
	}
	p.clock.WaitTimer(wire.RNRTimer(testRNRCode)) // the requester's RNR timer
	p.postRecv(t, 100, 64)
	noWC(t, p.wcA)
	p.clock.Advance(wire.RNRTimer(testRNRCode))
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	expectWC(t, p.wcB, 100, verbs.WCSuccess)
}

// TestRCRNRRetryExceeded runs out of rnr_retry: after it, the WR fails
// with RNR_RETRY_EXC_ERR.
func TestRCRNRRetryExceeded(t *testing.T) {
	p := newPair(t, 256, 3, 1)
	rnrs := make(chan wire.Packet, 16)
	p.tb.Inject(Fault{Action: FaultObserve, Count: 1 << 30, Match: isOp(wire.RCAcknowledge),
		Hit: func(pk wire.Packet) { rnrs <- pk }})
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: []byte("never")})
	next(t, rnrs)
	p.clock.WaitTimer(wire.RNRTimer(testRNRCode))
	p.clock.Advance(wire.RNRTimer(testRNRCode))
	next(t, rnrs)
	expectWC(t, p.wcA, 1, verbs.WCRNRRetryExcErr)
}

// TestRCReadResponseLost loses a middle packet of a READ response: the
// requester drops what follows it, and after the timeout asks for the
// rest a window at a time (one packet, the window a timeout leaves, then
// what the window has grown to), which the responder answers from the
// saved request.
func TestRCReadResponseLost(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	got := make(chan wire.PSN, 16)
	p.a.mu.Lock()
	p.a.cfg.observe = func(pk *wire.Packet) { got <- pk.BTH.PSN }
	p.a.mu.Unlock()
	p.writeB(0, pattern(1024, 5))
	start := wire.PSN(0xfffffe)
	p.tb.Inject(Fault{Action: FaultDrop, Match: isPSN(start.Add(1)), Hit: p.hit})
	rereq := make(chan wire.Packet, 4)
	p.ta.Inject(Fault{Action: FaultObserve, Count: 1 << 30, Match: isOp(wire.RCReadRequest), Hit: func(pk wire.Packet) { rereq <- pk }})
	rd := make([]byte, 1024)
	p.post(t, &sendWQE{id: 1, op: verbs.OpRead, data: rd, raddr: vaB, rkey: rkeyB})
	next(t, rereq)
	p.waitHit(t)
	for range 3 { // responses 0, 2 and 3 reached A, 2 and 3 out of order
		next(t, got)
	}
	noWC(t, p.wcA)
	p.clock.Advance(testTimeout)
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	if !bytes.Equal(rd, pattern(1024, 5)) {
		t.Fatal("READ data wrong")
	}
	pk := next(t, rereq)
	if pk.BTH.PSN != start.Add(1) || pk.RETH.VA != vaB+256 || pk.RETH.DMALen != 256 {
		t.Fatalf("re-request %v %+v, want one packet's worth from PSN %v", &pk, pk.RETH, start.Add(1))
	}
	if pk := next(t, rereq); pk.BTH.PSN != start.Add(2) || pk.RETH.VA != vaB+512 || pk.RETH.DMALen != 512 {
		t.Fatalf("second re-request %v %+v, want the two packets left", &pk, pk.RETH)
	}
}

// TestRCRemoteAccessError writes through a bad rkey: the requester fails
// with REM_ACCESS_ERR and the responder's receives flush.
func TestRCRemoteAccessError(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	p.postRecv(t, 100, 64)
	// The WRITE is lost once, so the SEND is queued before the NAK can
	// come: the SEND arrives out of sequence, its NAK makes A go back, and
	// the retransmitted WRITE meets the bad rkey.
	p.ta.Inject(Fault{Action: FaultDrop, Match: isOp(wire.RCWriteOnly)})
	p.post(t, &sendWQE{id: 1, op: verbs.OpWrite, data: []byte("x"), raddr: vaB, rkey: rkeyB + 1})
	p.post(t, &sendWQE{id: 2, op: verbs.OpSend, data: []byte("y")})
	expectWC(t, p.wcA, 1, verbs.WCRemAccessErr)
	expectWC(t, p.wcA, 2, verbs.WCWRFlushErr)
	expectWC(t, p.wcB, 100, verbs.WCWRFlushErr)
}

// TestRCInvalidRequest sends a message longer than the receive buffer:
// the responder's receive fails with LOC_LEN_ERR, the requester's with
// REM_INV_REQ_ERR.
func TestRCInvalidRequest(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	p.postRecv(t, 100, 8)
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: make([]byte, 9)})
	expectWC(t, p.wcA, 1, verbs.WCRemInvReqErr)
	expectWC(t, p.wcB, 100, verbs.WCLocLenErr)
}

// TestRCAckSkipsResent acknowledges packets the requester was about to
// send again after going back: it completes their WRs and resumes after
// them instead of resending them.
func TestRCAckSkipsResent(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	sent := make(chan wire.Packet, 16)
	p.ta.Inject(Fault{Action: FaultDrop, Count: 1 << 30, Hit: func(pk wire.Packet) { sent <- pk }})
	start := wire.PSN(0xfffffe)
	for id := range uint64(3) {
		p.post(t, &sendWQE{id: id + 1, op: verbs.OpSend, data: []byte{byte(id)}})
		next(t, sent)
	}
	// The requester has gone back to the first PSN and not sent yet.
	p.a.mu.Lock()
	p.a.seek(start)
	p.a.mu.Unlock()
	ack := wire.Packet{BTH: wire.BTH{Opcode: wire.RCAcknowledge, DestQP: 0x11, PSN: start.Add(1)}, AETH: wire.AETH{Syndrome: wire.ACK(wire.CreditsInvalid)}}
	p.a.Receive(p.tb.LocalAddr(), &ack)
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	expectWC(t, p.wcA, 2, verbs.WCSuccess)
	if pk := next(t, sent); pk.BTH.PSN != start.Add(2) {
		t.Fatalf("sent PSN %d after the ACK, want %d", pk.BTH.PSN, start.Add(2))
	}
	// A stale ACK changes nothing.
	p.a.Receive(p.tb.LocalAddr(), &ack)
	noWC(t, p.wcA)
}

// TestRCLargeTransfers moves messages longer than the requester's window
// at several MTUs, so the window refills on ACKs requested in the middle
// of a message. It runs on the system clock: a READ's response is sent
// at once and may overrun a small socket buffer, and the retransmission
// that repairs the loss must not wait for a test to move a manual clock.
// Nothing is asserted about time.
func TestRCLargeTransfers(t *testing.T) {
	for _, mtu := range []int{256, 1024, 4096} {
		p := newPairClock(t, NewManualClock(), SystemClock{}, mtu, 7, 7)
		msg := pattern(100<<10, byte(mtu>>8))
		p.post(t, &sendWQE{id: 1, op: verbs.OpWrite, data: msg, raddr: vaB, rkey: rkeyB})
		rd := make([]byte, len(msg))
		p.post(t, &sendWQE{id: 2, op: verbs.OpRead, data: rd, raddr: vaB, rkey: rkeyB})
		r := p.postRecv(t, 100, len(msg))
		p.post(t, &sendWQE{id: 3, op: verbs.OpSend, data: msg})
		expectWC(t, p.wcA, 1, verbs.WCSuccess)
		expectWC(t, p.wcA, 2, verbs.WCSuccess)
		expectWC(t, p.wcA, 3, verbs.WCSuccess)
		expectWC(t, p.wcB, 100, verbs.WCSuccess)
		if !bytes.Equal(rd, msg) || !bytes.Equal(r, msg) || !bytes.Equal(p.readB(0, len(msg)), msg) {
			t.Fatalf("MTU %d: data wrong", mtu)
		}
	}
}

// TestRCOpcodeSequence feeds a responder packets out of their message
// order: each is an invalid request that moves it to ERR.
func TestRCOpcodeSequence(t *testing.T) {
	start := wire.PSN(0xfffffe)
	for _, c := range []struct {
		name string
		ops  []wire.Opcode
	}{
		{"middle first", []wire.Opcode{wire.RCSendMiddle}},
		{"last first", []wire.Opcode{wire.RCWriteLast}},
		{"first twice", []wire.Opcode{wire.RCSendFirst, wire.RCSendFirst}},
		{"send inside write", []wire.Opcode{wire.RCWriteFirst, wire.RCSendLast}},
		{"write inside send", []wire.Opcode{wire.RCSendFirst, wire.RCWriteMiddle}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, 256, 3, 7)
			naks := make(chan wire.Packet, 4)
			p.tb.Inject(Fault{Action: FaultDrop, Count: 1 << 30, Hit: func(pk wire.Packet) { naks <- pk }})
			p.postRecv(t, 100, 1024)
			for i, op := range c.ops {
				pk := wire.Packet{BTH: wire.BTH{Opcode: op, DestQP: 0x22, PSN: start.Add(i)}, Payload: make([]byte, 256),
					RETH: wire.RETH{VA: vaB, RKey: rkeyB, DMALen: 1024}}
				p.b.Receive(p.ta.LocalAddr(), &pk)
			}
			nak := next(t, naks)
			if nak.AETH.Syndrome != wire.NAK(wire.NAKInvalidRequest) || nak.BTH.PSN != start.Add(len(c.ops)-1) {
				t.Fatalf("response %v syndrome %#x", &nak, nak.AETH.Syndrome)
			}
			if wc := waitWC(t, p.wcB); wc.WRID != 100 || wc.Status == verbs.WCSuccess {
				t.Fatalf("receive completed %+v", wc)
			}
		})
	}
}

func (p *pair) wordB(off int) uint64 {
	return binary.NativeEndian.Uint64(p.readB(off, 8))
}

// TestRCAtomics runs FETCH_AND_ADD and CMP_AND_SWP (a hit and a miss):
// each returns the original value in host byte order and changes the
// remote word as it should.
func TestRCAtomics(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	var w [8]byte
	binary.NativeEndian.PutUint64(w[:], 40)
	p.writeB(64, w[:])
	orig := make([]byte, 8)
	for _, c := range []struct {
		op                 verbs.Opcode
		compare, swapAdd   uint64
		wantOrig, wantWord uint64
	}{
		{verbs.OpAtomicFetchAdd, 0, 2, 40, 42},
		{verbs.OpAtomicCmpSwp, 42, 7, 42, 7},          // hit
		{verbs.OpAtomicCmpSwp, 42, 99, 7, 7},          // miss
		{verbs.OpAtomicFetchAdd, 0, ^uint64(0), 7, 6}, // adds -1, wrapping
	} {
		p.post(t, &sendWQE{id: 1, op: c.op, data: orig, raddr: vaB + 64, rkey: rkeyB, compare: c.compare, swapAdd: c.swapAdd})
		wc := expectWC(t, p.wcA, 1, verbs.WCSuccess)
		if got := binary.NativeEndian.Uint64(orig); got != c.wantOrig || wc.Opcode != verbs.WCOpcodeOf(c.op) {
			t.Fatalf("%v: original %d (%v), want %d", c.op, got, wc.Opcode, c.wantOrig)
		}
		if got := p.wordB(64); got != c.wantWord {
			t.Fatalf("%v: remote word %d, want %d", c.op, got, c.wantWord)
		}
	}
}

// TestRCAtomicReplay loses an atomic's response: the retransmitted atomic
// is a duplicate the responder answers from its history, so the remote
// word changes once and the requester gets the first original value.
func TestRCAtomicReplay(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	p.tb.Inject(Fault{Action: FaultDrop, Match: isOp(wire.RCAtomicAcknowledge), Hit: p.hit})
	orig := make([]byte, 8)
	p.post(t, &sendWQE{id: 1, op: verbs.OpAtomicFetchAdd, data: orig, raddr: vaB, rkey: rkeyB, swapAdd: 5})
	p.waitHit(t)
	noWC(t, p.wcA)
	p.clock.Advance(testTimeout)
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	if got := binary.NativeEndian.Uint64(orig); got != 0 {
		t.Fatalf("original %d, want 0", got)
	}
	if got := p.wordB(0); got != 5 {
		t.Fatalf("remote word %d after one FETCH_AND_ADD of 5 retransmitted once", got)
	}
}

// TestRCAtomicAfterAck loses an atomic's response and acknowledges a later
// SEND: the requester must not complete the atomic on that ACK, and asks
// for it again.
func TestRCAtomicAfterAck(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	p.tb.Inject(Fault{Action: FaultDrop, Match: isOp(wire.RCAtomicAcknowledge), Hit: p.hit})
	p.postRecv(t, 100, 8)
	orig := make([]byte, 8)
	p.post(t, &sendWQE{id: 1, op: verbs.OpAtomicCmpSwp, data: orig, raddr: vaB + 8, rkey: rkeyB, compare: 0, swapAdd: 9})
	p.post(t, &sendWQE{id: 2, op: verbs.OpSend, data: []byte("x")})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	expectWC(t, p.wcA, 2, verbs.WCSuccess)
	p.waitHit(t)
	if got := binary.NativeEndian.Uint64(orig); got != 0 || p.wordB(8) != 9 {
		t.Fatalf("original %d, word %d", got, p.wordB(8))
	}
}

// TestRCAtomicAccessAndAlignment checks the responder's refusals: no
// atomic right is a remote access error, a misaligned address an invalid
// request.
func TestRCAtomicAccessAndAlignment(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	p.post(t, &sendWQE{id: 1, op: verbs.OpAtomicFetchAdd, data: make([]byte, 8), raddr: vaB + 4, rkey: rkeyB, swapAdd: 1})
	expectWC(t, p.wcA, 1, verbs.WCRemInvReqErr)
	p = newPair(t, 256, 3, 7)
	p.post(t, &sendWQE{id: 2, op: verbs.OpAtomicFetchAdd, data: make([]byte, 8), raddr: vaB, rkey: rkeyB + 1, swapAdd: 1})
	expectWC(t, p.wcA, 2, verbs.WCRemAccessErr)
}
