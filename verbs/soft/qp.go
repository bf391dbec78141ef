package soft

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// sendWQE is a posted send WR as the engine sees it. Slots and their SGE
// and inline storage are allocated as the queue grows (growSQ): posting
// allocates nothing once the queue has held as many WRs as it holds now.
type sendWQE struct {
	id         uint64
	op         verbs.Opcode
	flags      verbs.SendFlags
	signaled   bool
	imm        uint32
	invRKey    uint32
	rdma       verbs.RDMA
	atomic     verbs.Atomic
	ah         *swhca.AH
	remoteQPN  uint32
	remoteQKey uint32
	remoteSRQN uint32
	length     uint64
	sgl        []verbs.SGE // len = num_sge, cap = max_send_sge
	inline     []byte      // len = inline bytes when flags has SendInline

	// Transport state of the WQE at the head of the queue.
	started   bool
	rnrLeft   int // -1: retry forever
	retryLeft int
}

type qp struct {
	pd     *swhca.PD
	ctx    *context
	dev    *device
	qpn    uint32
	typ    verbs.QPType
	sendCQ *swhca.CQ
	recvCQ *swhca.CQ
	srq    *srq
	xrcd   *xrcd
	sigAll bool
	caps   verbs.QPCaps
	limits verbs.SendLimits

	mu    lockrank.Mutex[lockrank.SoftQP]
	state verbs.QPState
	attr  verbs.QPAttr
	// sq has room for the most WRs the QP has held at once, doubled as
	// needed up to caps.MaxSendWR (growSQ): a QP that never holds many
	// WRs never allocates room for them, whatever max_send_wr says.
	sq      []sendWQE
	sqHead  uint64 // next WQE to execute
	sqTail  uint64 // next slot to fill
	sqFreed uint64 // slots below this are free again: released by a signaled or failed completion
	rq      recvQueue
	closed  bool
	// stalled is set while the head WQE waits for a timer (RNR NAK,
	// transport retry, injected delay); the timer reschedules the QP.
	stalled bool
	timer   *time.Timer
	faults  faultState

	// peer caches the destination QP found for the current DestQPN and
	// address vector; only the engine that executes q's WQEs touches it.
	peer     *qp
	peerAV   avKey
	peerPort uint8

	queued    atomic.Bool // on the engine's run queue
	postCalls atomic.Uint64
	postedWRs atomic.Uint64
}

