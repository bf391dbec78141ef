package qpactor

import (
	"errors"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// Phase is how far an operation has come when an Observer sees it.
type Phase uint8

const (
	// Started: a caller submitted it (Submit, SubmitBatch), before it is
	// queued.
	Started Phase = iota
	// Posted: the actor hands it to PostSend. A PostSend that refuses it
	// is followed by its Ended with the error.
	Posted
	// Ended: its completion was handled, or it failed without reaching
	// the device (refused, cancelled, the actor closed or broken).
	Ended
)

// Event is one operation, one WR of a batch, at one Phase.
type Event struct {
	Phase  Phase
	Opcode verbs.Opcode
	Bytes  uint32        // the caller's bytes: its gather list's length, 8 for an atomic
	Since  time.Duration // since it was submitted; 0 at Started
	// At Ended: the completion's status when the device completed it
	// (WCSuccess for an unsignaled WR a later completion retired),
	// WCWRFlushErr for one that ended without a completion (refused,
	// cancelled, the actor closed); Err the failure, nil on success.
	Status verbs.WCStatus
	Err    error
}

// Observer sees every operation the actor carries for its callers (not
// its own credit SENDs) at each Phase, on the goroutine that moves it
// there: the submitter, the actor's, the one handling the CQ. Observe
// must be safe for concurrent use and must not block or call the actor.
type Observer interface {
	Observe(Event)
}

// observer is what an actor with Config.Observer keeps: the observer,
// and the submission time of each outstanding WR it observes, in its
// scratch slot (seq & scratchMask: two outstanding WRs never share one).
// The poster writes a slot before it publishes the WR's shadow entry,
// completion handling reads it after it saw the entry. 0 is a WR not
// observed (a credit SEND).
type observer struct {
	o     Observer
	start []time.Duration
}

// now is the observer's clock, the sampler's: never 0, which marks a WR
// not observed.
func (a *Actor) obsNow() time.Duration { return max(a.lat.now(), 1) }

// observeStarted stamps sub with the time it was submitted and reports
// each of its ops as Started.
func (a *Actor) observeStarted(sub *submission) {
	sub.start = a.obsNow()
	for i, ops := 0, sub.ops(); i < len(ops); i++ {
		a.obs.o.Observe(Event{Phase: Started, Opcode: ops[i].Opcode, Bytes: opBytes(&ops[i])})
	}
}

// observeUnposted reports the ops of sub, which never reached the
// device, as Ended with err. A submission not observed (submitted
// before, or the actor's own) reports nothing.
func (a *Actor) observeUnposted(sub *submission, err error) {
	if sub.start == 0 {
		return
	}
	since := a.obsNow() - sub.start
	for i, ops := 0, sub.ops(); i < len(ops); i++ {
		a.obs.o.Observe(Event{Phase: Ended, Opcode: ops[i].Opcode, Bytes: opBytes(&ops[i]), Since: since, Status: verbs.WCWRFlushErr, Err: err})
	}
}

// observePost records the submission time of the chain's WR i, of
// sequence number seq, in its slot and reports it as Posted: about to go
// to PostSend, now being the time the chain is prepared.
func (a *Actor) observePost(seq uint64, i int, length uint32, now time.Duration) {
	start := a.owners[i].start
	a.obs.start[seq&a.scratchMask] = start
	if start != 0 {
		a.obs.o.Observe(Event{Phase: Posted, Opcode: a.chain[i].Opcode, Bytes: length, Since: now - start})
	}
}

// observeEnd reports the WR of sequence number seq, shadowed by e, as
// Ended with status and err: completion handling, or the poster for a WR
// PostSend refused.
func (a *Actor) observeEnd(seq uint64, e *entry, status verbs.WCStatus, err error) {
	slot := &a.obs.start[seq&a.scratchMask]
	start := *slot
	if start == 0 {
		return
	}
	*slot = 0
	a.obs.o.Observe(Event{Phase: Ended, Opcode: e.opcode, Bytes: e.length, Since: a.obsNow() - start, Status: status, Err: err})
}

// observeRefused reports the chain's WRs from posted on, which PostSend
// refused with err (posted the first of them), as Ended: the WRs of the
// submission that owns the first one, or, when err is not about one WR,
// all of them. The innocent WRs of a WRError go out again, and are
// reported Posted again.
func (a *Actor) observeRefused(posted int, err error) {
	var wrErr *verbs.WRError
	one := errors.As(err, &wrErr)
	base, tab := a.seq, a.shadow.Load()
	for i := posted; i < len(a.chain) && (!one || a.owners[i] == a.owners[posted]); i++ {
		seq := base + uint64(i-posted)
		a.observeEnd(seq, &tab.entries[seq&tab.mask], verbs.WCWRFlushErr, err)
	}
}

// opBytes is the caller's bytes of op.
func opBytes(op *Op) uint32 {
	if op.Opcode.IsAtomic() {
		return 8
	}
	if op.Gather == nil {
		return op.Local.Length
	}
	var n uint32
	for _, s := range op.Gather {
		n += s.Length
	}
	return n
}
