package bench

import (
	"context"
	"testing"
	"time"

	vrt "github.com/verbsrt/verbsrt/runtime"
)

// BenchmarkWakeup measures the operation that finds its endpoint idle: one
// caller writes 64 bytes and waits, then stays away for idleGap, past the
// actor's and the poller's spin windows, so each write wakes both. One op is
// one such write; wake-ns/op is its latency alone (the gap excluded).
// An idle actor's goroutine ends and the write starts a new one.
func BenchmarkWakeup(b *testing.B) {
	const idleGap = 500 * time.Microsecond
	for _, mode := range []struct {
		name string
		opts []vrt.Option
	}{{"exit", nil}} {
		b.Run(mode.name, func(b *testing.B) {
			v := newViaRuntime(b, 1, append(runtimeOpts(), mode.opts...)...)
			ctx := context.Background()
			var busy time.Duration
			for b.Loop() {
				time.Sleep(idleGap)
				t0 := time.Now()
				if _, err := v.cli.Write(ctx, v.locals[0], v.remotes[0]).Wait(ctx); err != nil {
					b.Fatal(err)
				}
				busy += time.Since(t0)
			}
			b.ReportMetric(float64(busy.Nanoseconds())/float64(b.N), "wake-ns/op")
		})
	}
}
