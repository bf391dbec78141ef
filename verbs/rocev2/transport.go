package rocev2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/verbsrt/verbsrt/internal/lockrank"
)

// Port is RoCE v2's UDP destination port (IANA, IBA Annex A17.2).
const Port = 4791

// ErrNotSupported is returned by Listen for an address the transport
// cannot carry RoCE v2 on with a correct ICRC (see the package comment).
var ErrNotSupported = errors.New("rocev2: not supported")

// Receiver is what a Transport hands the packets addressed to a QP.
type Receiver interface {
	// Receive handles p, which is valid only during the call. It runs on
	// the transport's receive goroutine or in an empty CQ poll of the
	// transport's device, one packet at a time and in the order the
	// socket received them.
	Receive(from netip.AddrPort, p *wire.Packet)
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
	// ReadBuffer is the receive buffer to ask the socket for, in bytes; 0
	// means DefaultReadBuffer. Stats.ReadBuffer says what was granted.
	ReadBuffer int
}

// DefaultReadBuffer is the receive buffer a Transport asks for: room for
// the bursts of several peers' windows (a window is at most 64 KiB of
// payload, and a datagram is charged more than its length), so that a
// receiver that falls behind queues packets instead of dropping them.
// Unprivileged, the kernel caps it at net.core.rmem_max (on Linux about
// 208 KiB unless an administrator raised it); with CAP_NET_ADMIN the
// transport forces it past that cap (SO_RCVBUFFORCE).
const DefaultReadBuffer = 4 << 20

// Transport sends and receives RoCE v2 packets on one UDP socket, with
// the ICRC computed and checked, and packets dispatched to Receivers by
// destination QP. Safe for concurrent use.
type Transport struct {
	conn    *net.UDPConn
	local   netip.AddrPort
	clock   Clock
	readBuf int // the receive buffer the kernel granted, as SO_RCVBUF reads back

	// rxMu admits one reader of the socket at a time, the receive
	// goroutine or pollSocket, and is held while it hands the packets to
	// the Receivers and flushes them, so that a socket's packets reach
	// them in the order it received them. It ranks before a Receiver's
	// own lock, and that before mu (internal/lockrank).
	rxMu    lockrank.Mutex[lockrank.RoCERx]
	rd      reader        // its buffer guarded by rxMu where pollSocket reads (unix)
	rxPkt   wire.Packet   // guarded by rxMu: the packet being handled
	touched []Receiver    // guarded by rxMu: got packets since the last flush
	idle    atomic.Uint64 // pollSocket's calls, to read on every pollEvery-th
	rxStop  atomic.Bool   // the receive goroutine ends at its next wake-up (tests)

	mu        lockrank.Mutex[lockrank.RoCETransport] // guards receivers and faults
	receivers map[uint32]registered
	faults    []*faultRule // Inject's, for sent packets
	inFaults  []*faultRule // InjectInbound's, for received packets
	held      []heldPacket // reordered packets waiting for the next send

	stats struct {
		sent, received, badICRC, malformed, noQP, faulted atomic.Uint64
		notPeer, runt                                     atomic.Uint64
		pollReads, pollPackets, emptyReads                atomic.Uint64
	}
	closed atomic.Bool
	done   chan struct{}
	bufs   sync.Pool
}

