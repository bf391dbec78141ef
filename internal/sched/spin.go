package sched

import (
	"runtime"
	"time"

	"go.uber.org/atomic"
)

// lockedSpinners counts the goroutines (actors, locked to their threads,
// and pollers) that hold a SpinSlot, process-wide: the Ps they hold are
// the process's.
var lockedSpinners atomic.Int32

// spinWanters counts the goroutines that Acquire refused and that still
// want a slot: each counts once, until an Acquire gives it one or it
// Releases (parks or exits). A goroutine spinning on the lower priority
// (AcquireIdle) gives its slot up while any wants one.
var spinWanters atomic.Int32

// SpinSlot is a spinning goroutine's leave to spin without yielding. A
// locked goroutine (an actor) that yields hands its P to another thread
// and sleeps in the kernel until it gets one back, microseconds each
// time, so it should spin flat out; but if every P is held by a spinning
// goroutine, the goroutines they wake (callers, Then callbacks) have
// nowhere to run. So at most GOMAXPROCS-1 slots are handed out (none on
// one P): the goroutine that gets none yields as it spins. The zero value
// holds no slot; each goroutine keeps its own.
type SpinSlot struct {
	held    bool
	wanting bool   // counted in spinWanters
	limit   int32  // GOMAXPROCS-1, as of the last refresh
	calls   uint32 // since the last refresh
}

// limitRefresh is how many calls share one read of GOMAXPROCS, which takes
// the scheduler's lock; it can change at run time (a test, a container's
// CPU limit).
const limitRefresh = 4096

func (s *SpinSlot) currentLimit() int32 {
	if s.calls%limitRefresh == 0 {
		s.limit = int32(runtime.GOMAXPROCS(0) - 1)
	}
	s.calls++
	return s.limit
}

// take gets a free slot, if any.
func take(limit int32) bool { return takeSlot(&lockedSpinners, limit) }

// takeSlot counts the caller in n if n stays within limit, and reports
// whether it did; the caller then decrements n when it gives the slot up.
func takeSlot(n *atomic.Int32, limit int32) bool {
	if limit <= 0 || n.Load() >= limit {
		return false
	}
	if n.Inc() > limit {
		n.Dec()
		return false
	}
	return true
}

// Acquire reports whether the goroutine may spin without yielding, taking
// a slot if it holds none and one is free.
func (s *SpinSlot) Acquire() bool {
	limit := s.currentLimit()
	if s.held {
		if lockedSpinners.Load() <= limit {
			return true
		}
		s.Release() // GOMAXPROCS went down
	}
	if !take(limit) {
		if !s.wanting && limit > 0 { // on one P there is no slot to want
			s.wanting = true
			spinWanters.Inc()
		}
		return false
	}
	s.held = true
	s.stopWanting()
	return true
}

// AcquireIdle is Acquire for a goroutine that spins only in the hope of
// work (a poller whose CQs are quiet): it gets or keeps a slot only while
// no goroutine that Acquire refused is waiting for one.
func (s *SpinSlot) AcquireIdle() bool {
	limit := s.currentLimit()
	if spinWanters.Load() > 0 || s.held && lockedSpinners.Load() > limit {
		s.Release()
		return false
	}
	if s.held {
		return true
	}
	s.held = take(limit)
	return s.held
}

// SlotsHeld returns how many spin slots are held, process-wide.
func SlotsHeld() int { return int(lockedSpinners.Load()) }

// Release gives the slot back, if held, and stops wanting one: before
// parking, and on exit.
func (s *SpinSlot) Release() {
	s.stopWanting()
	if s.held {
		s.held = false
		lockedSpinners.Dec()
	}
}

func (s *SpinSlot) stopWanting() {
	if s.wanting {
		s.wanting = false
		spinWanters.Dec()
	}
}

// DefaultSpin is how long an actor or a poller that finds nothing to do
// spins before it sleeps, unless its configuration says otherwise: long
// enough to catch the next completion of a busy QP on soft and a NIC,
// short enough that an idle endpoint gives its P back at once.
const DefaultSpin = 50 * time.Microsecond
