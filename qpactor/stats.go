package qpactor

import (
	"math/bits"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/verbs"
)

// Metrics beyond Stats' doorbells and WRs. Each counter has one writer, the
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
// whose sequence number is a multiple of it. A clock read costs more than a
// WR's share of the actor's work on a VM; one per 64 WRs does not show.
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
	// Cancelled counts the submissions whose context ended while they
	// were queued: taken (and resolved) without reaching the QP.
	Cancelled atomic.Uint64
	// CreditOnly counts the actor's own SENDs of a header alone (peer
	// credits): credit reports, requests for a larger window and credits
	// given back. They are in WRsPosted and ByOpcode too.
	CreditOnly atomic.Uint64
	// Runs counts the actor goroutine's starts: the first, and each time
	// a Wake found it gone idle and started a new one, on an OS thread of
	// its own (about 15 µs: what a wake-up of an idle actor costs).
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

// observe adds a sample of d.
func (h *Histogram) observe(d time.Duration) {
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

// batchBucket returns the bucket of a PostSend of n WRs: the least i with
// n <= 1<<i.
func batchBucket(n int) int {
	if n <= 1 {
		return 0
	}
	return min(bits.Len(uint(n-1)), BatchBuckets-1)
}

// Pending returns how many futures the actor holds unresolved: queued in
// the inbox, or taken and not yet resolved. It is a sum of counters read
// one after another, exact only while the actor is idle.
func (a *Actor) Pending() int {
	s := &a.stats.Ops
	// Resolved first: a later read of Taken is at least what was resolved.
	resolved := s.ResolvedByPoller.Load() + s.ResolvedByActor.Load()
	n := int64(s.Taken.Load()-resolved) + int64(a.inbox.Len())
	return int(max(n, 0))
}

// sampler keeps the post time of the WRs sampled for latency: one slot per
// LatencySampleEvery shadow entries. Two sampled WRs outstanding at once
// are fewer than the shadow size apart, so they never share a slot. The
// actor writes a slot before it publishes the WR's entry, the poller reads
// it after it sees the entry: the entry's seq orders the two.
type sampler struct {
	epoch time.Time
	at    []time.Duration
	mask  uint64
}

func (s *sampler) init(shadow int) {
	s.epoch = time.Now()
	s.at = make([]time.Duration, max(1, shadow/LatencySampleEvery))
	s.mask = uint64(len(s.at) - 1)
}

// now reads the actor's clock: the time since init, monotonic, and a
// duration where a time.Time would not fit (TestActorSize).
func (s *sampler) now() time.Duration { return time.Since(s.epoch) }

// stamp records the post time of the WR with sequence number seq, when it
// is sampled. Only the actor goroutine calls it.
func (s *sampler) stamp(seq uint64) {
	if seq%LatencySampleEvery == 0 {
		s.at[seq/LatencySampleEvery&s.mask] = s.now()
	}
}

// countPosted counts the first posted WRs of the chain: by opcode, one
// add per run of equal opcodes (a chain is mostly one), and the batch.
func (a *Actor) countPosted(posted int) {
	ops := &a.stats.Ops
	ops.Batches[batchBucket(posted)].Inc()
	chain := a.chain[:posted]
	for i := 0; i < len(chain); {
		op, j := chain[i].Opcode, i+1
		for j < len(chain) && chain[j].Opcode == op {
			j++
		}
		ops.ByOpcode[op&(OpcodeSlots-1)].Add(uint64(j - i))
		i = j
	}
	n := 0
	for _, o := range a.owners[:posted] {
		if o == &a.peer.reportSub {
			n++
		}
	}
	if n > 0 {
		ops.CreditOnly.Add(uint64(n))
	}
}

// sample observes the latency of the WR with sequence number seq that
// completed successfully, when it is sampled. Only the poller goroutine
// calls it.
func (a *Actor) sample(seq uint64, op verbs.Opcode) {
	if seq%LatencySampleEvery != 0 {
		return
	}
	s := &a.lat
	d := s.now() - s.at[seq/LatencySampleEvery&s.mask]
	a.stats.Ops.Latency[op&(OpcodeSlots-1)].observe(d)
}
