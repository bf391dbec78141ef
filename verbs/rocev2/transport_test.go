package rocev2

import (
	"errors"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder is a Receiver that queues what it receives.
type recorder struct {
	mu      sync.Mutex
	pkts    []wire.Packet
	flushes int
	ch      chan struct{}
	flushed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{ch: make(chan struct{}, 1024), flushed: make(chan struct{}, 1024)}
}

func (r *recorder) Receive(_ netip.AddrPort, p *wire.Packet) {
	c := *p
	c.Payload = append([]byte(nil), p.Payload...)
	r.mu.Lock()
	r.pkts = append(r.pkts, c)
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *recorder) Flush() {
	r.mu.Lock()
	r.flushes++
	r.mu.Unlock()
	r.flushed <- struct{}{}
}

// wait waits for n more packets; the bound is only a way out of a broken
// test, never a measurement.
func (r *recorder) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-r.ch:
		case <-time.After(10 * time.Second):
			t.Fatal("packet not delivered")
		}
	}
}

func (r *recorder) psns() []wire.PSN {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []wire.PSN
	for _, p := range r.pkts {
		s = append(s, p.BTH.PSN)
	}
	return s
}

var loopback6 = netip.AddrPortFrom(netip.IPv6Loopback(), 0)

func listenPair(t testing.TB, clock Clock) (a, b *Transport) {
	t.Helper()
	var err error
	if a, err = Listen(TransportConfig{Addr: loopback6, Clock: clock}); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	if b, err = Listen(TransportConfig{Addr: loopback6, Clock: clock}); err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func sendOnly(psn wire.PSN, qpn uint32) *wire.Packet {
	return &wire.Packet{BTH: wire.BTH{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey, DestQP: qpn, PSN: psn}, Payload: []byte{byte(psn), 2, 3}}
}

func TestListenRefuses(t *testing.T) {
	for _, a := range []string{"[::]:0", "127.0.0.1:0", "[::ffff:127.0.0.1]:0"} {
		if _, err := Listen(TransportConfig{Addr: netip.MustParseAddrPort(a)}); !errors.Is(err, ErrNotSupported) {
			t.Errorf("%s: %v, want ErrNotSupported", a, err)
		}
	}
}

// TestTransportDelivers checks that packets cross the socket with a valid
// ICRC, reach the Receiver of their QP, and that a burst ends in a Flush.
func TestTransportDelivers(t *testing.T) {
	a, b := listenPair(t, nil)
	r := newRecorder()
	b.Register(7, r, AnySource)
	for i := range 3 {
		if err := a.Send(b.LocalAddr(), sendOnly(wire.PSN(i), 7)); err != nil {
			t.Fatal(err)
		}
	}
	a.Send(b.LocalAddr(), sendOnly(9, 8)) // no QP 8
	r.wait(t, 3)
	if got := r.psns(); len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Fatalf("psns %v", got)
	}
	r.mu.Lock()
	payload := r.pkts[1].Payload
	r.mu.Unlock()
	if string(payload) != "\x01\x02\x03" {
		t.Fatalf("payload % x", payload)
	}
	// The flush after the burst runs on the receive goroutine once the
	// socket is empty. (A packet sent afterwards proves nothing: under
	// load it may join the burst before the socket was seen empty.)
	next(t, r.flushed)
	a.Send(b.LocalAddr(), sendOnly(3, 7))
	r.wait(t, 1)
	if s := b.Stats(); s.Received != 4 || s.BadICRC != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestFaults checks each fault action on chosen packets.
func TestFaults(t *testing.T) {
	clock := NewManualClock()
	a, b := listenPair(t, clock)
	r := newRecorder()
	b.Register(1, r, AnySource)
	is := func(psn wire.PSN) func(*wire.Packet) bool {
		return func(p *wire.Packet) bool { return p.BTH.PSN == psn }
	}
	hits := make(chan wire.Packet, 8)
	hit := func(p wire.Packet) { hits <- p }

	a.Inject(Fault{Action: FaultDrop, Match: is(1), Hit: hit})
	a.Inject(Fault{Action: FaultDuplicate, Match: is(2)})
	a.Inject(Fault{Action: FaultReorder, Match: is(3)})
	a.Inject(Fault{Action: FaultCorrupt, Match: is(5)})
	a.Inject(Fault{Action: FaultDelay, Match: is(6), Delay: time.Millisecond})
	for psn := range wire.PSN(8) {
		a.Send(b.LocalAddr(), sendOnly(psn, 1))
	}
	if p := next(t, hits); p.BTH.PSN != 1 {
		t.Fatalf("hit on %v", &p)
	}
	// Loopback delivers a datagram to the receiving socket within the
	// sender's system call, so one sender's packets keep their order.
	// 0, 2, 2, 4, 3, 7 arrive; 1 is lost, 5 fails its ICRC, 6 waits.
	r.wait(t, 6)
	want := []wire.PSN{0, 2, 2, 4, 3, 7}
	if got := r.psns(); !equalPSNs(got, want) {
		t.Fatalf("arrived %v, want %v", got, want)
	}
	clock.Advance(time.Millisecond)
	r.wait(t, 1)
	if got := r.psns(); got[len(got)-1] != 6 {
		t.Fatalf("arrived %v, want 6 last", got)
	}
	if s := b.Stats(); s.BadICRC != 1 {
		t.Fatalf("receiver stats %+v", s)
	}
	if s := a.Stats(); s.Faulted != 5 {
		t.Fatalf("sender stats %+v", s)
	}
}

func equalPSNs(a, b []wire.PSN) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// gated is a recorder whose first Receive waits for the test to open the
// gate, so packets pile up in the socket meanwhile.
type gated struct {
	*recorder
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (g *gated) Receive(from netip.AddrPort, p *wire.Packet) {
	g.once.Do(func() {
		close(g.entered)
		<-g.gate
	})
	g.recorder.Receive(from, p)
}

// TestTransportFlushesOncePerBurst holds the receive goroutine inside the
// first packet while four more queue in the socket: the five packets end
// in a single Flush, the ACK coalescing a responder relies on.
func TestTransportFlushesOncePerBurst(t *testing.T) {
	a, b := listenPair(t, nil)
	g := &gated{recorder: newRecorder(), gate: make(chan struct{}), entered: make(chan struct{})}
	b.Register(7, g, AnySource)
	a.Send(b.LocalAddr(), sendOnly(0, 7))
	next(t, g.entered)
	// Loopback queues each datagram in the receiving socket before the
	// sender's system call returns.
	for i := 1; i < 5; i++ {
		a.Send(b.LocalAddr(), sendOnly(wire.PSN(i), 7))
	}
	close(g.gate)
	select {
	case <-g.flushed:
	case <-time.After(10 * time.Second):
		t.Fatal("no flush")
	}
	// Nothing else was sent, so no later flush can come.
	g.mu.Lock()
	n, flushes := len(g.pkts), g.flushes
	g.mu.Unlock()
	if n != 5 || flushes != 1 {
		t.Fatalf("%d packets before the first flush, %d flushes; want 5 and 1", n, flushes)
	}
}

// TestTransportSendBatch sends five packets in one batch through fault
// rules that drop one and duplicate another: the receiver gets what the
// rules leave, in order, and the sender counts every datagram it wrote.
func TestTransportSendBatch(t *testing.T) {
	a, b := listenPair(t, nil)
	r := newRecorder()
	b.Register(7, r, AnySource)
	a.Inject(Fault{Action: FaultDrop, Match: isPSN(1)})
	a.Inject(Fault{Action: FaultDuplicate, Match: isPSN(3)})
	ps := make([]wire.Packet, 5)
	for i := range ps {
		ps[i] = *sendOnly(wire.PSN(i), 7)
	}
	if err := a.SendBatch(b.LocalAddr(), ps); err != nil {
		t.Fatal(err)
	}
	r.wait(t, 5)
	if got := r.psns(); !slices.Equal(got, []wire.PSN{0, 2, 3, 3, 4}) {
		t.Fatalf("received PSNs %v, want [0 2 3 3 4]", got)
	}
	if s := a.Stats(); s.Sent != 5 || s.Faulted != 2 {
		t.Fatalf("sender stats %+v, want 5 sent and 2 faulted", s)
	}
}
