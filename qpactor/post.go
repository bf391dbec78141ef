package qpactor

import (
	"errors"
	"fmt"
	"time"

	"github.com/verbsrt/verbsrt/internal/credit"
	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/verbs"
)

// shadowRoom returns how many more WRs the shadow table takes, the actor
// holding credits send-queue credits: its entries less the WRs
// outstanding, in it or in the tables before it (counting those keeps the
// sums simple and costs nothing once the table has grown). The WRs
// outstanding are the sequence numbers from completion handling's head to
// a.seq, so room for them all keeps two of them off one entry.
func (a *Actor) shadowRoom(credits int) int {
	return len(a.shadow.Load().entries) - (int(a.sqDepth) - credits)
}

// growShadow replaces the shadow table by one of at least n entries, and
// twice the old one's (at most the full size, where it has room for every
// credit), for the WRs from a.seq on. The outstanding WRs stay where they
// are (shadowTable.prev).
func (a *Actor) growShadow(n int) {
	old := a.shadow.Load()
	size := 2 * len(old.entries)
	for size < n {
		size <<= 1
	}
	size = min(size, int(a.scratchMask)+1)
	a.shadow.Store(&shadowTable{entries: make([]entry, size), mask: uint64(size - 1), since: a.seq, prev: old})
}

// growPost gives the per-post arrays room for n WRs and submissions (at
// least postStart, at most the send queue), keeping what the chain being
// built holds: its gather lists move to the new chainSGE and its owners to
// the new drained, so that a burst still goes out in one PostSend. The
// actor calls it while it builds a chain, never while post runs.
func (a *Actor) growPost(n int) {
	n = min(max(n, postStart), int(a.sqDepth))
	sge := make([]verbs.SGE, sgesPerWR*n)
	copy(sge, a.chainSGE)
	chain := make([]verbs.SendWR, len(a.chain), n)
	for i, wr := range a.chain {
		if k := len(wr.SGL); k > 0 {
			// WR i's gather list starts at sgesPerWR*i (buildWR).
			b := sgesPerWR * i
			wr.SGL = sge[b : b+k : b+cap(wr.SGL)]
		}
		chain[i] = wr
	}
	drained := make([]submission, len(a.drained), n)
	copy(drained, a.drained)
	owners := make([]*submission, len(a.owners), n)
	j := 0 // owners are in drained's order
	for i, o := range a.owners {
		owners[i] = o
		for k := j; k < len(a.drained); k++ {
			if &a.drained[k] == o {
				owners[i], j = &drained[k], k
				break
			}
		}
	}
	uses := make([]peerUse, len(a.peer.uses), n)
	copy(uses, a.peer.uses)
	a.chain, a.chainSGE, a.owners, a.drained, a.peer.uses = chain, sge, owners, drained, uses
}

// appendOps validates a submission's ops and appends them to the chain; on
// a rule broken, nothing of the submission is appended.
func (a *Actor) appendOps(sub *submission) error {
	start := len(a.chain)
	ops := sub.ops()
	for i := range ops {
		op := &ops[i]
		if len(op.Gather) > MaxGather {
			a.chain = a.chain[:start]
			a.owners = a.owners[:start]
			return a.opError(infoOf(&ops[i]), len(ops), fmt.Errorf("%w: gather list of %d entries, at most %d",
				verbs.ErrInvalidArgument, len(op.Gather), MaxGather))
		}
		wr := a.buildWR(op, len(a.chain))
		if err := a.limits.Check(i, &wr); err != nil {
			a.chain = a.chain[:start]
			a.owners = a.owners[:start]
			return a.opError(infoOf(&ops[i]), len(ops), err)
		}
		a.chain = append(a.chain, wr)
		a.owners = append(a.owners, sub)
	}
	return nil
}

