package ring

import (
	"runtime"
	"sync"
	"testing"
	"time"

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
	w := NewWaker()
	dst := make([]msg, 4)
	v := msg{p: new(int)}
	allocs := testing.AllocsPerRun(1000, func() {
		for range 3 {
			r.TryPush(&v)
			w.Wake()
		}
		r.Peek().buf[0]++
		r.Pop()
		r.PopBatch(dst)
		_ = r.Len()
		w.PrepareSleep()
		w.Wake()
		w.Sleep(nil)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per push, pop and wake cycle, want 0", allocs)
	}
}

// msg64 is a 64-byte message that carries who sent it and in what order.
type msg64 struct {
	producer, seq uint32
	_             [56]byte
}

// Many producers, one consumer, a small ring that is often full: every
// value arrives once and in its producer's order. With "park" the consumer
// also sleeps on a Waker whenever the ring is empty, as the actor does.
func TestRingStress(t *testing.T) {
	const producers = 128
	perProducer := 2500
	if testing.Short() {
		perProducer = 100
	}
	for _, park := range []bool{false, true} {
		name := "spin"
		if park {
			name = "park"
		}
		t.Run(name, func(t *testing.T) {
			r := New[msg64](64)
			w := NewWaker()
			stop := make(chan struct{})
			deadline := time.AfterFunc(20*time.Second, func() { close(stop) })
			defer deadline.Stop()

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
						w.Wake()
					}
				})
			}

			next := make([]uint32, producers)
			dst := make([]msg64, 16)
			total, sleeps := 0, 0
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
				if n > 0 {
					continue
				}
				if !park {
					runtime.Gosched()
					continue
				}
				w.PrepareSleep()
				if r.Peek() != nil {
					w.CancelSleep()
					continue
				}
				sleeps++
				if !w.Sleep(stop) {
					t.Fatalf("consumer still asleep at the deadline with %d of %d values: lost wake-up",
						total, producers*perProducer)
				}
			}
			wg.Wait()
			if r.Peek() != nil || r.Len() != 0 {
				t.Fatalf("values left in the ring: Len %d", r.Len())
			}
			t.Logf("%d values, consumer slept %d times", total, sleeps)
		})
	}
}

