package sched

import (
	"math/rand/v2"
	"testing"
	"time"
)

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
