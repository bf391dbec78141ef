package qpactor

import (
	"math/bits"

	"go.uber.org/atomic"
)

// MaxRingCapacity is the largest capacity NewRing accepts. A bigger inbox
// would only hide a consumer that cannot keep up.
const MaxRingCapacity = 1 << 30

// cacheLine is the size the hot indices are padded to. It is what
// golang.org/x/sys/cpu.CacheLinePad uses on amd64; that module is not a
// dependency of verbsrt and a constant does not earn it a place.
const cacheLine = 64

// Ring is a bounded, lock-free multi-producer single-consumer queue of T,
// the inbox of a QP actor: many caller goroutines push, the one actor
// goroutine drains. It is Dmitry Vyukov's bounded queue with a single
// consumer: every slot carries a sequence number that says whose turn it is.
//
// Slots hold values, not pointers, and are allocated once by NewRing:
// pushing and popping allocate nothing, take no lock and send on no channel.
// The ring never blocks or waits; parking an idle consumer is Waker's job.
//
// A producer claims position pos by a compare-and-swap of tail from pos to
// pos+1, copies its value into slot pos&mask, then publishes the slot by
// storing seq = pos+1. The consumer at head reads slot head&mask only once
// its seq is head+1, and releases it with seq = head+cap, which is the
// position that slot has on the next lap. So for a slot and a position pos
// that maps to it:
//
//	seq == pos        free: the producer that claims pos may write it
//	seq == pos+1      published: the consumer may read it
//	seq <  pos        still holds the value of the previous lap: ring full
//
// A ring of capacity 8 with positions 5 to 8 claimed: 5, 7 and 8 are
// published, 6 is not written yet:
//
//	             tail=9                  head=5
//	               v                       v
//	index    0     1     2     3     4     5     6     7
//	      +-----+-----+-----+-----+-----+-----+-----+-----+
//	seq   |  9  |  9  |  10 |  11 |  12 |  6  |  6  |  8  |
//	      +-----+-----+-----+-----+-----+-----+-----+-----+
//	pos      8     9     10    11    12    5     6     7
//	        pub   free  free  free  free  pub   claim pub
//
// The consumer reads position 5 and then stops at 6 even though 7 and 8 are
// published: FIFO order holds and a slow producer is never read half
// written. Producers claiming 9 to 12 find seq == pos and go ahead; a
// producer that finds the tail at 13 reads seq 6 < 13 at index 5 and
// reports full. Capacity 1 cannot work: released (pos+cap) and published
// (pos+1) would be the same number.
//
// Concurrency: TryPush, Len and Cap may be called by any number of
// goroutines at once. Peek, Pop and PopBatch belong to one consumer
// goroutine at a time; Pop and PopBatch panic when they catch two consumers
// overlapping (a compare-and-swap on head), which catches some misuse, not
// all of it.
//
// Sequence numbers are 64 bits and never wrap in practice. They are atomics
// inside the slots, next to values of any T, which keeps them 8-byte aligned
// on 64-bit platforms only: the only ones RDMA hardware and rdma-core
// support.
type Ring[T any] struct {
	// Read-only after NewRing, read by everyone: kept off the lines of
	// head and tail, so that writes to those do not evict it.
	slots []slot[T]
	mask  uint64

	// tail is written by every producer (one compare-and-swap per push),
	// head by the consumer (one per Pop or PopBatch). On one cache line the
	// two sides would take the line from each other on every message, and
	// each producer's CAS would also stall the consumer's reads: the pads
	// keep head and tail at least a line apart from each other and from
	// the fields around them.
	_    [cacheLine]byte
	tail atomic.Uint64 // next position a producer claims
	_    [cacheLine - 8]byte
	head atomic.Uint64 // next position the consumer reads
	_    [cacheLine - 8]byte
}

// slot is one cell of the ring. The slots are not padded: adjacent slots
// share lines, which costs some false sharing between a producer writing
// one and the consumer reading its neighbour, and saves a line per slot.
type slot[T any] struct {
	seq atomic.Uint64
	val T
}

// NewRing returns an empty ring that holds capacity values, rounded up to a
// power of two and to at least 2. It panics when capacity is not in
// [1, MaxRingCapacity]: the size of an inbox is a programming decision, not
// an input.
func NewRing[T any](capacity int) *Ring[T] {
	if capacity < 1 || capacity > MaxRingCapacity {
		panic("qpactor: NewRing capacity out of range")
	}
	n := uint64(2)
	if capacity > 2 {
		n = 1 << bits.Len64(uint64(capacity-1))
	}
	r := &Ring[T]{slots: make([]slot[T], n), mask: n - 1}
	for i := range r.slots {
		r.slots[i].seq.Store(uint64(i))
	}
	return r
}

// Cap returns the number of values the ring holds when full. Any goroutine
// may call it.
func (r *Ring[T]) Cap() int { return len(r.slots) }

