package rocev2

import (
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"sync/atomic"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// responderReceive handles a request packet (IBA 9.7.5.1): in sequence it
// executes; ahead of sequence it NAKs once (PSN sequence error) and drops
// until the expected PSN comes; behind, it is a duplicate: a READ or an
// atomic is answered again from the saved request it repeats, or dropped
// when it repeats none; anything else is acknowledged again.
func (q *rcQP) responderReceive(p *wire.Packet) {
	psn := p.BTH.PSN
	d := psn.Diff(q.ePSN)
	switch {
	case d > 0:
		if !q.nakSent {
			q.nakSent = true
			q.sendAck(wire.NAK(wire.NAKPSNSequenceError), q.ePSN)
		}
		return
	case d < 0:
		if op := p.BTH.Opcode; op == wire.RCCompareSwap || op == wire.RCFetchAdd {
			q.replayAtomic(p)
			return
		}
		if p.BTH.Opcode == wire.RCReadRequest {
			q.replayRead(p)
			return
		}
		q.ackPending = true
		return
	}
	if q.execute(p) {
		q.nakSent = false
		q.ePSN = q.ePSN.Next()
		if p.BTH.AckReq {
			q.ackPending = true
		}
	}
}

// execute carries out the request at ePSN. It reports whether the packet
// was consumed; a false return has sent a NAK, or it was a READ, which
// moves ePSN itself.
func (q *rcQP) execute(p *wire.Packet) bool {
	op := p.BTH.Opcode
	var immRecv recvWQE // the receive a WRITE with immediate completes
	haveImm := false
	if op.IsFirst() == q.cur.active || (q.cur.active && op.IsSend() != q.cur.send) {
		// A FIRST or ONLY inside a message, a MIDDLE or LAST outside one,
		// or one of another operation than the message's.
		q.reject(p, wire.NAKInvalidRequest)
		return false
	}
	switch {
	case op == wire.RCReadRequest:
		mem, ok := q.readable(p)
		if !ok {
			q.reject(p, wire.NAKRemoteAccessError)
			return false
		}
		q.msn = (q.msn + 1) & wire.Mask24
		q.nakSent = false
		n := q.sendReadResponse(p.BTH.PSN, mem)
		q.reads[q.readN%atomicHistory] = readResource{valid: true, psn: p.BTH.PSN, npkts: n,
			rkey: p.RETH.RKey, va: p.RETH.VA, n: p.RETH.DMALen}
		q.readN++
		q.ePSN = q.ePSN.Add(n)
		return false
	case op == wire.RCCompareSwap || op == wire.RCFetchAdd:
		return q.executeAtomic(p)
	case op.IsSend():
		if op.IsFirst() {
			r, ok := q.takeRecv()
			if !ok {
				q.noReceive(p)
				return false
			}
			q.cur.active, q.cur.send, q.cur.off = true, true, 0
			q.cur.rwqe = r
			q.cur.buf = r.buf
		}
	case op.IsWrite():
		if op.HasImm() {
			r, ok := q.takeRecv()
			if !ok {
				// The immediate needs a receive; this packet's data is
				// written when it is retransmitted.
				q.noReceive(p)
				return false
			}
			immRecv, haveImm = r, true
		}
		if op.IsFirst() {
			mem, ok := q.cfg.Memory.Remote(p.RETH.RKey, p.RETH.VA, int(p.RETH.DMALen), verbs.AccessRemoteWrite)
			if !ok {
				if haveImm {
					q.untakeRecv(immRecv)
				}
				q.reject(p, wire.NAKRemoteAccessError)
				return false
			}
			q.cur.active, q.cur.send, q.cur.off, q.cur.buf = true, false, 0, mem
			q.cur.rkey, q.cur.va = p.RETH.RKey, p.RETH.VA
		} else if len(p.Payload) > 0 {
			// The MR may have been deregistered since the FIRST packet:
			// the rkey must still grant this packet's bytes.
			if _, ok := q.cfg.Memory.Remote(q.cur.rkey, q.cur.va+uint64(q.cur.off), len(p.Payload), verbs.AccessRemoteWrite); !ok {
				if haveImm {
					q.untakeRecv(immRecv)
				}
				q.reject(p, wire.NAKRemoteAccessError)
				return false
			}
		}
	default:
		q.reject(p, wire.NAKInvalidRequest)
		return false
	}
	n := q.cur.off + len(p.Payload)
	if n > len(q.cur.buf) || (!op.IsLast() && len(p.Payload) != q.cfg.MTU) ||
		(op.IsLast() && !q.cur.send && n != len(q.cur.buf)) {
		// Longer than the receive buffer, a short FIRST or MIDDLE, or a
		// WRITE whose packets do not add up to its DMA length.
		if q.cur.send {
			q.addWC(verbs.WC{WRID: q.cur.rwqe.id, Status: verbs.WCLocLenErr, QPNum: q.cfg.QPN}, 0, false)
			q.cur.active = false
		}
		if haveImm {
			q.untakeRecv(immRecv)
		}
		q.reject(p, wire.NAKInvalidRequest)
		return false
	}
	copy(q.cur.buf[q.cur.off:], p.Payload)
	q.cur.off += len(p.Payload)
	if !op.IsLast() {
		return true
	}
	q.cur.active = false
	q.msn = (q.msn + 1) & wire.Mask24
	wc := verbs.WC{Status: verbs.WCSuccess, QPNum: q.cfg.QPN, SrcQP: q.cfg.RemoteQPN, ByteLen: uint32(q.cur.off)}
	switch {
	case q.cur.send:
		wc.WRID, wc.Opcode = q.cur.rwqe.id, verbs.WCRecv
		if q.cur.rwqe.scatter != nil {
			copySegs(q.cur.rwqe.scatter, q.cur.buf[:q.cur.off])
		}
		if op == wire.RCSendLastInvalidate || op == wire.RCSendOnlyInvalidate {
			inv, ok := q.cfg.Memory.(invalidator)
			if !ok || !inv.Invalidate(p.IETH.RKey) {
				// An rkey the QP may not invalidate: the receive fails and
				// the requester gets a remote access error.
				q.addWC(verbs.WC{WRID: wc.WRID, Status: verbs.WCLocProtErr, QPNum: q.cfg.QPN}, 0, false)
				q.reject(p, wire.NAKRemoteAccessError)
				return false
			}
			wc.Imm, wc.Flags = p.IETH.RKey, verbs.WCFlagWithInv
		}
	case haveImm:
		wc.WRID, wc.Opcode = immRecv.id, verbs.WCRecvRDMAWithImm
	default:
		return true
	}
	if op.HasImm() {
		wc.Imm, wc.Flags = p.ImmDt.Imm, verbs.WCFlagWithImm
	}
	q.addWC(wc, 0, p.BTH.Solicited)
	return true
}

// takeRecv takes the next receive WQE, from the SRQ when the QP has one.
func (q *rcQP) takeRecv() (recvWQE, bool) {
	if q.cfg.SRQ != nil {
		return q.cfg.SRQ.take()
	}
	if len(q.rq) == 0 {
		return recvWQE{}, false
	}
	r := q.rq[0]
	q.rq = q.rq[1:]
	return r, true
}

// untakeRecv puts back a receive WQE taken for a message that did not
// complete, at the head of the queue it came from.
func (q *rcQP) untakeRecv(r recvWQE) {
	if q.cfg.SRQ != nil {
		q.cfg.SRQ.putBack(r)
		return
	}
	q.rq = append([]recvWQE{r}, q.rq...)
}

// noReceive answers a SEND (or WRITE with immediate) that finds no
// receive posted: an RNR NAK on RC; on UC the message is dropped.
func (q *rcQP) noReceive(p *wire.Packet) {
	if q.cfg.UC {
		q.ucDrop(p.BTH.Opcode)
		return
	}
	q.nakSent = true
	q.sendAck(wire.RNRNAK(q.cfg.MinRNRTimer), p.BTH.PSN)
}

// reject answers a request the responder cannot execute: a NAK that ends
// the connection on RC; on UC, which has no NAK, the message is dropped.
func (q *rcQP) reject(p *wire.Packet, code uint8) {
	if q.cfg.UC {
		q.ucDrop(p.BTH.Opcode)
		return
	}
	q.nakFatal(code)
}

// nakFatal sends a NAK that ends the connection and moves the responder to
// ERR, flushing its own outstanding work.
func (q *rcQP) nakFatal(code uint8) {
	q.sendAck(wire.NAK(code), q.ePSN)
	status := verbs.WCRemInvReqErr
	if code == wire.NAKRemoteAccessError {
		status = verbs.WCRemAccessErr
	}
	q.failAs(status, true)
}

// replayRead answers a duplicate READ request from the saved request it
// repeats (all of it or its tail, as a requester resuming after a lost
// response packet asks), with the memory as it is now and if the rkey
// still grants it; one that repeats no saved request gets no answer.
func (q *rcQP) replayRead(p *wire.Packet) {
	for i := range q.reads {
		if q.reads[i].covers(p.BTH.PSN, p.RETH.RKey, p.RETH.VA, p.RETH.DMALen, q.cfg.MTU) {
			if mem, ok := q.readable(p); ok {
				q.sendReadResponse(p.BTH.PSN, mem)
			}
			return
		}
	}
}

// readable returns the memory a READ request asks for, if its rkey grants
// it.
func (q *rcQP) readable(p *wire.Packet) ([]byte, bool) {
	return q.cfg.Memory.Remote(p.RETH.RKey, p.RETH.VA, int(p.RETH.DMALen), verbs.AccessRemoteRead)
}

// sendReadResponse sends mem as the response to the READ at psn and
// returns how many PSNs it took.
func (q *rcQP) sendReadResponse(psn wire.PSN, mem []byte) int {
	mtu := q.cfg.MTU
	n := max(1, (len(mem)+mtu-1)/mtu)
	defer q.batch()()
	for k := range n {
		off := k * mtu
		p := &q.tx
		*p = wire.Packet{BTH: wire.BTH{PSN: psn.Add(k)}, Payload: mem[off:min(off+mtu, len(mem))],
			AETH: wire.AETH{Syndrome: wire.ACK(wire.CreditsInvalid), MSN: q.msn}}
		switch {
		case n == 1:
			p.BTH.Opcode = wire.RCReadResponseOnly
		case k == 0:
			p.BTH.Opcode = wire.RCReadResponseFirst
		case k == n-1:
			p.BTH.Opcode = wire.RCReadResponseLast
		default:
			p.BTH.Opcode = wire.RCReadResponseMiddle
		}
		q.send(p)
	}
	return n
}

// executeAtomic carries out a CMP_SWAP or FETCH_ADD on the responder's
// memory, atomically with respect to every other atomic on those 8 bytes
// (the CPU's atomics, so other QPs and local users that use atomics too),
// in the responder's host byte order, and answers with the original
// value. It always returns false: it moves ePSN itself.
func (q *rcQP) executeAtomic(p *wire.Packet) bool {
	h := &p.AtomicETH
	mem, ok := q.cfg.Memory.Remote(h.RKey, h.VA, 8, verbs.AccessRemoteAtomic)
	if !ok {
		q.nakFatal(wire.NAKRemoteAccessError)
		return false
	}
	if h.VA%8 != 0 || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		q.nakFatal(wire.NAKInvalidRequest)
		return false
	}
	word := (*uint64)(unsafe.Pointer(&mem[0]))
	var orig uint64
	if p.BTH.Opcode == wire.RCFetchAdd {
		orig = atomic.AddUint64(word, h.SwapAdd) - h.SwapAdd
	} else {
		for {
			orig = atomic.LoadUint64(word)
			if orig != h.Compare || atomic.CompareAndSwapUint64(word, orig, h.SwapAdd) {
				break
			}
		}
	}
	q.atomics[q.atomicN%atomicHistory] = atomicResult{valid: true, psn: p.BTH.PSN, rkey: h.RKey, va: h.VA, orig: orig}
	q.atomicN++
	q.msn = (q.msn + 1) & wire.Mask24
	q.nakSent = false
	q.ePSN = q.ePSN.Next()
	q.sendAtomicAck(p.BTH.PSN, orig)
	return false
}

// replayAtomic answers a duplicate atomic with the result of its first
// execution: the same PSN, key and address. One too old to be remembered,
// or that repeats no atomic executed, gets no answer: executing it again
// could change memory twice.
func (q *rcQP) replayAtomic(p *wire.Packet) {
	psn, h := p.BTH.PSN, &p.AtomicETH
	for _, r := range q.atomics {
		if r.valid && r.psn == psn && r.rkey == h.RKey && r.va == h.VA {
			q.sendAtomicAck(psn, r.orig)
			return
		}
	}
}

func (q *rcQP) sendAtomicAck(psn wire.PSN, orig uint64) {
	q.tx = wire.Packet{BTH: wire.BTH{Opcode: wire.RCAtomicAcknowledge, PSN: psn},
		AETH:         wire.AETH{Syndrome: wire.ACK(wire.CreditsInvalid), MSN: q.msn},
		AtomicAckETH: wire.AtomicAckETH{OrigRemData: orig}}
	q.send(&q.tx)
}
