package soft

import (
	"sync"
	"time"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// processBudget is how many WQEs of one QP the engine executes before it
// turns to the next QP with work: fairness between QPs of a context.
const processBudget = 64

// inlineBudget is how many WQEs a doorbell executes on the poster's
// goroutine before it leaves the rest to the engine: a whole send queue of
// the sizes the runtime uses, so one PostSend of a chain usually completes
// it, while a poster with a deeper queue does not hold the context's
// execution for longer than that.
const inlineBudget = 1024

// engine is the "HCA" of one context: it executes the WQEs of the
// context's QPs in order, one at a time (execMu), and writes their
// completions. A doorbell executes them on the poster's goroutine when
// execMu is free (doorbell); the engine goroutine takes what is left: QPs
// whose doorbell found the engine busy, and QPs whose timer (RNR, retry,
// injected delay) fired.
//
// The requester also plays the responder's part for the packets it
// "sends": it locks the target QP, checks keys and access, moves the data
// and writes the target's receive completion. Lock order: execMu, then a
// QP's mu, then an SRQ's, then a CQ's; execution holds at most one QP lock
// at a time, and a poster calls doorbell holding none.
type engine struct {
	ctx    *context
	inline bool // Config.EngineOnly unset

	// execMu is held while a WQE executes. Closing an MR or a QP takes
	// and drops it on every engine of the fabric (Provider.quiesce), so
	// once Close returns no engine still touches the memory or queue.
	execMu sync.Mutex

	mu    sync.Mutex
	runq  []*qp
	spare []*qp
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}

	// Scratch owned by the engine goroutine, so executing a WQE allocates
	// nothing.
	cur  sendWQE
	attr verbs.QPAttr
	src  [][]byte
	dst  [][]byte
	rwqe recvWQE
	rsrq *srq // the SRQ rwqe came from, nil for a QP's own RQ
	grh  [grhLen]byte
}

