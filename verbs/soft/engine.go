package soft

import (
	"sync"
	"time"

	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
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
// and writes the target's receive completion. Execution holds at most one
// QP lock at a time, and a poster calls doorbell holding none; the ranks
// of execMu, the QPs', SRQs' and CQs' locks are in internal/lockrank.
type engine struct {
	ctx    *context
	inline bool // Config.EngineOnly unset

	// execMu is held while a WQE executes. Closing an MR or a QP takes
	// and drops it on every engine of the fabric (Provider.quiesce), so
	// once Close returns no engine still touches the memory or queue.
	execMu lockrank.Mutex[lockrank.SoftExec]

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
	e.cur.sgl = make([]verbs.SGE, 0, swhca.MaxSGE)
	e.cur.inline = make([]byte, 0, swhca.MaxInline)
	e.src = make([][]byte, 0, swhca.MaxSGE+1)
	e.dst = make([][]byte, 0, swhca.MaxSGE+1)
	e.rwqe.sgl = make([]verbs.SGE, swhca.MaxSGE)
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
		q.sendCQ.Push(&verbs.WC{WRID: w.id, Status: res.status, QPNum: q.qpn}, false)
		q.sqFreed = idx + 1
		q.toErrorLocked()
		return
	}
	if w.signaled {
		wc := verbs.WC{WRID: w.id, Opcode: verbs.WCOpcodeOf(w.op), ByteLen: uint32(w.length), QPNum: q.qpn}
		if w.op.HasImm() {
			wc.Flags = verbs.WCFlagWithImm // rxe sets it on the sender's WC too (SEMANTICS 16a)
		}
		q.sendCQ.Push(&wc, false)
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
	r, port := e.connectedPeer(q)
	if r == nil {
		return noAnswer()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.accepting() || r.attr.DestQPN != q.qpn || !onPort(r, port) || e.mtuDrop(r, w) {
		return noAnswer()
	}
	return e.respond(q, r, w)
}

// mtuDrop reports whether the packets of w are larger than the active MTU
// of the port that receives them: a NIC drops such packets, so a
// requester whose path MTU is above its peer's port MTU gets no answer
// and retries until RETRY_EXC_ERR. A READ's response packets travel the
// other way, at the responder's path MTU. The caller holds r.mu.
func (e *engine) mtuDrop(r *qp, w *sendWQE) bool {
	pathMTU, rx := e.attr.PathMTU, r.dev.portN(max(r.attr.PortNum, 1))
	if w.op == verbs.OpRead {
		pathMTU, rx = r.attr.PathMTU, e.ctx.dev.portN(max(e.attr.PortNum, 1))
	}
	if rx == nil || pathMTU.Bytes() == 0 {
		return false
	}
	return min(w.length, uint64(pathMTU.Bytes())) > uint64(rx.mtu.Bytes())
}
