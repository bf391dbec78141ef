package rocev2

import (
	"bytes"
	"encoding/binary"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// stranger is a third party on the host: a plain UDP socket on ::1 that
// sends RoCE v2 datagrams with ICRCs valid for its own address and port,
// as any process of the host can.
type stranger struct {
	c    *net.UDPConn
	addr netip.AddrPort
}

func newStranger(t *testing.T) *stranger {
	t.Helper()
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &stranger{c: c, addr: c.LocalAddr().(*net.UDPAddr).AddrPort()}
}

// send seals p for the path from the stranger to tr and sends it.
func (s *stranger) send(t *testing.T, tr *Transport, p *wire.Packet) {
	t.Helper()
	to := tr.LocalAddr()
	p.BTH.PKey = wire.DefaultPKey
	b, err := p.Append(nil, &wire.IPHeader{Src: s.addr.Addr(), Dst: to.Addr(), SrcPort: s.addr.Port(), DstPort: to.Port()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.WriteToUDPAddrPort(b, to); err != nil {
		t.Fatal(err)
	}
}

// handled is how many datagrams tr took from its socket: those it handed
// to a QP and those it dropped before any QP saw them.
func handled(tr *Transport) uint64 {
	s := tr.Stats()
	return s.Received + s.Runt + s.NoQP + s.NotPeer + s.BadICRC + s.Malformed
}

// waitHandled waits until tr has taken n datagrams from its socket; the
// bound is only a way out of a broken test.
func waitHandled(t *testing.T, tr *Transport, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); handled(tr) < n; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the transport took %d datagrams, want %d: %+v", handled(tr), n, tr.Stats())
		}
	}
}

// wantNotPeer checks that tr dropped n datagrams as not its QPs' peers'.
func wantNotPeer(t *testing.T, tr *Transport, n uint64) {
	t.Helper()
	if st := tr.Stats(); st.NotPeer != n || st.Received != 0 {
		t.Fatalf("Stats.NotPeer %d and Received %d, want %d and 0: %+v", st.NotPeer, st.Received, n, st)
	}
}

// expected is the PSN q's responder expects next.
func (q *rcQP) expected() wire.PSN {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ePSN
}

func (q *rcQP) isFailed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failed
}

// TestStrangerCannotTakeAPSN sends B, from a stranger's socket, a
// zero-length WRITE at the PSN B expects from A next: had B taken it, A's
// WRITE at that PSN would arrive as a duplicate, be acknowledged and
// never land. The stranger's datagram is dropped before B's QP sees it,
// and A's WRITE lands.
func TestStrangerCannotTakeAPSN(t *testing.T) {
	p := newPair(t, 256, 7, 7)
	s := newStranger(t)
	want := p.b.expected()
	s.send(t, p.tb, &wire.Packet{BTH: wire.BTH{Opcode: wire.RCWriteOnly, DestQP: p.b.cfg.QPN, PSN: want},
		RETH: wire.RETH{VA: vaB, RKey: rkeyB}})
	waitHandled(t, p.tb, 1)
	if got := p.b.expected(); got != want {
		t.Fatalf("B's expected PSN moved from %v to %v on a stranger's datagram", want, got)
	}
	wantNotPeer(t, p.tb, 1)
	data := pattern(600, 9)
	p.post(t, &sendWQE{id: 1, op: verbs.OpWrite, data: data, raddr: vaB, rkey: rkeyB})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	if !bytes.Equal(p.readB(0, len(data)), data) {
		t.Fatal("A's WRITE did not land")
	}
}

// TestStrangerCannotInjectASend sends B, from a stranger's socket, a SEND
// at the PSN B expects and one on each side of it: none reaches B's
// receive, which then takes A's SEND whole.
func TestStrangerCannotInjectASend(t *testing.T) {
	p := newPair(t, 256, 7, 7)
	s := newStranger(t)
	buf := p.postRecv(t, 101, 64)
	e := p.b.expected()
	for _, psn := range []wire.PSN{e.Add(-1), e, e.Add(1)} {
		s.send(t, p.tb, &wire.Packet{BTH: wire.BTH{Opcode: wire.RCSendOnly, DestQP: p.b.cfg.QPN, PSN: psn}, Payload: []byte("forged!!")})
	}
	waitHandled(t, p.tb, 3)
	noWC(t, p.wcB)
	wantNotPeer(t, p.tb, 3)
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: []byte("real")})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	wc := expectWC(t, p.wcB, 101, verbs.WCSuccess)
	if wc.ByteLen != 4 || string(buf[:4]) != "real" {
		t.Fatalf("B received %d bytes %q, want A's 4 %q", wc.ByteLen, buf[:wc.ByteLen], "real")
	}
}

