package rtbench

import (
	"testing"
	"time"
)

// TestPeakRate: the peak is the best qualifying window; a burst shorter
// than the minimum counts does not make one.
func TestPeakRate(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int, n uint64) point { return point{t0.Add(time.Duration(ms) * time.Millisecond), n} }
	// 1000 ops/s, then a burst of 500 ops in 20 ms, then 1000 ops/s.
	hist := []point{at(0, 0), at(100, 100), at(200, 200), at(220, 700), at(300, 780), at(400, 880), at(500, 980)}
	if got := peakRate(hist, 100*time.Millisecond, 1); got < 5000 || got > 6000 {
		t.Errorf("peak over 100 ms windows of 1+ ops: %.0f/s, want the burst's window, about 5000-6000", got)
	}
	if got := peakRate(hist, 100*time.Millisecond, 900); got < 1900 || got > 2000 {
		t.Errorf("peak over windows of 900+ ops: %.0f/s, want 1960 (980 ops in 500 ms)", got)
	}
	if got := peakRate(hist[:2], time.Second, 1); got != 0 {
		t.Errorf("no window qualifies: %.0f, want 0", got)
	}
}
