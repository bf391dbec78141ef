package rocev2

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
)

// Port is RoCE v2's UDP destination port (IANA, IBA Annex A17.2).
const Port = 4791

// ErrNotSupported is returned by Listen for an address the transport
// cannot carry RoCE v2 on with a correct ICRC (see the package comment).
var ErrNotSupported = errors.New("rocev2: not supported")

// Receiver is what a Transport hands the packets addressed to a QP.
type Receiver interface {
	// Receive handles p, which is valid only during the call. It runs on
	// the transport's receive goroutine, one packet at a time.
	Receive(from netip.AddrPort, p *Packet)
	// Flush runs after the packets the socket held have all been
	// received, for each Receiver that got one of them: the place to send
	// one coalesced ACK for all of them.
	Flush()
}

// TransportConfig configures Listen.
type TransportConfig struct {
	// Addr is the local address: a specific IPv6 address (the ICRC covers
	// the source address, which a wildcard bind leaves to the kernel) and
	// a port, 0 for one the kernel picks.
	Addr netip.AddrPort
	// Clock drives injected delays; nil means SystemClock.
	Clock Clock
}

// Transport sends and receives RoCE v2 packets on one UDP socket, with
// the ICRC computed and checked, and packets dispatched to Receivers by
// destination QP. Safe for concurrent use.
type Transport struct {
	conn  *net.UDPConn
	local netip.AddrPort
	clock Clock

	mu        sync.Mutex // guards receivers and faults; lock order: a Receiver's own lock, then mu
	receivers map[uint32]Receiver
	faults    []*faultRule
	held      []heldPacket // reordered packets waiting for the next send

	stats struct {
		sent, received, badICRC, malformed, noQP, faulted atomic.Uint64
	}
	closed atomic.Bool
	done   chan struct{}
	bufs   sync.Pool
}

// Stats counts a Transport's packets.
type Stats struct {
	Sent, Received uint64
	BadICRC        uint64 // dropped: ICRC mismatch
	Malformed      uint64 // dropped: the decoder refused them
	NoQP           uint64 // dropped: no Receiver for the destination QP
	Faulted        uint64 // packets an injected fault acted on
}

// Listen opens a Transport on cfg.Addr.
func Listen(cfg TransportConfig) (*Transport, error) {
	a := cfg.Addr.Addr()
	switch {
	case !a.IsValid() || a.IsUnspecified():
		return nil, fmt.Errorf("%w: a specific local address is needed, got %v", ErrNotSupported, cfg.Addr)
	case a.Is4() || a.Is4In6():
		return nil, fmt.Errorf("%w: IPv4 (%v): a plain socket cannot check the ICRC of a received IPv4 packet", ErrNotSupported, a)
	}
	conn, err := net.ListenUDP("udp6", net.UDPAddrFromAddrPort(cfg.Addr))
	if err != nil {
		return nil, err
	}
	// A larger buffer absorbs bursts (read responses are not paced); the
	// kernel caps it at net.core.rmem_max without an error.
	conn.SetReadBuffer(4 << 20)
	tuneSocket(conn)
	t := &Transport{conn: conn, clock: cfg.Clock, receivers: make(map[uint32]Receiver), done: make(chan struct{})}
	if t.clock == nil {
		t.clock = SystemClock{}
	}
	t.local = netip.AddrPortFrom(a, uint16(conn.LocalAddr().(*net.UDPAddr).Port))
	t.bufs.New = func() any { b := make([]byte, 0, maxPacket); return &b }
	go t.receive()
	return t, nil
}

// maxPacket is the largest UDP payload the transport sends or receives.
const maxPacket = headerBTH + headerRETH + headerImmDt + MaxPayload + ICRCLen + 64

// LocalAddr is the address and port peers send to.
func (t *Transport) LocalAddr() netip.AddrPort { return t.local }

// Register routes the packets for QP qpn to r.
func (t *Transport) Register(qpn uint32, r Receiver) {
	t.mu.Lock()
	t.receivers[qpn&mask24] = r
	t.mu.Unlock()
}

// Unregister stops routing packets to qpn.
func (t *Transport) Unregister(qpn uint32) {
	t.mu.Lock()
	delete(t.receivers, qpn&mask24)
	t.mu.Unlock()
}

// quiesce returns once every registered Receiver that has a barrier
// (rcQP, udQP) has finished the packet or timer it was handling.
func (t *Transport) quiesce() {
	t.mu.Lock()
	rs := make([]Receiver, 0, len(t.receivers))
	for _, r := range t.receivers {
		rs = append(rs, r)
	}
	t.mu.Unlock()
	for _, r := range rs {
		if b, ok := r.(interface{ barrier() }); ok {
			b.barrier()
		}
	}
}

