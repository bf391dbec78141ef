package rocev2

import "github.com/verbsrt/verbsrt/verbs/rocev2/wire"

// ucReceive handles a request packet on a UC QP (IBA 9.8.3), its opcode
// already mapped to the RC one: nothing is acknowledged, a packet out of
// sequence ends the message in progress, and the responder picks up at the
// next FIRST or ONLY packet. A message the responder cannot take (no
// receive, no right to the memory) is dropped whole, silently.
func (q *rcQP) ucReceive(p *wire.Packet) {
	op := p.BTH.Opcode
	if op == wire.RCReadRequest || op == wire.RCCompareSwap || op == wire.RCFetchAdd {
		return // not UC operations
	}
	if p.BTH.PSN != q.ePSN {
		// Packets were lost: the message in progress cannot complete.
		q.ucAbort()
		q.cur.drop = !op.IsFirst()
	}
	q.ePSN = p.BTH.PSN.Next()
	if q.cur.drop {
		if !op.IsFirst() {
			return
		}
		q.cur.drop = false
	}
	if op.IsFirst() && q.cur.active {
		q.ucAbort() // the LAST of the message in progress was lost
	}
	if !op.IsFirst() && !q.cur.active {
		return
	}
	q.execute(p)
}

// ucAbort abandons the message in progress; a SEND's receive WQE goes
// back to the head of the queue for the next message.
func (q *rcQP) ucAbort() {
	if q.cur.active && q.cur.send {
		q.untakeRecv(q.cur.rwqe)
	}
	q.cur.active = false
}

// ucDrop drops the message the packet of opcode op belongs to.
func (q *rcQP) ucDrop(op wire.Opcode) {
	q.ucAbort()
	q.cur.drop = !op.IsLast()
}
