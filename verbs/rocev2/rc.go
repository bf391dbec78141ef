package rocev2

import (
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"net/netip"
	"time"

	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/verbs"
)

// Memory is what a responder reaches through rkeys.
type Memory interface {
	// Remote returns the n bytes at va of the region rkey names, when the
	// region grants acc over all of them.
	Remote(rkey uint32, va uint64, n int, acc verbs.Access) ([]byte, bool)
}

// invalidator is a Memory whose rkeys a SEND_WITH_INV may invalidate.
type invalidator interface {
	// Invalidate makes rkey unusable and reports whether it named a
	// region the QP may invalidate.
	Invalidate(rkey uint32) bool
}

// rcConfig is what an RC QP needs in RTS: both ends and the attributes
// of ibv_modify_qp that drive the transport.
type rcConfig struct {
	QPN, RemoteQPN uint32
	// Remote is where the QP sends, and whose packets alone it takes:
	// from Remote's address and port, or with RemoteAnyPort from any port
	// of its address (rxe and NICs, which send from ports of their own).
	Remote        netip.AddrPort
	RemoteAnyPort bool
	MTU           int      // path MTU in bytes: 256, 512, 1024, 2048 or 4096
	SQPSN, RQPSN  wire.PSN // first PSN sent, first PSN expected
	Timeout       time.Duration
	RetryCnt      int // 0-7 retransmissions after a timeout or sequence NAK
	RNRRetry      int // 0-6 retries after an RNR NAK; 7 is forever
	// MaxRdAtomic is how many READs and atomics may await their response
	// at once (max_rd_atomic, which must not exceed the responder's
	// max_dest_rd_atomic); 0 means no limit.
	MaxRdAtomic int
	MinRNRTimer uint8
	// UC makes the QP an Unreliable Connection: UC opcodes, no ACK, no
	// retransmission; a send WQE completes once its last packet is sent.
	UC bool
	// LocalInv, when set, invalidates the local key of a LOCAL_INV and
	// reports whether the key named an MR the QP may invalidate.
	LocalInv func(key uint32) bool
	// SRQ, when set, is where the responder takes its receive WQEs.
	SRQ    recvSource
	Memory Memory
	Clock  Clock
	// Complete receives every completion, in order, outside the QP's lock,
	// unless Deliver is set.
	Complete func(verbs.WC)
	// Deliver, when set, receives every completion instead of Complete,
	// in order, outside the QP's lock, with the send sequence number of a
	// send WQE's completion (0 for a receive's) and whether the message
	// it completes asked for a solicited event.
	Deliver func(c completion)
	// OnFail, when set, is called under the QP's lock as the QP moves to
	// ERR, with the status of the failure and whether the responder
	// detected it (the peer broke a rule) rather than the requester.
	OnFail func(status verbs.WCStatus, responder bool)
	// observe, when set, sees each packet after the QP handled it (tests
	// wait on it).
	observe func(*wire.Packet)
}

// source is whose packets the QP takes.
func (c *rcConfig) source() Source {
	s := Source{Addr: c.Remote.Addr(), Port: c.Remote.Port()}
	if c.RemoteAnyPort {
		s.Port = 0
	}
	return s
}

// rnrRetryForever is the rnr_retry value that never gives up (IBA
// 9.7.5.2.8).
const rnrRetryForever = 7

// atomicHistory is how many atomic results a responder keeps for replay:
// the max_dest_rd_atomic the provider grants.
const atomicHistory = 16

type atomicResult struct {
	valid bool
	psn   wire.PSN
	rkey  uint32
	va    uint64
	orig  uint64
}

// readResource is a READ request the responder executed, saved so that a
// duplicate of it, or of its tail, is answered from it (IBA 9.7.5.1.3;
// rxe's responder resources): a READ request behind the expected PSN that
// matches none is dropped, so an old or forged request cannot make the
// responder send memory again.
type readResource struct {
	valid bool
	psn   wire.PSN // its response's first PSN
	npkts int      // its response's packets
	rkey  uint32
	va    uint64
	n     uint32 // bytes
}

// covers reports whether a READ request at psn for n bytes at va asks for
// the tail of r's response from psn on, or a part of it that starts there.
func (r *readResource) covers(psn wire.PSN, rkey uint32, va uint64, n uint32, mtu int) bool {
	k := psn.Diff(r.psn)
	if !r.valid || rkey != r.rkey || k < 0 || k >= r.npkts {
		return false
	}
	off := uint64(k) * uint64(mtu)
	return va == r.va+off && uint64(n) <= uint64(r.n)-off
}