// Len returns about how many values are in the ring: claimed by a producer
// and not yet released by the consumer. It is exact only while nobody
// pushes or pops; it is meant for metrics and tests. Any goroutine may call
// it.
func (r *Ring[T]) Len() int {
	// head first: head never passes the tail, so with head read before the
	// tail the difference cannot be negative.
	h := r.head.Load()
	t := r.tail.Load()
	// head may move on between the two loads, and the tail with it.
	return int(min(t-h, uint64(len(r.slots))))
}

// TryPush copies *v into the ring and reports true, or reports false
// without waiting when the ring is full. It never allocates and never
// blocks, but it may retry its compare-and-swap while other producers win
// it. Any number of goroutines may call TryPush at once.
func (r *Ring[T]) TryPush(v *T) bool {
	pos := r.tail.Load()
	for {
		s := &r.slots[pos&r.mask]
		seq := s.seq.Load()
		switch d := int64(seq - pos); {
		case d == 0:
			if r.tail.CompareAndSwap(pos, pos+1) {
				s.val = *v
				s.seq.Store(pos + 1) // publish: the consumer may read it now
				return true
			}
			pos = r.tail.Load()
		case d < 0:
			// The slot still holds the value put there one lap ago.
			return false
		default:
			// Another producer claimed pos since we read the tail.
			pos = r.tail.Load()
		}
	}
}

// Peek returns a pointer to the oldest published value, or nil when there
// is none (the ring is empty, or its oldest slot is claimed but not yet
// written). The value may be read and modified in place until Pop releases
// it; the pointer must not be kept after that. Only the consumer goroutine
// may call Peek.
func (r *Ring[T]) Peek() *T {
	pos := r.head.Load()
	s := &r.slots[pos&r.mask]
	if s.seq.Load() != pos+1 {
		return nil
	}
	return &s.val
}

// PeekAt returns a pointer to the i-th oldest published value (PeekAt(0)
// is Peek), or nil when it is not published. The same rules as Peek's
// apply. Only the consumer goroutine may call PeekAt.
func (r *Ring[T]) PeekAt(i int) *T {
	if i < 0 || i >= len(r.slots) {
		return nil
	}
	pos := r.head.Load() + uint64(i)
	s := &r.slots[pos&r.mask]
	if s.seq.Load() != pos+1 {
		return nil
	}
	return &s.val
}

// Reached reports whether the n-th oldest value (1 <= n <= Cap) is
// published: at least n values have been pushed, though a producer may
// still be writing one of the first n-1. It reads one slot, so the
// consumer can watch the queue grow without taking the cache line of the
// slot producers write next. Only the consumer goroutine may call it.
func (r *Ring[T]) Reached(n int) bool {
	pos := r.head.Load() + uint64(n) - 1
	return r.slots[pos&r.mask].seq.Load() == pos+1
}

// Pop releases the oldest value, the one Peek returns, for producers to
// reuse. It zeroes the slot, so the ring keeps nothing alive for the
// garbage collector. Only the consumer goroutine may call Pop; it panics
// when no value is published (Peek would return nil) and when it catches
// a second consumer.
func (r *Ring[T]) Pop() {
	pos := r.head.Load()
	s := &r.slots[pos&r.mask]
	if s.seq.Load() != pos+1 {
		panic("qpactor: Ring.Pop with no published value")
	}
	r.advance(pos, 1)
	var zero T
	s.val = zero
	s.seq.Store(pos + uint64(len(r.slots)))
}

// PopBatch copies up to len(dst) published values, oldest first, into dst,
// releases (and zeroes) their slots and returns how many it copied: 0 when
// Peek would return nil. Only the consumer goroutine may call PopBatch; it
// panics when it catches a second consumer.
func (r *Ring[T]) PopBatch(dst []T) int {
	pos := r.head.Load()
	n := 0
	// Count first and move head, so that a second consumer is caught before
	// either of them touches a slot.
	for n < len(dst) && r.slots[(pos+uint64(n))&r.mask].seq.Load() == pos+uint64(n)+1 {
		n++
	}
	if n == 0 {
		return 0
	}
	r.advance(pos, n)
	var zero T
	lap := uint64(len(r.slots))
	for i := range dst[:n] {
		p := pos + uint64(i)
		s := &r.slots[p&r.mask]
		dst[i] = s.val
		s.val = zero
		s.seq.Store(p + lap)
	}
	return n
}

// advance moves head from pos by n. head has one writer, so a plain store
// would do; a compare-and-swap costs the same on amd64 and catches a second
// consumer that read the same head.
func (r *Ring[T]) advance(pos uint64, n int) {
	if !r.head.CompareAndSwap(pos, pos+uint64(n)) {
		panic("qpactor: Ring consumed by two goroutines at once")
	}
}