func newEngine(c *context) *engine {
	e := &engine{ctx: c, inline: c.dev.p.inline, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	e.cur.sgl = make([]verbs.SGE, 0, maxSGE)
	e.cur.inline = make([]byte, 0, maxInline)
	e.src = make([][]byte, 0, maxSGE+1)
	e.dst = make([][]byte, 0, maxSGE+1)
	e.rwqe.sgl = make([]verbs.SGE, maxSGE)
	return e
}

// schedule puts q on the run queue unless it is there already, and wakes
// the engine.
func (e *engine) schedule(q *qp) {
	if !q.queued.CompareAndSwap(false, true) {
		return
	}
	e.mu.Lock()
	e.runq = append(e.runq, q)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *engine) run() {
	defer close(e.done)
	for {
		select {
		case <-e.wake:
		case <-e.quit:
			return
		}
		for {
			// Swap the run queue with the spare slice, so schedulers append
			// to one while the engine walks the other.
			e.mu.Lock()
			batch := e.runq
			if len(batch) == 0 {
				e.mu.Unlock()
				break
			}
			e.runq = e.spare[:0]
			e.mu.Unlock()
			for i, q := range batch {
				e.process(q)
				batch[i] = nil
			}
			e.spare = batch
		}
	}
}

func (e *engine) stop() {
	close(e.quit)
	<-e.done
}

// outcome of one attempt at a WQE.
type outcome uint8

const (
	done   outcome = iota // executed (or, on UC and UD, lost silently)
	failed                // completes with an error status; the QP goes to ERR
	rnrNAK                // the responder had no receive posted
	lost                  // no answer: retry after the ACK timeout
)

type result struct {
	kind     outcome
	status   verbs.WCStatus
	rnrDelay time.Duration
}

func ok() result                   { return result{kind: done} }
func fail(s verbs.WCStatus) result { return result{kind: failed, status: s} }
func noAnswer() result             { return result{kind: lost} }
func rnr(timer uint8) result       { return result{kind: rnrNAK, rnrDelay: verbs.RNRTimerDuration(timer)} }
func accessFail(reliable bool) result {
	if reliable {
		return fail(verbs.WCRemAccessErr)
	}
	return ok() // UC: the responder drops the packet, the requester never knows
}

// process executes up to processBudget WQEs of q on the engine goroutine,
// and puts q back on the run queue when more are left.
func (e *engine) process(q *qp) {
	q.queued.Store(false)
	e.execMu.Lock()
	more := e.executeLocked(q, processBudget)
	e.execMu.Unlock()
	if more {
		e.schedule(q)
	}
}

// doorbell runs q's newly posted WQEs. When no other WQE of the context is
// executing, the poster's goroutine executes them before PostSend returns,
// as rxe runs its requester task in the poster's context: a hand-off to the
// engine goroutine, and the wake-up of a parked one, would cost more than
// the copy. Otherwise (the engine is busy, or the WQEs wait on a timer) the
// engine goroutine takes them, in order, as before.
func (e *engine) doorbell(q *qp) {
	if e.inline && e.execMu.TryLock() {
		more := e.executeLocked(q, inlineBudget)
		e.execMu.Unlock()
		if !more {
			return
		}
	}
	e.schedule(q)
}

// executeLocked executes up to budget WQEs of q, with execMu held, and
// reports whether q has WQEs left that it could run now. It holds q's lock
// except while a transfer runs: one lock hand-off per WQE settles it and
// picks up the next.
func (e *engine) executeLocked(q *qp, budget int) (more bool) {
	q.mu.Lock()
	for range budget {
		if q.closed || q.state != verbs.QPStateRTS || q.stalled || q.sqHead == q.sqTail {
			q.mu.Unlock()
			return false
		}
		idx := q.sqHead
		w := &q.sq[idx%uint64(len(q.sq))]
		if !w.started {
			w.started = true
			w.rnrLeft = int(q.attr.RNRRetry)
			if w.rnrLeft == 7 {
				w.rnrLeft = -1 // 7 means retry forever (IB spec; rxe differs, SEMANTICS 6e)
			}
			w.retryLeft = int(q.attr.RetryCnt)
			if q.faults.delayN > 0 {
				q.faults.delayN--
				q.stallFor(q.faults.delay)
				q.mu.Unlock()
				return false
			}
		}
		drop := false
		if q.faults.dropN > 0 {
			q.faults.dropN--
			drop = true
		}
		e.snapshot(q, w)
		q.mu.Unlock()

		res := e.execute(q, drop)

		q.mu.Lock()
		if q.sqHead != idx || q.closed || q.state != verbs.QPStateRTS {
			// Flushed, reset or destroyed while it ran: whoever did that
			// completed (or dropped) the WQE already.
			continue
		}
		// A post may have grown the queue while it ran (growSQ).
		w = &q.sq[idx%uint64(len(q.sq))]
		e.settleLocked(q, w, res)
	}
	q.mu.Unlock()
	return true
}

// snapshot copies the head WQE and the QP attributes the transfer needs, so
// the transfer runs without q's lock and a concurrent reset cannot change
// them underneath.
func (e *engine) snapshot(q *qp, w *sendWQE) {
	sgl, inl := e.cur.sgl, e.cur.inline
	e.cur = *w
	e.cur.sgl = append(sgl[:0], w.sgl...)
	e.cur.inline = append(inl[:0], w.inline...)
	e.attr = q.attr
}

// settleLocked applies the result of an attempt to the head WQE: complete
// it, or arm the timer of a retry.
func (e *engine) settleLocked(q *qp, w *sendWQE, res result) {
	reliable := q.typ.Reliable()
	switch res.kind {
	case rnrNAK:
		if !reliable {
			res = ok()
			break
		}
		if w.rnrLeft == 0 {
			res = fail(verbs.WCRNRRetryExcErr)
			break
		}
		if w.rnrLeft > 0 {
			w.rnrLeft--
		}
		q.stallFor(res.rnrDelay)
		return
	case lost:
		if !reliable {
			res = ok()
			break
		}
		if w.retryLeft == 0 {
			res = fail(verbs.WCRetryExcErr)
			break
		}
		w.retryLeft--
		// A transport timeout of 0 means wait forever: the WQE stays at the
		// head until the QP leaves RTS.
		if d := verbs.AckTimeoutDuration(e.attr.Timeout); d > 0 {
			q.stallFor(d)
		} else {
			q.stalled = true
		}
		return
	}
	idx := q.sqHead
	q.sqHead++
	if res.kind == failed {
		q.sendCQ.push(&verbs.WC{WRID: w.id, Status: res.status, QPNum: q.qpn}, false)
		q.sqFreed = idx + 1
		q.toErrorLocked()
		return
	}
	if w.signaled {
		wc := verbs.WC{WRID: w.id, Opcode: verbs.WCOpcodeOf(w.op), ByteLen: uint32(w.length), QPNum: q.qpn}
		if w.op.HasImm() {
			wc.Flags = verbs.WCFlagWithImm // rxe sets it on the sender's WC too (SEMANTICS 16a)
		}
		q.sendCQ.push(&wc, false)
		q.sqFreed = idx + 1
	}
}

// execute performs one attempt of e.cur on behalf of q.
func (e *engine) execute(q *qp, drop bool) result {
	w := &e.cur
	switch w.op {
	case verbs.OpLocalInv:
		return e.localInvalidate(q, w.invRKey)
	case verbs.OpRead, verbs.OpAtomicCmpSwp, verbs.OpAtomicFetchAdd:
		var okSegs bool
		if e.dst, okSegs = localSegs(q, w.sgl, verbs.AccessLocalWrite, e.dst[:0]); !okSegs {
			return fail(verbs.WCLocProtErr)
		}
	default:
		if w.flags&verbs.SendInline != 0 {
			e.src = append(e.src[:0], w.inline)
		} else {
			var okSegs bool
			if e.src, okSegs = localSegs(q, w.sgl, 0, e.src[:0]); !okSegs {
				return fail(verbs.WCLocProtErr)
			}
		}
	}
	if q.typ == verbs.QPTypeUD {
		if !drop {
			e.deliverUD(q, w)
		}
		return ok()
	}
	if drop {
		return noAnswer()
	}
	r := e.connectedPeer(q)
	if r == nil {
		return noAnswer()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.accepting() || r.attr.DestQPN != q.qpn {
		return noAnswer()
	}
	return e.respond(q, r, w)
}

// connectedPeer finds the QP the connected QP q sends to: the device that
// owns the destination GID, then the destination QPN on it.
func (e *engine) connectedPeer(q *qp) *qp {
	if c := q.peer; c != nil && c.qpn == e.attr.DestQPN && q.peerGID == e.attr.AH.GRH.DGID {
		return c // QPNs are never reused: a closed peer is caught by accepting()
	}
	d := e.ctx.dev.p.deviceByGID(e.attr.AH.GRH.DGID)
	if d == nil {
		return nil
	}
	r, found := d.qps.get(e.attr.DestQPN)
	if !found {
		return nil
	}
	switch q.typ {
	case verbs.QPTypeXRCSend:
		if r.typ != verbs.QPTypeXRCRecv {
			return nil
		}
	default:
		if r.typ != q.typ {
			return nil
		}
	}
	q.peer, q.peerGID = r, e.attr.AH.GRH.DGID
	return r
}

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
		var inv *mr
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
			inv.valid.Store(false)
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
	r.recvCQFor().push(&verbs.WC{WRID: e.rwqe.id, Status: local, QPNum: r.qpn}, false)
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
	cq.push(&wc, w.flags&verbs.SendSolicited != 0)
}

// recvCQFor returns the CQ where r's current receive completes.
func (r *qp) recvCQFor() *cq {
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
	if !found || !m.valid.Load() || m.access&need == 0 || r.attr.AccessFlags&need == 0 {
		return nil
	}
	if m.pd != r.pd && (r.typ != verbs.QPTypeXRCRecv || m.pd.ctx != r.ctx) {
		return nil
	}
	return m.slice(addr, n)
}

// invalidatable finds the MR a SEND_WITH_INV names at responder r.
func (r *qp) invalidatable(key uint32) *mr {
	m, found := r.dev.mrs.get(key)
	if !found || m.pd.ctx != r.ctx || !m.valid.Load() {
		return nil
	}
	return m
}

func (e *engine) localInvalidate(q *qp, key uint32) result {
	m, found := q.dev.mrs.get(key)
	if !found || m.pd != q.pd || !m.valid.Load() {
		return fail(verbs.WCMWBindErr)
	}
	m.valid.Store(false)
	return ok()
}

// deliverUD hands a UD datagram to its destination, or drops it: unknown
// destination, Q_Key mismatch, larger than the MTU, no receive posted. The
// sender completes successfully in every case (SEMANTICS 13).
func (e *engine) deliverUD(q *qp, w *sendWQE) {
	a := &w.ah.attr
	d := e.ctx.dev.p.deviceByGID(a.GRH.DGID)
	if d == nil || w.length > uint64(d.p.mtu.Bytes()) {
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
	if !r.accepting() || r.attr.QKey != qkey {
		return
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
	sgid := q.dev.gids[a.GRH.SGIDIndex]
	writeGRH(&e.grh, sgid, a.GRH.DGID, a.GRH.HopLimit, a.GRH.TrafficClass, a.GRH.FlowLabel, int(w.length))
	e.src = append(e.src, nil)
	copy(e.src[1:], e.src)
	e.src[0] = e.grh[:]
	copySegs(e.dst, e.src)
	e.completeRecv(q, r, w, verbs.WCRecv, uint32(grhLen+w.length))
}

// localSegs resolves a local gather or scatter list through the device's
// keys, appending the registered bytes to out. Every key must belong to q's
// PD, be valid, grant need and cover its range.
func localSegs(q *qp, sgl []verbs.SGE, need verbs.Access, out [][]byte) ([][]byte, bool) {
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		m, found := q.dev.mrs.get(s.LKey)
		if !found || m.pd != q.pd || !m.valid.Load() || m.access&need != need {
			return out, false
		}
		b := m.slice(s.Addr, uint64(s.Length))
		if b == nil {
			return out, false
		}
		out = append(out, b)
	}
	return out, true
}

func segsLen(segs [][]byte) uint64 {
	var n uint64
	for _, s := range segs {
		n += uint64(len(s))
	}
	return n
}

// copySegs copies the bytes of src, in order, into dst and returns how
// many it copied: a scatter/gather memcpy.
func copySegs(dst, src [][]byte) int {
	n, di, off := 0, 0, 0
	for _, s := range src {
		for len(s) > 0 {
			for di < len(dst) && off == len(dst[di]) {
				di, off = di+1, 0
			}
			if di == len(dst) {
				return n
			}
			c := copy(dst[di][off:], s)
			n, off, s = n+c, off+c, s[c:]
		}
	}
	return n
}

// copySegs1 gathers src into one contiguous destination.
func copySegs1(dst []byte, src [][]byte) {
	for _, s := range src {
		dst = dst[copy(dst, s):]
	}
}

// atomic64 performs an RDMA atomic on the 8 aligned bytes of b and returns
// the value they held before. The bytes are in host order, as on every
// libibverbs device (SEMANTICS 5a).
func atomic64(b []byte, op verbs.Opcode, compareAdd, swap uint64) uint64 {
	p := (*uint64)(unsafe.Pointer(&b[0]))
	if op == verbs.OpAtomicFetchAdd {
		return atomicAdd(p, compareAdd) - compareAdd
	}
	for {
		old := atomicLoad(p)
		if old != compareAdd || atomicCAS(p, old, swap) {
			return old
		}
	}
}

// userBytes is memory the caller passed by address with no key: an inline
// payload, read at post time like the CPU of a real host reads it.
func userBytes(addr uint64, n uint32) []byte {
	if n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}
