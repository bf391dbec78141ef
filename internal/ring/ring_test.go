package ring

import (
	"runtime"
	"sync"
	"testing"

	"go.uber.org/atomic"
)

func TestNewRingCapacity(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{1, 2}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {1000, 1024}, {1024, 1024}, {1025, 2048},
	} {
		r := New[int](tc.in)
		if r.Cap() != tc.want || r.Len() != 0 {
			t.Errorf("New(%d): Cap %d Len %d, want Cap %d Len 0", tc.in, r.Cap(), r.Len(), tc.want)
		}
	}
	for _, bad := range []int{0, -1, MaxCapacity + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", bad)
				}
			}()
			New[int](bad)
		}()
	}
}

func TestRingFIFOAndFull(t *testing.T) {
	r := New[int](8)
	if r.Peek() != nil {
		t.Fatal("Peek on an empty ring returned a value")
	}
	for i := range 8 {
		v := i
		if !r.TryPush(&v) {
			t.Fatalf("TryPush %d of 8 reported full", i)
		}
	}
	v := 99
	if r.TryPush(&v) {
		t.Fatal("TryPush on a full ring succeeded")
	}
	if r.Len() != 8 {
		t.Fatalf("Len %d, want 8", r.Len())
	}
	for i := range 8 {
		p := r.Peek()
		if p == nil || *p != i {
			t.Fatalf("Peek %d: got %v", i, p)
		}
		r.Pop()
		if i == 0 && !r.TryPush(&v) {
			t.Fatal("TryPush after one Pop reported full")
		}
	}
	if p := r.Peek(); p == nil || *p != 99 {
		t.Fatalf("Peek after the wrap: got %v, want 99", p)
	}
	r.Pop()
	if r.Peek() != nil || r.Len() != 0 {
		t.Fatalf("ring not empty: Len %d", r.Len())
	}
}

func TestRingPeekModifiesInPlace(t *testing.T) {
	r := New[[2]int](2)
	v := [2]int{1, 2}
	r.TryPush(&v)
	r.Peek()[1] = 7
	if got := *r.Peek(); got != [2]int{1, 7} {
		t.Fatalf("Peek after a write through Peek: %v", got)
	}
	if v != [2]int{1, 2} {
		t.Fatal("TryPush kept a reference to the caller's value")
	}
}

func TestRingPopEmptyPanics(t *testing.T) {
	r := New[int](2)
	defer func() {
		if recover() == nil {
			t.Fatal("Pop on an empty ring did not panic")
		}
	}()
	r.Pop()
}

// The ring goes around many times with every fill level and both ways of
// consuming; sequence numbers reach many laps past the capacity.
func TestRingWrapAround(t *testing.T) {
	r := New[uint64](4)
	var next, want uint64
	dst := make([]uint64, 3)
	for round := range 20000 {
		fill := 1 + round%r.Cap()
		for range fill {
			v := next
			if !r.TryPush(&v) {
				t.Fatalf("round %d: TryPush reported full with Len %d", round, r.Len())
			}
			next++
		}
		if round%2 == 0 {
			for p := r.Peek(); p != nil; p = r.Peek() {
				if *p != want {
					t.Fatalf("round %d: Peek %d, want %d", round, *p, want)
				}
				r.Pop()
				want++
			}
		} else {
			for n := r.PopBatch(dst); n > 0; n = r.PopBatch(dst) {
				for _, v := range dst[:n] {
					if v != want {
						t.Fatalf("round %d: PopBatch %d, want %d", round, v, want)
					}
					want++
				}
			}
		}
		if want != next {
			t.Fatalf("round %d: consumed up to %d, pushed %d", round, want, next)
		}
	}
}

func TestRingPopBatchPartial(t *testing.T) {
	r := New[int](8)
	for i := range 5 {
		r.TryPush(&i)
	}
	dst := make([]int, 8)
	for _, step := range []struct {
		size int
		want []int
	}{
		{0, nil},
		{3, []int{0, 1, 2}},
		{8, []int{3, 4}},
		{8, nil},
	} {
		n := r.PopBatch(dst[:step.size])
		if n != len(step.want) {
			t.Fatalf("PopBatch(len %d) = %d, want %d", step.size, n, len(step.want))
		}
		for i, v := range step.want {
			if dst[i] != v {
				t.Fatalf("PopBatch(len %d)[%d] = %d, want %d", step.size, i, dst[i], v)
			}
		}
	}
}

