package bench

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkHandoff measures the floor under every round trip through a
// runtime on this machine: the benchmark goroutine publishes a number, a
// goroutine locked to its OS thread and spinning on it answers, and the
// benchmark goroutine spins until it sees the answer. One op is one round
// trip: a cache line crossing between cores and back, with no work done.
// A caller's write through an actor crosses at least as often (the
// submission there, the completion back), so runtime/callers=1 cannot be
// faster than this plus the write itself.
func BenchmarkHandoff(b *testing.B) {
	var line struct {
		_ [64]byte
		v atomic.Int64
		_ [56]byte
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for {
			switch v := line.v.Load(); {
			case v < 0:
				return
			case v&1 == 1:
				line.v.Store(v + 1)
			}
		}
	}()
	b.ResetTimer()
	for i := range b.N {
		want := int64(2*i + 2)
		line.v.Store(want - 1)
		for line.v.Load() != want {
		}
	}
	b.StopTimer()
	line.v.Store(-1)
	<-done
}