// buildWR turns op into the WR at position pos of the chain; the wr_id,
// the shadow entry and signaling are set by post. With peer credits, a
// SEND gets room for its header in front of op's data (withHeader).
func (a *Actor) buildWR(op *Op, pos int) verbs.SendWR {
	wr := verbs.SendWR{Opcode: op.Opcode, Flags: op.Flags &^ verbs.SendSignaled, Imm: op.Imm, RDMA: op.Remote}
	sge := sgesPerWR * pos
	if op.Opcode.IsAtomic() {
		wr.Atomic = verbs.Atomic{RemoteAddr: op.Remote.RemoteAddr, RKey: op.Remote.RKey,
			CompareAdd: op.CompareAdd, Swap: op.Swap}
		wr.RDMA = verbs.RDMA{}
		a.chainSGE[sge] = verbs.SGE{Length: 8, LKey: a.scratch.LKey} // Addr set in post
		wr.SGL = a.chainSGE[sge : sge+1 : sge+1]
		return wr
	}
	// op's gather list: Gather, or Local when it has bytes.
	sgl, one := op.Gather, [1]verbs.SGE{op.Local}
	if sgl == nil && op.Local.Length > 0 {
		sgl = one[:]
	}
	if op.Opcode.IsSend() && a.peer.s.Headers() {
		wr.SGL = a.withHeader(pos, sgl)
	} else if len(sgl) > 0 {
		n := copy(a.chainSGE[sge:sge+MaxGather], sgl)
		wr.SGL = a.chainSGE[sge : sge+n : sge+n]
	}
	return wr
}

// post assigns sequence numbers and shadow entries, signals every k-th WR
// and the last, and rings the doorbell once for the chain. When PostSend
// stops at a bad WR, the submission owning it fails and the innocent WRs
// after it go out in the next PostSend.
func (a *Actor) post() {
	a.run.mustHold("post")
	for len(a.chain) > 0 {
		posted, err := a.postOnce()
		if err == nil {
			return
		}
		// The WRs from posted on never reached the queue: their entries
		// and credits go back.
		base, tab := a.seq, a.shadow.Load()
		a.credits.Add(int64(len(a.chain) - posted))
		for i := posted; i < len(a.chain); i++ {
			tab.entries[(base+uint64(i-posted))&tab.mask].seq.Store(0)
		}
		if a.obs != nil {
			a.observeRefused(posted, err)
		}
		var wrErr *verbs.WRError
		if !errors.As(err, &wrErr) {
			// Not about one WR (the QP's state, a closed QP): nothing after
			// posted can go out either.
			a.unusePeer(posted, len(a.chain))
			for i := posted; i < len(a.chain); i++ {
				if f := a.owners[i].fut; f != nil {
					f.FailCounted(a.opError(wrInfo(&a.chain[i]), f.WRs(), err), 1, &a.stats.Ops.ResolvedByActor)
				}
			}
			return
		}
		failed := a.owners[posted]
		n := 0
		for i := posted; i < len(a.chain) && a.owners[i] == failed; i++ {
			n++
		}
		a.unusePeer(posted, posted+n)
		if failed.fut != nil {
			failed.fut.FailCounted(a.opError(wrInfo(&a.chain[posted]), failed.fut.WRs(), err), n, &a.stats.Ops.ResolvedByActor)
		}
		// The innocent WRs keep what they took, at their new places.
		a.peer.uses = append(a.peer.uses[:0], a.peer.uses[posted+n:]...)
		rest, restOwners := a.chain[posted+n:], a.owners[posted+n:]
		if len(rest) == 0 && posted > 0 && a.chain[posted-1].Flags&verbs.SendSignaled == 0 {
			// The posted prefix ends unsignaled and nothing follows it: its
			// completions would wait for the next drain, maybe forever.
			// A zero-length signaled WRITE (no key is checked) retires it.
			s, _ := future.New(1, nil)
			a.stats.Ops.Taken.Inc() // the poller resolves it
			rest = []verbs.SendWR{{Opcode: verbs.OpWrite}}
			restOwners = []*submission{{fut: s}}
			a.peer.uses = append(a.peer.uses[:0], peerUse{})
		}
		a.log.Debug("qpactor: reposting after a bad WR", "qpn", a.qp.QPN(), "wrs", len(rest), "err", err)
		a.chain = append(a.chain[:0], rest...)
		a.owners = append(a.owners[:0], restOwners...)
		for i := range a.chain {
			if n := len(a.chain[i].SGL); n > 0 {
				// From a later position: copying in order overwrites no
				// gather list still to be moved.
				sgl := a.chainSGE[sgesPerWR*i : sgesPerWR*i+n : sgesPerWR*i+n]
				copy(sgl, a.chain[i].SGL)
				a.chain[i].SGL = sgl
			}
			a.chain[i].Flags &^= verbs.SendSignaled
		}
	}
}

