//go:build linux && cgo

package ibv

/*
#include "shim.h"
*/
import "C"

import (
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/verbsrt/verbsrt/verbs"
)

// qp is a queue pair (struct ibv_qp). Safe for concurrent use: PostSend
// calls serialize on the send lock, PostRecv calls on the receive lock, and
// the two do not wait for each other. Modify and Query serialize on their
// own lock.
type qp struct {
	ctx    *devContext
	c      *C.struct_ibv_qp // fixed for the QP's life; closed says when it is gone
	h      cgo.Handle
	qpn    uint32
	typ    verbs.QPType
	caps   verbs.QPCaps // granted (ibv_query_qp after create)
	srq    *srq
	cqs    [2]*cq // send and receive CQ; nil where the type has none
	closed atomic.Bool
	// state is the state the QP was last moved to by Modify or seen in by
	// Query. The QP can only leave RESET, INIT and RTR through Modify, so
	// "not yet RTS" is exact; ERR reached by the device on its own is not
	// tracked, and needs not be: posting is allowed there.
	state     atomic.Uint32
	postCalls atomic.Uint64
	postedWRs atomic.Uint64

	sqMu sync.Mutex
	sq   *sendQueue // nil for XRC_RECV or a QP granted no send WRs
	lim  verbs.SendLimits

	rqMu sync.Mutex
	rq   *recvQueue // nil with an SRQ, for XRC QPs or a QP granted no receive WRs

	modMu sync.Mutex
}

// CreateQP creates a QP (ibv_create_qp_ex, which is ibv_create_qp for the
// basic types) and queries the capacities the device granted: the arrays
// PostSend and PostRecv fill and the limits WRs are checked against are
// sized from those.
func (p *pd) CreateQP(spec verbs.QPSpec) (verbs.QP, error) {
	pc, err := p.ptr()
	if err != nil {
		return nil, err
	}
	x := p.ctx
	var a C.struct_ibv_qp_init_attr_ex
	a.qp_type = C.enum_ibv_qp_type(spec.Type)
	if spec.SigAll {
		a.sq_sig_all = 1
	}
	a.cap = C.struct_ibv_qp_cap{
		max_send_wr:     C.uint32_t(spec.Caps.MaxSendWR),
		max_recv_wr:     C.uint32_t(spec.Caps.MaxRecvWR),
		max_send_sge:    C.uint32_t(spec.Caps.MaxSendSGE),
		max_recv_sge:    C.uint32_t(spec.Caps.MaxRecvSGE),
		max_inline_data: C.uint32_t(spec.Caps.MaxInlineData),
	}
	q := &qp{ctx: x, typ: spec.Type}
	bad := func(detail string) error {
		return verbs.NewError("ibv_create_qp", verbs.ErrInvalidArgument, detail)
	}
	switch spec.Type {
	case verbs.QPTypeRC, verbs.QPTypeUC, verbs.QPTypeUD, verbs.QPTypeRawPacket, verbs.QPTypeXRCSend:
		a.comp_mask = C.IBV_QP_INIT_ATTR_PD
		a.pd = pc
	case verbs.QPTypeXRCRecv:
		d, ok := spec.XRCD.(*xrcd)
		if !ok || d.ctx != x {
			return nil, bad("XRC_RECV needs an XRC domain of this context")
		}
		dc, err := d.ptr()
		if err != nil {
			return nil, err
		}
		a.comp_mask = C.IBV_QP_INIT_ATTR_XRCD
		a.xrcd = dc
	default:
		return nil, bad("unknown QP type " + spec.Type.String())
	}
	if spec.Type != verbs.QPTypeXRCRecv {
		scq, ok := spec.SendCQ.(*cq)
		if !ok || scq.ctx != x {
			return nil, bad("a send CQ of this context is required")
		}
		if a.send_cq, err = scq.ptr(); err != nil {
			return nil, err
		}
		q.cqs[0] = scq
	}
	if spec.Type != verbs.QPTypeXRCRecv && spec.Type != verbs.QPTypeXRCSend {
		rcq, ok := spec.RecvCQ.(*cq)
		if !ok || rcq.ctx != x {
			return nil, bad("a receive CQ of this context is required")
		}
		if a.recv_cq, err = rcq.ptr(); err != nil {
			return nil, err
		}
		q.cqs[1] = rcq
	}
	if spec.SRQ != nil {
		s, ok := spec.SRQ.(*srq)
		if !ok || s.ctx != x {
			return nil, bad("SRQ of another context or provider")
		}
		if a.srq, err = s.ptr(); err != nil {
			return nil, err
		}
		q.srq = s
	}

	q.h = cgo.NewHandle(q)
	var granted C.struct_ibv_qp_cap
	c, errno := C.vrt_create_qp(x.c, &a, C.uintptr_t(q.h), &granted)
	if c == nil {
		q.h.Delete()
		return nil, verbs.FromErrno("ibv_create_qp", errnoOf(errno, syscall.EINVAL), spec.Type.String())
	}
	q.c, q.qpn = c, uint32(c.qp_num)
	q.caps = verbs.QPCaps{
		MaxSendWR:     int(granted.max_send_wr),
		MaxRecvWR:     int(granted.max_recv_wr),
		MaxSendSGE:    int(granted.max_send_sge),
		MaxRecvSGE:    int(granted.max_recv_sge),
		MaxInlineData: int(granted.max_inline_data),
	}
	q.lim = verbs.SendLimits{Type: spec.Type, MaxSendSGE: q.caps.MaxSendSGE,
		MaxInlineData: q.caps.MaxInlineData, IPCsum: x.ipCsum}
	if spec.Type != verbs.QPTypeXRCRecv && q.caps.MaxSendWR > 0 {
		if q.sq, err = newSendQueue(min(q.caps.MaxSendWR, maxChain), q.caps.MaxSendSGE, q.caps.MaxInlineData); err != nil {
			q.destroy()
			return nil, err
		}
	}
	if q.srq == nil && q.cqs[1] != nil && q.caps.MaxRecvWR > 0 {
		if q.rq, err = newRecvQueue(q.caps.MaxRecvWR, q.caps.MaxRecvSGE); err != nil {
			q.destroy()
			return nil, err
		}
	}
	if err := x.track(kindQP, q); err != nil {
		q.destroy()
		return nil, err
	}
	return q, nil
}

