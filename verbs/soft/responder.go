package soft

import (
	"cmp"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// connectedPeer finds the QP the connected QP q sends to: the device its
// address vector routes to (Provider.route), then the destination QPN on
// it, and the port the route arrives on (0: any), which the caller checks
// under r's lock (onPort).
func (e *engine) connectedPeer(q *qp) (r *qp, port uint8) {
	av := &e.attr.AH
	if c := q.peer; c != nil && c.qpn == e.attr.DestQPN && q.peerAV == avKeyOf(av) {
		return c, q.peerPort // QPNs are never reused: a closed peer is caught by accepting()
	}
	d, port := e.ctx.dev.p.route(av)
	if d == nil {
		return nil, 0
	}
	r, found := d.qps.get(e.attr.DestQPN)
	if !found {
		return nil, 0
	}
	switch q.typ {
	case verbs.QPTypeXRCSend:
		if r.typ != verbs.QPTypeXRCRecv {
			return nil, 0
		}
	default:
		if r.typ != q.typ {
			return nil, 0
		}
	}
	q.peer, q.peerAV, q.peerPort = r, avKeyOf(av), port
	return r, port
}

// avKey is what of an address vector decides where it leads.
type avKey struct {
	global bool
	dgid   verbs.GID
	dlid   uint16
}

func avKeyOf(a *verbs.AHAttr) avKey {
	if a.IsGlobal {
		return avKey{global: true, dgid: a.GRH.DGID}
	}
	return avKey{dlid: a.DLID}
}

// onPort reports whether r takes packets that arrive on port (0: any):
// those of its own port only (qpPort). The caller holds r.mu.
func onPort(r *qp, port uint8) bool { return port == 0 || qpPort(&r.attr) == port }

// qpPort is the port of a QP whose attributes are a: its address vector's
// once it has one, else the one it was initialised on, else port 1.
func qpPort(a *verbs.QPAttr) uint8 { return max(cmp.Or(a.AH.PortNum, a.PortNum), 1) }

// accepting reports whether the responder side of r takes packets: RTR and
// the states after it, short of ERR.
func (r *qp) accepting() bool {
	switch r.state {
	case verbs.QPStateRTR, verbs.QPStateRTS, verbs.QPStateSQD, verbs.QPStateSQE:
		return !r.closed
	}
	return false
}

// respond executes w at responder r, whose lock is held.
func (e *engine) respond(q, r *qp, w *sendWQE) result {
	reliable := q.typ.Reliable()
	switch w.op {
	case verbs.OpWrite:
		if w.length == 0 {
			return ok() // nothing to access: the rkey is not checked (SEMANTICS 12c)
		}
		m := r.remoteMR(w.rdma.RKey, w.rdma.RemoteAddr, w.length, verbs.AccessRemoteWrite)
		if m == nil {
			return e.remoteAccessError(r, reliable)
		}
		copySegs1(m, e.src)
		return ok()

	case verbs.OpRead:
		if w.length == 0 {
			return ok()
		}
		m := r.remoteMR(w.rdma.RKey, w.rdma.RemoteAddr, w.length, verbs.AccessRemoteRead)
		if m == nil {
			return e.remoteAccessError(r, reliable)
		}
		e.src = append(e.src[:0], m)
		copySegs(e.dst, e.src)
		return ok()

	case verbs.OpAtomicCmpSwp, verbs.OpAtomicFetchAdd:
		m := r.remoteMR(w.atomic.RKey, w.atomic.RemoteAddr, 8, verbs.AccessRemoteAtomic)
		if m == nil {
			return e.remoteAccessError(r, reliable)
		}
		old := atomic64(m, w.op, w.atomic.CompareAdd, w.atomic.Swap)
		var b [8]byte
		putUint64(b[:], old)
		e.src = append(e.src[:0], b[:])
		copySegs(e.dst, e.src)
		return ok()

	case verbs.OpWriteImm:
		var m []byte
		if w.length > 0 {
			if m = r.remoteMR(w.rdma.RKey, w.rdma.RemoteAddr, w.length, verbs.AccessRemoteWrite); m == nil {
				return e.remoteAccessError(r, reliable)
			}
		}
		if res, okRecv := e.takeRecv(q, r, reliable); !okRecv {
			return res
		}
		copySegs1(m, e.src)
		e.completeRecv(q, r, w, verbs.WCRecvRDMAWithImm, uint32(w.length))
		return ok()

	default: // the SEND family
		var inv *swhca.MR
		if w.op == verbs.OpSendInv {
			if inv = r.invalidatable(w.invRKey); inv == nil {
				if reliable {
					r.toErrorLocked()
					return fail(verbs.WCRemInvReqErr)
				}
				return ok()
			}
		}
		if res, okRecv := e.takeRecv(q, r, reliable); !okRecv {
			return res
		}
		var okSegs bool
		if e.dst, okSegs = localSegs(r, e.rwqe.sgl[:e.rwqe.n], verbs.AccessLocalWrite, e.dst[:0]); !okSegs {
			return e.recvError(r, verbs.WCLocProtErr, verbs.WCRemOpErr, reliable)
		}
		if segsLen(e.dst) < w.length {
			// The IB spec's result; rxe reports LOC_QP_OP_ERR and REM_OP_ERR
			// (SEMANTICS 7). Nothing is written either way.
			return e.recvError(r, verbs.WCLocLenErr, verbs.WCRemInvReqErr, reliable)
		}
		copySegs(e.dst, e.src)
		if inv != nil {
			inv.Invalidate()
		}
		e.completeRecv(q, r, w, verbs.WCRecv, uint32(w.length))
		return ok()
	}
}

// remoteAccessError ends a reliable connection on both sides, as rxe does
// (SEMANTICS 2-5): the responder's posted receives are flushed.
func (e *engine) remoteAccessError(r *qp, reliable bool) result {
	if reliable {
		r.toErrorLocked()
	}
	return accessFail(reliable)
}

// recvError completes the receive e.rwqe with local status and moves the
// responder to ERR; the requester sees remote.
func (e *engine) recvError(r *qp, local, remote verbs.WCStatus, reliable bool) result {
	r.recvCQFor().Push(&verbs.WC{WRID: e.rwqe.id, Status: local, QPNum: r.qpn}, false)
	r.toErrorLocked()
	if reliable {
		return fail(remote)
	}
	return ok()
}

// takeRecv takes the next receive of r (its RQ or SRQ) into e.rwqe.
// Without one, a reliable responder answers RNR NAK and an unreliable one
// drops the message.
func (e *engine) takeRecv(q, r *qp, reliable bool) (result, bool) {
	if r.faults.rnrN > 0 {
		r.faults.rnrN--
		return rnrOrDrop(r, reliable), false
	}
	s := r.srq
	if r.typ == verbs.QPTypeXRCRecv {
		t, found := r.dev.srqs.get(e.cur.remoteSRQN)
		if !found || t.xrcd != r.xrcd {
			r.toErrorLocked()
			return fail(verbs.WCRemInvReqErr), false
		}
		s = t
	}
	e.rwqe.sgl = e.rwqe.sgl[:cap(e.rwqe.sgl)]
	var got bool
	if s != nil {
		got = s.consume(&e.rwqe)
		e.rsrq = s
	} else {
		got = r.rq.pop(&e.rwqe)
		e.rsrq = nil
	}
	if !got {
		return rnrOrDrop(r, reliable), false
	}
	return result{}, true
}

func rnrOrDrop(r *qp, reliable bool) result {
	if reliable {
		return rnr(r.attr.MinRNRTimer)
	}
	return ok()
}

// completeRecv writes the responder's receive completion.
func (e *engine) completeRecv(q, r *qp, w *sendWQE, op verbs.WCOpcode, n uint32) {
	wc := verbs.WC{WRID: e.rwqe.id, Opcode: op, ByteLen: n, QPNum: r.qpn, SrcQP: q.qpn,
		Flags: verbs.WCFlagGRH} // rxe sets GRH on RC and UC receives too (RoCE packets carry one)
	if av := &e.attr.AH; q.typ == verbs.QPTypeUD {
		av = w.ah.Attr()
		if !av.IsGlobal {
			wc.Flags, wc.SLID = 0, q.dev.portN(avPort(av)).lid
		}
	} else if !av.IsGlobal {
		wc.Flags, wc.SLID = 0, q.dev.portN(qpPort(&e.attr)).lid
	}
	switch {
	case w.op.HasImm():
		wc.Flags |= verbs.WCFlagWithImm
		wc.Imm = w.imm
	case w.op == verbs.OpSendInv:
		wc.Flags |= verbs.WCFlagWithInv
		wc.Imm = w.invRKey
	}
	cq := r.recvCQ
	if e.rsrq != nil && e.rsrq.cq != nil {
		cq = e.rsrq.cq
	}
	cq.Push(&wc, w.flags&verbs.SendSolicited != 0)
}

// recvCQFor returns the CQ where r's current receive completes.
func (r *qp) recvCQFor() *swhca.CQ {
	if r.recvCQ != nil {
		return r.recvCQ
	}
	if r.srq != nil {
		return r.srq.cq
	}
	return nil
}

// remoteMR checks an incoming RDMA access against r's keys and permissions
// and returns the bytes it may touch, or nil: unknown or invalidated key,
// MR of another PD, permission missing on the MR or the QP, or a range not
// inside the MR.
func (r *qp) remoteMR(rkey uint32, addr, n uint64, need verbs.Access) []byte {
	m, found := r.dev.mrs.get(rkey)
	if !found || m.Invalid() || m.Access()&need == 0 || r.attr.AccessFlags&need == 0 {
		return nil
	}
	if m.PD() != r.pd && (r.typ != verbs.QPTypeXRCRecv || m.PD().Owner() != r.ctx) {
		return nil
	}
	return m.Slice(addr, n)
}

// invalidatable finds the MR a SEND_WITH_INV names at responder r.
func (r *qp) invalidatable(key uint32) *swhca.MR {
	m, found := r.dev.mrs.get(key)
	if !found || m.PD().Owner() != r.ctx || m.Invalid() {
		return nil
	}
	return m
}

func (e *engine) localInvalidate(q *qp, key uint32) result {
	m, found := q.dev.mrs.get(key)
	if !found || m.PD() != q.pd || m.Invalid() {
		return fail(verbs.WCMWBindErr)
	}
	m.Invalidate()
	return ok()
}

// deliverUD hands a UD datagram to its destination, or drops it: unknown
// destination, Q_Key mismatch, larger than the MTU, no receive posted. The
// sender completes successfully in every case (SEMANTICS 13).
func (e *engine) deliverUD(q *qp, w *sendWQE) {
	a := w.ah.Attr()
	d, port := e.ctx.dev.p.route(a)
	if d == nil {
		return
	}
	r, found := d.qps.get(w.remoteQPN)
	if !found || r.typ != verbs.QPTypeUD {
		return
	}
	qkey := w.remoteQKey
	if qkey&0x8000_0000 != 0 {
		qkey = e.attr.QKey // the IB rule: a Q_Key with the high bit set means "use the QP's own"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.accepting() || r.attr.QKey != qkey || !onPort(r, port) {
		return
	}
	if pt := d.portN(max(r.attr.PortNum, 1)); pt == nil || w.length > uint64(pt.mtu.Bytes()) {
		return // larger than the receiving port's MTU
	}
	if _, got := e.takeRecv(q, r, false); !got {
		return
	}
	var okSegs bool
	if e.dst, okSegs = localSegs(r, e.rwqe.sgl[:e.rwqe.n], verbs.AccessLocalWrite, e.dst[:0]); !okSegs {
		e.recvError(r, verbs.WCLocProtErr, 0, false)
		return
	}
	if segsLen(e.dst) < grhLen+w.length {
		// rxe reports LOC_QP_OP_ERR here (SEMANTICS 13e); the spec's
		// LOC_LEN_ERR matches verbs.ErrLocalLength all the same.
		e.recvError(r, verbs.WCLocLenErr, 0, false)
		return
	}
	if a.IsGlobal {
		sgid := q.dev.portN(avPort(a)).gids[a.GRH.SGIDIndex].GID
		writeGRH(&e.grh, sgid, a.GRH.DGID, a.GRH.HopLimit, a.GRH.TrafficClass, a.GRH.FlowLabel, int(w.length))
	} else {
		// No GRH travelled: the first 40 bytes of the buffer are the
		// spec's "undefined"; zeros here.
		e.grh = [grhLen]byte{}
	}
	e.src = append(e.src, nil)
	copy(e.src[1:], e.src)
	e.src[0] = e.grh[:]
	copySegs(e.dst, e.src)
	e.completeRecv(q, r, w, verbs.WCRecv, uint32(grhLen+w.length))
}
