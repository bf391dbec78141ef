package qpactor

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestWaitWindowCoversParkCost: a waiter polls for WaitPoll, or as long as
// a park would cost (parkHops wake-ups) where that is longer, up to
// maxParkWindow.
func TestWaitWindowCoversParkCost(t *testing.T) {
	const base = 200 * time.Microsecond
	for _, c := range []struct{ wakeUp, want time.Duration }{
		{0, base},                     // no wake-up measured yet
		{10 * time.Microsecond, base}, // hardware: parks are cheap
		{100 * time.Microsecond, 300 * time.Microsecond}, // soft on a slow machine
		{time.Millisecond, 3 * time.Millisecond},         // a TCG guest
		{time.Second, maxParkWindow},
	} {
		restore := SetWakeUpCost(c.wakeUp)
		a := &Actor{waitPollMicros: waitPollMicros(base)}
		if got := a.waitWindow(); got != c.want {
			t.Errorf("wake-up %v: window %v, want %v", c.wakeUp, got, c.want)
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
