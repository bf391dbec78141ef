package ring

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// payload is the size of a small inbox message: one cache line.
type payload struct {
	seq uint64
	_   [56]byte
}

const (
	benchCapacity = 1024 // ring and channel capacity
	benchBatch    = 64   // most messages the consumer takes at once
)

// BenchmarkInbox compares ways to get messages from many producer goroutines
// to one consumer that drains in batches: the Ring, a
// buffered channel and a mutex-guarded slice swapped out by the consumer.
// One op is one message, from push to consumption. Producers retry with a
// yield when the ring is full; the channel blocks them; the slice is
// unbounded. The consumer is not locked to its thread here: this compares
// the queues, not the thread policy (see the actor's own benchmarks).
//
//	go test -run '^$' -bench Inbox -benchtime 200000x ./internal/ring/
func BenchmarkInbox(b *testing.B) {
	impls := []struct {
		name string
		run  func(b *testing.B, producers int)
	}{
		{"ring", benchRing},
		{"chan", benchChan},
		{"mutex", benchMutex},
	}
	for _, producers := range []int{1, 16, 128} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/producers=%d", impl.name, producers), func(b *testing.B) {
				b.ReportAllocs()
				impl.run(b, producers)
			})
		}
	}
}

// produce runs n messages split over producers goroutines with push and
// returns when all are pushed.
func produce(n, producers int, push func(*payload)) {
	var wg sync.WaitGroup
	for p := range producers {
		share := n / producers
		if p < n%producers {
			share++
		}
		wg.Go(func() {
			var v payload
			for i := range share {
				v.seq = uint64(i)
				push(&v)
			}
		})
	}
	wg.Wait()
}

// sink keeps the consumers' reads from being optimized away.
var sink uint64

func benchRing(b *testing.B, producers int) {
	r := New[payload](benchCapacity)
	done := make(chan uint64)
	b.ResetTimer()
	go func() {
		var buf [benchBatch]payload
		var sum uint64
		for got := 0; got < b.N; {
			n := r.PopBatch(buf[:])
			for i := range buf[:n] {
				sum += buf[i].seq
			}
			got += n
			if n == 0 {
				runtime.Gosched() // an empty ring: let the producers run
			}
		}
		done <- sum
	}()
	produce(b.N, producers, func(v *payload) {
		for !r.TryPush(v) {
			runtime.Gosched()
		}
	})
	sink += <-done
}

func benchChan(b *testing.B, producers int) {
	ch := make(chan payload, benchCapacity)
	done := make(chan uint64)
	b.ResetTimer()
	go func() {
		var sum uint64
		for got := 0; got < b.N; {
			v := <-ch // block for the first of a batch, then take what is there
			sum += v.seq
			got++
		batch:
			for range benchBatch - 1 {
				select {
				case v = <-ch:
					sum += v.seq
					got++
				default:
					break batch
				}
			}
		}
		done <- sum
	}()
	produce(b.N, producers, func(v *payload) { ch <- *v })
	sink += <-done
}

func benchMutex(b *testing.B, producers int) {
	var mu sync.Mutex
	q := make([]payload, 0, benchCapacity)
	done := make(chan uint64)
	b.ResetTimer()
	go func() {
		local := make([]payload, 0, benchCapacity)
		var sum uint64
		for got := 0; got < b.N; {
			mu.Lock()
			local, q = q, local[:0]
			mu.Unlock()
			if len(local) == 0 {
				runtime.Gosched()
				continue
			}
			for i := range local {
				sum += local[i].seq
			}
			got += len(local)
		}
		done <- sum
	}()
	produce(b.N, producers, func(v *payload) {
		mu.Lock()
		q = append(q, *v)
		mu.Unlock()
	})
	sink += <-done
}
