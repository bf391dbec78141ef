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
	defer SetWakeUpCost(0)()
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
		if got, _ := a.waitWindow(); got != c.want {
			t.Errorf("tail %v: window %v, want %v", c.tail, got, c.want)
		}
	}
}

// TestWaitWindowCoversParkCost: where a park costs more than the window
// learned from the waits (parkHops wake-ups), a waiter polls as long as a
// park would cost, up to maxParkWindow; where it costs less, the learned
// window stands.
func TestWaitWindowCoversParkCost(t *testing.T) {
	const base = 200 * time.Microsecond
	for _, c := range []struct{ tail, wakeUp, want time.Duration }{
		{0, 10 * time.Microsecond, base},                                          // hardware: parks are cheap
		{150 * time.Microsecond, 100 * time.Microsecond, 1500 * time.Microsecond}, // the learned window is longer
		{0, time.Millisecond, 3 * time.Millisecond},                               // a TCG guest
		{time.Second, time.Millisecond, 3 * time.Millisecond},                     // waits too long to spin through: still no less than a park
		{150 * time.Microsecond, time.Millisecond, 3 * time.Millisecond},
		{0, time.Second, maxParkWindow},
	} {
		restore := SetWakeUpCost(c.wakeUp)
		a := &Actor{waitPollMicros: waitPollMicros(base)}
		a.waitTail.Store(uint32(c.tail))
		if got, _ := a.waitWindow(); got != c.want {
			t.Errorf("tail %v, wake-up %v: window %v, want %v", c.tail, c.wakeUp, got, c.want)
		}
		restore()
	}
}

// TestLearnWakeUp: the learned wake-up starts at the first one measured,
// settles near the median of those measured, and a rare slow one moves it
// little.
func TestLearnWakeUp(t *testing.T) {
	defer SetWakeUpCost(0)()
	learnWakeUp(300 * time.Microsecond)
	if got, _ := WakeUpCost(); got != 300*time.Microsecond {
		t.Fatalf("after one wake-up of 300µs: learned %v", got)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		d := time.Duration(50+rng.IntN(100)) * time.Microsecond // median 100 µs
		if i%50 == 0 {
			d = 50 * time.Millisecond // a time slice lost now and then
		}
		learnWakeUp(d)
	}
	if got, _ := WakeUpCost(); got < 85*time.Microsecond || got > 120*time.Microsecond {
		t.Errorf("learned %v from wake-ups uniform in [50µs, 150µs) and 2%% of 50ms, want about 100µs", got)
	}
}
