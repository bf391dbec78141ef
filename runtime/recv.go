package runtime

import (
	"context"
	"sync"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// Receive credits.
//
// Each endpoint keeps recvDepth receives posted from a pool of 2*recvDepth
// registered buffers, and its peer starts with recvDepth send credits. A
// SEND (or WRITE_WITH_IMM) spends one. The receiver re-posts a buffer as
// soon as a completion frees one (from the pool, not waiting for the
// application to Release the message) and reports the re-posts back: in the
// immediate data of its own SENDs, or, when it has nothing to send and half
// the window is unreported, in a credit-only SEND. Data sends never take
// the last credit, which is kept for that credit-only message, so two
// peers cannot both wait for credits only the other could report. A sender
// without credits queues its sends, in order, and the poller flushes them
// when credits arrive: a SEND never meets an empty receive queue, and RNR
// never happens in normal use.
const (
	creditOnly = 1 << 31 // imm flag: the message carries no data
	creditMask = 0xffff  // imm bits: credits returned
)

// takeUnreported takes the re-posted receives not yet reported, at most
// what one immediate value carries; the rest stays for the next report.
func (r *recvSide) takeUnreported() int64 {
	n := r.unreported.Swap(0)
	if n > creditMask {
		r.unreported.Add(n - creditMask)
		n = creditMask
	}
	return n
}

// Message is a received message. Its bytes stay valid until Release, which
// gives the buffer back to the endpoint's pool.
type Message struct {
	r      *recvSide
	idx    int
	n      int
	imm    uint32
	hasImm bool
}

// Bytes returns the message's data (empty for a WriteImm notification).
func (m *Message) Bytes() []byte {
	off := m.idx * m.r.msgSize
	return m.r.mem[off : off+m.n : off+m.n]
}

// Imm returns the immediate data of a WriteImm notification.
func (m *Message) Imm() (uint32, bool) { return m.imm, m.hasImm }

// Release returns the message's buffer to the pool.
func (m *Message) Release() {
	r := m.r
	r.putFree(m.idx)
	r.replenish()
}

type recvSide struct {
	ep       *Endpoint
	buf      *Buffer
	mem      []byte
	msgSize  int
	depth    int
	msgs     chan *Message
	messages []Message

	mu     sync.Mutex // idle and posting
	idle   []int      // buffers neither posted nor held by a Message
	posted int
	wrs    []verbs.RecvWR
	sges   []verbs.SGE

	unreported atomic.Int64 // re-posted receives the peer has not been told of
}

func (r *recvSide) init(ep *Endpoint, nbufs, depth, msgSize int) error {
	r.ep, r.depth, r.msgSize = ep, depth, msgSize
	var err error
	if r.buf, err = ep.rt.Alloc(nbufs * msgSize); err != nil {
		return err
	}
	r.mem = r.buf.Bytes()
	r.msgs = make(chan *Message, nbufs)
	r.messages = make([]Message, nbufs)
	r.idle = make([]int, 0, nbufs)
	for i := range nbufs {
		r.messages[i] = Message{r: r, idx: i}
		r.idle = append(r.idle, nbufs-1-i)
	}
	r.wrs = make([]verbs.RecvWR, depth)
	r.sges = make([]verbs.SGE, depth)
	r.replenish()
	r.unreported.Store(0) // the first window is the peer's initial credit
	return nil
}

func (r *recvSide) release() {
	if r.buf != nil {
		r.buf.Free()
	}
}

func (r *recvSide) putFree(idx int) {
	r.mu.Lock()
	r.idle = append(r.idle, idx)
	r.mu.Unlock()
}

// replenish posts free buffers until depth receives are posted, in one
// PostRecv, and reports them as credits when that is due.
func (r *recvSide) replenish() {
	r.mu.Lock()
	n := 0
	for r.posted+n < r.depth && len(r.idle) > 0 {
		idx := r.idle[len(r.idle)-1]
		r.idle = r.idle[:len(r.idle)-1]
		r.sges[n] = verbs.SGE{Addr: r.buf.Addr() + uint64(idx*r.msgSize), Length: uint32(r.msgSize), LKey: r.buf.LKey()}
		r.wrs[n] = verbs.RecvWR{ID: qpactor.RecvWRID(idx), SGL: r.sges[n : n+1 : n+1]}
		n++
	}
	posted := 0
	if n > 0 {
		var err error
		posted, err = r.ep.qp.PostRecv(r.wrs[:n])
		if err != nil {
			// The QP left the states that take receives (closing or
			// failed): the buffers go back to the pool.
			for _, wr := range r.wrs[posted:n] {
				r.idle = append(r.idle, qpactor.RecvIndex(wr.ID))
			}
		}
		r.posted += posted
	}
	r.mu.Unlock()
	if posted > 0 {
		r.unreported.Add(int64(posted))
		r.ep.send.maybeReport(r.ep)
	}
}

// onRecv handles a receive completion on the poller goroutine.
func (r *recvSide) onRecv(wc *verbs.WC) {
	idx := qpactor.RecvIndex(wc.WRID)
	r.mu.Lock()
	r.posted--
	r.mu.Unlock()
	if idx >= len(r.messages) {
		return
	}
	if wc.Status != verbs.WCSuccess {
		r.putFree(idx) // flushed: the endpoint is closing or failed
		return
	}
	m := &r.messages[idx]
	switch {
	case wc.Opcode == verbs.WCRecvRDMAWithImm:
		m.n, m.imm, m.hasImm = 0, wc.Imm, true
		r.msgs <- m
	case wc.Flags&verbs.WCFlagWithImm != 0 && wc.Imm&creditOnly != 0:
		r.ep.send.grant(r.ep, int64(wc.Imm&creditMask))
		r.putFree(idx)
	default:
		if wc.Flags&verbs.WCFlagWithImm != 0 {
			r.ep.send.grant(r.ep, int64(wc.Imm&creditMask))
		}
		m.n, m.imm, m.hasImm = int(wc.ByteLen), 0, false
		r.msgs <- m // never blocks: the channel holds every buffer
	}
	r.replenish()
}

// Recv returns the next message, waiting until one arrives, ctx ends or the
// endpoint closes.
func (ep *Endpoint) Recv(ctx context.Context) (*Message, error) {
	select {
	case m := <-ep.recv.msgs:
		return m, nil
	default:
	}
	select {
	case m := <-ep.recv.msgs:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-ep.closed:
		if err := ep.failErr.Load(); err != nil {
			return nil, err
		}
		return nil, ErrClosed
	}
}

// sendCredits gates SEND and WRITE_WITH_IMM on the peer's posted receives.
type sendCredits struct {
	credits     atomic.Int64
	peerMsgSize int

	mu       sync.Mutex
	pending  []pendingSend
	npending atomic.Int64
	retry    *time.Timer
}

type pendingSend struct {
	ops []Op
	p   qpactor.Promise
}

func (s *sendCredits) init(peerDepth int) { s.credits.Store(int64(peerDepth)) }

// take takes n credits, keeping reserve back, and reports success.
func (s *sendCredits) take(n, reserve int64) bool {
	for {
		c := s.credits.Load()
		if c-n < reserve {
			return false
		}
		if s.credits.CompareAndSwap(c, c-n) {
			return true
		}
	}
}

// sendOne posts one op that consumes a receive credit (SEND, WRITE_WITH_IMM),
// or queues it. The fast path allocates nothing.
func (ep *Endpoint) sendOne(op Op) Future {
	s := &ep.send
	if err := ep.failErr.Load(); err != nil {
		return ep.failed(err)
	}
	if s.npending.Load() == 0 && s.take(1, 1) {
		ep.stampOne(&op)
		p, f := qpactor.NewPromise(1, ep.rt.pool)
		if err := ep.submitPromise(func() error { return ep.actor.TrySubmitPromiseOp(&op, p) }); err != nil {
			s.credits.Inc()
			p.Fail(ep.mapErr(err))
		}
		return f
	}
	return ep.queueSends([]Op{op})
}

// sendOps posts a batch whose ops consume receive credits, or queues it.
func (ep *Endpoint) sendOps(ops []Op) Future {
	s := &ep.send
	if err := ep.failErr.Load(); err != nil {
		return ep.failed(err)
	}
	n := int64(countCredited(ops))
	if s.npending.Load() == 0 && s.take(n, 1) {
		ep.stampCredits(ops)
		p, f := qpactor.NewPromise(len(ops), ep.rt.pool)
		if err := ep.submitPromise(func() error { return ep.actor.TrySubmitPromise(ops, p) }); err != nil {
			s.credits.Add(n)
			p.Fail(ep.mapErr(err))
		}
		return f
	}
	return ep.queueSends(ops)
}

// queueSends queues ops, in order, until credits arrive; ops is kept.
func (ep *Endpoint) queueSends(ops []Op) Future {
	s := &ep.send
	p, f := qpactor.NewPromise(len(ops), ep.rt.pool)
	s.mu.Lock()
	s.pending = append(s.pending, pendingSend{ops: ops, p: p})
	s.npending.Inc()
	s.mu.Unlock()
	s.flush(ep)
	return f
}

// submitPromise retries try while the inbox is full: sends come from
// callers, who may block, never from the poller (flush does not wait).
func (ep *Endpoint) submitPromise(try func() error) error {
	for spins := 0; ; spins++ {
		err := try()
		if err != qpactor.ErrBusy {
			return err
		}
		if spins > 64 {
			time.Sleep(10 * time.Microsecond)
		}
	}
}

func countCredited(ops []Op) int {
	n := 0
	for i := range ops {
		if ops[i].Opcode.IsSend() || ops[i].Opcode == verbs.OpWriteImm {
			n++
		}
	}
	return n
}

// stampCredits puts the credits to report into the immediate data of the
// SENDs (WRITE_WITH_IMM carries the caller's immediate data).
func (ep *Endpoint) stampCredits(ops []Op) {
	for i := range ops {
		ep.stampOne(&ops[i])
	}
}

func (ep *Endpoint) stampOne(op *Op) {
	if op.Opcode.IsSend() {
		op.Opcode = verbs.OpSendImm
		op.Imm = uint32(ep.recv.takeUnreported())
	}
}

// flush posts queued sends, in order, while credits last. It never blocks:
// with the inbox full it retries shortly on a timer.
func (s *sendCredits) flush(ep *Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.pending) > 0 {
		ps := s.pending[0]
		n := int64(countCredited(ps.ops))
		if !s.take(n, 1) {
			return
		}
		ep.stampCredits(ps.ops)
		err := ep.actor.TrySubmitPromise(ps.ops, ps.p)
		if err == qpactor.ErrBusy {
			s.credits.Add(n)
			if s.retry == nil {
				s.retry = time.AfterFunc(50*time.Microsecond, func() { s.flush(ep) })
			} else {
				s.retry.Reset(50 * time.Microsecond)
			}
			return
		}
		if err != nil {
			s.credits.Add(n)
			ps.p.Fail(ep.mapErr(err))
		}
		s.pending[0] = pendingSend{}
		s.pending = s.pending[1:]
		s.npending.Dec()
	}
}

// grant adds credits the peer returned and flushes queued sends.
func (s *sendCredits) grant(ep *Endpoint, n int64) {
	if n == 0 {
		return
	}
	s.credits.Add(n)
	if s.npending.Load() > 0 {
		s.flush(ep)
	}
}

// maybeReport sends a credit-only message when half the window is
// unreported; it may use the last credit.
func (s *sendCredits) maybeReport(ep *Endpoint) {
	r := &ep.recv
	if r.unreported.Load() < int64(r.depth/2) || !s.take(1, 0) {
		return
	}
	n := r.takeUnreported()
	p, f := qpactor.NewPromise(1, ep.rt.pool)
	if err := ep.actor.TrySubmitPromise([]Op{{Opcode: verbs.OpSendImm, Imm: creditOnly | uint32(n)}}, p); err != nil {
		s.credits.Inc()
		r.unreported.Add(n)
		p.Fail(err)
	}
	f.Release()
}

// failPending fails every queued send with err.
func (s *sendCredits) failPending(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retry != nil {
		s.retry.Stop()
	}
	for _, ps := range s.pending {
		ps.p.Fail(err)
	}
	s.pending = nil
	s.npending.Store(0)
}
