package runtime_test

import (
	goruntime "runtime"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
)

// heapInuse returns the Go heap in use after a collection.
func heapInuse() uint64 {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestIdleEndpointHeap: an idle endpoint, default options, holds at most
// 64 KiB of Go heap, whether it was never used or has carried a WRITE and
// a SEND: its queues and rings have room for what it held, not for all it
// may hold (a send queue and an inbox allocated at their maximum would
// take ten times that). After a burst of 64 operations an endpoint keeps
// room for 64; that figure is logged.
func TestIdleEndpointHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("connects 500 endpoints")
	}
	const pairs = 250
	rt := newRuntime(t)
	ctx := ctxT(t)
	src := alloc(t, rt, 64*64)
	dst := refOf(t, alloc(t, rt, 64*64))
	// One pair first, so that what the runtime makes once is not counted.
	connect(t, rt)
	settle := func() { time.Sleep(20 * time.Millisecond) } // past every spin window
	settle()
	base := heapInuse()
	eps := make([]*runtime.Endpoint, 0, 2*pairs)
	for range pairs {
		cli, srv := connect(t, rt)
		eps = append(eps, cli, srv)
	}
	settle()
	perEndpoint := func() float64 { return float64(heapInuse()-base) / float64(len(eps)) / 1024 }
	never := perEndpoint()

	for i := 0; i < len(eps); i += 2 {
		if _, err := eps[i].Write(ctx, src.Slice(0, 64), dst).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		sendAndRelease(t, ctx, eps[i], eps[i+1], src.Slice(0, 64))
	}
	settle()
	once := perEndpoint()

	for i := 0; i < len(eps); i += 2 {
		fs := make([]runtime.Future, 64)
		for k := range fs {
			fs[k] = eps[i].Write(ctx, src.Slice(64*k, 64), dst.At(64*k))
		}
		for _, f := range fs {
			if _, err := f.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle()
	burst := perEndpoint()
	t.Logf("Go heap per idle endpoint (%d endpoints): %.1f KiB never used, %.1f KiB after a WRITE and a SEND, %.1f KiB after a burst of 64 WRITEs on one end of each pair",
		len(eps), never, once, burst)
	if never > 64 || once > 64 {
		t.Errorf("Go heap per idle endpoint: %.1f KiB never used, %.1f KiB used once; want at most 64", never, once)
	}
	goruntime.KeepAlive(eps)
}
