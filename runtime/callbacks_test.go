package runtime_test

import (
	"runtime"
	"sync/atomic"
	"testing"

	vrt "github.com/verbsrt/verbsrt/runtime"
)

// TestThenCallbacksBounded: 1,000 Then callbacks that block, on a worker
// pool of 2, run on at most 3 goroutines (the pool and its overflow), not
// on a goroutine each, and all run once they are let go.
func TestThenCallbacksBounded(t *testing.T) {
	rt, cli, _ := pair(t, vrt.WithTuning(vrt.Tuning{CallbackWorkers: 2}))
	ctx := ctxT(t)
	buf := alloc(t, rt, 64)
	const n = 1000
	gate := make(chan struct{})
	var ran, started atomic.Int32
	done := make(chan struct{})
	base := runtime.NumGoroutine()
	for range n {
		cli.Write(ctx, buf.Local(), refOf(t, buf)).Then(func(_ vrt.Completion, err error) {
			if err != nil {
				t.Error(err)
			}
			started.Add(1)
			<-gate
			if ran.Add(1) == n {
				close(done)
			}
		})
	}
	// Every write completes; the callbacks pile up behind the gate.
	for started.Load() < 3 {
		runtime.Gosched()
	}
	if extra := runtime.NumGoroutine() - base; extra > 3+2 { // +2: ants' purge and ticker goroutines
		t.Errorf("%d more goroutines with %d blocked callbacks on a pool of 2, want at most 5", extra, n)
	}
	close(gate)
	<-done
	if got := started.Load(); got != n {
		t.Errorf("%d callbacks ran, want %d", got, n)
	}
}
