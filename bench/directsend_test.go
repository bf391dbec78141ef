package bench

import (
	"testing"

	floor "github.com/verbsrt/verbsrt/internal/direct"
)

// directSend is the Go floor of a SEND stream (internal/direct's
// Loop.Sends) over a loopback whose peer QP keeps floor.SendRecvDepth
// receives posted, each into a slot of its own.
type directSend struct {
	lb   *loopback
	loop *floor.Loop
}

func newDirectSend(tb testing.TB) *directSend {
	lb := newLoopbackRecv(tb, floor.SendRecvDepth, directBatch, floor.SendRecvDepth)
	return &directSend{lb: lb, loop: lb.floor()}
}

// run sends ops messages and returns once every one has been received
// and every SEND has completed.
func (d *directSend) run(ops int) error { return d.loop.Sends(ops) }

func (d *directSend) stats() postStats { return postStats{calls: d.loop.Posts, wrs: d.loop.WRs} }
