package ring

import (
	"math/bits"
	"runtime"

	"go.uber.org/atomic"
)

// MaxCapacity is the largest capacity New accepts. A bigger inbox
// would only hide a consumer that cannot keep up.
const MaxCapacity = 1 << 30

// cacheLine is the size the hot indices are padded to. It is what
// golang.org/x/sys/cpu.CacheLinePad uses on amd64; that module is not a
// dependency of verbsrt and a constant does not earn it a place.
const cacheLine = 64

// Ring is a bounded, lock-free multi-producer single-consumer queue of T,
// the inbox of a QP actor: many caller goroutines push, the one actor
// goroutine drains. It is Dmitry Vyukov's bounded queue with a single
// consumer: every slot carries a sequence number that says whose turn it is.
//
// Slots hold values, not pointers: pushing and popping allocate nothing,
// take no lock and send on no channel. The ring never blocks or waits;
// how an idle consumer waits is its own affair.
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
// Growing. The slots live in a segment with its own head and tail. A ring
// from New has one segment of its whole capacity. A ring from
// NewGrowing starts with a small one, so that an idle inbox costs a few
// slots instead of its capacity: the producer that finds the segment full,
// while it is smaller than the capacity, closes it (a compare-and-swap of
// the tail from pos to pos|closed, which no producer can claim) and links
// a segment twice its size after it, where it and the others go on
// pushing; they wait for the link meanwhile, an allocation, at most
// log2(capacity/initial) times in the ring's life. The consumer reads the
// closed segment to the position it was closed at (end), then moves to the
// next; the old one is garbage:
//
//	 first (consumer)           cur (producers)
//	     v                           v
//	+----------+  next  +---------------------+
//	| 8 slots  | -----> |      16 slots       |
//	| end = 13 |        | tail = 3            |
//	+----------+        +---------------------+
//
// Positions claimed before the close are all below it, so the consumer
// meets every value of the old segment before any of the new one: FIFO
// order holds across the boundary. The bound holds too: the new segment
// keeps its upper half reserved (those slots start as if they held values
// of the lap before) for what is left in the old one, and the consumer
// frees them when it gets there; until then a full new segment grows again
// or, at the capacity, is full. So the values in all segments never exceed
// the size of the newest, nor Cap. A ring that has grown stays at its size.
//
// Concurrency: TryPush, Len and Cap may be called by any number of
// goroutines at once. Peek, PeekAt, Reached, Pop and PopBatch belong to one
// consumer goroutine at a time; Pop and PopBatch panic when they catch two
// consumers overlapping (a compare-and-swap on head), which catches some
// misuse, not all of it.
//
// Sequence numbers are 64 bits and never wrap in practice. They are atomics
// inside the slots, next to values of any T, which keeps them 8-byte aligned
// on 64-bit platforms only: the only ones RDMA hardware and rdma-core
// support.
type Ring[T any] struct {
	// cur is the segment producers push to, first the one the consumer
	// reads: the same one except while the consumer finishes a segment
	// the ring grew out of. Both change only when the ring grows.
	cur   atomic.Pointer[segment[T]]
	first atomic.Pointer[segment[T]]
	max   uint64 // the capacity: the largest segment
}

// closedBit, set in a segment's tail, says that the ring grew out of it:
// no producer claims a position there any more.
const closedBit = 1 << 63

