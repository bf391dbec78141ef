package rocev2

import (
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
)

var (
	errPostState = verbs.NewError("ibv_post_send", verbs.ErrQPState, "the QP is not in RTS or ERR")
	errRQFull    = verbs.NewError("ibv_post_recv", verbs.ErrNoMemory, "receive queue full")
)

// PostSend checks each WR (verbs.Validate's rules, the send queue's room),
// resolves its gather list through the lkeys, copies inline data, and
// hands it to the transport QP, which sends what its window allows at
// once. A gather entry whose lkey does not resolve fails the WR with
// LOC_PROT_ERR when it reaches the head of the queue, and the QP with it.
// In ERR every WR completes with WR_FLUSH_ERR.
func (q *qp) PostSend(wrs []verbs.SendWR) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, swhca.ErrSendClosed
	}
	st := q.stateLocked()
	if st != verbs.QPStateRTS && st != verbs.QPStateErr {
		return 0, errPostState
	}
	n := 0
	var err error
	for i := range wrs {
		if err = q.postOneLocked(i, &wrs[i], st == verbs.QPStateErr); err != nil {
			break
		}
		n++
	}
	if n > 0 {
		q.postCalls.Add(1)
		q.postedWRs.Add(uint64(n))
	}
	return n, err
}

func (q *qp) postOneLocked(i int, wr *verbs.SendWR, flush bool) error {
	if err := q.limits.Check(i, wr); err != nil {
		return err
	}
	var a *swhca.AH
	if q.typ == verbs.QPTypeUD {
		a, _ = wr.UD.AH.(*swhca.AH)
		if a == nil || a.Owner() != q.ctx {
			return &verbs.WRError{Index: i, WRID: wr.ID, Err: verbs.ErrInvalidWR,
				Rule: "the address handle is not one of this device's"}
		}
		if a.Closed() {
			return &verbs.WRError{Index: i, WRID: wr.ID, Err: verbs.ErrInvalidWR, Rule: "the address handle is closed"}
		}
	}
	if q.sqPosted-q.sqFreed.Load() >= uint64(q.caps.MaxSendWR) {
		return swhca.ErrSendQueueFull
	}
	q.sqPosted++
	seq := q.sqPosted
	if flush {
		q.deliver(completion{WC: verbs.WC{WRID: wr.ID, Status: verbs.WCWRFlushErr, QPNum: q.qpn}, SendSeq: seq})
		return nil
	}
	signaled := q.sigAll || wr.Flags&verbs.SendSignaled != 0
	var data []byte
	var scatter [][]byte
	lerr := verbs.WCSuccess
	if wr.Flags&verbs.SendInline != 0 {
		// Copied now: the caller may reuse the buffer once PostSend
		// returns, and the lkey is not checked.
		for _, s := range wr.SGL {
			data = append(data, swhca.UserBytes(s.Addr, s.Length)...)
		}
	} else {
		need := verbs.Access(0)
		if wr.Opcode == verbs.OpRead || wr.Opcode.IsAtomic() {
			need = verbs.AccessLocalWrite
		}
		segs, ok := localSegs(q.dev, q.pd, wr.SGL, need)
		switch {
		case !ok:
			lerr = verbs.WCLocProtErr
		case len(segs) > 1 && (wr.Opcode == verbs.OpRead):
			data, scatter = make([]byte, wr.Length()), segs
		default:
			data = gather(segs)
		}
	}
	if q.typ == verbs.QPTypeUD {
		if lerr != verbs.WCSuccess {
			q.deliver(completion{WC: verbs.WC{WRID: wr.ID, Status: lerr, QPNum: q.qpn}, SendSeq: seq})
			return nil
		}
		g := a.Attr().GRH
		q.ud.postSend(&udSend{id: wr.ID, data: data, imm: wr.Imm, hasImm: wr.Opcode == verbs.OpSendImm,
			signaled: signaled, solicited: wr.Flags&verbs.SendSolicited != 0,
			remote:    q.dev.p.routeUD(g.DGID, a.Attr().DLID, wr.UD.RemoteQPN),
			remoteQPN: wr.UD.RemoteQPN & wire.Mask24, remoteQKey: wr.UD.RemoteQKey, seq: seq})
		return nil
	}
	w := &sendWQE{id: wr.ID, op: wr.Opcode, data: data, scatter: scatter, localErr: lerr, seq: seq,
		signaled: signaled, solicited: wr.Flags&verbs.SendSolicited != 0, imm: wr.Imm}
	switch {
	case wr.Opcode.IsAtomic():
		w.raddr, w.rkey = wr.Atomic.RemoteAddr, wr.Atomic.RKey
		w.compare, w.swapAdd = wr.Atomic.CompareAdd, wr.Atomic.CompareAdd
		if wr.Opcode == verbs.OpAtomicCmpSwp {
			w.swapAdd = wr.Atomic.Swap
		}
	case wr.Opcode == verbs.OpLocalInv:
		w.rkey = wr.InvalidateRKey
	default:
		w.raddr, w.rkey = wr.RDMA.RemoteAddr, wr.RDMA.RKey
	}
	w.inv = wr.InvalidateRKey
	if wr.Opcode == verbs.OpSendInv && q.typ == verbs.QPTypeUC {
		w.localErr = verbs.WCLocQPOpErr // UC has no SEND with invalidate opcodes
	}
	if err := q.rc.postSend(w); err != nil {
		// The transport QP failed since the state was read.
		q.deliver(completion{WC: verbs.WC{WRID: wr.ID, Status: verbs.WCWRFlushErr, QPNum: q.qpn}, SendSeq: seq})
	}
	return nil
}

// PostRecv posts receive WRs. A receive of several SGEs lands in one
// buffer and is scattered when its message completes. On a QP in ERR
// they complete at once with WR_FLUSH_ERR, as the IB spec says.
func (q *qp) PostRecv(wrs []verbs.RecvWR) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, swhca.ErrSendClosed
	}
	if q.srq != nil {
		return 0, swhca.ErrRecvOnSRQ
	}
	st := q.stateLocked()
	if st == verbs.QPStateReset {
		return 0, swhca.ErrRecvInReset
	}
	lim := verbs.RecvLimits{MaxRecvSGE: q.caps.MaxRecvSGE}
	for i := range wrs {
		wr := &wrs[i]
		if err := lim.Check(i, wr); err != nil {
			return i, err
		}
		if st == verbs.QPStateErr {
			q.recvCQ.Push(&verbs.WC{WRID: wr.ID, Status: verbs.WCWRFlushErr, QPNum: q.qpn}, false)
			continue
		}
		if q.rqHeld.Load() >= int64(q.caps.MaxRecvWR) {
			return i, errRQFull
		}
		r := resolveRecv(q.dev, q.pd, wr)
		q.rqHeld.Add(1)
		switch {
		case q.rc != nil:
			q.rc.postRecv(r)
		case q.ud != nil:
			q.ud.postRecv(r)
		default:
			q.early = append(q.early, r)
		}
	}
	return len(wrs), nil
}
