package opstats

import (
	"math/bits"
	"time"

	"go.uber.org/atomic"
)

// Stats are counters the actor keeps for metrics. Read them with Load.
type Stats struct {
	PostCalls atomic.Uint64 // PostSend calls (doorbells)
	WRsPosted atomic.Uint64
	Stale     atomic.Uint64 // completions whose wr_id matched no outstanding WR
	Ops       OpStats       // by opcode, batch sizes, futures, latency
}

// An actor's counters. Each counter has one writer, the
// actor goroutine or the poller goroutine, and is touched once per drain or
// per completion, not per WR, except where a WR is sampled for latency.

// OpcodeSlots is the length of the per-opcode arrays: verbs.Opcode values
// index them (masked, so an unknown opcode cannot index out of range).
const OpcodeSlots = 16

// BatchBuckets is the number of PostSend batch-size buckets: bucket i counts
// the PostSend calls that posted at most 1<<i WRs (i < BatchBuckets-1), the
// last one the calls that posted more.
const BatchBuckets = 12

// LatencyBuckets is the number of latency buckets: bucket i counts the
// samples of at most 1<<i µs (i < LatencyBuckets-1), the last one slower
// ones (over about 1 s).
const LatencyBuckets = 22

// LatencySampleEvery is how sparsely WRs are timed: the one WR in this many
// whose sequence number is a multiple of it. A clock read can cost more
// than a WR's share of the actor's work on a VM; a sparse sample does not
// show in the actor's cost.
const LatencySampleEvery = 64

// OpStats are an actor's counters beyond Stats' first three: WRs by opcode,
// PostSend batch sizes, futures taken and resolved, and the sampled latency
// of operations by opcode. Read them with Load, from any goroutine.
type OpStats struct {
	// Written by the actor goroutine.
	ByOpcode [OpcodeSlots]atomic.Uint64 // WRs posted, by verbs.Opcode
	Batches  [BatchBuckets]atomic.Uint64
	// Taken counts submissions (each with its own future) the actor took
	// from the inbox; ResolvedByActor those of them it resolved itself (a
	// WR refused before or by PostSend).
	Taken           atomic.Uint64
	ResolvedByActor atomic.Uint64
	// Cancelled counts the submissions whose context ended before they
	// reached the QP: before they were queued, while they waited for room
	// in the inbox, or while they were queued (taken and resolved).
	Cancelled atomic.Uint64
	// CreditOnly counts the actor's own SENDs of a header alone (peer
	// credits): credit reports, requests for a larger window and credits
	// given back. They are in WRsPosted and ByOpcode too.
	CreditOnly atomic.Uint64
	// Runs counts the actor goroutine's starts: the first, and each time
	// a Wake found it gone idle and started a new one, on an OS thread of
	// its own: what a wake-up of an idle actor costs.
	Runs atomic.Uint64
	// InlineRuns counts the drains a submitter ran itself on finding the
	// actor idle (Config.InlinePost), instead of starting a run.
	InlineRuns atomic.Uint64
	// WaitsParked counts the waits (Future.Wait, WaitUntil) that spun
	// without their result and parked: written by waiters, only on that
	// slow path.
	WaitsParked atomic.Uint64

	// The poller's counters on lines of their own: 64 bytes from the
	// actor's hot counters, Runs, InlineRuns and WaitsParked (written
	// once a run or a park) counting as padding.
	_ [64 - 24]byte

	// Written by the poller goroutine.
	ResolvedByPoller atomic.Uint64
	// Latency is the time from the PostSend that carried a sampled WR to
	// the completion that retired it, by the WR's verbs.Opcode: the
	// device's part and the polling, not the wait in the inbox.
	Latency [OpcodeSlots]Histogram
}

// Histogram is a latency histogram of LatencyBuckets non-cumulative buckets
// and the sum of the samples.
type Histogram struct {
	Buckets  [LatencyBuckets]atomic.Uint64
	SumNanos atomic.Uint64
}

// Observe adds a sample of d.
func (h *Histogram) Observe(d time.Duration) {
	h.Buckets[latencyBucket(d)].Inc()
	h.SumNanos.Add(uint64(max(d, 0)))
}

// latencyBucket returns the bucket of d: the least i with d <= 1<<i µs.
func latencyBucket(d time.Duration) int {
	us := (uint64(max(d, 0)) + 999) / 1000 // rounded up
	if us <= 1 {
		return 0
	}
	return min(bits.Len64(us-1), LatencyBuckets-1)
}

// BatchBucket returns the bucket of a PostSend of n WRs: the least i with
// n <= 1<<i.
func BatchBucket(n int) int {
	if n <= 1 {
		return 0
	}
	return min(bits.Len(uint(n-1)), BatchBuckets-1)
}