// segment holds a ring's slots while it has this size.
type segment[T any] struct {
	// Read-only after newSegment, or written once, and read by everyone:
	// kept off the lines of head and tail, so that writes to those do not
	// evict it.
	slots []slot[T]
	mask  uint64
	// end is 0 while producers push here, then 1 + the position the
	// segment was closed at: the consumer moves to next there.
	end  atomic.Uint64
	next atomic.Pointer[segment[T]]
	// reserved is how many slots, at the top, stand for values left in
	// the segments before this one, until the consumer gets here.
	reserved atomic.Uint64

	// tail is written by every producer (one compare-and-swap per push),
	// head by the consumer (one per Pop or PopBatch). On one cache line the
	// two sides would take the line from each other on every message, and
	// each producer's CAS would also stall the consumer's reads: the pads
	// keep head and tail at least a line apart from each other and from
	// the fields around them.
	_    [cacheLine]byte
	tail atomic.Uint64 // next position a producer claims; closedBit once closed
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

// newSegment returns a segment of n slots whose top reserved ones are
// taken until release.
func newSegment[T any](n, reserved uint64) *segment[T] {
	s := &segment[T]{slots: make([]slot[T], n), mask: n - 1}
	for i := range s.slots {
		s.slots[i].seq.Store(uint64(i))
	}
	for i := n - reserved; i < n; i++ {
		s.slots[i].seq.Store(i - n) // a value of lap -1, not yet released
	}
	s.reserved.Store(reserved)
	return s
}

// release frees the reserved slots: the consumer has read every segment
// before this one.
func (s *segment[T]) release() {
	n := uint64(len(s.slots))
	for i := n - s.reserved.Load(); i < n; i++ {
		s.slots[i].seq.Store(i)
	}
	s.reserved.Store(0)
}

// ringSize rounds a capacity up to a power of two, and to at least 2; it
// panics when capacity is not in [1, MaxCapacity]: the size of an
// inbox is a programming decision, not an input.
func ringSize(capacity int) uint64 {
	if capacity < 1 || capacity > MaxCapacity {
		panic("ring: New capacity out of range")
	}
	if capacity <= 2 {
		return 2
	}
	return 1 << bits.Len64(uint64(capacity-1))
}

// New returns an empty ring that holds capacity values, rounded up to a
// power of two and to at least 2, with all its slots allocated now. It
// panics when capacity is not in [1, MaxCapacity].
func New[T any](capacity int) *Ring[T] {
	return NewGrowing[T](capacity, capacity)
}

// NewGrowing returns an empty ring that holds capacity values (as
// New) but allocates slots for initial of them (rounded the same way,
// at most capacity) and doubles them when they are full, up to capacity.
func NewGrowing[T any](initial, capacity int) *Ring[T] {
	n, c := ringSize(initial), ringSize(capacity)
	r := &Ring[T]{max: c}
	s := newSegment[T](min(n, c), 0)
	r.cur.Store(s)
	r.first.Store(s)
	return r
}

// Cap returns the number of values the ring holds when full. Any goroutine
// may call it.
func (r *Ring[T]) Cap() int { return int(r.max) }

// Len returns about how many values are in the ring: claimed by a producer
// and not yet released by the consumer. It is exact only while nobody
// pushes or pops; it is meant for metrics and tests. Any goroutine may call
// it.
func (r *Ring[T]) Len() int {
	var n uint64
	for s := r.first.Load(); s != nil; s = s.next.Load() {
		// head first: head never passes the tail, so with head read before
		// the tail the difference cannot be negative.
		h := s.head.Load()
		t := s.tail.Load() &^ closedBit
		// head may move on between the two loads, and the tail with it.
		n += min(t-h, uint64(len(s.slots)))
	}
	return int(n)
}

// Full reports whether TryPush would fail now: the ring holds Cap values,
// or holds what its reserved slots stand for and cannot grow (see Growing).
// Len would not tell: it counts values, not the reserved slots. Any
// goroutine may call it.
func (r *Ring[T]) Full() bool {
	seg := r.cur.Load()
	for {
		pos := seg.tail.Load()
		if pos&closedBit != 0 {
			n := seg.next.Load()
			if n == nil {
				return false // growing
			}
			seg = n
			continue
		}
		if uint64(len(seg.slots)) < r.max {
			return false // it grows instead
		}
		return int64(seg.slots[pos&seg.mask].seq.Load()-pos) < 0
	}
}

// TryPush copies *v into the ring and reports true, or reports false
// without waiting when the ring is full. It never allocates (but to grow
// the ring) and never blocks, but it may retry its compare-and-swap while
// other producers win it, and yield while another producer links the
// segment the ring grows into. Any number of goroutines may call TryPush
// at once.
func (r *Ring[T]) TryPush(v *T) bool {
	seg := r.cur.Load()
	pos := seg.tail.Load()
	for {
		if pos&closedBit != 0 {
			seg = r.successor(seg)
			pos = seg.tail.Load()
			continue
		}
		s := &seg.slots[pos&seg.mask]
		seq := s.seq.Load()
		switch d := int64(seq - pos); {
		case d == 0:
			if seg.tail.CompareAndSwap(pos, pos+1) {
				s.val = *v
				s.seq.Store(pos + 1) // publish: the consumer may read it now
				return true
			}
		case d < 0:
			// The slot still holds the value put there one lap ago.
			size := uint64(len(seg.slots))
			if size >= r.max {
				return false
			}
			if seg.tail.CompareAndSwap(pos, pos|closedBit) {
				// Closed first, allocated after: of the producers that
				// found it full, one allocates, and the others wait for
				// the link (successor). Sizes are powers of two, so twice
				// one below the capacity is at most the capacity.
				grown := newSegment[T](2*size, size)
				seg.end.Store(pos + 1)
				seg.next.Store(grown)
				r.cur.CompareAndSwap(seg, grown)
				seg = grown
			}
		}
		// Another producer claimed pos, or closed the segment, since we
		// read the tail.
		pos = seg.tail.Load()
	}
}

// successor returns the segment linked after seg, which a producer has
// closed: it may still be linking it.
func (r *Ring[T]) successor(seg *segment[T]) *segment[T] {
	for {
		if n := seg.next.Load(); n != nil {
			r.cur.CompareAndSwap(seg, n) // in case its closer is slow to
			return n
		}
		runtime.Gosched()
	}
}

// front returns the consumer's segment and the position of its head,
// moving past a closed segment once it is read to its end. Only the
// consumer calls it.
func (r *Ring[T]) front() (*segment[T], uint64) {
	seg := r.first.Load()
	pos := seg.head.Load()
	for seg.end.Load() == pos+1 {
		n := seg.next.Load()
		if n == nil {
			break // its closer is linking the next: nothing there yet
		}
		if n.reserved.Load() > 0 {
			n.release()
		}
		r.first.Store(n)
		seg, pos = n, n.head.Load()
	}
	return seg, pos
}

// Peek returns a pointer to the oldest published value, or nil when there
// is none (the ring is empty, or its oldest slot is claimed but not yet
// written). The value may be read and modified in place until Pop releases
// it; the pointer must not be kept after that. Only the consumer goroutine
// may call Peek.
func (r *Ring[T]) Peek() *T {
	seg := r.first.Load()
	pos := seg.head.Load()
	s := &seg.slots[pos&seg.mask]
	if s.seq.Load() == pos+1 {
		return &s.val
	}
	if seg.end.Load() == 0 {
		return nil
	}
	// The ring grew out of this segment: the value may be in the next.
	return r.PeekAt(0)
}

// PeekAt returns a pointer to the i-th oldest published value (PeekAt(0)
// is Peek), or nil when it is not published. The same rules as Peek's
// apply. Only the consumer goroutine may call PeekAt.
func (r *Ring[T]) PeekAt(i int) *T {
	if i < 0 {
		return nil
	}
	seg, pos := r.front()
	for {
		if e := seg.end.Load(); e != 0 && pos+uint64(i) >= e-1 {
			// Past where this segment was closed: in the next one.
			n := seg.next.Load()
			if n == nil {
				return nil
			}
			i -= int(e - 1 - pos)
			seg, pos = n, n.head.Load()
			continue
		}
		if i >= len(seg.slots) {
			return nil
		}
		p := pos + uint64(i)
		s := &seg.slots[p&seg.mask]
		if s.seq.Load() != p+1 {
			return nil
		}
		return &s.val
	}
}

// Reached reports whether the n-th oldest value (1 <= n <= Cap) is
// published: at least n values have been pushed, though a producer may
// still be writing one of the first n-1. It reads one slot, so the
// consumer can watch the queue grow without taking the cache line of the
// slot producers write next. Only the consumer goroutine may call it.
func (r *Ring[T]) Reached(n int) bool { return r.PeekAt(n-1) != nil }

// Pop releases the oldest value, the one Peek returns, for producers to
// reuse. It zeroes the slot, so the ring keeps nothing alive for the
// garbage collector. Only the consumer goroutine may call Pop; it panics
// when no value is published (Peek would return nil) and when it catches
// a second consumer.
func (r *Ring[T]) Pop() {
	seg, pos := r.front()
	s := &seg.slots[pos&seg.mask]
	if s.seq.Load() != pos+1 {
		panic("ring: Ring.Pop with no published value")
	}
	seg.advance(pos, 1)
	var zero T
	s.val = zero
	s.seq.Store(pos + uint64(len(seg.slots)))
}

// PopBatch copies up to len(dst) published values, oldest first, into dst,
// releases (and zeroes) their slots and returns how many it copied: 0 when
// Peek would return nil. Only the consumer goroutine may call PopBatch; it
// panics when it catches a second consumer.
func (r *Ring[T]) PopBatch(dst []T) int {
	n := 0
	for n < len(dst) {
		seg, pos := r.front()
		k := seg.popBatch(pos, dst[n:])
		if k == 0 {
			break
		}
		n += k
	}
	return n
}

// popBatch is PopBatch within one segment, from head position pos.
func (s *segment[T]) popBatch(pos uint64, dst []T) int {
	n := 0
	// Count first and move head, so that a second consumer is caught before
	// either of them touches a slot. A closed segment's count stops at its
	// end: that position is never published.
	for n < len(dst) && s.slots[(pos+uint64(n))&s.mask].seq.Load() == pos+uint64(n)+1 {
		n++
	}
	if n == 0 {
		return 0
	}
	s.advance(pos, n)
	var zero T
	lap := uint64(len(s.slots))
	for i := range dst[:n] {
		p := pos + uint64(i)
		sl := &s.slots[p&s.mask]
		dst[i] = sl.val
		sl.val = zero
		sl.seq.Store(p + lap)
	}
	return n
}

// advance moves head from pos by n. head has one writer, so a plain store
// would do; a compare-and-swap costs the same on amd64 and catches a second
// consumer that read the same head.
func (s *segment[T]) advance(pos uint64, n int) {
	if !s.head.CompareAndSwap(pos, pos+uint64(n)) {
		panic("ring: Ring consumed by two goroutines at once")
	}
}
