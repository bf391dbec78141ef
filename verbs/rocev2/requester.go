package rocev2

import (
	"encoding/binary"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"

	"github.com/verbsrt/verbsrt/verbs"
)

// pump sends the packets of the queued WQEs that the window allows, and
// keeps the ACK timer running while any are unacknowledged.
func (q *rcQP) pump() {
	if q.rnrWait || q.failed {
		return
	}
	defer q.batch()()
	for q.next < len(q.sq) && q.sndPSN.Diff(q.una) < q.sendWindow() {
		w := q.sq[q.next]
		k := q.nextPkt
		if w.localErr != verbs.WCSuccess {
			// Nothing after it is sent; it fails once every WQE before
			// it has completed.
			if q.next == 0 {
				q.fail(w.localErr)
				return
			}
			break
		}
		if w.op == verbs.OpLocalInv {
			// Local: it runs once every WQE before it has completed.
			if q.next != 0 {
				break
			}
			if q.cfg.LocalInv == nil || !q.cfg.LocalInv(w.rkey) {
				q.fail(verbs.WCLocProtErr)
				return
			}
			q.sq = q.sq[1:]
			if w.signaled {
				q.addWC(verbs.WC{WRID: w.id, Status: verbs.WCSuccess, Opcode: verbs.WCLocalInv,
					QPNum: q.cfg.QPN}, w.seq, false)
			}
			continue
		}
		if q.cfg.UC {
			q.sendData(w, k)
			q.sndPSN = q.sndPSN.Next()
			q.maxPSN, q.una = q.sndPSN, q.sndPSN
			if k+1 < w.npkts {
				q.nextPkt++
				continue
			}
			q.next, q.nextPkt = q.next+1, 0
			q.acknowledge(w.lastPSN()) // sent is done: nothing comes back
			continue
		}
		if (w.op == verbs.OpRead || w.op.IsAtomic()) && !q.mayRead() {
			break // max_rd_atomic READs and atomics await their response
		}
		if w.op.IsAtomic() {
			q.sendAtomic(w)
			q.sndPSN = q.sndPSN.Next()
			q.next, q.nextPkt = q.next+1, 0
			continue
		}
		if w.op == verbs.OpRead {
			if w.readRecv < k {
				break // the response to its last request is still coming
			}
			c := q.sendRead(w, k)
			q.sndPSN = q.sndPSN.Add(c)
			if k+c == w.npkts {
				q.next, q.nextPkt = q.next+1, 0
			} else {
				q.nextPkt = k + c
			}
			continue
		}
		q.sendData(w, k)
		q.sndPSN = q.sndPSN.Next()
		if k+1 == w.npkts {
			q.next, q.nextPkt = q.next+1, 0
		} else {
			q.nextPkt++
		}
	}
	if q.sndPSN.After(q.maxPSN) {
		q.maxPSN = q.sndPSN
	}
	if q.timer == nil && q.maxPSN != q.una {
		q.armTimer(q.cfg.Timeout, q.ackTimeout)
	}
}

// sendWindow is how many packets may be sent and not acknowledged now.
func (q *rcQP) sendWindow() int { return min(q.window, q.cwnd) }

// advance moves the oldest unacknowledged PSN to una, a PSN after it, and
// opens the window by as many packets as that acknowledged (they have left
// the path, so as many may take their place), but at most doubles it: an
// ACK for packets sent before a timeout acknowledges more than the window
// that followed it let out.
func (q *rcQP) advance(una wire.PSN) {
	n := una.Diff(q.una)
	q.cwnd = min(q.window, q.cwnd+min(n, q.cwnd))
	q.una = una
}

// mayRead reports whether the READ or atomic at q.next may be sent: fewer
// than max_rd_atomic of those before it await their response. (A READ
// resent from its middle counts once, as itself.)
func (q *rcQP) mayRead() bool {
	if q.cfg.MaxRdAtomic <= 0 {
		return true
	}
	n := 0
	for _, w := range q.sq[:q.next] {
		if w.op == verbs.OpRead || w.op.IsAtomic() {
			n++
		}
	}
	return n < q.cfg.MaxRdAtomic
}

