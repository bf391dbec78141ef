package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	vrt "github.com/verbsrt/verbsrt/runtime"
)

// activePairCounts are the numbers of pairs BenchmarkActivePairs runs: one,
// and the many connections of a storage server, all busy at once.
var activePairCounts = []int{1, 10, 100, 1000}

// BenchmarkActivePairs measures many connections busy at once: N endpoint
// pairs of one runtime (default options), each ping-ponging 64-byte
// messages as BenchmarkPingPong does (a client goroutine Sends, waits for
// the future and Recvs the reply; an echo goroutine on the other end Recvs
// and Sends it back), all N at the same time. One op is one round trip of
// any pair, so ops/s is the aggregate rate and cpu-ns/op the process's CPU
// per round trip; p50-ns and p99-ns are the round trips' latencies, each
// timed by its client; runs/op, parked/op and sleeps/op the hand-offs
// between goroutines a round trip took. A runtime that scales keeps ops/s
// and cpu-ns/op from pairs=1 to pairs=1000.
func BenchmarkActivePairs(b *testing.B) {
	for _, n := range activePairCounts {
		b.Run(fmt.Sprintf("pairs=%d", n), func(b *testing.B) {
			a := newActivePairs(b, n)
			b.ReportAllocs()
			if err := a.run(b, b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// activePairs are n ping-pong pairs of one runtime.
type activePairs struct {
	rt    *vrt.Runtime
	pairs []*pingPongEnd
}

// pingPongEnd is a pair's client side (its endpoint and request buffer)
// and the round-trip times it measured.
type pingPongEnd struct {
	pingPong
	ops   int // round trips to make
	times []time.Duration
}

func newActivePairs(tb testing.TB, n int) *activePairs {
	tb.Helper()
	rt := softRuntime(tb)
	ctx, cancel := context.WithCancel(context.Background())
	var echoes sync.WaitGroup
	tb.Cleanup(func() {
		cancel() // stops the echoes before their endpoints close
		echoes.Wait()
	})
	bufs, err := rt.Alloc(2 * 64 * n)
	if err != nil {
		tb.Fatal(err)
	}
	a := &activePairs{rt: rt}
	for i := range n {
		cli, srv := connectPair(tb, rt)
		reply := bufs.Slice((2*i+1)*64, 64)
		echoes.Add(1)
		go func() {
			defer echoes.Done()
			echo(ctx, srv, reply, nil)
		}()
		a.pairs = append(a.pairs, &pingPongEnd{pingPong: pingPong{rt: rt, cli: cli, msg: bufs.Slice(2*i*64, 64)}})
	}
	return a
}

// run does ops round trips spread over the pairs, all at once, and reports
// the aggregate rate, the CPU per round trip, the latencies and the
// hand-offs.
func (a *activePairs) run(b *testing.B, ops int) error {
	before := a.rt.Stats()
	all, err := a.roundTrips(ops, func() func() { return timeSection(b) })
	if err != nil {
		return err
	}
	after := a.rt.Stats()
	b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "rt/s")
	b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "p99-ns")
	// What the round trips cost in hand-offs: actor goroutines started,
	// waits that parked, poller sleeps on a completion channel.
	b.ReportMetric(float64(after.ActorRuns-before.ActorRuns)/float64(ops), "runs/op")
	b.ReportMetric(float64(after.WaitsParked-before.WaitsParked)/float64(ops), "parked/op")
	b.ReportMetric(float64(after.Sleeps-before.Sleeps)/float64(ops), "sleeps/op")
	return nil
}

// roundTrips does ops round trips spread over the pairs, every pair's
// client at once, and returns their times, sorted. measure starts the
// measured section once every client is ready and returns what ends it.
func (a *activePairs) roundTrips(ops int, measure func() (stop func())) ([]time.Duration, error) {
	ctx := context.Background()
	for i, p := range a.pairs {
		p.times = make([]time.Duration, 0, ops/len(a.pairs)+1)
		p.ops = ops / len(a.pairs)
		if i < ops%len(a.pairs) {
			p.ops++
		}
	}
	errs := make(chan error, len(a.pairs))
	start := make(chan struct{})
	var done sync.WaitGroup
	for _, p := range a.pairs {
		done.Add(1)
		go func() {
			defer done.Done()
			<-start
			for range p.ops {
				t0 := time.Now()
				if err := p.roundTrip(ctx); err != nil {
					errs <- err
					return
				}
				p.times = append(p.times, time.Since(t0))
			}
		}()
	}
	stop := measure()
	close(start)
	done.Wait()
	stop()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	var all []time.Duration
	for _, p := range a.pairs {
		all = append(all, p.times...)
	}
	slices.Sort(all)
	return all, nil
}

// TestActivePairs runs BenchmarkActivePairs' round trips briefly: every
// pair's client makes its share, each reply comes back.
func TestActivePairs(t *testing.T) {
	const pairs, ops = 10, 205
	a := newActivePairs(t, pairs)
	all, err := a.roundTrips(ops, func() func() { return func() {} })
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != ops {
		t.Fatalf("%d round trips, want %d", len(all), ops)
	}
	for _, p := range a.pairs {
		if len(p.times) != ops/pairs && len(p.times) != ops/pairs+1 {
			t.Errorf("a pair made %d round trips, want %d or %d", len(p.times), ops/pairs, ops/pairs+1)
		}
	}
}
