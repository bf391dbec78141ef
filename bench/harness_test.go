package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
)

// opSize is the length of every RDMA WRITE the benchmarks issue.
const opSize = 64

// sqDepth is the send queue depth every variant asks for (max_send_wr);
// the soft provider rounds it up as rxe does (2^n - 1).
const sqDepth = 256

// stallLimit is how long drive waits without any operation completing
// before it cancels the rest: no write takes seconds, so one that does was
// lost, and a benchmark that says so beats one that hangs.
const stallLimit = 10 * time.Second

// errStalled is the cause of the context drive cancels on a stall.
var errStalled = errors.New("bench: no operation completed for " + stallLimit.String())

// drive runs ops operations split among callers goroutines, each calling
// op with ctx and its caller index in a loop, and returns the first error.
// With a *testing.B it times the operations only: the goroutines are
// started and waiting before the timer is reset. ctx is cancelled, with
// errStalled as the cause, when no operation completes for stallLimit.
func drive(tb testing.TB, callers, ops int, op func(ctx context.Context, caller int) error) error {
	var (
		ready, done sync.WaitGroup
		start       = make(chan struct{})
		errOnce     sync.Once
		first       error
		// progress has a cache line per caller, so counting costs each
		// caller a store to a line of its own.
		progress = make([]struct {
			n atomic.Uint64
			_ [56]byte
		}, callers)
	)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
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
				if err := op(ctx, c); err != nil {
					if context.Cause(ctx) == errStalled {
						err = fmt.Errorf("%w: %w", errStalled, err)
					}
					errOnce.Do(func() { first = err })
					return
				}
				progress[c].n.Add(1)
			}
		}()
	}
	finished := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var last uint64
		lastChange := time.Now()
		tick := time.NewTicker(stallLimit / 10)
		defer tick.Stop()
		for {
			select {
			case <-finished:
				return
			case now := <-tick.C:
				var sum uint64
				for i := range progress {
					sum += progress[i].n.Load()
				}
				if sum != last {
					last, lastChange = sum, now
				} else if now.Sub(lastChange) >= stallLimit {
					cancel(errStalled)
					return
				}
			}
		}
	}()
	ready.Wait()
	stop := func() {}
	if b, ok := tb.(*testing.B); ok {
		stop = timeSection(b)
	}
	close(start)
	done.Wait()
	stop()
	close(finished)
	<-watched
	return first
}

// timeSection resets b's timer and returns the function that stops it and
// reports, per op in between: the heap allocations as mallocs/op,
// unrounded (allocs/op rounds down, so one allocation every other op
// shows as 0), and the CPU time the process used, user and system
// (getrusage), as cpu-ns/op: every goroutine's, spinning ones included,
// which ns/op, a wall-clock figure, does not show.
func timeSection(b *testing.B) (stop func()) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.Mallocs
	cpu := benchkit.CPUTime()
	b.ResetTimer()
	return func() {
		b.StopTimer()
		cpuPerOp, cpuOK := benchkit.CPUPerOp(cpu, uint64(b.N))
		runtime.ReadMemStats(&m)
		b.ReportMetric(float64(m.Mallocs-before)/float64(b.N), "mallocs/op")
		if cpuOK {
			b.ReportMetric(cpuPerOp, "cpu-ns/op")
		}
	}
}

// postStats are doorbells and WRs counted over a measured section.
type postStats struct {
	calls, wrs uint64
	// runs counts the starts of the runtime's actor goroutines (each a
	// goroutine on a locked OS thread): what waking idle actors cost.
	runs uint64
}

func (s postStats) sub(o postStats) postStats {
	return postStats{calls: s.calls - o.calls, wrs: s.wrs - o.wrs, runs: s.runs - o.runs}
}

// report adds the metrics every variant reports: WRs per PostSend and
// operations per second.
func report(b *testing.B, s postStats) {
	if s.calls > 0 {
		b.ReportMetric(float64(s.wrs)/float64(s.calls), "wrs/post")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if s.runs > 0 {
		b.ReportMetric(float64(s.runs)/float64(b.N), "actor-runs/op")
	}
}