// postOnce prepares the chain and calls PostSend once. a.seq advances by
// the WRs posted.
func (a *Actor) postOnce() (int, error) {
	base, tab := a.seq, a.shadow.Load()
	var obsNow time.Duration
	if a.obs != nil {
		obsNow = a.obsNow()
	}
	for i := range a.chain {
		wr := &a.chain[i]
		seq := base + uint64(i)
		slot := seq & a.scratchMask
		wr.ID = wrid.Send(a.id, seq)
		a.sinceSignal++
		if a.sinceSignal >= a.signalEvery || i == len(a.chain)-1 {
			wr.Flags |= verbs.SendSignaled
			a.sinceSignal = 0
		}
		length := uint32(wr.Length())
		if wr.Opcode.IsAtomic() {
			wr.SGL[0].Addr = a.scratch.Addr + 8*slot
		} else if wr.Opcode.IsSend() && a.peer.s.Headers() {
			a.placeHeader(i, wr, slot)
			length -= credit.HeaderSize // the caller's bytes
		}
		e := &tab.entries[seq&tab.mask]
		e.fut, e.opcode, e.length = a.owners[i].fut, wr.Opcode, length
		e.raddr, e.rkey = wr.RDMA.RemoteAddr, wr.RDMA.RKey
		if wr.Opcode.IsAtomic() {
			e.raddr, e.rkey = wr.Atomic.RemoteAddr, wr.Atomic.RKey
		}
		a.lat.stamp(seq)
		if a.obs != nil {
			a.observePost(seq, i, length, obsNow)
		}
		e.seq.Store(seq + 1)
	}
	a.credits.Sub(int64(len(a.chain)))
	// Counted before the call, corrected after: the WRs may complete, and
	// their caller read the counters, before PostSend returns.
	timed := a.stats.PostCalls.Inc()%postCostEvery == 1
	a.stats.WRsPosted.Add(uint64(len(a.chain)))
	var start time.Time
	if timed {
		start = time.Now()
	}
	posted, err := a.qp.PostSend(a.chain)
	if timed {
		a.learnPostCost(time.Since(start))
	}
	if posted < len(a.chain) {
		a.stats.WRsPosted.Sub(uint64(len(a.chain) - posted))
	}
	a.countPosted(posted)
	a.seq = base + uint64(posted)
	a.postedTail.Store(a.seq)
	return posted, err
}

// failQueued fails everything still in the inbox with err.
func (a *Actor) failQueued(err error) int {
	a.run.mustHold("failQueued")
	n := 0
	for s := a.inbox.Peek(); s != nil; s = a.inbox.Peek() {
		fut, k := s.fut, len(s.ops())
		var failure error // nil: its context's end resolved it
		if a.take(s) {
			failure = a.submissionError(s, err)
			if a.obs != nil {
				a.observeUnposted(s, err)
			}
		}
		a.pop()
		if failure != nil {
			fut.FailN(failure, k)
		}
		n++
	}
	if n > 0 {
		a.roomMade()
	}
	return n
}

// dropCancelled pops the submission at the head of the inbox, which its
// context's end resolved: it never reaches the QP.
func (a *Actor) dropCancelled() {
	a.pop()
	a.stats.Ops.Cancelled.Inc()
	a.stats.Ops.ResolvedByActor.Inc()
}