func (q *qp) QPN() uint32             { return q.qpn }
func (q *qp) Type() verbs.QPType      { return q.typ }
func (q *qp) PostCalls() uint64       { return q.postCalls.Load() }
func (q *qp) PostedWRs() uint64       { return q.postedWRs.Load() }
func (q *qp) curState() verbs.QPState { return verbs.QPState(q.state.Load()) }

// PostSend checks every WR (verbs.SendLimits from the granted caps), writes
// the valid prefix into the QP's C arrays and posts it with one
// ibv_post_send per chunk of maxChain WRs. A WR that fails the checks is
// never handed to libibverbs: the WRs before it are posted and it is
// reported as a *verbs.WRError.
func (q *qp) PostSend(wrs []verbs.SendWR) (int, error) {
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	if q.closed.Load() {
		return 0, errClosed
	}
	if len(wrs) == 0 {
		return 0, nil
	}
	if st := q.curState(); st < verbs.QPStateRTS {
		// rxe would return EINVAL here but keep the WRs and run them once
		// the QP reaches RTS; refuse them before they reach it.
		return 0, verbs.Errorf("ibv_post_send", verbs.ErrQPState,
			"QP %#x is in %s: sends need RTS", q.qpn, st)
	}
	s := q.sq
	if s == nil {
		return 0, q.lim.Check(0, &wrs[0]) // XRC_RECV: no send queue
	}
	// One ibv_post_send of more WRs than the send queue holds fails with
	// ENOMEM at index max_send_wr (or earlier). Chunks must not change that:
	// rxe retires WRs between two calls, and a later chunk could slip in.
	all := wrs
	wrs = wrs[:min(len(wrs), q.caps.MaxSendWR)]
	posted := 0
	for posted < len(wrs) {
		chunk := wrs[posted:min(len(wrs), posted+len(s.wrs))]
		n := 0
		var verr error
		for i := range chunk {
			if verr = q.lim.Check(posted+i, &chunk[i]); verr != nil {
				break
			}
			if verr = s.fill(i, &chunk[i], posted+i, q.typ); verr != nil {
				break
			}
			n++
		}
		if n > 0 {
			// Counted before the call: the device may complete the WRs, and
			// a caller may read the counter, before ibv_post_send returns.
			q.postCalls.Add(1)
			q.postedWRs.Add(uint64(n))
			rc := C.vrt_post_send(q.c, &s.wrs[0], C.int(n), s.scratch, C.int(s.maxInline), s.bad)
			s.release(n)
			if rc != 0 {
				bad := int(*s.bad)
				q.postedWRs.Add(-uint64(n - max(bad, 0))) // bad_wr and those after it were not posted
				at := posted + max(bad, 0)
				return at, postError("ibv_post_send", syscall.Errno(rc), bad, at, wrs[at].ID)
			}
			posted += n
		}
		if verr != nil {
			return posted, verr
		}
	}
	if posted < len(all) {
		return posted, queueFull("ibv_post_send", posted, all[posted].ID, q.caps.MaxSendWR)
	}
	return posted, nil
}

