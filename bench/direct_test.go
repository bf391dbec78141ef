package bench

import (
	"testing"

	floor "github.com/verbsrt/verbsrt/internal/direct"
)

// directBatch is how many WRs the Go floor chains into one PostSend;
// only the last is signaled.
const directBatch = floor.Chain

// direct is the Go floor of the write stream (internal/direct's Loop) over
// a loopback: one goroutine that owns the QP outright keeps its send
// queue (as granted for sqDepth, as the runtime's actor does) full with
// chains of directBatch writes and polls the CQ itself.
type direct struct {
	lb   *loopback
	loop *floor.Loop
}

func newDirect(tb testing.TB) *direct {
	lb := newLoopback(tb, directBatch, 64)
	return &direct{lb: lb, loop: lb.floor()}
}

// floor returns the Go floor's loop over lb's QP pair and slots.
func (lb *loopback) floor() *floor.Loop {
	return &floor.Loop{QP: lb.qp, CQ: lb.cq, Peer: lb.peer, PeerCQ: lb.peerCQ, Capacity: lb.capacity, Local: lb.local, Remote: lb.remote}
}

// run writes ops times and returns once every write has completed.
func (d *direct) run(ops int) error { return d.loop.Writes(ops) }

// roundTrips writes ops times, one at a time, each polled until it
// completed.
func (d *direct) roundTrips(ops int) error { return d.loop.WriteRoundTrips(ops) }

func (d *direct) stats() postStats { return postStats{calls: d.loop.Posts, wrs: d.loop.WRs} }