func newQP(c *context, p *swhca.PD, spec verbs.QPSpec) (*qp, error) {
	const op = "ibv_create_qp"
	q := &qp{pd: p, ctx: c, dev: c.dev, typ: spec.Type, sigAll: spec.SigAll}
	bad := func(detail string) (*qp, error) {
		return nil, verbs.NewError(op, verbs.ErrInvalidArgument, detail)
	}
	switch spec.Type {
	case verbs.QPTypeRC, verbs.QPTypeUC, verbs.QPTypeUD, verbs.QPTypeXRCSend, verbs.QPTypeXRCRecv:
	case verbs.QPTypeRawPacket:
		return nil, verbs.NewError(op, verbs.ErrNotSupported, "RAW_PACKET QPs need an Ethernet device")
	default:
		return bad("unknown QP type")
	}
	hasSQ := spec.Type != verbs.QPTypeXRCRecv
	hasRQ := spec.Type != verbs.QPTypeXRCSend && spec.Type != verbs.QPTypeXRCRecv
	caps := spec.Caps
	if hasSQ {
		if caps.MaxSendWR < 1 || caps.MaxSendWR > swhca.MaxQPWR {
			return bad("max_send_wr outside 1..16384")
		}
		if caps.MaxSendSGE < 0 || caps.MaxSendSGE > swhca.MaxSGE || caps.MaxInlineData < 0 || caps.MaxInlineData > swhca.MaxInline {
			return bad("max_send_sge above 32 or max_inline_data above 512")
		}
		sq, ok := spec.SendCQ.(*swhca.CQ)
		if !ok || sq.Owner() != c {
			return bad("send CQ missing or of another context")
		}
		q.sendCQ = sq
		q.caps.MaxSendWR = swhca.QueueCapacity(caps.MaxSendWR)
		q.caps.MaxSendSGE = max(caps.MaxSendSGE, 1)
		q.caps.MaxInlineData = max(caps.MaxInlineData, swhca.MinInline)
	}
	if spec.SRQ != nil {
		s, ok := spec.SRQ.(*srq)
		if !ok || s.ctx != c {
			return bad("SRQ of another context")
		}
		if (spec.Type == verbs.QPTypeXRCRecv) != (s.xrcd != nil) {
			return bad("XRC_RECV QPs take XRC SRQs only, other QPs basic ones only")
		}
		q.srq = s
	}
	switch {
	case spec.Type == verbs.QPTypeXRCRecv:
		x, ok := spec.XRCD.(*xrcd)
		if !ok || x.ctx != c {
			return bad("XRC_RECV QPs need an XRCD of this context")
		}
		q.xrcd = x
	case hasRQ:
		rc, ok := spec.RecvCQ.(*swhca.CQ)
		if !ok || rc.Owner() != c {
			return bad("receive CQ missing or of another context")
		}
		q.recvCQ = rc
		if q.srq == nil {
			if caps.MaxRecvWR < 1 || caps.MaxRecvWR > swhca.MaxQPWR || caps.MaxRecvSGE < 0 || caps.MaxRecvSGE > swhca.MaxSGE {
				return bad("max_recv_wr outside 1..16384 or max_recv_sge above 32")
			}
			q.caps.MaxRecvWR = swhca.QueueCapacity(caps.MaxRecvWR)
			q.caps.MaxRecvSGE = max(caps.MaxRecvSGE, 1)
			q.rq = newRecvQueue(q.caps.MaxRecvWR, q.caps.MaxRecvSGE)
		}
	}
	q.limits = verbs.SendLimits{Type: q.typ, MaxSendSGE: q.caps.MaxSendSGE, MaxInlineData: q.caps.MaxInlineData}
	q.attr.Cap = q.caps
	q.timer = time.AfterFunc(time.Hour, q.timerFired)
	q.timer.Stop()

	if err := c.Registry().Add(op, q, swhca.RankQP, q.destroy); err != nil {
		return nil, err
	}
	q.qpn = c.dev.nextQPN.Add(1)
	q.deps().Hold()
	c.dev.qps.put(q.qpn, q)
	return q, nil
}

// deps are the objects the QP holds while it lives.
func (q *qp) deps() swhca.Deps {
	return swhca.Deps{PD: q.pd, SendCQ: q.sendCQ, RecvCQ: q.recvCQ, SRQ: srqUses(q.srq)}
}

func srqUses(s *srq) *swhca.Usage {
	if s == nil {
		return nil
	}
	return &s.uses
}

func (q *qp) QPN() uint32        { return q.qpn }
func (q *qp) Type() verbs.QPType { return q.typ }
func (q *qp) PostCalls() uint64  { return q.postCalls.Load() }
func (q *qp) PostedWRs() uint64  { return q.postedWRs.Load() }
func (q *qp) timerFired()        { q.mu.Lock(); q.stalled = false; q.mu.Unlock(); q.ctx.eng.schedule(q) }
func (q *qp) stallFor(d time.Duration) {
	q.stalled = true
	q.timer.Reset(d)
}

var (
	errPostState   = verbs.NewError("ibv_post_send", verbs.ErrQPState, "the QP is not in RTS, SQD, SQE or ERR")
	errNoRecvQueue = verbs.NewError("ibv_post_recv", verbs.ErrInvalidArgument, "XRC QPs have no receive queue")
)

// PostSend copies wrs into the send queue, inline payloads included, and
// rings the engine's doorbell once.
func (q *qp) PostSend(wrs []verbs.SendWR) (int, error) {
	q.mu.Lock()
	n, err := q.postSendLocked(wrs)
	if n > 0 {
		// Counted while the WRs are still invisible to the engine: a
		// caller that sees their completions sees the count too.
		q.postCalls.Add(1)
		q.postedWRs.Add(uint64(n))
	}
	flush := q.state == verbs.QPStateErr || q.state == verbs.QPStateSQE
	if flush && n > 0 {
		q.flushSendLocked()
	}
	q.mu.Unlock()
	if n > 0 {
		if !flush {
			q.ctx.eng.doorbell(q)
		}
	}
	return n, err
}

