package runtime_test

import (
	"context"
	"errors"
	"math/rand/v2"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// soakOps is the soak's operation count: 1,000,000, fewer with -short.
func soakOps() int64 {
	if testing.Short() {
		return 100_000
	}
	return 1_000_000
}

// TestSoakCancelAndRestart: 64 goroutines issue 1,000,000 operations
// (writes, reads, sends, fetch-adds) on one connection, a tenth of them with
// a context cancelled at a random moment, while the peer runtime is closed
// and started anew every 100,000 operations. Every future resolves exactly
// once (Wait never runs out of its deadline, a second Wait finds it
// consumed, and every actor's taken submissions equal its resolved ones),
// with success, context.Canceled or the end of its connection; and the
// heap stays flat (HeapInuse logged every 100,000 operations).
func TestSoakCancelAndRestart(t *testing.T) {
	const goroutines = 64
	total := soakOps()
	epochOps := total / 10 // ten peers, under -short too
	cliRT, err := runtime.New(runtime.WithMemoryLimit(16 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer cliRT.Close(context.Background())
	local := alloc(t, cliRT, 64*goroutines)

	type peer struct {
		rt     *runtime.Runtime
		ep     *runtime.Endpoint // the client's end
		remote runtime.RemoteRef
		done   chan struct{} // the server's receive loop ended
	}
	start := func() *peer {
		rt, err := runtime.New(runtime.WithMemoryLimit(16 << 20))
		if err != nil {
			t.Fatal(err)
		}
		mem := alloc(t, rt, 64*goroutines)
		cli, srv := connectRuntimes(t, cliRT, rt)
		p := &peer{rt: rt, ep: cli, remote: refOf(t, mem), done: make(chan struct{})}
		go func() {
			defer close(p.done)
			for {
				m, err := srv.Recv(context.Background())
				if err != nil {
					return
				}
				m.Release()
			}
		}()
		return p
	}

	var (
		cur      atomic.Pointer[peer]
		issued   atomic.Int64
		ok       atomic.Int64
		canceled atomic.Int64
		ended    atomic.Int64
	)
	cur.Store(start())
	// checkResolved: a closed endpoint's actor resolved every submission
	// it took. (Endpoints are not kept: they would hold their memory.)
	checkResolved := func(ep *runtime.Endpoint) {
		st := ep.Actor().Stats()
		resolved := st.Ops.ResolvedByActor.Load() + st.Ops.ResolvedByPoller.Load()
		if taken := st.Ops.Taken.Load(); taken != resolved {
			t.Errorf("an endpoint's actor took %d submissions and resolved %d", taken, resolved)
		}
	}

	// A goroutine whose operation found the connection over waits for the
	// next one.
	var mu sync.Mutex
	restarted := sync.NewCond(&mu)

	var heap []uint64
	sampleHeap := func() {
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		heap = append(heap, ms.HeapInuse)
		t.Logf("after %7d operations: HeapInuse %6.1f MiB, goroutines %d", issued.Load(), float64(ms.HeapInuse)/(1<<20), goruntime.NumGoroutine())
	}
	sampleHeap()

	var wg sync.WaitGroup
	failures := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			buf := local.Slice(64*g, 64)
			for {
				n := issued.Add(1)
				if n > total {
					return
				}
				p := cur.Load()
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				cancelling := r.IntN(10) == 0
				if cancelling {
					ctx, cancel = context.WithCancel(context.Background())
				}
				remote := p.remote.At(64 * g)
				var f runtime.Future
				switch r.IntN(4) {
				case 0:
					f = p.ep.Write(ctx, buf, remote)
				case 1:
					f = p.ep.Read(ctx, buf, remote)
				case 2:
					f = p.ep.Send(ctx, local.Slice(64*g, 16))
				default:
					f = p.ep.FetchAdd(ctx, remote, 1)
				}
				if cancelling {
					if r.IntN(2) == 0 {
						goruntime.Gosched()
					}
					cancel()
				}
				wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := f.Wait(wctx)
				wcancel()
				cancel()
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					failures <- errors.New("a future did not resolve within 30 s")
					return
				case errors.Is(err, context.Canceled):
					canceled.Add(1)
				case errors.Is(err, runtime.ErrPeerClosed), errors.Is(err, runtime.ErrClosed),
					errors.Is(err, verbs.ErrFlushed), errors.Is(err, runtime.ErrConnFailed):
					ended.Add(1)
					// Wait for the restart that replaces p.
					mu.Lock()
					for cur.Load() == p {
						restarted.Wait()
					}
					mu.Unlock()
				default:
					failures <- err
					return
				}
				if n%997 == 0 {
					if _, err := f.Wait(context.Background()); !errors.Is(err, runtime.ErrReleased) {
						failures <- errors.New("a consumed future answered a second Wait: " + errString(err))
						return
					}
				}
			}
		}()
	}

	// The restarts: every epochOps operations, the peer runtime closes (its
	// endpoint says goodbye) and a new one takes its place.
	for next := int64(epochOps); next < total; next += epochOps {
		last, stalled := issued.Load(), time.Now()
		for issued.Load() < next {
			select {
			case err := <-failures:
				t.Fatal(err)
			case <-time.After(time.Millisecond):
			}
			if n := issued.Load(); n != last {
				last, stalled = n, time.Now()
			} else if time.Since(stalled) > 30*time.Second {
				t.Fatalf("no operation issued for 30 s at %d: the connection ended without a restart?", n)
			}
		}
		old := cur.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := old.rt.Close(ctx); err != nil {
			t.Errorf("closing the peer runtime: %v", err)
		}
		cancel()
		<-old.done
		p := start()
		mu.Lock()
		cur.Store(p)
		restarted.Broadcast()
		mu.Unlock()
		ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
		if err := old.ep.Close(ctx); err != nil {
			t.Errorf("closing the client's old endpoint: %v", err)
		}
		cancel()
		checkResolved(old.ep)
		sampleHeap()
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	sampleHeap()
	last := cur.Load()
	last.rt.Close(context.Background())
	<-last.done
	last.ep.Close(context.Background())
	checkResolved(last.ep)

	if got := ok.Load() + canceled.Load() + ended.Load(); got != total {
		t.Errorf("%d operations resolved, %d issued", got, total)
	}
	if canceled.Load() == 0 || ended.Load() == 0 {
		t.Errorf("%d cancelled and %d ended by a restart: the soak did not exercise both", canceled.Load(), ended.Load())
	}
	// Flat: the last sample within 1.5x (plus 4 MiB of noise) of the first
	// one taken under load.
	if len(heap) > 2 && float64(heap[len(heap)-1]) > 1.5*float64(heap[1])+4<<20 {
		t.Errorf("HeapInuse grew from %d to %d bytes over the soak", heap[1], heap[len(heap)-1])
	}
	t.Logf("%d operations: %d succeeded, %d cancelled, %d ended by a peer restart", total, ok.Load(), canceled.Load(), ended.Load())
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
