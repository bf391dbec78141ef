package rocev2

import (
	"encoding/binary"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"net/netip"

	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/verbs"
)

// GRHLen is the length of the header a UD receive buffer starts with:
// the IPv6 header of the datagram, as rxe writes it for RoCE v2.
const GRHLen = 40

// udConfig is what a UD QP needs in RTS.
type udConfig struct {
	QPN      uint32
	QKey     uint32
	MTU      int
	SQPSN    wire.PSN
	Complete func(verbs.WC)
	// Deliver, when set, receives every completion instead of Complete
	// (see rcConfig.Deliver).
	Deliver func(c completion)
	// OnFail, when set, is called under the QP's lock as a receive too
	// short for its datagram moves the QP to ERR.
	OnFail func()
	// SRQ, when set, is where the QP takes its receive WQEs.
	SRQ recvSource
	// observe, when set, sees each packet after the QP handled it (tests
	// wait on it).
	observe func(*wire.Packet)
}

// udSend is one UD send work request.
type udSend struct {
	id         uint64
	data       []byte
	imm        uint32
	hasImm     bool
	signaled   bool
	solicited  bool
	remote     netip.AddrPort
	remoteQPN  uint32
	remoteQKey uint32
	seq        uint64 // returned with the completion (completion.SendSeq)
}

// udQP is a UD queue pair in RTS: unreliable datagrams of at most one
// MTU, each a SEND ONLY with a DETH. Nothing is acknowledged or
// retransmitted; the receiver drops silently what it cannot take (wrong
// Q_Key, larger than the MTU, no receive posted), and the sender completes
// successfully in every case (SEMANTICS 13 of the rxe measurements).
//
// mu, deliverMu and the Transport's mu rank as the rcQP's do
// (internal/lockrank).
type udQP struct {
	cfg udConfig
	t   *Transport

	mu     lockrank.Mutex[lockrank.RoCEReceiver]
	failed bool // in ERR: a receive was too short for its datagram
	psn    wire.PSN
	rq     []recvWQE
	out    []completion
	tx     wire.Packet
	// deliverMu keeps completions in order (see rcQP.deliverMu).
	deliverMu lockrank.Mutex[lockrank.RoCEDeliver]
}

func newUDQP(t *Transport, cfg udConfig) *udQP {
	q := &udQP{cfg: cfg, t: t, psn: cfg.SQPSN}
	t.Register(cfg.QPN, q, AnySource)
	return q
}

func (q *udQP) close() {
	q.t.Unregister(q.cfg.QPN)
	q.mu.Lock()
	q.failed = true // a datagram dispatched before Unregister is dropped
	q.mu.Unlock()
}

// barrier returns once no datagram is being placed under mu.
func (q *udQP) barrier() {
	q.mu.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier
	q.mu.Unlock()
}

func (q *udQP) unlock() {
	out := q.out
	q.out = nil
	if len(out) == 0 {
		q.mu.Unlock()
		return
	}
	q.deliverMu.Lock()
	q.mu.Unlock()
	deliver(&q.cfg.Deliver, q.cfg.Complete, out)
	q.deliverMu.Unlock()
}

// setSQPSN sets the first PSN RTS gives the QP.
func (q *udQP) setSQPSN(psn wire.PSN) {
	q.mu.Lock()
	q.psn = psn
	q.mu.Unlock()
}

// flush completes every posted receive with WR_FLUSH_ERR (the QP moved to
// ERR).
func (q *udQP) flush() {
	q.mu.Lock()
	defer q.unlock()
	q.flushLocked()
}

func (q *udQP) flushLocked() {
	for _, r := range q.rq {
		q.out = append(q.out, completion{WC: verbs.WC{WRID: r.id, Status: verbs.WCWRFlushErr, QPNum: q.cfg.QPN}})
	}
	q.rq = nil
}

func (q *udQP) postRecv(r recvWQE) {
	q.mu.Lock()
	defer q.unlock()
	q.rq = append(q.rq, r)
	if q.failed {
		q.flushLocked()
	}
}

