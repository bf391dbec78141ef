package rocev2

import (
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"sync/atomic"

	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// qp is a verbs QP over the transport: the state machine of ibv_modify_qp
// around an rcQP or udQP, which it creates at RTR (when the QP starts to
// receive) and discards at RESET.
//
// mu ranks before the rcQP's or udQP's locks and the CQs' (the table in
// internal/lockrank). The transport QP delivers completions (deliver)
// without taking mu.
type qp struct {
	qpn    uint32
	typ    verbs.QPType
	caps   verbs.QPCaps
	limits verbs.SendLimits
	sigAll bool
	// The objects the QP uses (deps) and where it lives.
	sendCQ, recvCQ *swhca.CQ
	srq            *srq // nil: the QP has a receive queue of its own
	pd             *swhca.PD
	ctx            *context
	dev            *device

	mu     lockrank.Mutex[lockrank.RoCEQP]
	state  verbs.QPState
	attr   verbs.QPAttr
	closed bool
	rc     *rcQP
	ud     *udQP
	// early holds the receives posted in INIT, handed to the transport
	// QP at RTR.
	early []recvWQE

	// failed is set when the transport QP moved to ERR on its own (an
	// error completion, a fatal NAK): Query reports ERR from then on.
	failed atomic.Bool
	// qpAccess is the QP's access flags, read by the responder.
	qpAccess atomic.Uint32
	// Send queue slots: WQE seq (from 1) were posted up to sqPosted
	// (under mu); those up to sqFreed have completed or were retired by
	// a later signaled completion, as unsignaled WQEs hold their slots.
	sqPosted uint64
	sqFreed  atomic.Uint64
	// rqHeld counts receives posted and not yet completed.
	rqHeld atomic.Int64

	postCalls atomic.Uint64
	postedWRs atomic.Uint64
}

func newQP(c *context, p *swhca.PD, spec verbs.QPSpec) (*qp, error) {
	const op = "ibv_create_qp"
	bad := func(detail string) (*qp, error) {
		return nil, verbs.NewError(op, verbs.ErrInvalidArgument, detail)
	}
	switch spec.Type {
	case verbs.QPTypeRC, verbs.QPTypeUC, verbs.QPTypeUD:
	case verbs.QPTypeXRCSend, verbs.QPTypeXRCRecv, verbs.QPTypeRawPacket:
		return nil, verbs.Errorf(op, verbs.ErrNotSupported, "rocev2 has no %s QPs", spec.Type)
	default:
		return bad("unknown QP type")
	}
	var shared *srq
	if spec.SRQ != nil {
		s, ok := spec.SRQ.(*srq)
		if !ok || s.ctx != c {
			return bad("SRQ of another context or provider")
		}
		shared = s
	}
	caps := spec.Caps
	if shared != nil {
		caps.MaxRecvWR, caps.MaxRecvSGE = 1, 1 // unused: receives come from the SRQ
	}
	if caps.MaxSendWR < 1 || caps.MaxSendWR > swhca.MaxQPWR || caps.MaxRecvWR < 1 || caps.MaxRecvWR > swhca.MaxQPWR {
		return bad("max_send_wr or max_recv_wr outside 1..16384")
	}
	if caps.MaxSendSGE < 0 || caps.MaxSendSGE > swhca.MaxSGE || caps.MaxRecvSGE < 0 || caps.MaxRecvSGE > swhca.MaxSGE ||
		caps.MaxInlineData < 0 || caps.MaxInlineData > swhca.MaxInline {
		return bad("max_send_sge or max_recv_sge above 32, or max_inline_data above 512")
	}
	sq, ok1 := spec.SendCQ.(*swhca.CQ)
	rq, ok2 := spec.RecvCQ.(*swhca.CQ)
	if !ok1 || !ok2 || sq.Owner() != c || rq.Owner() != c {
		return bad("send or receive CQ missing or of another context")
	}
	q := &qp{pd: p, ctx: c, dev: c.dev, typ: spec.Type, sendCQ: sq, recvCQ: rq, srq: shared, sigAll: spec.SigAll}
	q.caps = verbs.QPCaps{MaxSendWR: swhca.QueueCapacity(caps.MaxSendWR), MaxRecvWR: swhca.QueueCapacity(caps.MaxRecvWR),
		MaxSendSGE: max(caps.MaxSendSGE, 1), MaxRecvSGE: max(caps.MaxRecvSGE, 1),
		MaxInlineData: max(caps.MaxInlineData, swhca.MinInline)}
	if shared != nil {
		q.caps.MaxRecvWR, q.caps.MaxRecvSGE = 0, 0
	}
	q.limits = verbs.SendLimits{Type: q.typ, MaxSendSGE: q.caps.MaxSendSGE, MaxInlineData: q.caps.MaxInlineData}
	q.attr.Cap = q.caps
	if err := c.Registry().Add(op, q, swhca.RankQP, q.destroy); err != nil {
		return nil, err
	}
	q.qpn = c.dev.p.newQPN(c.dev)
	q.deps().Hold()
	return q, nil
}

func (q *qp) QPN() uint32        { return q.qpn }
func (q *qp) Type() verbs.QPType { return q.typ }

// PostCalls implements verbs.PostCounter.
func (q *qp) PostCalls() uint64 { return q.postCalls.Load() }

// PostedWRs implements verbs.PostCounter.
func (q *qp) PostedWRs() uint64 { return q.postedWRs.Load() }

// deliver hands a completion of the transport QP to its CQ and frees the
// queue slots it retires. It runs outside the transport QP's lock and
// takes no QP lock.
func (q *qp) deliver(c completion) {
	if c.SendSeq != 0 {
		for {
			f := q.sqFreed.Load()
			if c.SendSeq <= f || q.sqFreed.CompareAndSwap(f, c.SendSeq) {
				break
			}
		}
		q.sendCQ.Push(&c.WC, false)
		return
	}
	if q.srq == nil {
		q.rqHeld.Add(-1)
	}
	q.recvCQ.Push(&c.WC, c.Solicited)
}

// onFail runs as the rcQP moves to ERR; a responder that found the
// peer's request invalid raises the async event of the IB spec (9.9.3).
func (q *qp) onFail(status verbs.WCStatus, responder bool) {
	q.failed.Store(true)
	if !responder {
		return
	}
	ev := verbs.EventQPReqErr
	if status == verbs.WCRemAccessErr {
		ev = verbs.EventQPAccessErr
	}
	q.ctx.Registry().Raise(verbs.AsyncEvent{Type: ev, QP: q})
}

// stateLocked is the state as a user sees it.
func (q *qp) stateLocked() verbs.QPState {
	if q.failed.Load() && q.state != verbs.QPStateReset {
		return verbs.QPStateErr
	}
	return q.state
}

// Modify changes state and attributes after checking the transition and
// its mask as the kernel does.
func (q *qp) Modify(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	const op = "ibv_modify_qp"
	q.mu.Lock()
	defer q.mu.Unlock()
	cur := q.stateLocked()
	next, err := swhca.NextState(q.closed, q.typ, cur, attr, mask)
	if err != nil {
		return err
	}
	if next == verbs.QPStateSQD || next == verbs.QPStateSQE {
		return verbs.Errorf(op, verbs.ErrNotSupported, "rocev2 has no %s state", next)
	}
	if err := swhca.CheckAttr(attr, mask, attrRules); err != nil {
		return verbs.NewError(op, verbs.ErrInvalidArgument, err.Error())
	}
	swhca.ApplyAttr(&q.attr, attr, mask)
	if mask&verbs.QPAttrAccessFlags != 0 {
		q.qpAccess.Store(uint32(attr.AccessFlags))
	}
	switch {
	case next == verbs.QPStateReset:
		q.resetLocked()
	case next == verbs.QPStateErr:
		q.toErrorLocked()
	case cur == verbs.QPStateInit && next == verbs.QPStateRTR:
		q.startLocked()
	case cur == verbs.QPStateRTR && next == verbs.QPStateRTS:
		q.startSendLocked(true)
	case cur == verbs.QPStateRTS && next == verbs.QPStateRTS:
		q.startSendLocked(false)
	}
	q.state = next
	q.attr.State = q.state
	return nil
}

// startLocked creates the transport QP at RTR, so it receives from now on.
func (q *qp) startLocked() {
	a := &q.attr
	var shared recvSource
	if q.srq != nil {
		shared = q.srq
	}
	if q.typ == verbs.QPTypeUD {
		q.ud = newUDQP(q.dev.t, udConfig{QPN: q.qpn, QKey: a.QKey, MTU: q.dev.p.mtu.Bytes(), SRQ: shared,
			Deliver: q.deliver, OnFail: func() { q.failed.Store(true) }})
		for _, r := range q.early {
			q.ud.postRecv(r)
		}
	} else {
		remote, anyPort := q.dev.p.route(a.AH.GRH.DGID, a.AH.DLID, a.DestQPN)
		q.rc = newRCQP(q.dev.t, rcConfig{QPN: q.qpn, RemoteQPN: a.DestQPN, Remote: remote, RemoteAnyPort: anyPort,
			MTU: min(a.PathMTU, q.dev.p.mtu).Bytes(), RQPSN: wire.PSN(a.RQPSN & wire.Mask24), MinRNRTimer: a.MinRNRTimer,
			UC: q.typ == verbs.QPTypeUC, SRQ: shared, Memory: qpMemory{q}, LocalInv: q.localInvalidate, Clock: q.dev.p.clock, Deliver: q.deliver, OnFail: q.onFail})
		for _, r := range q.early {
			q.rc.postRecv(r)
		}
	}
	q.early = nil
}

// startSendLocked applies what RTS sets: the requester's timers, and
// with first the first send PSN.
func (q *qp) startSendLocked(first bool) {
	a := &q.attr
	if q.ud != nil && first {
		q.ud.setSQPSN(wire.PSN(a.SQPSN & wire.Mask24))
	}
	if q.rc != nil {
		q.rc.startRequester(first, wire.PSN(a.SQPSN&wire.Mask24), verbs.AckTimeoutDuration(a.Timeout),
			int(a.RetryCnt), int(a.RNRRetry), max(1, int(a.MaxRdAtomic)))
	}
}

// toErrorLocked moves the QP to ERR, flushing both queues.
func (q *qp) toErrorLocked() {
	q.failed.Store(true)
	switch {
	case q.rc != nil:
		q.rc.toError()
	case q.ud != nil:
		q.ud.flush()
	}
	for _, r := range q.early {
		q.deliver(completion{WC: verbs.WC{WRID: r.id, Status: verbs.WCWRFlushErr, QPNum: q.qpn}})
	}
	q.early = nil
	q.state = verbs.QPStateErr
}

// resetLocked discards the transport QP and everything queued, without
// completions, as RESET does.
func (q *qp) resetLocked() {
	q.stopTransportLocked()
	q.early = nil
	q.failed.Store(false)
	q.sqFreed.Store(q.sqPosted)
	q.rqHeld.Store(0)
	q.attr = verbs.QPAttr{Cap: q.caps}
	q.qpAccess.Store(0)
}

func (q *qp) stopTransportLocked() {
	if q.rc != nil {
		q.rc.close()
		q.rc = nil
	}
	if q.ud != nil {
		q.ud.close()
		q.ud = nil
	}
}

// attrRules are the device's limits on QP attributes: one port, and
// read and atomic depths up to the responder's history.
var attrRules = swhca.AttrRules{
	Port: func(port uint8) error {
		if port != portNum {
			return swhca.AttrError("port_num must be 1")
		}
		return nil
	},
	RdAtomic: func(a *verbs.QPAttr, mask verbs.QPAttrMask) error {
		if mask&verbs.QPAttrMaxQPRdAtomic != 0 && a.MaxRdAtomic > atomicHistory ||
			mask&verbs.QPAttrMaxDestRdAtomic != 0 && a.MaxDestRdAtomic > atomicHistory {
			return swhca.AttrError("max_rd_atomic above 16")
		}
		return nil
	},
	AV: checkAV,
}

// deps are the objects the QP holds while it lives.
func (q *qp) deps() swhca.Deps {
	d := swhca.Deps{PD: q.pd, SendCQ: q.sendCQ, RecvCQ: q.recvCQ}
	if q.srq != nil {
		d.SRQ = &q.srq.uses
	}
	return d
}

func (q *qp) Query() (verbs.QPAttr, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return verbs.QPAttr{}, verbs.NewError("ibv_query_qp", verbs.ErrClosed, "QP")
	}
	return swhca.QueryAttr(q.attr, q.stateLocked(), q.caps), nil
}

func (q *qp) destroy() {
	q.mu.Lock()
	q.closed = true
	q.stopTransportLocked()
	q.mu.Unlock()
	q.dev.p.forgetQPN(q.qpn)
}

// Close destroys the QP. Outstanding WRs are dropped without completions,
// as ibv_destroy_qp drops them.
func (q *qp) Close() error {
	swhca.Close(&q.mu, &q.closed, q.destroy, q.ctx.Registry(), q, q.deps())
	return nil
}

// createQP is PD.CreateQP over the transport.
func (c *context) createQP(p *swhca.PD, spec verbs.QPSpec) (verbs.QP, error) {
	return newQP(c, p, spec)
}
