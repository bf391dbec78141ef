package bench

import (
	"runtime"
	"sync"
	"testing"
)

// opSize is the length of every RDMA WRITE the benchmarks issue.
const opSize = 64

// sqDepth is the send queue depth every variant asks for (max_send_wr);
// the soft provider rounds it up as rxe does (2^n - 1).
const sqDepth = 256

// drive runs ops operations split among callers goroutines, each calling
// op with its caller index in a loop, and returns the first error. With a
// *testing.B it times the operations only: the goroutines are started and
// waiting before the timer is reset.
func drive(tb testing.TB, callers, ops int, op func(caller int) error) error {
	var (
		ready, done sync.WaitGroup
		start       = make(chan struct{})
		errOnce     sync.Once
		first       error
	)
	ready.Add(callers)
	done.Add(callers)
	for c := range callers {
		n := ops / callers
		if c < ops%callers {
			n++
		}
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			for range n {
				if err := op(c); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		}()
	}
	ready.Wait()
	stop := func() {}
	if b, ok := tb.(*testing.B); ok {
		stop = timeSection(b)
	}
	close(start)
	done.Wait()
	stop()
	return first
}

// timeSection resets b's timer and returns the function that stops it and
// reports the heap allocations per op in between as mallocs/op, unrounded:
// allocs/op rounds down, so one allocation every other op shows as 0.
func timeSection(b *testing.B) (stop func()) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.Mallocs
	b.ResetTimer()
	return func() {
		b.StopTimer()
		runtime.ReadMemStats(&m)
		b.ReportMetric(float64(m.Mallocs-before)/float64(b.N), "mallocs/op")
	}
}

// postStats are doorbells and WRs counted over a measured section.
type postStats struct {
	calls, wrs uint64
}

func (s postStats) sub(o postStats) postStats {
	return postStats{calls: s.calls - o.calls, wrs: s.wrs - o.wrs}
}

// report adds the metrics every variant reports: WRs per PostSend and
// operations per second.
func report(b *testing.B, s postStats) {
	if s.calls > 0 {
		b.ReportMetric(float64(s.wrs)/float64(s.calls), "wrs/post")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