// Waker parks a consumer whose ring stays empty and lets producers wake it.
// It is apart from Ring so that the ring knows nothing of waiting: the actor
// decides when to stop spinning and park (parking a goroutine locked to its
// OS thread costs microseconds to undo, so it spins first). Make one with
// NewWaker.
//
// Protocol. The consumer, having found nothing to do:
//
//	w.PrepareSleep()              // 1. sleeping = true
//	if ring.Peek() != nil || closing.Load() {
//		w.CancelSleep()        // 2. look again: work came in meanwhile
//	} else {
//		w.Sleep(stop)          // 3. block until a Wake or stop
//	}
//
// A producer, after a successful TryPush (and anyone who changes what the
// consumer looks at in step 2, such as a closing flag):
//
//	w.Wake()                      // 4. if sleeping: sleeping = false, send a token
//
// The race it closes: a producer publishes just after the consumer's last
// look and checks the flag just before the consumer sets it; the consumer
// would then sleep on a value nobody wakes it for. With the second look in
// step 2, after the flag is set, one of the two always sees the other:
// publishing (a store to the slot's seq) and the flag are sequentially
// consistent atomics, so either the consumer's second look sees the value,
// or the producer's load in Wake sees sleeping == true. A token sent before
// the consumer blocks waits in the channel's one buffer slot, so a wake-up
// that comes early is not lost either. The second look must cover all that
// a Wake may announce; a flag that is not checked there can be missed.
//
// Cost. While the consumer runs, Wake is one atomic load that finds false:
// no channel operation, no write to a shared line. Only a Wake that finds
// the flag set does a compare-and-swap, and only the goroutine that wins it
// sends, without blocking, on the channel.
//
// Sleep may return with nothing new to do (a token left by a Wake that
// raced with CancelSleep): the consumer must look again, as it does anyway.
//
// Concurrency: PrepareSleep, CancelSleep and Sleep belong to the one
// consumer goroutine; any number of goroutines may call Wake at once.
type Waker struct {
	sleeping atomic.Bool
	ch       chan struct{} // wake-up tokens; its one buffer slot keeps an early one
	// restart, when set, starts the consumer again: it ends (Leave)
	// instead of sleeping (NewRestartingWaker). gone is set while it has
	// ended or is ending; the Wake that clears it restarts it.
	restart func()
	gone    atomic.Bool
	// sends counts channel operations by Wake, for tests that check the
	// fast path does none.
	sends atomic.Uint64
}

// NewWaker returns a Waker whose consumer is not sleeping.
func NewWaker() *Waker {
	return &Waker{ch: make(chan struct{}, 1)}
}

// NewRestartingWaker returns a Waker for a consumer that ends instead of
// sleeping: where the protocol says Sleep, it calls Leave, and ends if
// Leave says so; the Wake that finds it gone calls restart, once, to start
// it again. Until Leave the consumer still owns everything (its second
// look included): no Wake restarts it before.
func NewRestartingWaker(restart func()) *Waker {
	return &Waker{restart: restart}
}

// Leave is Sleep for a restarting consumer: it reports whether the
// consumer must end now (a Wake will start it again, or already has), or
// go on, when a Wake came since PrepareSleep and left it to carry on.
// After Leave returns true the consumer must touch nothing it shares with
// the next run.
//
// Against wake: the consumer sets gone, then looks at sleeping; a Wake
// clears sleeping, then looks at gone. One of the two sees the other (the
// same argument as PrepareSleep's), and whoever then clears gone owns the
// next run: the Wake by starting it, the consumer by going on.
func (w *Waker) Leave() bool {
	w.gone.Store(true)
	if w.sleeping.Load() {
		return true // no Wake yet: the next one restarts
	}
	return !w.gone.CompareAndSwap(true, false)
}

// Restarts reports whether the consumer ends instead of sleeping.
func (w *Waker) Restarts() bool { return w.restart != nil }

// PrepareSleep announces that the consumer is about to sleep. The consumer
// must then look at its ring once more and call CancelSleep if it found
// work, or Sleep if it did not.
func (w *Waker) PrepareSleep() { w.sleeping.Store(true) }

// CancelSleep withdraws PrepareSleep when the second look found work.
func (w *Waker) CancelSleep() { w.sleeping.Store(false) }

// Sleep blocks until a Wake after PrepareSleep, or until stop is closed,
// and reports false in the second case. It may return true with nothing new
// to do; see the type's documentation. A nil stop never fires: a consumer
// may instead be stopped by a flag it checks in its second look, set before
// a Wake.
func (w *Waker) Sleep(stop <-chan struct{}) bool {
	select {
	case <-w.ch:
		// Normally Wake has cleared the flag; after a stale token it is
		// still set, and producers must not pay for it while we run.
		w.sleeping.Store(false)
		return true
	case <-stop:
		w.sleeping.Store(false)
		return false
	}
}

// Wake wakes the consumer if it sleeps or is about to. Call it after each
// successful push; it costs one atomic load while the consumer runs. Any
// goroutine may call Wake.
func (w *Waker) Wake() {
	if w.sleeping.Load() {
		w.wake()
	}
}

// wake is the slow path of Wake: the consumer sleeps or is about to.
func (w *Waker) wake() {
	if !w.sleeping.CompareAndSwap(true, false) {
		return // another goroutine is waking it, or it woke
	}
	w.sends.Inc()
	if w.restart != nil {
		if w.gone.CompareAndSwap(true, false) {
			w.restart()
		}
		return
	}
	select {
	case w.ch <- struct{}{}:
	default: // a token is already waiting
	}
}