// Push, then wait for the consumer to take the value, many times: each
// push lands somewhere on the consumer's way to sleep, which is where a lost
// wake-up would show. If a Wake were ever missed, the consumer would sleep
// on a value in the ring and the round would hit its deadline. The consumer
// waits a random while between the steps of the protocol, so that pushes
// land in each window: before PrepareSleep, between it and the second look,
// between that and Sleep, and during Sleep.
func TestWakerNoLostWakeup(t *testing.T) {
	rounds := 100000
	if testing.Short() {
		rounds = 10000
	}
	// A round where the consumer really parks costs a park and unpark of a
	// locked thread (tens of microseconds): cap the time as well.
	budget := time.Now().Add(1500 * time.Millisecond)
	r := New[int](4)
	w := NewWaker()
	var got atomic.Int64
	var sleeps, cancels atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // as the actor is
		defer runtime.UnlockOSThread()
		rnd := uint32(1)
		pause := func() {
			rnd ^= rnd << 13
			rnd ^= rnd >> 17
			rnd ^= rnd << 5
			switch n := rnd % 128; {
			case n < 64: // half the time no pause at all
				for range n {
					got.Load()
				}
			case n >= 120:
				// Yield now and then: on one P the producer runs only
				// then, and must land between the steps too.
				runtime.Gosched()
			}
		}
		for {
			for p := r.Peek(); p != nil; p = r.Peek() {
				got.Store(int64(*p))
				r.Pop()
			}
			pause()
			w.PrepareSleep()
			pause()
			if r.Peek() != nil {
				w.CancelSleep()
				cancels.Inc()
				continue
			}
			pause()
			sleeps.Inc()
			if !w.Sleep(stop) {
				return
			}
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()

	for i := 1; i <= rounds; i++ {
		v := i
		if !r.TryPush(&v) {
			t.Fatalf("round %d: ring full", i)
		}
		w.Wake()
		deadline := time.Now().Add(5 * time.Second)
		for spins := 0; got.Load() != int64(i); spins++ {
			if spins < 1000 {
				continue // busy: push again as soon as the value is taken
			}
			if spins%64 == 0 && time.Now().After(deadline) {
				t.Fatalf("round %d: the consumer did not take the value in 5s: lost wake-up", i)
			}
			runtime.Gosched()
		}
		if i%256 == 0 && time.Now().After(budget) {
			rounds = i
			break
		}
	}
	t.Logf("%d rounds: consumer slept %d times, cancelled %d, %d channel sends",
		rounds, sleeps.Load(), cancels.Load(), w.sends.Load())
	if sleeps.Load() == 0 || cancels.Load() == 0 {
		t.Error("the test did not exercise both the sleep and the cancel path")
	}
}

// While the consumer runs, Wake does no channel operation; while it
// sleeps, a burst of Wakes does one.
func TestWakerFastPath(t *testing.T) {
	w := NewWaker()
	for range 1000 {
		w.Wake()
	}
	if n := w.sends.Load(); n != 0 {
		t.Fatalf("Wake on a running consumer: %d channel sends, want 0", n)
	}

	w.PrepareSleep()
	w.CancelSleep()
	w.Wake()
	if n := w.sends.Load(); n != 0 {
		t.Fatalf("Wake after CancelSleep: %d channel sends, want 0", n)
	}

	w.PrepareSleep()
	for range 1000 {
		w.Wake()
	}
	if n := w.sends.Load(); n != 1 {
		t.Fatalf("1000 Wakes of a sleeping consumer: %d channel sends, want 1", n)
	}
	// The token sent before Sleep is kept: Sleep returns at once.
	sleepOrFail(t, w)
	w.Wake()
	if n := w.sends.Load(); n != 1 {
		t.Fatalf("Wake after the consumer woke: %d channel sends, want 1", n)
	}
}

// A stale token (a Wake that raced with CancelSleep) makes the next Sleep
// return at once, and does not leave producers on the slow path.
func TestWakerStaleToken(t *testing.T) {
	w := NewWaker()
	w.PrepareSleep()
	w.Wake() // the consumer's second look found work too
	w.CancelSleep()
	w.PrepareSleep()
	sleepOrFail(t, w)
	w.Wake()
	if n := w.sends.Load(); n != 1 {
		t.Fatalf("Wake after a spurious return: %d channel sends, want 1", n)
	}
}

func TestWakerSleepStop(t *testing.T) {
	w := NewWaker()
	stop := make(chan struct{})
	res := make(chan bool)
	go func() {
		w.PrepareSleep()
		res <- w.Sleep(stop)
	}()
	close(stop)
	if <-res {
		t.Fatal("Sleep reported a wake-up when stop was closed")
	}
	w.Wake()
	if n := w.sends.Load(); n != 0 {
		t.Fatalf("Wake after Sleep returned on stop: %d channel sends, want 0", n)
	}
}

// sleepOrFail calls w.Sleep and fails if it does not return at once.
func sleepOrFail(t *testing.T, w *Waker) {
	t.Helper()
	stop := make(chan struct{})
	timer := time.AfterFunc(5*time.Second, func() { close(stop) })
	defer timer.Stop()
	if !w.Sleep(stop) {
		t.Fatal("Sleep did not return: the token was lost")
	}
}

// TestRestartingWakerOneRunAtATime: a consumer that ends instead of
// sleeping (NewRestartingWaker, Leave) and is started again by the Wake
// that finds it gone, against several producers: no value is lost (every
// one is taken within 5 s), and never do two runs overlap.
func TestRestartingWakerOneRunAtATime(t *testing.T) {
	const producers, perProducer = 4, 20000
	r := New[int](64)
	var w *Waker
	var running, overlaps, runs, leaves, stays atomic.Int64
	var taken atomic.Int64
	run := func() {
		runs.Inc()
		if running.Inc() != 1 {
			overlaps.Inc()
		}
		for {
			for p := r.Peek(); p != nil; p = r.Peek() {
				r.Pop()
				taken.Inc()
			}
			w.PrepareSleep()
			if r.Peek() != nil {
				w.CancelSleep()
				continue
			}
			running.Dec() // before Leave: the next run may start at once
			if w.Leave() {
				leaves.Inc()
				return
			}
			if running.Inc() != 1 {
				overlaps.Inc()
			}
			stays.Inc()
		}
	}
	w = NewRestartingWaker(func() { go run() })
	w.gone.Store(true) // as if a run had ended: the first Wake starts one
	w.sleeping.Store(true)
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for i := range perProducer {
				for v := i; !r.TryPush(&v); {
					runtime.Gosched()
				}
				w.Wake()
				if i%8 == 0 {
					time.Sleep(time.Microsecond) // let the consumer run dry and end
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for taken.Load() != producers*perProducer {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d values taken after 5 s: a lost wake-up", taken.Load(), producers*perProducer)
		}
		time.Sleep(time.Millisecond)
	}
	if overlaps.Load() != 0 {
		t.Fatalf("%d runs overlapped another", overlaps.Load())
	}
	t.Logf("%d runs, %d ended, %d went on after a Wake in Leave", runs.Load(), leaves.Load(), stays.Load())
	if runs.Load() < 2 {
		t.Error("the consumer never ended and restarted: the test proves nothing")
	}
}