// The requester's window: at most windowBytes of packets (and at most
// maxWindow packets) sent and not yet acknowledged, so a long message does
// not overrun the peer's socket buffer (on Linux, about 200 KiB unless an
// administrator raised net.core.rmem_max, of which each datagram costs its
// length plus the kernel's per-packet overhead). An ACK is requested on
// every quarter window, so the window refills before it runs dry.
const (
	windowBytes = 64 << 10
	maxWindow   = 64
)

// window returns the window in packets for a path MTU, and how often a
// packet asks for an ACK.
func window(mtu int) (pkts, ackEvery int) {
	pkts = min(maxWindow, max(4, windowBytes/mtu))
	return pkts, pkts / 4
}

// sendWQE is one posted send work request and its transport state.
type sendWQE struct {
	id        uint64
	op        verbs.Opcode // Send, SendImm, Write, WriteImm, Read
	data      []byte       // gathered source; destination of a Read
	raddr     uint64
	rkey      uint32 // the remote key; LOCAL_INV's key to invalidate
	imm       uint32
	inv       uint32 // the rkey SEND_WITH_INV invalidates at the responder
	compare   uint64 // CMP_AND_SWP's compare value
	swapAdd   uint64 // CMP_AND_SWP's swap value, FETCH_AND_ADD's addend
	signaled  bool
	solicited bool

	// seq is the provider's sequence number of the WQE, returned with its
	// completion (completion.SendSeq).
	seq uint64
	// scatter, when set, receives a READ's bytes from data once it
	// completes: a READ into several SGEs lands in data first.
	scatter [][]byte
	// localErr, when not WCSuccess, fails the WQE with that status when
	// it reaches the head of the queue, before anything is sent (a bad
	// lkey found when it was posted).
	localErr verbs.WCStatus

	psn      wire.PSN // first PSN
	npkts    int      // PSNs it takes: its packets, or its read response's
	readRecv int      // response packets (READ or atomic) received in order
	// reqFrom and reqTo are the response packets the last READ request
	// asked for, [reqFrom, reqTo): a READ is asked for a window at a time.
	reqFrom, reqTo int
}

func (w *sendWQE) lastPSN() wire.PSN { return w.psn.Add(w.npkts - 1) }

// responded reports whether w is done at the responder as far as the
// requester can tell: a READ or an atomic needs its response, anything
// else only an ACK.
func (w *sendWQE) responded() bool {
	return (w.op != verbs.OpRead && !w.op.IsAtomic()) || w.readRecv == w.npkts
}

type recvWQE struct {
	id  uint64
	buf []byte
	// scatter, when set, receives buf's bytes at the end of the message:
	// a receive of several SGEs lands in buf first.
	scatter [][]byte
}

// recvSource is a shared receive queue: receive WQEs that QPs take one
// at a time, each under its own lock.
type recvSource interface {
	// take pops the oldest receive WQE, if there is one.
	take() (recvWQE, bool)
	// putBack returns r to the head of the queue: its message did not
	// complete.
	putBack(r recvWQE)
}

// completion is a work completion on its way to a CQ.
type completion struct {
	WC verbs.WC
	// SendSeq is the send WQE's sequence number (sendWQE.seq), 0 for a
	// receive completion.
	SendSeq   uint64
	Solicited bool
}

// rcQP is one RC queue pair in RTS: requester and responder.
//
// Completions are delivered after mu is released, under deliverMu; what
// receives them must not call the rcQP. The ranks of mu, deliverMu and the
// Transport's mu are in internal/lockrank.
type rcQP struct {
	cfg rcConfig
	t   *Transport

	mu     lockrank.Mutex[lockrank.RoCEReceiver]
	failed bool         // the QP is in ERR
	out    []completion // completions to deliver once mu is released
	// deliverMu is taken before mu is released and held while the
	// completions gathered under mu are delivered, so that two goroutines
	// that released mu one after the other deliver in that order.
	deliverMu lockrank.Mutex[lockrank.RoCEDeliver]
	tx        wire.Packet   // scratch for the packet being built
	batching  bool          // send collects packets in pkts (batch)
	pkts      []wire.Packet // packets of the batch being built
	timer     Timer         // the ACK timer or the RNR timer
	tgen      uint64        // generation of timer, so a stale firing is ignored

	// Requester.
	sq         []*sendWQE // posted and not completed, oldest first
	next       int        // index in sq of the WQE sent next
	nextPkt    int        // its packet (or, for a Read, response packet) index
	sndPSN     wire.PSN   // PSN of the next packet to send
	tailPSN    wire.PSN   // PSN the next posted WQE starts at
	una        wire.PSN   // oldest unacknowledged PSN
	maxPSN     wire.PSN   // one past the highest PSN ever sent
	retries    int
	rnrRetries int
	rnrWait    bool
	window     int // packets
	ackEvery   int
	// cwnd bounds the packets sent and not acknowledged below window: one
	// after a local ACK timeout, so that the timeout resends only the
	// oldest unacknowledged packet, half after a sequence NAK, and it
	// grows back by what each ACK acknowledges (sendWindow).
	cwnd int

	// Responder.
	rq         []recvWQE
	ePSN       wire.PSN
	msn        uint32
	nakSent    bool // a NAK for ePSN went out; later packets are dropped silently
	ackPending bool
	// atomics holds the results of the last atomics executed, by PSN, so
	// a duplicate is answered with its first result instead of being
	// executed again (IBA 9.7.5.1.4; rxe keeps them in its responder
	// resources).
	atomics [atomicHistory]atomicResult
	atomicN int
	// reads holds the last READ requests executed, for their duplicates.
	reads [atomicHistory]readResource
	readN int
	cur   struct {
		active bool
		drop   bool   // UC: the rest of the message is dropped
		rkey   uint32 // a WRITE's rkey and address, checked again on
		va     uint64 // each of its packets
		send   bool   // SEND (into rwqe) or WRITE (into buf)
		rwqe   recvWQE
		buf    []byte
		off    int
	}
}