// PostRecv posts receive WRs like PostSend, through ibv_post_recv.
func (q *qp) PostRecv(wrs []verbs.RecvWR) (int, error) {
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	if q.closed.Load() {
		return 0, errClosed
	}
	if len(wrs) == 0 {
		return 0, nil
	}
	if q.srq != nil {
		return 0, verbs.NewError("ibv_post_recv", verbs.ErrInvalidArgument,
			"the QP receives through its SRQ: post receives there")
	}
	if q.rq == nil {
		return 0, verbs.Errorf("ibv_post_recv", verbs.ErrInvalidArgument, "%s QP has no receive queue", q.typ)
	}
	if st := q.curState(); st == verbs.QPStateReset {
		return 0, verbs.Errorf("ibv_post_recv", verbs.ErrQPState, "QP %#x is in RESET", q.qpn)
	}
	return q.rq.post("ibv_post_recv", q.c, nil, wrs)
}

// Modify checks the transition (verbs.CheckModify, against the state
// ibv_query_qp reports now) and applies it with ibv_modify_qp.
func (q *qp) Modify(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	q.modMu.Lock()
	defer q.modMu.Unlock()
	if q.closed.Load() {
		return errClosed
	}
	var cur C.struct_ibv_qp_attr
	var init C.struct_ibv_qp_init_attr
	if rc := C.vrt_query_qp(q.c, &cur, C.IBV_QP_STATE, &init); rc != 0 {
		return verbs.FromErrno("ibv_query_qp", syscall.Errno(rc), "")
	}
	if err := verbs.CheckModify(q.typ, verbs.QPState(cur.qp_state), attr.State, mask); err != nil {
		return err
	}
	var a C.struct_ibv_qp_attr
	fillQPAttr(&a, attr)
	if rc := C.vrt_modify_qp(q.c, &a, C.int(mask)); rc != 0 {
		return verbs.FromErrno("ibv_modify_qp", syscall.Errno(rc),
			verbs.QPState(cur.qp_state).String()+" -> "+attr.State.String()+" mask "+mask.String())
	}
	if mask&verbs.QPAttrState != 0 {
		q.state.Store(uint32(attr.State))
	}
	return nil
}

// allQPAttrs asks ibv_query_qp for every attribute QPAttr holds.
const allQPAttrs = (1 << 21) - 1

func (q *qp) Query() (verbs.QPAttr, error) {
	q.modMu.Lock()
	defer q.modMu.Unlock()
	if q.closed.Load() {
		return verbs.QPAttr{}, errClosed
	}
	var a C.struct_ibv_qp_attr
	var init C.struct_ibv_qp_init_attr
	if rc := C.vrt_query_qp(q.c, &a, allQPAttrs, &init); rc != 0 {
		return verbs.QPAttr{}, verbs.FromErrno("ibv_query_qp", syscall.Errno(rc), "")
	}
	attr := qpAttrOf(&a)
	q.state.Store(uint32(attr.State))
	return attr, nil
}