// postSend sends w as one datagram. One larger than the MTU is not sent.
func (q *udQP) postSend(w *udSend) {
	q.mu.Lock()
	defer q.unlock()
	if q.failed {
		q.out = append(q.out, completion{WC: verbs.WC{WRID: w.id, Status: verbs.WCWRFlushErr, QPNum: q.cfg.QPN}, SendSeq: w.seq})
		return
	}
	if len(w.data) <= q.cfg.MTU {
		qkey := w.remoteQKey
		if qkey&0x8000_0000 != 0 {
			qkey = q.cfg.QKey // a Q_Key with the high bit set means the QP's own (IBA 10.2.5)
		}
		op := wire.UDSendOnly
		if w.hasImm {
			op = wire.UDSendOnlyImm
		}
		q.tx = wire.Packet{BTH: wire.BTH{Opcode: op, Solicited: w.solicited, PKey: wire.DefaultPKey, DestQP: w.remoteQPN, PSN: q.psn},
			DETH: wire.DETH{QKey: qkey, SrcQP: q.cfg.QPN}, ImmDt: wire.ImmDt{Imm: w.imm}, Payload: w.data}
		q.psn = q.psn.Next()
		q.t.Send(w.remote, &q.tx)
	}
	if w.signaled {
		q.out = append(q.out, completion{WC: verbs.WC{WRID: w.id, Status: verbs.WCSuccess, Opcode: verbs.WCSend,
			ByteLen: uint32(len(w.data)), QPNum: q.cfg.QPN}, SendSeq: w.seq})
	}
}

// Receive places a datagram after its GRH in the next receive buffer.
func (q *udQP) Receive(from netip.AddrPort, p *wire.Packet) {
	op := p.BTH.Opcode
	if op != wire.UDSendOnly && op != wire.UDSendOnlyImm {
		return
	}
	q.mu.Lock()
	defer q.unlock()
	if q.cfg.observe != nil {
		defer q.cfg.observe(p)
	}
	if q.failed || p.DETH.QKey != q.cfg.QKey || len(p.Payload) > q.cfg.MTU {
		return
	}
	var r recvWQE
	switch {
	case q.cfg.SRQ != nil:
		var ok bool
		if r, ok = q.cfg.SRQ.take(); !ok {
			return
		}
	case len(q.rq) == 0:
		return
	default:
		r = q.rq[0]
		q.rq = q.rq[1:]
	}
	n := GRHLen + len(p.Payload)
	if len(r.buf) < n {
		// rxe reports LOC_QP_OP_ERR here (SEMANTICS 13e); the spec's
		// LOC_LEN_ERR matches verbs.ErrLocalLength all the same. The QP
		// goes to ERR, as on rxe, flushing the other receives.
		q.out = append(q.out, completion{WC: verbs.WC{WRID: r.id, Status: verbs.WCLocLenErr, QPNum: q.cfg.QPN}})
		q.failed = true
		q.flushLocked()
		if q.cfg.OnFail != nil {
			q.cfg.OnFail()
		}
		return
	}
	putGRH(r.buf[:GRHLen], from.Addr(), q.t.LocalAddr().Addr(), p.EncodedLen())
	copy(r.buf[GRHLen:], p.Payload)
	if r.scatter != nil {
		copySegs(r.scatter, r.buf[:n])
	}
	wc := verbs.WC{WRID: r.id, Status: verbs.WCSuccess, Opcode: verbs.WCRecv, ByteLen: uint32(n),
		QPNum: q.cfg.QPN, SrcQP: p.DETH.SrcQP, Flags: verbs.WCFlagGRH, PKeyIndex: 0}
	if op == wire.UDSendOnlyImm {
		wc.Imm, wc.Flags = p.ImmDt.Imm, wc.Flags|verbs.WCFlagWithImm
	}
	q.out = append(q.out, completion{WC: wc, Solicited: p.BTH.Solicited})
}

// Flush has nothing to acknowledge on UD.
func (q *udQP) Flush() {}

// putGRH writes the IPv6 header the datagram came in: version 6, payload
// length (UDP header and payload), next header UDP, and the addresses.
// The traffic class, flow label and hop limit are written as zero: a
// plain socket does not learn them.
func putGRH(g []byte, src, dst netip.Addr, udpPayload int) {
	clear(g)
	g[0] = 6 << 4
	binary.BigEndian.PutUint16(g[4:], uint16(wire.UDPHeaderLen+udpPayload))
	g[6] = 17
	s, d := src.As16(), dst.As16()
	copy(g[8:24], s[:])
	copy(g[24:40], d[:])
}
