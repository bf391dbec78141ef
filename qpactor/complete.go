package qpactor

import (
	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/verbs"
)

// Complete handles a send completion of this actor's QP and reports
// whether its wr_id matched an outstanding WR (false: stale or unknown,
// counted and dropped). A signaled completion completes, in order, every
// earlier unsignaled WR. Only the goroutine handling the QP's CQ (its
// poller, or the actor through its Driver) may call it.
func (a *Actor) Complete(wc *verbs.WC) bool {
	id, seq := wrid.DecodeSend(wc.WRID)
	tab := a.shadow.Load()
	if e := tab.entry(seq); id != a.id || e == nil || e.seq.Load() != seq+1 || seq < a.head {
		a.stats.Stale.Inc()
		return false
	}
	// Retire every WR the completion covers first, and give their slots
	// back as credits, before any future resolves: a caller woken by its
	// future must find the WR no longer outstanding (Outstanding, the
	// in-flight gauge).
	done := a.retired[:0]
	for ; a.head <= seq; a.head++ {
		e := tab.entry(a.head)
		if e == nil || e.seq.Load() != a.head+1 {
			continue
		}
		if a.head == seq {
			done = append(done, a.retire(e, *wc))
		} else {
			// An unsignaled WR before a later completion succeeded: RC
			// executes in order and a failed WR always completes.
			done = append(done, a.retire(e, verbs.WC{Opcode: verbs.WCOpcodeOf(e.opcode), ByteLen: e.length}))
		}
	}
	dropRetiredTables(tab, a.head)
	a.credits.Add(int64(len(done)))
	a.resolve(done, nil)
	a.retired = done[:0]
	return true
}

// Polled is called by the goroutine handling the QP's CQ after a poll
// whose completions Complete handled, once for them all: the send-queue
// slots they gave back may let queued work go, and what submitters left
// queued while WRs were in flight (coalesces) waits for this call. With
// inline posting the caller posts it, as a grant's handler does
// (GrantPeerCredits), if the actor is idle; otherwise it wakes the actor
// (decideKick).
//
// Against a submitter that leaves work queued: it publishes the work, then
// reads the credits (coalesces); Complete adds the credits, then this
// looks at the inbox. One of the two sees the other's write, so the
// submitter posts itself or this call finds its work. The same holds for
// an actor going to sleep on credits (sleepsOnCredits).
func (a *Actor) Polled() { a.kick(kickCompleted) }

// retiredWR is a WR taken off the send queue whose future is still to be
// told.
type retiredWR struct {
	fut   *future.State
	wc    verbs.WC
	value uint64
	info  opInfo // for its error
}

func (e *entry) info() opInfo {
	return opInfo{opcode: e.opcode, remoteAddr: e.raddr, rkey: e.rkey, length: e.length}
}

func wrInfo(wr *verbs.SendWR) opInfo {
	info := opInfo{opcode: wr.Opcode, remoteAddr: wr.RDMA.RemoteAddr, rkey: wr.RDMA.RKey, length: uint32(wr.Length())}
	if wr.Opcode.IsAtomic() {
		info.remoteAddr, info.rkey = wr.Atomic.RemoteAddr, wr.Atomic.RKey
	}
	return info
}

// dropRetiredTables lets go of the tables before tab whose WRs are all
// retired: those before head. Completion handling only.
func dropRetiredTables(tab *shadowTable, head uint64) {
	for t := tab; t.prev != nil; t = t.prev {
		if head >= t.since {
			t.prev = nil
			return
		}
	}
}

// retire takes the WR at head, e, off the send queue, reading what its
// completion returns (an atomic's original value, from the slot's
// scratch, which the next WR in the slot overwrites).
func (a *Actor) retire(e *entry, wc verbs.WC) retiredWR {
	var value uint64
	if wc.Status == verbs.WCSuccess {
		if e.opcode.IsAtomic() {
			off := 8 * (a.head & a.scratchMask)
			value = leUint64(a.scratch.Bytes[off : off+8])
		} else if e.opcode.IsSend() && a.peer.s.Headers() {
			wc.ByteLen = e.length // without the header
		}
		a.sample(a.head, e.opcode)
	}
	if a.obs != nil {
		a.observeEnd(a.head, e, wc.Status, wc.Err())
	}
	r := retiredWR{fut: e.fut, wc: wc, value: value, info: e.info()}
	e.fut = nil
	e.seq.Store(0)
	return r
}

// resolve tells the futures of retired WRs their outcome: err when it is not
// nil, else each WR's completion.
func (a *Actor) resolve(done []retiredWR, err error) {
	for i := range done {
		r := &done[i]
		e := err
		if e == nil {
			e = r.wc.Err()
		}
		if r.fut != nil { // nil: a credit-only SEND
			r.fut.CompleteCounted(r.wc, a.opError(r.info, r.fut.WRs(), e), r.value, &a.stats.Ops.ResolvedByPoller)
		}
		*r = retiredWR{}
	}
}

func leUint64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// RemoteKey returns the rkey of the outstanding WR a completion of this
// actor's QP names (wr_id, one of the fields an error completion carries),
// for a failure's cause: a peer refuses an access by its key. ok is false
// for a wr_id that names no outstanding WR or one without remote memory
// (a SEND). Only the goroutine handling the QP's CQ may call it, before
// Complete retires the WR.
func (a *Actor) RemoteKey(wrID uint64) (rkey uint32, ok bool) {
	id, seq := wrid.DecodeSend(wrID)
	e := a.shadow.Load().entry(seq)
	if id != a.id || e == nil || e.seq.Load() != seq+1 || seq < a.head || e.opcode.IsSend() {
		return 0, false
	}
	return e.rkey, true
}