// Close destroys the QP (ibv_destroy_qp) and frees its arrays.
func (q *qp) Close() error { return q.ctx.closeObj(kindQP, q) }

func (q *qp) destroy() error {
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	q.modMu.Lock()
	defer q.modMu.Unlock()
	if q.closed.Load() {
		return nil
	}
	if rc := C.vrt_destroy_qp(q.c); rc != 0 {
		return verbs.FromErrno("ibv_destroy_qp", syscall.Errno(rc), "")
	}
	q.closed.Store(true)
	if q.sq != nil {
		q.sq.free()
	}
	if q.rq != nil {
		q.rq.free()
	}
	q.h.Delete()
	return nil
}

func fillQPAttr(c *C.struct_ibv_qp_attr, a *verbs.QPAttr) {
	c.qp_state = C.enum_ibv_qp_state(a.State)
	c.cur_qp_state = C.enum_ibv_qp_state(a.CurState)
	c.path_mtu = C.enum_ibv_mtu(a.PathMTU)
	c.qkey = C.uint32_t(a.QKey)
	c.rq_psn = C.uint32_t(a.RQPSN)
	c.sq_psn = C.uint32_t(a.SQPSN)
	c.dest_qp_num = C.uint32_t(a.DestQPN)
	c.qp_access_flags = C.uint(a.AccessFlags)
	c.cap = C.struct_ibv_qp_cap{
		max_send_wr:     C.uint32_t(a.Cap.MaxSendWR),
		max_recv_wr:     C.uint32_t(a.Cap.MaxRecvWR),
		max_send_sge:    C.uint32_t(a.Cap.MaxSendSGE),
		max_recv_sge:    C.uint32_t(a.Cap.MaxRecvSGE),
		max_inline_data: C.uint32_t(a.Cap.MaxInlineData),
	}
	fillAHAttr(&c.ah_attr, &a.AH)
	c.pkey_index = C.uint16_t(a.PKeyIndex)
	c.max_rd_atomic = C.uint8_t(a.MaxRdAtomic)
	c.max_dest_rd_atomic = C.uint8_t(a.MaxDestRdAtomic)
	c.min_rnr_timer = C.uint8_t(a.MinRNRTimer)
	c.port_num = C.uint8_t(a.PortNum)
	c.timeout = C.uint8_t(a.Timeout)
	c.retry_cnt = C.uint8_t(a.RetryCnt)
	c.rnr_retry = C.uint8_t(a.RNRRetry)
}

func qpAttrOf(c *C.struct_ibv_qp_attr) verbs.QPAttr {
	return verbs.QPAttr{
		State:       verbs.QPState(c.qp_state),
		CurState:    verbs.QPState(c.cur_qp_state),
		PathMTU:     verbs.MTU(c.path_mtu),
		QKey:        uint32(c.qkey),
		RQPSN:       uint32(c.rq_psn),
		SQPSN:       uint32(c.sq_psn),
		DestQPN:     uint32(c.dest_qp_num),
		AccessFlags: verbs.Access(c.qp_access_flags),
		Cap: verbs.QPCaps{
			MaxSendWR:     int(c.cap.max_send_wr),
			MaxRecvWR:     int(c.cap.max_recv_wr),
			MaxSendSGE:    int(c.cap.max_send_sge),
			MaxRecvSGE:    int(c.cap.max_recv_sge),
			MaxInlineData: int(c.cap.max_inline_data),
		},
		AH:              ahAttrOf(&c.ah_attr),
		PKeyIndex:       uint16(c.pkey_index),
		SQDraining:      c.sq_draining != 0,
		MaxRdAtomic:     uint8(c.max_rd_atomic),
		MaxDestRdAtomic: uint8(c.max_dest_rd_atomic),
		MinRNRTimer:     uint8(c.min_rnr_timer),
		PortNum:         uint8(c.port_num),
		Timeout:         uint8(c.timeout),
		RetryCnt:        uint8(c.retry_cnt),
		RNRRetry:        uint8(c.rnr_retry),
	}
}

var (
	_ verbs.QP          = (*qp)(nil)
	_ verbs.PostCounter = (*qp)(nil)
)