func newRCQP(t *Transport, cfg rcConfig) *rcQP {
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	q := &rcQP{cfg: cfg, t: t, sndPSN: cfg.SQPSN, tailPSN: cfg.SQPSN, una: cfg.SQPSN, maxPSN: cfg.SQPSN,
		ePSN: cfg.RQPSN, retries: cfg.RetryCnt, rnrRetries: cfg.RNRRetry}
	q.window, q.ackEvery = window(cfg.MTU)
	q.cwnd = q.window
	t.Register(cfg.QPN, q, cfg.source())
	return q
}

// close unregisters the QP and stops its timer.
func (q *rcQP) close() {
	q.t.Unregister(q.cfg.QPN)
	q.mu.Lock()
	// A packet dispatched before Unregister, or a timer that fired
	// before stopTimer, finds the QP failed and touches nothing.
	q.failed = true
	q.stopTimer()
	q.mu.Unlock()
}

// barrier returns once no packet or timer is being handled under mu: a
// memory access that began before it has ended.
func (q *rcQP) barrier() {
	q.mu.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier
	q.mu.Unlock()
}

// unlock releases mu and delivers the completions gathered under it.
func (q *rcQP) unlock() {
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

func deliver(d *func(completion), complete func(verbs.WC), out []completion) {
	for _, c := range out {
		if *d != nil {
			(*d)(c)
		} else {
			complete(c.WC)
		}
	}
}

// addWC queues a completion of a receive (seq 0) or of a send WQE.
func (q *rcQP) addWC(wc verbs.WC, seq uint64, solicited bool) {
	q.out = append(q.out, completion{WC: wc, SendSeq: seq, Solicited: solicited})
}

// startRequester sets what RTS brings on a QP created at RTR: the
// requester's timers, and with first (RTR to RTS) the first send PSN.
func (q *rcQP) startRequester(first bool, sqpsn wire.PSN, timeout time.Duration, retry, rnrRetry, maxRdAtomic int) {
	q.mu.Lock()
	defer q.unlock()
	q.cfg.Timeout, q.cfg.RetryCnt, q.cfg.RNRRetry = timeout, retry, rnrRetry
	q.cfg.MaxRdAtomic = maxRdAtomic
	if first {
		q.cfg.SQPSN = sqpsn
		q.sndPSN, q.tailPSN, q.una, q.maxPSN = sqpsn, sqpsn, sqpsn, sqpsn
	}
	q.retries, q.rnrRetries = retry, rnrRetry
}

// toError moves the QP to ERR as ibv_modify_qp does: every WQE of both
// queues completes with WR_FLUSH_ERR.
func (q *rcQP) toError() {
	q.mu.Lock()
	defer q.unlock()
	if !q.failed {
		q.fail(verbs.WCWRFlushErr)
	}
}

// postSend queues w and sends what the window allows.
func (q *rcQP) postSend(w *sendWQE) error {
	q.mu.Lock()
	defer q.unlock()
	if q.failed {
		return verbs.ErrQPState
	}
	w.psn = q.tailPSN
	w.npkts = max(1, (len(w.data)+q.cfg.MTU-1)/q.cfg.MTU)
	if w.op == verbs.OpLocalInv {
		w.npkts = 0 // a local operation: no packet, no PSN
	}
	q.tailPSN = q.tailPSN.Add(w.npkts)
	q.sq = append(q.sq, w)
	q.pump()
	return nil
}

// postRecv queues a receive buffer.
func (q *rcQP) postRecv(r recvWQE) error {
	q.mu.Lock()
	defer q.unlock()
	if q.failed {
		q.addWC(verbs.WC{WRID: r.id, Status: verbs.WCWRFlushErr, QPNum: q.cfg.QPN}, 0, false)
		return nil
	}
	q.rq = append(q.rq, r)
	return nil
}

// Receive dispatches a packet to the requester or the responder.
func (q *rcQP) Receive(_ netip.AddrPort, p *wire.Packet) {
	q.mu.Lock()
	defer q.unlock()
	if q.failed {
		return
	}
	if q.cfg.UC {
		if op := p.BTH.Opcode; op&wire.ServiceMask == wire.ServiceUC && op.IsRequest() {
			p.BTH.Opcode = op &^ wire.ServiceUC
			q.ucReceive(p)
		}
	} else if p.BTH.Opcode.IsResponse() {
		q.requesterReceive(p)
	} else if p.BTH.Opcode.IsRequest() && p.BTH.Opcode < 0x20 {
		q.responderReceive(p)
	}
	if q.cfg.observe != nil {
		q.cfg.observe(p)
	}
}

// Flush sends the ACK the burst's packets asked for, once.
func (q *rcQP) Flush() {
	q.mu.Lock()
	defer q.unlock()
	if q.ackPending && !q.failed {
		q.ackPending = false
		q.sendAck(wire.ACK(wire.CreditsInvalid), q.ePSN.Add(-1))
	}
}

func (q *rcQP) send(p *wire.Packet) {
	if q.cfg.UC {
		p.BTH.Opcode |= wire.ServiceUC
	}
	p.BTH.DestQP = q.cfg.RemoteQPN
	p.BTH.PKey = wire.DefaultPKey
	if q.batching {
		q.pkts = append(q.pkts, *p)
		return
	}
	q.t.Send(q.cfg.Remote, p)
}

// batch makes the packets sent until the returned function runs go out
// together (Transport.SendBatch: one sendmmsg on Linux). Nested calls
// join the outer batch.
func (q *rcQP) batch() (flush func()) {
	if q.batching {
		return func() {}
	}
	q.batching = true
	return q.flushBatch
}

func (q *rcQP) flushBatch() {
	q.batching = false
	if len(q.pkts) > 0 {
		q.t.SendBatch(q.cfg.Remote, q.pkts)
		clear(q.pkts) // no payload stays referenced
		q.pkts = q.pkts[:0]
	}
}

func (q *rcQP) sendAck(s wire.Syndrome, psn wire.PSN) {
	q.tx = wire.Packet{BTH: wire.BTH{Opcode: wire.RCAcknowledge, PSN: psn}, AETH: wire.AETH{Syndrome: s, MSN: q.msn}}
	q.send(&q.tx)
}

// armTimer (re)starts the QP's timer for d; f runs under mu if the timer
// is still the current one when it fires.
func (q *rcQP) armTimer(d time.Duration, f func()) {
	q.stopTimer()
	if d <= 0 {
		return
	}
	q.tgen++
	gen := q.tgen
	q.timer = q.cfg.Clock.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.unlock()
		if gen != q.tgen || q.failed {
			return
		}
		q.timer = nil
		f()
	})
}