// TestStrangerCannotEndAConnection sends B, from a stranger's socket, at
// the PSN B expects, each request that IB rules make a peer's QP fail
// for: a WRITE through a wrong key, to a read-only range (B grants
// everything, so past its end), a READ out of range, a misaligned
// atomic, an opcode out of order, and a NAK to A. Both QPs stay up and
// the stream goes on.
func TestStrangerCannotEndAConnection(t *testing.T) {
	p := newPair(t, 256, 7, 7)
	s := newStranger(t)
	e := p.b.expected()
	qpn := p.b.cfg.QPN
	for _, pk := range []wire.Packet{
		{BTH: wire.BTH{Opcode: wire.RCWriteOnly, DestQP: qpn, PSN: e}, RETH: wire.RETH{VA: vaB, RKey: rkeyB ^ 1, DMALen: 4}, Payload: []byte("evil")},
		{BTH: wire.BTH{Opcode: wire.RCWriteOnly, DestQP: qpn, PSN: e}, RETH: wire.RETH{VA: vaB + uint64(len(p.memB)), RKey: rkeyB, DMALen: 4}, Payload: []byte("evil")},
		{BTH: wire.BTH{Opcode: wire.RCReadRequest, DestQP: qpn, PSN: e}, RETH: wire.RETH{VA: vaB, RKey: rkeyB, DMALen: 1 << 30}},
		{BTH: wire.BTH{Opcode: wire.RCFetchAdd, DestQP: qpn, PSN: e}, AtomicETH: wire.AtomicETH{VA: vaB + 3, RKey: rkeyB, SwapAdd: 1}},
		{BTH: wire.BTH{Opcode: wire.RCSendMiddle, DestQP: qpn, PSN: e}, Payload: make([]byte, 256)},
	} {
		s.send(t, p.tb, &pk)
	}
	s.send(t, p.ta, &wire.Packet{BTH: wire.BTH{Opcode: wire.RCAcknowledge, DestQP: p.a.cfg.QPN, PSN: p.b.expected()},
		AETH: wire.AETH{Syndrome: wire.NAK(wire.NAKRemoteAccessError)}})
	waitHandled(t, p.tb, 5)
	waitHandled(t, p.ta, 1)
	if p.a.isFailed() || p.b.isFailed() {
		t.Fatal("a stranger's datagram moved a QP to ERR")
	}
	wantNotPeer(t, p.tb, 5)
	wantNotPeer(t, p.ta, 1)
	data := pattern(300, 2)
	p.post(t, &sendWQE{id: 1, op: verbs.OpWrite, data: data, raddr: vaB, rkey: rkeyB})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	if !bytes.Equal(p.readB(0, len(data)), data) {
		t.Fatal("A's WRITE did not land")
	}
}

// TestStrangerSweepLeavesTheStream sweeps zero-length WRITEs over QPNs
// about B's and PSNs upward from the one B expects, as a blind attacker
// would to push B's expected PSN past A's: every one is dropped, and A's
// WRITEs and READs then complete with their data.
func TestStrangerSweepLeavesTheStream(t *testing.T) {
	p := newPair(t, 256, 7, 7)
	s := newStranger(t)
	e := p.b.expected()
	const psns = 500
	qpns := []uint32{p.b.cfg.QPN - 1, p.b.cfg.QPN, p.b.cfg.QPN + 1, p.a.cfg.QPN}
	sent := uint64(0)
	for k := range psns {
		for _, qpn := range qpns {
			s.send(t, p.tb, &wire.Packet{BTH: wire.BTH{Opcode: wire.RCWriteOnly, DestQP: qpn, PSN: e.Add(k)}, RETH: wire.RETH{VA: vaB, RKey: rkeyB}})
		}
		if sent += uint64(len(qpns)); sent%100 == 0 {
			// In bursts that B's socket buffer holds whatever its size.
			waitHandled(t, p.tb, sent)
		}
	}
	waitHandled(t, p.tb, sent)
	if got := p.b.expected(); got != e {
		t.Fatalf("B's expected PSN moved from %v to %v", e, got)
	}
	for i := range 8 {
		data := pattern(512, byte(i))
		p.post(t, &sendWQE{id: uint64(2 * i), op: verbs.OpWrite, data: data, raddr: vaB + uint64(i)*1024, rkey: rkeyB})
		rd := make([]byte, 512)
		p.post(t, &sendWQE{id: uint64(2*i + 1), op: verbs.OpRead, data: rd, raddr: vaB + uint64(i)*1024, rkey: rkeyB})
		expectWC(t, p.wcA, uint64(2*i), verbs.WCSuccess)
		expectWC(t, p.wcA, uint64(2*i+1), verbs.WCSuccess)
		if !bytes.Equal(rd, data) {
			t.Fatalf("READ %d returned other bytes than the WRITE before it wrote", i)
		}
	}
}

