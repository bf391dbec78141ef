package qpactor

import (
	"runtime"

	"go.uber.org/atomic"
)

// lockedSpinners counts the locked goroutines (actors and pollers) that
// hold a SpinSlot, process-wide: the Ps they hold are the process's.
var lockedSpinners atomic.Int32

// spinWanted is set by an Acquire that found no slot free, and cleared by
// the next Acquire that gets one: a goroutine spinning on the lower
// priority (AcquireIdle) gives its slot up when it sees it.
var spinWanted atomic.Bool

// SpinSlot is a locked goroutine's leave to spin without yielding. A
// locked goroutine that yields hands its P to another thread and sleeps
// in the kernel until it gets one back, microseconds each time, so it
// should spin flat out; but if every P is held by a spinning locked
// goroutine, the goroutines they wake (callers, Then callbacks) have
// nowhere to run. So at most GOMAXPROCS-1 slots are handed out (at least
// one): the goroutine that gets none yields as it spins. The zero value
// holds no slot; each goroutine keeps its own.
type SpinSlot struct {
	held  bool
	limit int32 // read once: GOMAXPROCS takes the scheduler's lock
}

// Acquire reports whether the goroutine may spin without yielding, taking
// a slot if it holds none and one is free.
func (s *SpinSlot) Acquire() bool {
	if s.held {
		return true
	}
	if s.limit == 0 {
		s.limit = int32(max(1, runtime.GOMAXPROCS(0)-1))
	}
	limit := s.limit
	if lockedSpinners.Load() >= limit || lockedSpinners.Inc() > limit && lockedSpinners.Dec() >= 0 {
		if !spinWanted.Load() {
			spinWanted.Store(true)
		}
		return false
	}
	s.held = true
	if spinWanted.Load() {
		spinWanted.Store(false)
	}
	return true
}

// AcquireIdle is Acquire for a goroutine that spins only in the hope of
// work (a poller whose CQs are quiet): it gets or keeps a slot only while
// no goroutine that Acquire refused is waiting for one.
func (s *SpinSlot) AcquireIdle() bool {
	if spinWanted.Load() {
		s.Release()
		return false
	}
	if s.held {
		return true
	}
	if s.limit == 0 {
		s.limit = int32(max(1, runtime.GOMAXPROCS(0)-1))
	}
	if lockedSpinners.Load() >= s.limit || lockedSpinners.Inc() > s.limit && lockedSpinners.Dec() >= 0 {
		return false
	}
	s.held = true
	return true
}

// Release gives the slot back, if held: before parking, and on exit.
func (s *SpinSlot) Release() {
	if s.held {
		s.held = false
		lockedSpinners.Dec()
	}
}
