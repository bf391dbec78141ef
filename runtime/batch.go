package runtime

import (
	"sync"

	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// opBatch is what Post hands the actor for one batch: its ops and the
// gather lists of those that gather. The actor reads them until it has
// chained every op into a post and never after, so a batch whose future
// succeeded (every op posted and completed) is free for the next Post:
// the future gives it back (giveBack) when it is consumed, by Wait, Then
// or Release, through the hook of its state (future.State.SetGiveBack).
// A batch whose future failed, or was released while pending, is left to
// the collector: a queued batch whose context ended is failed while the
// actor may still be about to read it.
type opBatch struct {
	ops    []qpactor.Op
	gather []verbs.SGE // MaxGather entries per op, made when an op gathers
	// giveBack puts this batch back in the pool: made once per batch,
	// so that a Post hands its future no new closure.
	giveBack func()
}

var opBatches sync.Pool

// getBatch returns a batch of n ops.
func getBatch(n int) *opBatch {
	b, _ := opBatches.Get().(*opBatch)
	if b == nil {
		b = new(opBatch)
		b.giveBack = func() { putBatch(b) }
	}
	if cap(b.ops) < n {
		b.ops = make([]qpactor.Op, n)
	}
	b.ops = b.ops[:n]
	return b
}

// gatherOf returns the room for op i's gather list, empty.
func (b *opBatch) gatherOf(i int) []verbs.SGE {
	if len(b.gather) < len(b.ops)*MaxGather {
		b.gather = make([]verbs.SGE, cap(b.ops)*MaxGather)
	}
	return b.gather[i*MaxGather : i*MaxGather : (i+1)*MaxGather]
}

// putBatch gives b back for another Post. Its ops' holds and gather lists
// are dropped, so the pool keeps no buffer reachable.
func putBatch(b *opBatch) {
	clear(b.ops)
	opBatches.Put(b)
}
