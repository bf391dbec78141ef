package opstats

import (
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {time.Microsecond, 0}, {time.Microsecond + 1, 1}, {2 * time.Microsecond, 1},
		{3 * time.Microsecond, 2}, {1024 * time.Microsecond, 10}, {time.Hour, LatencyBuckets - 1}, {-5, 0},
	} {
		if got := latencyBucket(c.d); got != c.want {
			t.Errorf("latencyBucket(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	for _, c := range []struct{ n, want int }{{0, 0}, {1, 0}, {2, 1}, {3, 2}, {64, 6}, {65, 7}, {1024, 10}, {1025, 11}, {1 << 20, 11}} {
		if got := BatchBucket(c.n); got != c.want {
			t.Errorf("BatchBucket(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}
