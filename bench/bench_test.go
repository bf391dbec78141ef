package bench

import (
	"fmt"
	"math/bits"
	"testing"

	"go.uber.org/atomic"

	vrt "github.com/verbsrt/verbsrt/runtime"
)

// callerCounts are the numbers of concurrent callers the shared-QP
// variants run with.
var callerCounts = []int{1, 16, 256}

// BenchmarkWrite compares 64-byte RDMA WRITEs on the soft provider, one
// op being one write that completed:
//
//   - runtime/callers=N: N goroutines each call ep.Write and Wait on the
//     future, through the runtime's actor and poller.
//   - observed/callers=1: runtime/callers=1 with an Observer (WithObserver)
//     that keeps a latency histogram of the completed operations.
//   - actor-only/callers=N: the same with the caller-thread defaults off
//     (Tuning.NoInlinePost, Tuning.NoWaitPoll): every post on the actor's
//     goroutine, every completion handled by the actor or the poller.
//   - naive/callers=N: the same callers over a mutex-guarded QP, one
//     signaled PostSend and one channel per write, one polling goroutine.
//   - pipelined/callers=1: one goroutine keeping 128 writes in flight
//     through futures, waiting for the oldest before it issues the next:
//     what a caller that does not wait for each write gets; pipelined-8
//     keeps 8, and the actor-only- variants turn the caller-thread
//     defaults off.
//   - pipelined-post/callers=1: the same 128 writes in flight as
//     Endpoint.Post batches of 16, one future a batch.
//   - direct/callers=1: one goroutine posting chains and polling itself.
//   - direct-roundtrip/callers=1: one goroutine posting one signaled write
//     and polling until it completed, then the next: the limit for a caller
//     that waits for each write, as runtime/callers=1 does.
//
// wrs/post is WRs per PostSend (doorbell) over the timed section.
func BenchmarkWrite(b *testing.B) {
	viaRuntimeWrites := func(b *testing.B, n int, opts ...vrt.Option) {
		v := newViaRuntime(b, n, append(runtimeOpts(), opts...)...)
		b.ReportAllocs()
		before := v.stats()
		if err := drive(b, n, b.N, v.write); err != nil {
			b.Fatal(err)
		}
		report(b, v.stats().sub(before))
	}
	for _, n := range callerCounts {
		b.Run(fmt.Sprintf("runtime/callers=%d", n), func(b *testing.B) { viaRuntimeWrites(b, n) })
	}
	b.Run("observed/callers=1", func(b *testing.B) {
		var h latencyHistogram
		viaRuntimeWrites(b, 1, vrt.WithObserver(&h))
		if h.count.Load() < uint64(b.N) {
			b.Fatalf("the observer saw %d writes complete, want %d", h.count.Load(), b.N)
		}
	})
	for _, n := range callerCounts {
		b.Run(fmt.Sprintf("actor-only/callers=%d", n), func(b *testing.B) { viaRuntimeWrites(b, n, actorOnlyOpts...) })
	}
	for _, n := range callerCounts {
		b.Run(fmt.Sprintf("naive/callers=%d", n), func(b *testing.B) {
			nv := newNaive(b, n)
			b.ReportAllocs()
			before := nv.stats()
			if err := drive(b, n, b.N, nv.write); err != nil {
				b.Fatal(err)
			}
			report(b, nv.stats().sub(before))
		})
	}
	for _, depth := range pipelineDepths {
		name := "pipelined"
		if depth != pipelineDepths[0] {
			name = fmt.Sprintf("pipelined-%d", depth)
		}
		for _, v := range pipelineModes {
			b.Run(v.prefix+name+"/callers=1", func(b *testing.B) {
				rt := newViaRuntime(b, depth, append(runtimeOpts(), v.opts...)...)
				timedRun(b, rt.stats, func() error { return rt.pipeline(b.N, depth) })
			})
		}
	}
	b.Run("pipelined-post/callers=1", func(b *testing.B) {
		rt := newViaRuntime(b, pipelineDepths[0], runtimeOpts()...)
		timedRun(b, rt.stats, func() error { return rt.pipelinePosts(b.N, pipelineDepths[0]) })
	})
	b.Run("direct/callers=1", func(b *testing.B) {
		d := newDirect(b)
		timedRun(b, d.stats, func() error { return d.run(b.N) })
	})
	b.Run("direct-roundtrip/callers=1", func(b *testing.B) {
		d := newDirect(b)
		timedRun(b, d.stats, func() error { return d.roundTrips(b.N) })
	})
}

// latencyHistogram is an Observer keeping what a user's latency histogram
// does: the completed operations in power-of-two buckets of nanoseconds,
// and their count.
type latencyHistogram struct {
	count   atomic.Uint64
	buckets [64]atomic.Uint64
}

func (h *latencyHistogram) ObserveOp(e vrt.OpEvent) {
	if e.Phase == vrt.OpCompleted {
		h.count.Inc()
		h.buckets[bits.Len64(uint64(e.Latency))&63].Inc()
	}
}
