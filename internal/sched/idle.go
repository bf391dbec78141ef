package sched

import "time"

// IdleClock tells a spinning goroutine how long it has found nothing to do.
// It reads the clock only every idleClockStride empty rounds: in a VM the
// clock read can cost more than the round it measures. Not safe for
// concurrent use: each spinning goroutine has its own.
type IdleClock struct {
	// Now, when set, is the clock it reads instead of time.Now: tests
	// drive the mechanism with a clock of their own.
	Now func() time.Time

	since  time.Time
	rounds uint32
	idle   time.Duration
}

const idleClockStride = 32

// Busy records a round that found work.
func (c *IdleClock) Busy() { c.rounds, c.idle = 0, 0 }

// Idle records an empty round and returns how long the goroutine has been
// idle, as of the last clock read.
func (c *IdleClock) Idle() time.Duration {
	switch {
	case c.rounds == 0:
		c.since = c.now()
	case c.rounds%idleClockStride == 0:
		c.idle = c.now().Sub(c.since)
	}
	c.rounds++
	return c.idle
}

func (c *IdleClock) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
