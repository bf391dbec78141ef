package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"os"
	goruntime "runtime"
	"sync"
	"syscall"

	"github.com/verbsrt/verbsrt/internal/rlimit"
	"github.com/verbsrt/verbsrt/verbs"
)

// The runtime's arena: registered memory that grows on demand, a chunk at
// a time, up to the limit WithMemoryLimit sets. Each chunk is mapped
// outside the Go heap and registered for local access only, so no key a
// peer holds reaches it; remote access is granted per exposure
// (Buffer.ExposeRange). Blocks smaller than a chunk are powers of two
// from 64 bytes, handed out from free lists per size class over a bump
// pointer in the newest chunk; a block of a chunk's size or more is a
// mapping of its own, of the size asked for rounded up to a page only (a
// power of two would map up to twice what was asked, against the limit).
//
// A chunk is never unmapped: a slice of it (Buffer.Bytes, Message.Bytes)
// is plain memory to Go, which cannot tell when the application drops
// it, so no point in time is safe to unmap at. Its registration ends at
// Close: the device no longer reaches it. Its contents stay while the
// runtime is open or a Buffer or Message that could reach it is left;
// once neither holds (runtime.AddCleanup on the chunk), its pages go back
// to the system (verbs.Arena.Retire) and its addresses stay mapped,
// reading zeros, for the rest of the process: a slice the application
// kept past its Buffer or Message reads and writes without faulting, and
// aliases no other memory, since the range is never handed out again.
// A process that opens and closes runtimes keeps the address space of
// their arenas, not their memory.

// chunkSize is the size of the arena's chunks (or the memory limit, when
// smaller).
const chunkSize = rlimit.ArenaChunk

func newAllocator(pd verbs.PD, limit int, log *slog.Logger) (allocator, error) {
	if limit <= 0 {
		return allocator{}, fmt.Errorf("verbsrt: WithMemoryLimit(%d): the limit must be positive: %w", limit, verbs.ErrInvalidArgument)
	}
	return allocator{pd: pd, limit: limit, chunk: min(chunkSize, limit), log: log, leaseTimer: realLeaseTimer}, nil
}

// minBlock is the smallest block: 64 bytes.
const minBlock = 64

type chunk struct {
	arena *verbs.Arena
	mem   []byte
	mr    verbs.MR
}

// block is a free block of a chunk.
type block struct {
	ch  *chunk
	off int
}

type allocator struct {
	pd    verbs.PD
	limit int // bytes the chunks may map in all
	chunk int // bytes of a chunk: chunkSize, or the limit when smaller
	log   *slog.Logger
	// leaseTimer arms the end of an exposure's lease (Exposure.Lease):
	// time.AfterFunc, or a test's clock.
	leaseTimer leaseTimer
	// revoked is why the exposures' most recent keys were revoked, to
	// tell a peer whose access one of them refused.
	revoked revokedKeys

	mu          sync.Mutex
	closed      bool
	bytesMapped int
	chunks      []*chunk
	cur         *chunk // the chunk the bump pointer is in
	next        int
	freeLists   [48][]block // by class: block size minBlock << class
	freeLarge   []*chunk    // the free blocks that are mappings of their own
	// appBytes and appBuffers are the bytes (as mapped: rounded up) and
	// the number of the blocks Runtime.Alloc handed out and the
	// application has not freed, for the error of an endpoint that finds
	// the limit reached.
	appBytes, appBuffers int
}

// errLimit is the arena's error when a chunk would take it past its
// limit: ErrNoMemory, told apart from the other shortages (a full shared
// receive queue) that match it too.
var errLimit = fmt.Errorf("%w: the memory limit is reached", ErrNoMemory)

// largeClass is the class of a block that is a mapping of its own.
const largeClass = -1

func classOf(n int) int {
	if n <= minBlock {
		return 0
	}
	return bits.Len(uint(n-1)) - 6
}

// alloc returns a zeroed buffer of n bytes; app says whether it is the
// application's (Runtime.Alloc) or the runtime's own.
func (a *allocator) alloc(n int, app bool) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("verbsrt: Alloc(%d): the size must be positive: %w", n, verbs.ErrInvalidArgument)
	}
	if n > a.limit {
		return nil, fmt.Errorf("verbsrt: Alloc(%d): larger than the memory limit of %d bytes (WithMemoryLimit): %w", n, a.limit, ErrNoMemory)
	}
	c := classOf(n)
	size := minBlock << c
	if size >= a.chunk {
		c, size = largeClass, pageUp(n)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	var blk block
	if c == largeClass {
		ch, err := a.takeLarge(size)
		if err != nil {
			return nil, fmt.Errorf("verbsrt: Alloc(%d): %w", n, err)
		}
		blk = block{ch: ch}
		size = len(ch.mem)
	} else if l := a.freeLists[c]; len(l) > 0 {
		blk = l[len(l)-1]
		a.freeLists[c] = l[:len(l)-1]
		clear(blk.ch.mem[blk.off : blk.off+n]) // a fresh block is zero already
	} else {
		var err error
		if blk, err = a.bump(size); err != nil {
			return nil, fmt.Errorf("verbsrt: Alloc(%d): %w", n, err)
		}
	}
	if app {
		a.appBytes += size
		a.appBuffers++
	}
	b := &Buffer{a: a, ch: blk.ch, off: blk.off, class: c, app: app, mem: blk.ch.mem[blk.off : blk.off+n : blk.off+n],
		addr: blk.ch.mr.Addr() + uint64(blk.off), lkey: blk.ch.mr.LKey()}
	b.hold.Init(b.giveBack)
	return b, nil
}