// TestSourceAdmits checks whose packets a registered QP takes.
func TestSourceAdmits(t *testing.T) {
	peer := netip.MustParseAddrPort("[fd00::1]:5000")
	other := netip.MustParseAddr("fd00::2")
	for _, c := range []struct {
		name string
		src  Source
		from netip.AddrPort
		want bool
	}{
		{"any source, anyone", AnySource, netip.AddrPortFrom(other, 1), true},
		{"the peer's address and port", Source{Addr: peer.Addr(), Port: peer.Port()}, peer, true},
		{"the peer's address, another port", Source{Addr: peer.Addr(), Port: peer.Port()}, netip.AddrPortFrom(peer.Addr(), 5001), false},
		{"another address, the peer's port", Source{Addr: peer.Addr(), Port: peer.Port()}, netip.AddrPortFrom(other, peer.Port()), false},
		{"address only, another port", Source{Addr: peer.Addr()}, netip.AddrPortFrom(peer.Addr(), 49152), true},
		{"address only, another address", Source{Addr: peer.Addr()}, netip.AddrPortFrom(other, 49152), false},
	} {
		if got := c.src.admits(c.from); got != c.want {
			t.Errorf("%s: %+v admits %v: %v, want %v", c.name, c.src, c.from, got, c.want)
		}
	}
}

// countResponses counts B's READ responses and atomic ACKs as they leave.
func countResponses(p *pair) *atomic.Int64 {
	var n atomic.Int64
	p.tb.Inject(Fault{Action: FaultObserve, Count: 1 << 30, Hit: func(wire.Packet) { n.Add(1) },
		Match: func(pk *wire.Packet) bool {
			return pk.BTH.Opcode.IsReadResponse() || pk.BTH.Opcode == wire.RCAtomicAcknowledge
		}})
	return &n
}

// TestRCDuplicateReadAnsweredFromSavedRequests replays READ requests to B
// as if from A, after a two-packet READ completed: B answers a duplicate
// only when it repeats the saved request or its tail (same key, the range
// from its PSN on), with as many packets as it asks for, and ignores a
// duplicate that widens the range, moves it, changes the key or repeats
// no request at all, as rxe's responder does (duplicate_request).
func TestRCDuplicateReadAnsweredFromSavedRequests(t *testing.T) {
	p := newPair(t, 256, 7, 7)
	p.writeB(0, pattern(512, 3))
	start := p.b.expected()
	rd := make([]byte, 512)
	p.post(t, &sendWQE{id: 1, op: verbs.OpRead, data: rd, raddr: vaB, rkey: rkeyB})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	responses := countResponses(p)
	from := p.ta.LocalAddr()
	for _, c := range []struct {
		name string
		psn  wire.PSN
		reth wire.RETH
		want int64
	}{
		{"the saved request", start, wire.RETH{VA: vaB, RKey: rkeyB, DMALen: 512}, 2},
		{"its tail", start.Add(1), wire.RETH{VA: vaB + 256, RKey: rkeyB, DMALen: 256}, 1},
		{"a part from its PSN", start, wire.RETH{VA: vaB, RKey: rkeyB, DMALen: 100}, 1},
		{"a wider range", start, wire.RETH{VA: vaB, RKey: rkeyB, DMALen: 4096}, 0},
		{"another address", start, wire.RETH{VA: vaB + 1024, RKey: rkeyB, DMALen: 512}, 0},
		{"the tail's PSN at the head's address", start.Add(1), wire.RETH{VA: vaB, RKey: rkeyB, DMALen: 256}, 0},
		{"another key", start, wire.RETH{VA: vaB, RKey: rkeyB + 1, DMALen: 512}, 0},
		{"a PSN no request had", start.Add(-100), wire.RETH{VA: vaB, RKey: rkeyB, DMALen: 512}, 0},
	} {
		before := responses.Load()
		pk := wire.Packet{BTH: wire.BTH{Opcode: wire.RCReadRequest, DestQP: p.b.cfg.QPN, PSN: c.psn}, RETH: c.reth}
		p.b.Receive(from, &pk) // B sends on the receiving goroutine: what it answers has left
		if got := responses.Load() - before; got != c.want {
			t.Errorf("%s: B sent %d response packets, want %d", c.name, got, c.want)
		}
	}
	if p.b.expected() != start.Add(2) || p.b.isFailed() {
		t.Fatal("a duplicate READ moved B's expected PSN or failed it")
	}
}