// sendData sends packet k of a SEND or WRITE.
func (q *rcQP) sendData(w *sendWQE, k int) {
	mtu := q.cfg.MTU
	off := k * mtu
	end := min(off+mtu, len(w.data))
	first, last := k == 0, k == w.npkts-1
	p := &q.tx
	*p = wire.Packet{BTH: wire.BTH{PSN: w.psn.Add(k)}, Payload: w.data[off:end]}
	imm := w.op == verbs.OpSendImm || w.op == verbs.OpWriteImm
	if w.op.IsSend() {
		inv := w.op == verbs.OpSendInv
		p.IETH.RKey = w.inv
		switch {
		case first && last && inv:
			p.BTH.Opcode = wire.RCSendOnlyInvalidate
		case last && inv:
			p.BTH.Opcode = wire.RCSendLastInvalidate
		case first && last && imm:
			p.BTH.Opcode = wire.RCSendOnlyImm
		case first && last:
			p.BTH.Opcode = wire.RCSendOnly
		case first:
			p.BTH.Opcode = wire.RCSendFirst
		case last && imm:
			p.BTH.Opcode = wire.RCSendLastImm
		case last:
			p.BTH.Opcode = wire.RCSendLast
		default:
			p.BTH.Opcode = wire.RCSendMiddle
		}
	} else {
		switch {
		case first && last && imm:
			p.BTH.Opcode = wire.RCWriteOnlyImm
		case first && last:
			p.BTH.Opcode = wire.RCWriteOnly
		case first:
			p.BTH.Opcode = wire.RCWriteFirst
		case last && imm:
			p.BTH.Opcode = wire.RCWriteLastImm
		case last:
			p.BTH.Opcode = wire.RCWriteLast
		default:
			p.BTH.Opcode = wire.RCWriteMiddle
		}
		p.RETH = wire.RETH{VA: w.raddr, RKey: w.rkey, DMALen: uint32(len(w.data))}
	}
	p.ImmDt.Imm = w.imm
	p.BTH.Solicited = last && w.solicited
	// The last packet of a message asks for an ACK, and so does every
	// ackEvery-th, so a long message frees its window before it ends, and
	// the packet that fills the window, which nothing follows until an
	// ACK comes (after a timeout, the one packet resent).
	p.BTH.AckReq = !q.cfg.UC && (last || k%q.ackEvery == q.ackEvery-1 ||
		q.sndPSN.Next().Diff(q.una) >= q.sendWindow())
	q.send(p)
}

// sendRead sends the request for a READ's response packets from k on, as
// many as the window has room for, and returns how many it asked for. A
// READ is asked for a window at a time, the next request going out once
// the last one's response has all arrived: a response is sent at once,
// with no ACK to pace it, and one larger than the window would overrun
// the socket buffers on its way (and, resent whole after a loss, again).
func (q *rcQP) sendRead(w *sendWQE, k int) int {
	c := max(1, min(w.npkts-k, q.sendWindow()-q.sndPSN.Diff(q.una)))
	off := k * q.cfg.MTU
	end := min(len(w.data), (k+c)*q.cfg.MTU)
	w.reqFrom, w.reqTo = k, k+c
	q.tx = wire.Packet{BTH: wire.BTH{Opcode: wire.RCReadRequest, PSN: w.psn.Add(k), AckReq: true},
		RETH: wire.RETH{VA: w.raddr + uint64(off), RKey: w.rkey, DMALen: uint32(end - off)}}
	q.send(&q.tx)
	return c
}

// sendAtomic sends a CMP_AND_SWP or FETCH_AND_ADD request.
func (q *rcQP) sendAtomic(w *sendWQE) {
	op := wire.RCFetchAdd
	if w.op == verbs.OpAtomicCmpSwp {
		op = wire.RCCompareSwap
	}
	q.tx = wire.Packet{BTH: wire.BTH{Opcode: op, PSN: w.psn, AckReq: true},
		AtomicETH: wire.AtomicETH{VA: w.raddr, RKey: w.rkey, SwapAdd: w.swapAdd, Compare: w.compare}}
	q.send(&q.tx)
}

