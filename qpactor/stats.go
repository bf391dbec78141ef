package qpactor

import (
	"time"

	"github.com/verbsrt/verbsrt/internal/opstats"
	"github.com/verbsrt/verbsrt/verbs"
)

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
// opstats.LatencySampleEvery shadow entries. Two sampled WRs outstanding at once
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
	s.at = make([]time.Duration, max(1, shadow/opstats.LatencySampleEvery))
	s.mask = uint64(len(s.at) - 1)
}

// now reads the actor's clock: the time since init, monotonic, and a
// duration where a time.Time would not fit (TestActorSize).
func (s *sampler) now() time.Duration { return time.Since(s.epoch) }

// stamp records the post time of the WR with sequence number seq, when it
// is sampled. Only the actor goroutine calls it.
func (s *sampler) stamp(seq uint64) {
	if seq%opstats.LatencySampleEvery == 0 {
		s.at[seq/opstats.LatencySampleEvery&s.mask] = s.now()
	}
}

// countPosted counts the first posted WRs of the chain: by opcode, one
// add per run of equal opcodes (a chain is mostly one), and the batch.
func (a *Actor) countPosted(posted int) {
	ops := &a.stats.Ops
	ops.Batches[opstats.BatchBucket(posted)].Inc()
	chain := a.chain[:posted]
	for i := 0; i < len(chain); {
		op, j := chain[i].Opcode, i+1
		for j < len(chain) && chain[j].Opcode == op {
			j++
		}
		ops.ByOpcode[op&(opstats.OpcodeSlots-1)].Add(uint64(j - i))
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
	if seq%opstats.LatencySampleEvery != 0 {
		return
	}
	s := &a.lat
	d := s.now() - s.at[seq/opstats.LatencySampleEvery&s.mask]
	a.stats.Ops.Latency[op&(opstats.OpcodeSlots-1)].Observe(d)
}