func (q *qp) postSendLocked(wrs []verbs.SendWR) (int, error) {
	if q.closed {
		return 0, swhca.ErrSendClosed
	}
	switch q.state {
	case verbs.QPStateRTS, verbs.QPStateSQD, verbs.QPStateSQE, verbs.QPStateErr:
	default:
		return 0, errPostState
	}
	for i := range wrs {
		wr := &wrs[i]
		if err := q.limits.Check(i, wr); err != nil {
			return i, err
		}
		if q.sqTail-q.sqFreed >= uint64(len(q.sq)) {
			if len(q.sq) >= q.caps.MaxSendWR {
				return i, swhca.ErrSendQueueFull
			}
			q.growSQ()
		}
		w := &q.sq[q.sqTail%uint64(len(q.sq))]
		w.id, w.op, w.flags = wr.ID, wr.Opcode, wr.Flags
		w.signaled = q.sigAll || wr.Flags&verbs.SendSignaled != 0
		w.imm, w.invRKey = wr.Imm, wr.InvalidateRKey
		w.rdma, w.atomic = wr.RDMA, wr.Atomic
		w.remoteQPN, w.remoteQKey, w.remoteSRQN = wr.UD.RemoteQPN, wr.UD.RemoteQKey, wr.RemoteSRQN
		w.ah, _ = wr.UD.AH.(*swhca.AH)
		if q.typ == verbs.QPTypeUD && (w.ah == nil || w.ah.Owner() != q.ctx) {
			return i, &verbs.WRError{Index: i, WRID: wr.ID, Err: verbs.ErrInvalidWR,
				Rule: "the address handle is not one of this device's"}
		}
		if q.typ == verbs.QPTypeUD && w.ah.Closed() {
			// As on the ibv provider; the engine would still find the
			// address in w.ah, but a device would not.
			return i, &verbs.WRError{Index: i, WRID: wr.ID, Err: verbs.ErrInvalidWR,
				Rule: "the address handle is closed"}
		}
		w.length = wr.Length()
		w.started = false
		w.sgl = append(w.sgl[:0], wr.SGL...)
		w.inline = w.inline[:0]
		if wr.Flags&verbs.SendInline != 0 {
			// The data is copied now: the caller may reuse the buffer as
			// soon as PostSend returns, and the L_Key is not checked.
			for _, s := range wr.SGL {
				w.inline = append(w.inline, swhca.UserBytes(s.Addr, s.Length)...)
			}
		}
		q.sqTail++
	}
	return len(wrs), nil
}

// sqStart is the room a send queue gets for its first WR (growSQ).
const sqStart = 4

// growSQ doubles the send queue's room, up to caps.MaxSendWR, moving the
// WQEs that hold slots to their places in the bigger ring. The engine
// finds the head WQE again after each unlock, so none of it points into
// the old one.
func (q *qp) growSQ() {
	n := min(max(2*len(q.sq), sqStart), q.caps.MaxSendWR)
	maxSGE, maxInline := q.caps.MaxSendSGE, q.caps.MaxInlineData
	sq := make([]sendWQE, n)
	sgl := make([]verbs.SGE, n*maxSGE)
	inl := make([]byte, n*maxInline)
	for i := range sq {
		s, k := i*maxSGE, i*maxInline
		sq[i].sgl = sgl[s : s : s+maxSGE]
		sq[i].inline = inl[k : k : k+maxInline]
	}
	for p := q.sqFreed; p < q.sqTail; p++ {
		old, w := &q.sq[p%uint64(len(q.sq))], &sq[p%uint64(n)]
		sgl, inl := w.sgl, w.inline
		*w = *old
		w.sgl = append(sgl, old.sgl...)
		w.inline = append(inl, old.inline...)
	}
	q.sq = sq
}

// PostRecv posts receive WRs. On a QP in ERR they complete at once with
// WR_FLUSH_ERR, as the IB spec says (rxe 6.1 leaves them pending instead:
// SEMANTICS 9b).
func (q *qp) PostRecv(wrs []verbs.RecvWR) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return 0, swhca.ErrSendClosed
	case q.srq != nil:
		return 0, swhca.ErrRecvOnSRQ
	case q.recvCQ == nil:
		return 0, errNoRecvQueue
	case q.state == verbs.QPStateReset:
		return 0, swhca.ErrRecvInReset
	}
	n, err := q.rq.post(wrs)
	if q.state == verbs.QPStateErr {
		q.flushRecvLocked()
	}
	return n, err
}