// ackTimeout runs when the local ACK timeout passes without progress:
// go back to the oldest unacknowledged packet, or fail once retry_cnt
// retransmissions are spent.
//
// It resends that one packet only, asking for an ACK (the window shrinks
// to one packet and grows back by what ACKs acknowledge). A timeout does
// not tell a lost window from one still on its way to a receiver slower
// than the timeout; resending the whole window at each timeout would, in
// the second case, queue a window of duplicates in front of that receiver
// per timeout (rxe answers each with an ACK of its own), until the ACKs
// that show progress come later than retry_cnt timeouts. If the ACK for
// the resent packet acknowledges packets sent before the timeout too,
// those were on their way, and sending resumes after them (acknowledge).
func (q *rcQP) ackTimeout() {
	if len(q.sq) == 0 || q.maxPSN == q.una {
		return
	}
	q.cwnd = 1
	q.retry(q.una)
}

// retry spends one transport retry and goes back to psn.
func (q *rcQP) retry(psn wire.PSN) {
	if q.retries == 0 {
		q.fail(verbs.WCRetryExcErr)
		return
	}
	q.retries--
	q.goBack(psn)
}

// goBack restarts transmission at psn (go-back-N).
func (q *rcQP) goBack(psn wire.PSN) {
	q.seek(psn)
	q.stopTimer()
	q.pump()
}

// seek moves the send position to psn: the packet of the WQE that holds
// it, or the end of the queue.
func (q *rcQP) seek(psn wire.PSN) {
	q.next, q.nextPkt, q.sndPSN = len(q.sq), 0, psn
	for i, w := range q.sq {
		if psn.Before(w.psn) || psn.After(w.lastPSN()) {
			continue
		}
		k := psn.Diff(w.psn)
		if w.op == verbs.OpRead || w.op.IsAtomic() {
			w.readRecv = k
		}
		q.next, q.nextPkt = i, k
		return
	}
}

// acknowledge completes the WQEs that every packet up to psn (included)
// finishes. It reports whether anything completed.
func (q *rcQP) acknowledge(psn wire.PSN) bool {
	progress := false
	una := psn.Next()
	for len(q.sq) > 0 {
		w := q.sq[0]
		if w.lastPSN().After(psn) || w.op == verbs.OpLocalInv {
			break // a LOCAL_INV completes when pump runs it
		}
		if !w.responded() {
			// The responder acknowledged past a READ or atomic whose
			// response did not all arrive: the rest of it was lost.
			una = w.psn.Add(w.readRecv)
			break
		}
		q.sq = q.sq[1:]
		q.next--
		if w.scatter != nil {
			copySegs(w.scatter, w.data)
		}
		if w.signaled {
			q.addWC(verbs.WC{WRID: w.id, Status: verbs.WCSuccess,
				Opcode: verbs.WCOpcodeOf(w.op), ByteLen: uint32(len(w.data)), QPNum: q.cfg.QPN}, w.seq, false)
		}
		progress = true
	}
	if una.After(q.una) && !una.After(q.maxPSN) {
		q.advance(una)
		progress = true
	}
	if q.next < 0 || q.sndPSN.Before(q.una) {
		// The ACK covers packets sent before a go-back and not sent again
		// since: the responder is receiving what was sent before it, and
		// the rest of that is likely on its way too. Sending resumes with
		// new packets, after the last one ever sent: a packet lost before
		// them draws a sequence NAK when they arrive. With nothing new to
		// send, nothing would bring that NAK, and it resumes at the
		// oldest unacknowledged packet, within the window.
		q.seek(q.maxPSN)
		if q.next == len(q.sq) {
			q.seek(q.una)
		}
	}
	if progress && !q.rnrWait {
		q.retries = q.cfg.RetryCnt
		q.rnrRetries = q.cfg.RNRRetry
		q.stopTimer()
		if q.maxPSN != q.una {
			q.armTimer(q.cfg.Timeout, q.ackTimeout)
		}
	}
	return progress
}

// outstanding reports whether psn was sent and is not yet acknowledged.
func (q *rcQP) outstanding(psn wire.PSN) bool {
	return !psn.Before(q.una) && psn.Before(q.maxPSN)
}

