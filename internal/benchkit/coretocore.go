package benchkit

import (
	goruntime "runtime"
	"sync/atomic"
	"time"
)

// CoreToCore is the round trip of one cache line between two OS threads:
// two goroutines, each locked to its thread, hand a counter back and forth,
// spinning, in batches of n round trips; the fastest of the batches
// counts, since a batch in which the Go scheduler or the OS took a
// thread away (another goroutine of a busy process) measures that
// instead. It is the floor under any latency that crosses cores, and it
// is not one figure on a virtual machine: where the host runs the two
// vCPUs changes it several times over from one run to the next, and a
// SEND/Recv round trip of the runtime, a dozen such transfers, moves with
// it. Benchmarks print it beside latencies they compare across runs, so
// that a ratio between two runs in different modes is seen for what it
// is. It returns 0 with fewer than 2 Ps, where the two could not spin at
// once.
func CoreToCore(n int) time.Duration {
	if goruntime.GOMAXPROCS(0) < 2 || n < 1 {
		return 0
	}
	const batches = 8
	var line atomic.Int64
	total := int64(batches * n)
	done := make(chan struct{})
	go func() {
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		for i := range total {
			for line.Load() != 2*i+1 {
			}
			line.Store(2*i + 2)
		}
		close(done)
	}()
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	best := time.Duration(-1)
	for b := range int64(batches) {
		start := time.Now()
		for i := b * int64(n); i < (b+1)*int64(n); i++ {
			line.Store(2*i + 1)
			for line.Load() != 2*i+2 {
			}
		}
		if took := time.Since(start); best < 0 || took < best {
			best = took
		}
	}
	<-done
	return best / time.Duration(n)
}