// pageUp rounds n up to a whole page.
func pageUp(n int) int {
	page := os.Getpagesize()
	return (n + page - 1) &^ (page - 1)
}

// takeLarge returns a zeroed mapping of its own of at least size bytes
// (a multiple of the page): the smallest free one that fits and maps no
// more than twice that, else a new one.
func (a *allocator) takeLarge(size int) (*chunk, error) {
	best := -1
	for i, ch := range a.freeLarge {
		if l := len(ch.mem); l >= size && l <= 2*size && (best < 0 || l < len(a.freeLarge[best].mem)) {
			best = i
		}
	}
	if best < 0 {
		return a.mapChunk(size)
	}
	ch := a.freeLarge[best]
	a.freeLarge = append(a.freeLarge[:best], a.freeLarge[best+1:]...)
	clear(ch.mem)
	return ch, nil
}

// bump carves a block of size bytes (a power of two smaller than a chunk)
// from the newest chunk, mapping a new one when it has no room. Blocks are
// aligned to their size (up to a page), so 8-byte words of a buffer are
// aligned for atomics.
func (a *allocator) bump(size int) (block, error) {
	align := min(size, 4096)
	off := (a.next + align - 1) &^ (align - 1)
	if a.cur == nil || off+size > len(a.cur.mem) {
		ch, err := a.mapChunk(a.chunk)
		if err != nil {
			return block{}, err
		}
		a.cur, off = ch, 0
	}
	a.next = off + size
	return block{ch: a.cur, off: off}, nil
}

// mapChunk maps and registers a chunk of size bytes, within the limit.
func (a *allocator) mapChunk(size int) (*chunk, error) {
	if a.bytesMapped+size > a.limit {
		return nil, fmt.Errorf("registered memory would exceed its limit of %d bytes (%d mapped, %d more needed; WithMemoryLimit raises it): %w",
			a.limit, a.bytesMapped, size, errLimit)
	}
	ar, err := verbs.NewArena(size)
	if err != nil {
		return nil, err
	}
	mr, err := a.pd.RegMR(ar.Bytes(), verbs.AccessLocalWrite)
	if err != nil {
		ar.Close()
		if errors.Is(err, syscall.ENOMEM) {
			return nil, &memlockError{size: size, registered: a.bytesMapped, limit: rlimit.Read(rlimit.Memlock), err: err}
		}
		return nil, fmt.Errorf("registering %d bytes: %w", size, err)
	}
	ch := &chunk{arena: ar, mem: ar.Bytes(), mr: mr}
	goruntime.AddCleanup(ch, func(ar *verbs.Arena) { ar.Retire() }, ar)
	a.bytesMapped += size
	a.chunks = append(a.chunks, ch)
	return ch, nil
}

// free returns a freed buffer's block.
func (a *allocator) free(b *Buffer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b.app {
		a.appBuffers--
		if b.class == largeClass {
			a.appBytes -= len(b.ch.mem)
		} else {
			a.appBytes -= minBlock << b.class
		}
	}
	switch {
	case a.closed:
	case b.class == largeClass:
		a.freeLarge = append(a.freeLarge, b.ch)
	default:
		a.freeLists[b.class] = append(a.freeLists[b.class], block{ch: b.ch, off: b.off})
	}
}

// usable returns ErrClosed once the runtime closed.
func (a *allocator) usable() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	return nil
}

// deregister ends a registration of the runtime's; after Close the device
// context ended them all.
func (a *allocator) deregister(mr verbs.MR) error {
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return nil
	}
	return mr.Close()
}

// register registers memory of the application's own.
func (a *allocator) register(mem []byte) (*Buffer, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("verbsrt: Register: empty memory: %w", verbs.ErrInvalidArgument)
	}
	if err := a.usable(); err != nil {
		return nil, err
	}
	mr, err := a.pd.RegMR(mem, verbs.AccessLocalWrite)
	if err != nil {
		return nil, fmt.Errorf("verbsrt: Register: %w", err)
	}
	b := &Buffer{a: a, mr: mr, mem: mem[:len(mem):len(mem)], addr: mr.Addr(), lkey: mr.LKey()}
	b.hold.Init(b.giveBack)
	return b, nil
}

// close forgets the chunks once the device context is closed (which ended
// their registrations): each gives its pages back when nothing reaches it
// any more.
func (a *allocator) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	a.chunks, a.cur = nil, nil
	a.freeLists = [48][]block{}
	a.freeLarge = nil
}

// mapped returns the bytes of registered memory the arena has mapped.
func (a *allocator) mapped() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bytesMapped
}

// exhausted is the error of what (a new endpoint's receive buffers and
// scratch) when the arena reached its limit: in the terms of the memory
// limit and of what holds the memory mapped, not of the block sizes the
// runtime asked its arena for. It matches ErrNoMemory.
func (a *allocator) exhausted(what string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Errorf("verbsrt: %s: the runtime's registered memory has no room left under its limit of %d bytes "+
		"(WithMemoryLimit raises it; the arena grows %d bytes at a time): %d bytes mapped, %d of them in %d Buffers "+
		"the application allocated and has not freed (Alloc rounds each up), the rest in receive buffers, "+
		"endpoints' scratch and free blocks: %w",
		what, a.limit, a.chunk, a.bytesMapped, a.appBytes, a.appBuffers, ErrNoMemory)
}