// Stats counts a Transport's packets.
type Stats struct {
	// Sent counts the packets written to the socket, Received those
	// handed to a Receiver; a duplicate (FaultDuplicate) counts twice.
	Sent, Received uint64
	// The packets dropped before any QP saw them, by reason, in the order
	// the checks run: Runt, too short to name a QP; NoQP, no Receiver for
	// the destination QP; NotPeer, a connected QP's packet from another
	// source than its peer; BadICRC, an ICRC mismatch; Malformed, refused
	// by the decoder.
	Runt        uint64
	NoQP        uint64
	NotPeer     uint64
	BadICRC     uint64
	Malformed   uint64
	Faulted     uint64 // packets an injected fault acted on
	PollReads   uint64 // reads of the socket by empty CQ polls, without waiting
	PollPackets uint64 // packets those reads received
	// EmptyReads counts the reads of the socket without waiting, by
	// either reader, that found nothing queued: the system calls a burst
	// costs beyond its packets, which a spinning poll multiplies.
	EmptyReads uint64
	// ReadBuffer is the socket's receive buffer in bytes, as the kernel
	// reports it after the transport asked for TransportConfig.ReadBuffer
	// (on Linux twice the size granted, the half it adds being its
	// allowance for per-packet bookkeeping); 0 where the platform does not
	// say.
	ReadBuffer uint64
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
	want := cfg.ReadBuffer
	if want <= 0 {
		want = DefaultReadBuffer
	}
	readBuf := setReadBuffer(conn, want)
	tuneSocket(conn)
	rd, err := newReader(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	t := &Transport{conn: conn, clock: cfg.Clock, readBuf: readBuf, rd: rd, receivers: make(map[uint32]registered), done: make(chan struct{})}
	if t.clock == nil {
		t.clock = SystemClock{}
	}
	t.local = netip.AddrPortFrom(a, uint16(conn.LocalAddr().(*net.UDPAddr).Port))
	t.bufs.New = func() any { b := make([]byte, 0, maxPacket); return &b }
	go t.receive()
	return t, nil
}

// maxPacket is the largest UDP payload the transport sends or receives.
const maxPacket = wire.BTHLen + wire.RETHLen + wire.ImmDtLen + wire.MaxPayload + wire.ICRCLen + 64

// LocalAddr is the address and port peers send to.
func (t *Transport) LocalAddr() netip.AddrPort { return t.local }

// Source says whose packets a registered QP takes. RoCE has no
// authentication of its own, and the transport's socket takes datagrams
// from every process of the host and every host that routes to it: a
// connected QP hears only its peer, so that a third party's packets are
// dropped before they touch the QP's state (rxe's check_addr does the
// same).
type Source struct {
	// Addr is the peer's address; the zero Addr admits every sender (UD,
	// whose receiver checks Q_Keys instead).
	Addr netip.Addr
	// Port, when not 0, is the only source port admitted: a verbsrt peer
	// sends from the port it announced. rxe and NICs choose a source
	// port per QP or per flow, so toward them only the address is known.
	Port uint16
}

// AnySource admits every sender.
var AnySource = Source{}

// admits reports whether a packet from `from` may reach the QP.
func (s Source) admits(from netip.AddrPort) bool {
	return !s.Addr.IsValid() || (from.Addr() == s.Addr && (s.Port == 0 || from.Port() == s.Port))
}

// registered is a Receiver and whose packets it takes.
type registered struct {
	r    Receiver
	from Source
}

// Register routes the packets for QP qpn that src admits to r; the others
// are dropped and counted (Stats.NotPeer).
func (t *Transport) Register(qpn uint32, r Receiver, src Source) {
	t.mu.Lock()
	t.receivers[qpn&wire.Mask24] = registered{r: r, from: src}
	t.mu.Unlock()
}

// Unregister stops routing packets to qpn.
func (t *Transport) Unregister(qpn uint32) {
	t.mu.Lock()
	delete(t.receivers, qpn&wire.Mask24)
	t.mu.Unlock()
}

// quiesce returns once every registered Receiver that has a barrier
// (rcQP, udQP) has finished the packet or timer it was handling.
func (t *Transport) quiesce() {
	t.mu.Lock()
	rs := make([]Receiver, 0, len(t.receivers))
	for _, x := range t.receivers {
		rs = append(rs, x.r)
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
		Runt: t.stats.runt.Load(), NoQP: t.stats.noQP.Load(), NotPeer: t.stats.notPeer.Load(),
		BadICRC: t.stats.badICRC.Load(), Malformed: t.stats.malformed.Load(), Faulted: t.stats.faulted.Load(),
		PollReads: t.stats.pollReads.Load(), PollPackets: t.stats.pollPackets.Load(), EmptyReads: t.stats.emptyReads.Load(),
		ReadBuffer: uint64(t.readBuf)}
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

func (t *Transport) header(from, to netip.AddrPort) wire.IPHeader {
	return wire.IPHeader{Src: from.Addr(), Dst: to.Addr(), SrcPort: from.Port(), DstPort: to.Port()}
}

// Send encodes p, seals its ICRC for the path from this transport to
// `to`, and sends it, unless an injected fault says otherwise.
func (t *Transport) Send(to netip.AddrPort, p *wire.Packet) error {
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
func (t *Transport) SendBatch(to netip.AddrPort, ps []wire.Packet) error {
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

// pollEvery is how many calls of pollSocket make one read of the socket.
// A read that finds nothing costs a system call, and a spinning poller
// calls pollSocket as fast as it polls; reading on every pollEvery-th call
// bounds the system calls to a fraction of its polls, and a packet waits
// for at most pollEvery-1 empty polls more than it would if every poll
// read.
const pollEvery = 8

// pollSocket is what an empty poll of a CQ of the transport's device
// does: on every pollEvery-th call (the first included), unless the
// receive goroutine or another poll is reading the socket, it reads what
// the socket holds without waiting, at most pollBurst packets, and hands
// them to their Receivers as the receive goroutine does. It makes
// receiving independent of the scheduler: the receive goroutine waits in
// Go's network poller, which the scheduler consults only when it runs out
// of goroutines to run, or from sysmon every 10 ms or so, and pollers that
// spin (runtime.Gosched loops, locked threads) never let it run out.
// Where the platform cannot read without waiting (not unix) it does
// nothing. Safe for concurrent use; a Receiver's lock must not be held.
func (t *Transport) pollSocket() {
	if !canPollSocket || (t.idle.Add(1)-1)%pollEvery != 0 || t.closed.Load() {
		return
	}
	if !t.rxMu.TryLock() {
		return // another reader has the socket, in order
	}
	before := t.stats.received.Load()
	t.stats.pollReads.Add(1)
	t.drain(pollBurst)
	t.stats.pollPackets.Add(t.stats.received.Load() - before)
	t.rxMu.Unlock()
}

// pollBurst bounds the packets one pollSocket handles, so that a poll
// returns in bounded time while packets keep coming; the rest wait for the
// next poll or the receive goroutine.
const pollBurst = 64

// drain reads the packets the socket holds without waiting, at most max
// of them (0: until none is left), hands each to its Receiver, then
// flushes the Receivers that got one: a burst is acknowledged once. It
// reports whether it found the socket empty, and a read's error other
// than "nothing queued". t.rxMu must be held.
func (t *Transport) drain(max int) (empty bool, err error) {
	defer t.flush()
	for n := 0; max == 0 || n < max; n++ {
		b, from, ok, err := t.rd.tryRead()
		if err != nil || !ok {
			if err == nil {
				t.stats.emptyReads.Add(1) // on the empty path only
			}
			return err == nil, err
		}
		t.handle(b, from)
	}
	return false, nil
}

// handle hands the datagram b from `from` to the Receiver of its
// destination QP, after the checks that drop what is not for it, cheapest
// first, so that a stranger's datagram costs a map lookup: long enough to
// carry a BTH and an ICRC, a registered destination QP, a source the QP
// admits, then the ICRC and the decoder. t.rxMu must be held.
func (t *Transport) handle(b []byte, from netip.AddrPort) {
	if len(b) < wire.BTHLen+wire.ICRCLen {
		t.stats.runt.Add(1)
		return
	}
	qpn := binary.BigEndian.Uint32(b[4:]) & wire.Mask24
	t.mu.Lock()
	reg, ok := t.receivers[qpn]
	t.mu.Unlock()
	switch {
	case !ok:
		t.stats.noQP.Add(1)
		return
	case !reg.from.admits(from):
		t.stats.notPeer.Add(1)
		return
	}
	h := t.header(from, t.local)
	if err := wire.CheckICRC(b, &h); err != nil {
		t.stats.badICRC.Add(1)
		return
	}
	p := &t.rxPkt
	if err := p.Decode(b); err != nil {
		t.stats.malformed.Add(1)
		return
	}
	var rule *faultRule
	t.mu.Lock()
	if len(t.inFaults) > 0 {
		rule = pickRule(&t.inFaults, p)
	}
	t.mu.Unlock()
	n := t.receiveFaulted(rule, p)
	if n == 0 {
		return
	}
	rc := reg.r
	t.stats.received.Add(uint64(n))
	if n == 2 {
		c := *p // a Receiver may rewrite the headers it was handed (UC)
		rc.Receive(from, p)
		*p = c
	}
	rc.Receive(from, p)
	if !slices.Contains(t.touched, rc) {
		t.touched = append(t.touched, rc)
	}
}

// flush flushes the Receivers that got packets since the last flush.
// t.rxMu must be held.
func (t *Transport) flush() {
	for i, x := range t.touched {
		x.Flush()
		t.touched[i] = nil
	}
	t.touched = t.touched[:0]
}
