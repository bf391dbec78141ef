package qpactor

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestLearnWaitTail: the learned tail settles near the 90th percentile of
// the waits, whatever it started from.
func TestLearnWaitTail(t *testing.T) {
	for _, start := range []time.Duration{0, time.Microsecond, 50 * time.Millisecond} {
		a := &Actor{}
		a.waitTail.Store(uint32(start))
		rng := rand.New(rand.NewPCG(1, 2))
		for range 20000 {
			a.learnWait(time.Duration(rng.IntN(1000)) * time.Microsecond)
		}
		got := time.Duration(a.waitTail.Load())
		if got < 780*time.Microsecond || got > time.Millisecond {
			t.Errorf("from %v: learned tail %v of waits uniform in [0, 1ms), want about 900µs", start, got)
		}
	}
}

// TestWaitWindow: a waiter polls for windowFactor times the learned tail,
// between WaitPoll and maxWindowFactor times it, and for WaitPoll when
// waits are too long to spin through.
func TestWaitWindow(t *testing.T) {
	const base = 200 * time.Microsecond
	for _, c := range []struct{ tail, want time.Duration }{
		{0, base},
		{10 * time.Microsecond, base},
		{20 * time.Microsecond, base},
		{30 * time.Microsecond, 300 * time.Microsecond},
		{150 * time.Microsecond, 1500 * time.Microsecond},
		{maxWindowFactor * base / windowFactor, maxWindowFactor * base},
		{parkBeyondFactor * base, maxWindowFactor * base},
		{parkBeyondFactor*base + time.Microsecond, base},
		{time.Second, base},
	} {
		a := &Actor{waitPollMicros: waitPollMicros(base)}
		a.waitTail.Store(uint32(c.tail))
		if got := a.waitWindow(); got != c.want {
			t.Errorf("tail %v: window %v, want %v", c.tail, got, c.want)
		}
	}
}