// flushSendLocked completes every WQE not yet completed with WR_FLUSH_ERR,
// unsignaled ones included (SEMANTICS 9a).
func (q *qp) flushSendLocked() {
	for ; q.sqHead != q.sqTail; q.sqHead++ {
		w := &q.sq[q.sqHead%uint64(len(q.sq))]
		q.sendCQ.Push(&verbs.WC{WRID: w.id, Status: verbs.WCWRFlushErr, QPNum: q.qpn}, false)
	}
	q.sqFreed = q.sqTail
	q.stalled = false
	q.timer.Stop()
}

func (q *qp) flushRecvLocked() {
	q.rq.drain(func(id uint64) {
		q.recvCQ.Push(&verbs.WC{WRID: id, Status: verbs.WCWRFlushErr, QPNum: q.qpn}, false)
	})
}

// toErrorLocked moves the QP to ERR and flushes its queues, receives first
// as rxe orders them.
func (q *qp) toErrorLocked() {
	if q.state == verbs.QPStateErr {
		return
	}
	q.state = verbs.QPStateErr
	if q.recvCQ != nil && q.srq == nil {
		q.flushRecvLocked()
	}
	if q.sendCQ != nil {
		q.flushSendLocked()
	}
}

// Modify changes state and attributes after checking the transition and
// its mask as the kernel does.
func (q *qp) Modify(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	const op = "ibv_modify_qp"
	q.mu.Lock()
	defer q.mu.Unlock()
	next, err := swhca.NextState(q.closed, q.typ, q.state, attr, mask)
	if err != nil {
		return err
	}
	if err := swhca.CheckAttr(attr, mask, attrRules(q.dev)); err != nil {
		return verbs.NewError(op, verbs.ErrInvalidArgument, err.Error())
	}
	swhca.ApplyAttr(&q.attr, attr, mask)
	switch next {
	case verbs.QPStateReset:
		q.state = next
		q.sqHead, q.sqFreed = q.sqTail, q.sqTail
		q.rq.head = q.rq.tail
		q.stalled = false
		q.timer.Stop()
		q.faults = faultState{}
		q.attr = verbs.QPAttr{Cap: q.caps}
	case verbs.QPStateErr:
		q.toErrorLocked()
	default:
		q.state = next
		if next == verbs.QPStateRTS && q.sqHead != q.sqTail {
			defer q.ctx.eng.schedule(q)
		}
	}
	q.attr.State = q.state
	return nil
}

// attrRules are the device's limits on QP attributes: its ports and its
// read and atomic depths.
func attrRules(d *device) swhca.AttrRules {
	return swhca.AttrRules{
		Port: func(port uint8) error {
			if d.portN(port) == nil {
				return swhca.AttrError("port_num: no such port")
			}
			return nil
		},
		RdAtomic: func(a *verbs.QPAttr, mask verbs.QPAttrMask) error {
			switch {
			case mask&verbs.QPAttrMaxQPRdAtomic != 0 && int(a.MaxRdAtomic) > d.initRdAtom:
				return swhca.AttrError(fmt.Sprintf("max_rd_atomic %d above the device's max_qp_init_rd_atom %d", a.MaxRdAtomic, d.initRdAtom))
			case mask&verbs.QPAttrMaxDestRdAtomic != 0 && int(a.MaxDestRdAtomic) > d.rdAtom:
				return swhca.AttrError(fmt.Sprintf("max_dest_rd_atomic %d above the device's max_qp_rd_atom %d", a.MaxDestRdAtomic, d.rdAtom))
			}
			return nil
		},
		AV: func(a *verbs.AHAttr) error { return checkAV(d, a) },
	}
}

func (q *qp) Query() (verbs.QPAttr, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return verbs.QPAttr{}, verbs.NewError("ibv_query_qp", verbs.ErrClosed, "QP")
	}
	return swhca.QueryAttr(q.attr, q.state, q.caps), nil
}

func (q *qp) destroy() {
	q.mu.Lock()
	q.closed = true
	q.timer.Stop()
	q.mu.Unlock()
	q.dev.qps.del(q.qpn)
	q.dev.p.quiesce()
}

// Close destroys the QP. Outstanding WRs are dropped without completions,
// as ibv_destroy_qp drops them.
func (q *qp) Close() error {
	swhca.Close(&q.mu, &q.closed, q.destroy, q.ctx.Registry(), q, q.deps())
	return nil
}

// createQP is PD.CreateQP on the soft engine.
func (c *context) createQP(p *swhca.PD, spec verbs.QPSpec) (verbs.QP, error) {
	return newQP(c, p, spec)
}
