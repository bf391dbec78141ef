package runtime

import (
	"sync"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// opBatch is what Post hands the actor for one batch: its ops and the
// gather lists of those that gather. The actor reads them until it has
// chained every op into a post and never after, so a batch whose future
// succeeded (every op posted and completed) is free for the next Post.
// The goroutine consuming that future gives it back: Wait, through the
// batch's WaitFor, and Then. A batch whose future failed, or was
// released without a wait, is left to the collector: a queued batch
// whose context ended is failed while the actor may still be about to
// read it.
//
// The batch rides on its future as the future's Waiter, which waits
// through the endpoint's actor as any future of it does: a Future stays
// four words, and Wait, inlined where it is called, no larger, where a
// field or a check of its own would cost every operation's future.
type opBatch struct {
	ops    []qpactor.Op
	gather []verbs.SGE    // MaxGather entries per op, made when an op gathers
	actor  *qpactor.Actor // the endpoint's, which the future's Wait polls through
}

// WaitFor waits as the actor's futures do (future.Waiter). A batch it
// finds succeeded goes back for the next Post: Wait, its only caller,
// consumes the future next and reads nothing of the batch.
func (b *opBatch) WaitFor(s *future.State) bool {
	if !b.actor.WaitFor(s) {
		return false
	}
	if s.Succeeded() {
		putBatch(b)
	}
	return true
}

var opBatches = sync.Pool{New: func() any { return new(opBatch) }}

// getBatch returns a batch of n ops.
func getBatch(n int) *opBatch {
	b := opBatches.Get().(*opBatch)
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
	b.actor = nil
	opBatches.Put(b)
}
