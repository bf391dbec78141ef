package ring

import (
	"runtime"
	"sync"
	"testing"
)

// A growing ring starts with a few slots, doubles them when full and
// holds no more than its capacity, in order, however far the consumer
// lags behind the growth.
func TestGrowingRingBoundAndOrder(t *testing.T) {
	r := NewGrowing[int](2, 16)
	if got := len(r.cur.Load().slots); got != 2 {
		t.Fatalf("a new growing ring has %d slots, want 2", got)
	}
	pushed := 0
	for {
		v := pushed
		if !r.TryPush(&v) {
			break
		}
		pushed++
		if pushed > 100 {
			t.Fatal("the ring never filled")
		}
	}
	if pushed != 16 || r.Len() != 16 || !r.Full() {
		t.Fatalf("the ring took %d values (Len %d, Full %v) before it was full, want 16", pushed, r.Len(), r.Full())
	}
	if got := len(r.cur.Load().slots); got != 16 {
		t.Fatalf("the full ring has %d slots in its newest segment, want 16", got)
	}
	// Take one, push all that fits, many times over: the values come
	// out in order, and the ring never holds more than 16, not even while
	// the consumer is still in the segments it grew out of.
	next := 0
	for next < 100 {
		if p := r.Peek(); p == nil || *p != next {
			t.Fatalf("Peek: got %v, want %d", p, next)
		}
		r.Pop()
		next++
		for v := pushed; r.TryPush(&v); v = pushed {
			pushed++
		}
		if r.Len() > 16 {
			t.Fatalf("Len %d after taking %d, want at most 16", r.Len(), next)
		}
	}
	for p := r.Peek(); p != nil; p = r.Peek() {
		if *p != next {
			t.Fatalf("got %d, want %d", *p, next)
		}
		next++
		r.Pop()
	}
	if next != pushed {
		t.Fatalf("took %d values, pushed %d", next, pushed)
	}
	if r.Full() {
		t.Fatal("an empty ring reports full")
	}
	// Grown, it stays at its size: 16 values fit without another segment.
	seg := r.cur.Load()
	for i := range 16 {
		if !r.TryPush(&i) {
			t.Fatalf("push %d of 16 into the grown ring failed", i)
		}
	}
	if r.cur.Load() != seg {
		t.Fatal("the grown ring made another segment")
	}
}

// Many producers, one consumer, a ring that starts at 2 slots and grows to
// 64 under them: every value arrives once and in its producer's order, and
// Len never exceeds Cap.
func TestGrowingRingStress(t *testing.T) {
	const producers = 64
	perProducer := 2000
	if testing.Short() {
		perProducer = 100
	}
	for round := range 20 {
		r := NewGrowing[msg64](2, 64)
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for s := range perProducer / 20 {
					m := msg64{producer: uint32(p), seq: uint32(s)}
					for !r.TryPush(&m) {
						runtime.Gosched()
					}
				}
			})
		}
		next := make([]uint32, producers)
		dst := make([]msg64, 8)
		for total := 0; total < producers*(perProducer/20); {
			if l := r.Len(); l > r.Cap() {
				t.Fatalf("round %d: Len %d above Cap %d", round, l, r.Cap())
			}
			n := 0
			if total%2 == 0 {
				n = r.PopBatch(dst)
			} else if m := r.Peek(); m != nil {
				dst[0] = *m
				r.Pop()
				n = 1
			}
			for _, m := range dst[:n] {
				if m.seq != next[m.producer] {
					t.Fatalf("round %d: producer %d seq %d, want %d", round, m.producer, m.seq, next[m.producer])
				}
				next[m.producer]++
			}
			total += n
			if n == 0 {
				runtime.Gosched()
			}
		}
		wg.Wait()
		if r.Peek() != nil || r.Len() != 0 {
			t.Fatalf("round %d: values left: Len %d", round, r.Len())
		}
	}
}

// PeekAt and Reached see values across the boundary of a segment the ring
// grew out of.
func TestGrowingRingPeekAtAcrossSegments(t *testing.T) {
	r := NewGrowing[int](2, 8)
	for i := range 5 {
		if !r.TryPush(&i) {
			t.Fatalf("push %d failed", i)
		}
	}
	for i := range 5 {
		if p := r.PeekAt(i); p == nil || *p != i {
			t.Fatalf("PeekAt(%d) = %v, want %d", i, p, i)
		}
	}
	if r.PeekAt(5) != nil || !r.Reached(5) || r.Reached(6) {
		t.Fatal("PeekAt or Reached past the last value")
	}
}
