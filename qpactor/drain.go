package qpactor

import (
	"time"

	"github.com/verbsrt/verbsrt/internal/credit"
	"github.com/verbsrt/verbsrt/internal/ring"
	"github.com/verbsrt/verbsrt/verbs"
)

// gatherer spaces the drains of an actor that takes a stream of
// submissions from many callers, so that one PostSend carries many. An
// actor that posts every submission as it arrives rings a doorbell per WR
// whenever it posts faster than its callers submit, and its reads of the
// inbox take the slot's cache line from the next producer each time.
//
// From the actor's side a lone caller and a crowd look alike (a drain of
// one, then another one a little later); only waiting tells them apart: a
// crowd fills the inbox while the actor waits, a lone caller, blocked on
// the write just posted, does not. So the actor goes into stream mode
// after a drain of two or more, and otherwise on every probeEvery-th
// drain. In stream mode it drains once gatherTarget submissions are
// queued, or when the wait since the last drain reaches the current
// bound: probeGather at first, doubled by each drain of two or more up to
// maxGather. A drain of one (or none) after a wait ends stream mode: a
// lone caller pays a short wait once every probeEvery operations.
type gatherer struct {
	stream bool
	wait   time.Duration // the bound of the current wait, in stream mode
	since  time.Time     // the last drain that took something
	drains uint32
	rounds uint32 // checks of the current wait, for the clock stride
}

const (
	gatherTarget = 16                   // submissions a drain waits for
	probeGather  = 1 * time.Microsecond // first wait of a stream
	maxGather    = 8 * time.Microsecond // longest wait
	probeEvery   = 64                   // drains between probes
	gatherStride = 8                    // checks per clock read
)

// due reports whether the actor should drain now.
func (g *gatherer) due(inbox *ring.Ring[submission]) bool {
	if !g.stream {
		return true
	}
	if g.rounds++; g.rounds%gatherStride != 0 {
		return false
	}
	return inbox.Reached(min(gatherTarget, inbox.Cap())) || time.Since(g.since) >= g.wait
}

// drained records a drain of k submissions.
func (g *gatherer) drained(k int) {
	if k == 0 && !g.stream {
		return
	}
	g.drains++
	switch {
	case k >= 2 && g.stream:
		g.wait = min(2*g.wait, maxGather)
	case k >= 2 || g.drains%probeEvery == 0:
		g.stream, g.wait = true, probeGather
	default:
		g.stream = false
	}
	if g.stream {
		g.since, g.rounds = time.Now(), 0
	}
}

// canDrain reports whether drain would post something now: it asks the
// Sender what drain asks it (admitHead), and whether a credit report is
// wanted.
func (a *Actor) canDrain() bool {
	if a.run.has(lifeBroken) {
		return a.inbox.Peek() != nil
	}
	sq := a.credits.Load()
	if sq > 0 && a.peer.s.ReportWanted(a.peer.s.Credits()) {
		return true
	}
	s := a.inbox.Peek()
	if s != nil && a.headCancelled(s) {
		return true // drain drops it
	}
	if s == nil || int64(len(s.ops())) > sq {
		return false
	}
	// Wait is the one verdict on which drain posts nothing: it takes the
	// submission, fails it (a closing actor) or asks for a larger window.
	v, _ := a.admitHead(s.ops(), a.peer.s.Credits())
	return v != credit.Wait
}

// drain chains everything queued, up to the credits held, into one PostSend
// and returns how many submissions it took from the inbox.
func (a *Actor) drain() int {
	a.run.mustHold("drain")
	if err := a.brokenErr(); err != nil {
		return a.failQueued(err)
	}
	credits := int(a.credits.Load())
	room := a.shadowRoom(credits)
	a.chain, a.owners = a.chain[:0], a.owners[:0]
	a.peer.uses = a.peer.uses[:0]
	a.drained = a.drained[:0]
	peerLeft := a.peer.s.Credits()
	taken := 0
	var starved int64 // the peer credits the next submission needs and lacks
	ask := false      // and the Sender asks the peer for them
	headWaits := false
	for {
		s := a.inbox.Peek()
		if s == nil {
			break
		}
		if a.headCancelled(s) && !a.take(s) {
			a.dropCancelled()
			taken++
			continue
		}
		ops := s.ops()
		if len(ops) > credits-len(a.chain) {
			headWaits = true
			break // wait for credits; order is kept
		}
		if len(ops) > room-len(a.chain) {
			a.growShadow(int(a.sqDepth) - credits + len(a.chain) + len(ops))
			room = a.shadowRoom(credits)
		}
		v, need := a.admitHead(ops, peerLeft)
		if v == credit.Fail {
			taken += a.failQueued(verbs.ErrClosed)
			break
		}
		if v != credit.Take {
			starved, ask, headWaits = need, v == credit.Ask, true
			break // wait for the peer's credits; order is kept
		}
		if len(ops) > cap(a.chain)-len(a.chain) || len(a.drained) == cap(a.drained) {
			if cap(a.chain) >= int(a.sqDepth) {
				break // drained is full at its largest: the rest goes next time
			}
			a.growPost(max(2*cap(a.chain), len(a.chain)+len(ops)))
		}
		if !a.take(s) { // its context ended a moment ago
			a.dropCancelled()
			taken++
			continue
		}
		a.drained = append(a.drained, *s)
		a.pop()
		taken++
		a.peer.s.Admitted(need)
		sub := &a.drained[len(a.drained)-1]
		start := len(a.chain)
		if err := a.appendOps(sub); err != nil {
			if a.obs != nil {
				a.observeUnposted(sub, err)
			}
			sub.fut.FailCounted(err, len(sub.ops()), &a.stats.Ops.ResolvedByActor)
		} else {
			a.stampChain(start, need)
			peerLeft -= need
		}
	}
	if a.headWaits.Load() != headWaits {
		a.headWaits.Store(headWaits)
	}
	if starved > 0 {
		a.markBacklog()
		if ask {
			peerLeft = a.appendAsk(credits, peerLeft, starved)
		}
	}
	a.appendReport(credits, peerLeft)
	if taken > 0 {
		a.stats.Ops.Taken.Add(uint64(taken))
		a.roomMade()
	}
	if len(a.chain) > 0 {
		a.post()
	}
	return taken
}