// TestRCDuplicateAtomicAnsweredFromSavedResults replays a FETCH_AND_ADD to
// B as if from A: the same PSN, key and address get the first result and
// change nothing; another key or address at that PSN gets no answer.
func TestRCDuplicateAtomicAnsweredFromSavedResults(t *testing.T) {
	p := newPair(t, 256, 7, 7)
	start := p.b.expected()
	old := make([]byte, 8)
	p.post(t, &sendWQE{id: 1, op: verbs.OpAtomicFetchAdd, data: old, raddr: vaB + 64, rkey: rkeyB, swapAdd: 5})
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	responses := countResponses(p)
	from := p.ta.LocalAddr()
	for _, c := range []struct {
		name string
		h    wire.AtomicETH
		want int64
	}{
		{"the same atomic", wire.AtomicETH{VA: vaB + 64, RKey: rkeyB, SwapAdd: 5}, 1},
		{"another address", wire.AtomicETH{VA: vaB + 128, RKey: rkeyB, SwapAdd: 5}, 0},
		{"another key", wire.AtomicETH{VA: vaB + 64, RKey: rkeyB + 1, SwapAdd: 5}, 0},
	} {
		before := responses.Load()
		pk := wire.Packet{BTH: wire.BTH{Opcode: wire.RCFetchAdd, DestQP: p.b.cfg.QPN, PSN: start}, AtomicETH: c.h}
		p.b.Receive(from, &pk)
		if got := responses.Load() - before; got != c.want {
			t.Errorf("%s: B sent %d answers, want %d", c.name, got, c.want)
		}
	}
	if got := binary.NativeEndian.Uint64(p.readB(64, 8)); got != 5 {
		t.Fatalf("the word holds %d after the replays, want 5: an atomic ran twice", got)
	}
}

// BenchmarkDropStranger is the transport's work for a datagram it drops
// before any QP sees it (what a flood costs it past the socket read): one
// from a stranger at a connected QP's number, with a valid ICRC, and one
// at no QP.
func BenchmarkDropStranger(b *testing.B) {
	ta, tb := listenPair(b, NewManualClock())
	q := newRCQP(tb, rcConfig{QPN: 0x22, RemoteQPN: 0x11, Remote: ta.LocalAddr(), MTU: 1024,
		Memory: &testMemory{keys: map[uint32]region{}}, Complete: func(verbs.WC) {}})
	b.Cleanup(q.close)
	from := netip.MustParseAddrPort("[::1]:40000")
	for _, c := range []struct {
		name string
		qpn  uint32
	}{{"not-the-peer", 0x22}, {"no-qp", 0x33}} {
		b.Run(c.name, func(b *testing.B) {
			pk := wire.Packet{BTH: wire.BTH{Opcode: wire.RCWriteOnly, DestQP: c.qpn, PKey: wire.DefaultPKey}, RETH: wire.RETH{DMALen: 64}, Payload: make([]byte, 64)}
			d, err := pk.Append(nil, &wire.IPHeader{Src: from.Addr(), Dst: tb.LocalAddr().Addr(), SrcPort: from.Port(), DstPort: tb.LocalAddr().Port()})
			if err != nil {
				b.Fatal(err)
			}
			tb.rxMu.Lock()
			defer tb.rxMu.Unlock()
			b.ReportAllocs()
			for b.Loop() {
				tb.handle(d, from)
			}
		})
	}
}