// A producer that claimed a slot but has not written it yet stops the
// consumer there, even with later slots published.
func TestRingStopsAtClaimedSlot(t *testing.T) {
	r := New[int](4)
	seg := r.first.Load()
	// Claim position 0 the way TryPush does, and stall before writing.
	if !seg.tail.CompareAndSwap(0, 1) {
		t.Fatal("claim failed")
	}
	one := 1
	if !r.TryPush(&one) {
		t.Fatal("TryPush behind a claimed slot failed")
	}
	dst := make([]int, 4)
	if r.Peek() != nil || r.PopBatch(dst) != 0 {
		t.Fatal("the consumer read past a claimed, unwritten slot")
	}
	if r.Len() != 2 {
		t.Fatalf("Len %d, want 2 (claimed slots count)", r.Len())
	}
	// The stalled producer finishes.
	seg.slots[0].val = 0
	seg.slots[0].seq.Store(1)
	if n := r.PopBatch(dst); n != 2 || dst[0] != 0 || dst[1] != 1 {
		t.Fatalf("PopBatch after publishing: %d %v", n, dst[:n])
	}
}

// Released slots are zeroed, so the ring keeps nothing alive for the GC.
func TestRingReleaseZeroesSlot(t *testing.T) {
	type msg struct {
		p *int
		n int
	}
	r := New[msg](4)
	push := func(n int) {
		v := msg{p: new(int), n: n}
		if !r.TryPush(&v) {
			t.Fatal("TryPush failed")
		}
	}
	released := func(pos int) bool {
		seg := r.first.Load()
		return seg.slots[pos&int(seg.mask)].val == msg{}
	}

	push(0)
	push(1)
	push(2)
	if p := r.Peek(); p == nil || p.p == nil {
		t.Fatal("Peek did not return the pushed value")
	}
	r.Pop()
	if !released(0) {
		t.Error("Pop left the value in its slot")
	}
	dst := make([]msg, 4)
	if n := r.PopBatch(dst); n != 2 || dst[0].p == nil || dst[1].n != 2 {
		t.Fatalf("PopBatch: %d %+v", n, dst[:n])
	}
	if !released(1) || !released(2) {
		t.Error("PopBatch left values in their slots")
	}
}

// The steady-state paths allocate nothing, whatever T holds.
func TestRingNoAllocs(t *testing.T) {
	type msg struct {
		p   *int
		buf [48]byte
	}
	r := New[msg](8)
	dst := make([]msg, 4)
	v := msg{p: new(int)}
	allocs := testing.AllocsPerRun(1000, func() {
		for range 3 {
			r.TryPush(&v)
		}
		r.Peek().buf[0]++
		r.Pop()
		r.PopBatch(dst)
		_ = r.Len()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per push and pop cycle, want 0", allocs)
	}
}

// msg64 is a 64-byte message that carries who sent it and in what order.
type msg64 struct {
	producer, seq uint32
	_             [56]byte
}

// Many producers, one consumer, a small ring that is often full: every
// value arrives once and in its producer's order.
func TestRingStress(t *testing.T) {
	const producers = 128
	perProducer := 2500
	if testing.Short() {
		perProducer = 100
	}
	r := New[msg64](64)

	var wg sync.WaitGroup
	var quit atomic.Bool // set when the test fails, so producers stop retrying
	defer func() {
		quit.Store(true)
		wg.Wait()
	}()
	for p := range producers {
		wg.Go(func() {
			for s := range perProducer {
				m := msg64{producer: uint32(p), seq: uint32(s)}
				for !r.TryPush(&m) {
					if quit.Load() {
						return
					}
					runtime.Gosched()
				}
			}
		})
	}

	next := make([]uint32, producers)
	dst := make([]msg64, 16)
	total := 0
	check := func(m *msg64) {
		if m.producer >= producers || m.seq != next[m.producer] {
			t.Fatalf("got producer %d seq %d, want seq %d", m.producer, m.seq, next[m.producer])
		}
		next[m.producer]++
		total++
	}
	for total < producers*perProducer {
		if l := r.Len(); l < 0 || l > r.Cap() {
			t.Fatalf("Len %d outside [0, %d]", l, r.Cap())
		}
		// Alternate the two ways of consuming.
		n := 0
		if total%2 == 0 {
			n = r.PopBatch(dst)
			for i := range dst[:n] {
				check(&dst[i])
			}
		} else if m := r.Peek(); m != nil {
			check(m)
			r.Pop()
			n = 1
		}
		if n == 0 {
			runtime.Gosched()
		}
	}
	wg.Wait()
	if r.Peek() != nil || r.Len() != 0 {
		t.Fatalf("values left in the ring: Len %d", r.Len())
	}
}