// requesterReceive handles an ACK, a NAK or a read response.
func (q *rcQP) requesterReceive(p *wire.Packet) {
	psn := p.BTH.PSN
	op := p.BTH.Opcode
	if op.IsReadResponse() {
		q.readResponse(p)
		return
	}
	if op == wire.RCAtomicAcknowledge {
		q.atomicResponse(p)
		return
	}
	if op != wire.RCAcknowledge {
		return
	}
	s := p.AETH.Syndrome
	switch {
	case s.IsACK():
		if !q.outstanding(psn) {
			return // duplicate or stale ACK
		}
		q.acknowledge(psn)
		if len(q.sq) > 0 && !q.sq[0].responded() && !q.sq[0].lastPSN().After(psn) {
			// Acknowledged past an unfinished READ or atomic: retransmit
			// the rest.
			w := q.sq[0]
			q.retry(w.psn.Add(w.readRecv))
			return
		}
		q.pump()
	case s.IsRNRNAK():
		if !q.outstanding(psn) {
			return
		}
		q.acknowledge(psn.Add(-1))
		if q.rnrRetries == 0 {
			q.fail(verbs.WCRNRRetryExcErr)
			return
		}
		if q.cfg.RNRRetry != rnrRetryForever {
			q.rnrRetries--
		}
		q.rnrWait = true
		q.armTimer(wire.RNRTimer(s.Value()), func() {
			q.rnrWait = false
			q.goBack(psn)
		})
	case s.IsNAK():
		if !q.outstanding(psn) {
			return
		}
		q.acknowledge(psn.Add(-1))
		switch s.Value() {
		case wire.NAKPSNSequenceError:
			// A packet was lost: halve the window, as the path had no room
			// for all of it.
			q.cwnd = max(1, q.sendWindow()/2)
			q.retry(psn)
		case wire.NAKInvalidRequest:
			q.fail(verbs.WCRemInvReqErr)
		case wire.NAKRemoteAccessError:
			q.fail(verbs.WCRemAccessErr)
		default:
			q.fail(verbs.WCRemOpErr)
		}
	}
}

// readResponse places a read response packet. Packets out of order are
// dropped; the ACK timeout retransmits the request from the first missing
// one.
func (q *rcQP) readResponse(p *wire.Packet) {
	psn := p.BTH.PSN
	if !q.outstanding(psn) {
		return
	}
	// A read response acknowledges every request before its READ (not
	// the earlier packets of its own response, which may be missing).
	var w *sendWQE
	for _, x := range q.sq {
		if !psn.Before(x.psn) && !psn.After(x.lastPSN()) {
			w = x
			break
		}
	}
	if w == nil || w.op != verbs.OpRead {
		return
	}
	q.acknowledge(w.psn.Add(-1))
	if q.sq[0] != w || psn != w.psn.Add(w.readRecv) {
		return
	}
	if p.BTH.Opcode.IsFirst() != (w.readRecv == w.reqFrom) || p.BTH.Opcode.IsLast() != (w.readRecv == w.reqTo-1) {
		// A response to an earlier request for this READ, late: after a
		// re-request from packet k, the first answer's MIDDLE at k may
		// still arrive where the new answer's FIRST is expected. Drop
		// it; the new answer, or the ACK timeout, follows.
		return
	}
	off := w.readRecv * q.cfg.MTU
	want := min(q.cfg.MTU, len(w.data)-off)
	if len(p.Payload) != want {
		q.fail(verbs.WCBadRespErr)
		return
	}
	copy(w.data[off:], p.Payload)
	w.readRecv++
	q.advance(psn.Next())
	if w.readRecv == w.npkts {
		q.acknowledge(psn)
	} else {
		// Progress on a long read keeps the ACK timer from firing.
		q.retries = q.cfg.RetryCnt
		q.armTimer(q.cfg.Timeout, q.ackTimeout)
	}
	q.pump()
}

// atomicResponse stores an atomic's original remote value, in host byte
// order as libibverbs returns it, and completes the atomic.
func (q *rcQP) atomicResponse(p *wire.Packet) {
	psn := p.BTH.PSN
	if !q.outstanding(psn) || !p.AETH.Syndrome.IsACK() {
		return
	}
	q.acknowledge(psn.Add(-1))
	if len(q.sq) == 0 || q.sq[0].psn != psn || !q.sq[0].op.IsAtomic() {
		return
	}
	w := q.sq[0]
	if len(w.data) >= 8 {
		binary.NativeEndian.PutUint64(w.data, p.AtomicAckETH.OrigRemData)
	}
	w.readRecv = 1
	q.advance(psn.Next())
	q.acknowledge(psn)
	q.pump()
}