// Stats returns the counters.
func (t *Transport) Stats() Stats {
	return Stats{Sent: t.stats.sent.Load(), Received: t.stats.received.Load(),
		BadICRC: t.stats.badICRC.Load(), Malformed: t.stats.malformed.Load(),
		NoQP: t.stats.noQP.Load(), Faulted: t.stats.faulted.Load()}
}

// Close closes the socket and waits for the receive goroutine to end.
func (t *Transport) Close() error {
	if !t.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := t.conn.Close()
	<-t.done
	return err
}

func (t *Transport) header(from, to netip.AddrPort) IPHeader {
	return IPHeader{Src: from.Addr(), Dst: to.Addr(), SrcPort: from.Port(), DstPort: to.Port()}
}

// Send encodes p, seals its ICRC for the path from this transport to
// `to`, and sends it, unless an injected fault says otherwise.
func (t *Transport) Send(to netip.AddrPort, p *Packet) error {
	bp := t.bufs.Get().(*[]byte)
	defer t.bufs.Put(bp)
	h := t.header(t.local, to)
	b, err := p.Append((*bp)[:0], &h)
	if err != nil {
		return err
	}
	*bp = b[:0]
	return t.transmit(to, p, b)
}

// SendBatch sends the packets of ps to `to`, in order, as Send would send
// each, with as few system calls as the platform allows: one sendmmsg on
// Linux (amd64, arm64) for the whole batch, what the fault rules leave of
// it included.
func (t *Transport) SendBatch(to netip.AddrPort, ps []Packet) error {
	if len(ps) == 1 {
		return t.Send(to, &ps[0])
	}
	h := t.header(t.local, to)
	bufs := make([]*[]byte, 0, len(ps))
	defer func() {
		for _, bp := range bufs {
			t.bufs.Put(bp)
		}
	}()
	out := make([]outPacket, 0, len(ps))
	var hits []hitCall
	var err error
	for i := range ps {
		bp := t.bufs.Get().(*[]byte)
		bufs = append(bufs, bp)
		b, e := ps[i].Append((*bp)[:0], &h)
		if e != nil {
			err = e
			break
		}
		*bp = b[:0]
		out, hits = t.decide(to, &ps[i], b, out, hits)
	}
	if e := t.writeMany(out); err == nil {
		err = e
	}
	for _, x := range hits {
		x.f(x.p)
	}
	return err
}

// writeMany puts encoded packets on the wire, in order.
func (t *Transport) writeMany(out []outPacket) error {
	switch len(out) {
	case 0:
		return nil
	case 1:
		return t.write(out[0].to, out[0].b)
	}
	n, err := t.sendmmsg(out)
	t.stats.sent.Add(uint64(n))
	for _, o := range out[n:] {
		if e := t.write(o.to, o.b); err == nil {
			err = e
		}
	}
	return err
}

// write puts one encoded packet on the wire.
func (t *Transport) write(to netip.AddrPort, b []byte) error {
	_, err := t.conn.WriteToUDPAddrPort(b, to)
	if err == nil {
		t.stats.sent.Add(1)
	}
	return err
}

// receive reads packets until the socket closes. Once the socket has no
// packet queued it flushes the Receivers that got packets since the last
// flush, so a burst is acknowledged once.
func (t *Transport) receive() {
	defer close(t.done)
	r := newReader(t.conn)
	var touched []Receiver
	var p Packet
	for {
		b, from, empty, err := r.read(len(touched) > 0)
		if empty {
			for i, x := range touched {
				x.Flush()
				touched[i] = nil
			}
			touched = touched[:0]
			continue
		}
		if err != nil {
			if t.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error reported on the socket, for instance
		}
		h := t.header(from, t.local)
		if err := CheckICRC(b, &h); err != nil {
			t.stats.badICRC.Add(1)
			continue
		}
		if err := p.Decode(b); err != nil {
			t.stats.malformed.Add(1)
			continue
		}
		t.mu.Lock()
		rc := t.receivers[p.BTH.DestQP]
		t.mu.Unlock()
		if rc == nil {
			t.stats.noQP.Add(1)
			continue
		}
		t.stats.received.Add(1)
		rc.Receive(from, &p)
		if !slices.Contains(touched, rc) {
			touched = append(touched, rc)
		}
	}
}