func (q *rcQP) stopTimer() {
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	q.tgen++
}

// fail moves the QP to ERR: the oldest WQE completes with status, the
// rest of both queues with WR_FLUSH_ERR.
func (q *rcQP) fail(status verbs.WCStatus) { q.failAs(status, false) }

// failAs is fail, saying whether the responder detected the error.
func (q *rcQP) failAs(status verbs.WCStatus, responder bool) {
	q.failed = true
	q.stopTimer()
	if q.cfg.OnFail != nil {
		q.cfg.OnFail(status, responder)
	}
	for i, w := range q.sq {
		s := verbs.WCWRFlushErr
		if i == 0 && !responder {
			s = status
		}
		q.addWC(verbs.WC{WRID: w.id, Status: s, QPNum: q.cfg.QPN}, w.seq, false)
	}
	q.sq = nil
	if q.cur.active && q.cur.send {
		q.addWC(verbs.WC{WRID: q.cur.rwqe.id, Status: verbs.WCWRFlushErr, QPNum: q.cfg.QPN}, 0, false)
	}
	for _, r := range q.rq {
		q.addWC(verbs.WC{WRID: r.id, Status: verbs.WCWRFlushErr, QPNum: q.cfg.QPN}, 0, false)
	}
	q.rq = nil
}
