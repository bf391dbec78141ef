package runtime

import (
	"math/bits"
	"sync"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/verbs"
)

// Local is a piece of registered memory on this side: the scatter/gather
// entry an operation reads from or writes into.
type Local = verbs.SGE

// RemoteRef names registered memory on the peer: hand it to the peer
// (address, rkey, length) and it can READ, WRITE and run atomics there.
type RemoteRef struct {
	Addr uint64
	RKey uint32
	Len  uint32
}

// At returns the reference n bytes further in.
func (r RemoteRef) At(off int) RemoteRef {
	return RemoteRef{Addr: r.Addr + uint64(off), RKey: r.RKey, Len: r.Len - uint32(min(off, int(r.Len)))}
}

// Buffer is registered memory from the runtime's arena. Its bytes live
// outside the Go heap, so the device may use them after a call returns.
// A Buffer may be used from any goroutine; Free it once no operation uses
// it.
type Buffer struct {
	a     *allocator
	off   int
	n     int
	class int
	freed atomic.Bool
}

// Bytes returns the buffer's memory.
func (b *Buffer) Bytes() []byte { return b.a.mem[b.off : b.off+b.n : b.off+b.n] }

// Len returns the buffer's length.
func (b *Buffer) Len() int { return b.n }

// Addr returns the address of the first byte, as SGEs and peers use it.
func (b *Buffer) Addr() uint64 { return b.a.mr.Addr() + uint64(b.off) }

// LKey returns the local key of the memory.
func (b *Buffer) LKey() uint32 { return b.a.mr.LKey() }

// Local returns the whole buffer as a local SGE.
func (b *Buffer) Local() Local { return b.Slice(0, b.n) }

// Slice returns bytes [off, off+n) of the buffer as a local SGE.
func (b *Buffer) Slice(off, n int) Local {
	if off < 0 || n < 0 || off+n > b.n {
		panic("verbsrt: Buffer.Slice out of range")
	}
	return Local{Addr: b.Addr() + uint64(off), Length: uint32(n), LKey: b.LKey()}
}

// RemoteRef returns the reference a peer needs to access the buffer.
func (b *Buffer) RemoteRef() RemoteRef {
	return RemoteRef{Addr: b.Addr(), RKey: b.a.mr.RKey(), Len: uint32(b.n)}
}

// Free returns the buffer to the arena. Freeing twice is a no-op.
func (b *Buffer) Free() {
	if b.freed.CompareAndSwap(false, true) {
		b.a.free(b.off, b.class)
	}
}

// allocator hands out power-of-two blocks (64 B and up) of one registered
// arena: free lists per size class over a bump pointer.
type allocator struct {
	mem []byte
	mr  verbs.MR

	mu        sync.Mutex
	next      int
	freeLists [48][]int // offsets of free blocks by class (block size 64 << class)
}

const minBlock = 64

func classOf(n int) int {
	if n <= minBlock {
		return 0
	}
	return bits.Len(uint(n-1)) - 6
}

func (a *allocator) alloc(n int) (*Buffer, error) {
	if n <= 0 {
		return nil, ErrNoMemory
	}
	c := classOf(n)
	size := minBlock << c
	a.mu.Lock()
	defer a.mu.Unlock()
	if l := a.freeLists[c]; len(l) > 0 {
		off := l[len(l)-1]
		a.freeLists[c] = l[:len(l)-1]
		return &Buffer{a: a, off: off, n: n, class: c}, nil
	}
	// Blocks are aligned to their size (up to a page), so atomics on
	// 8-byte words of a buffer are aligned too.
	align := min(size, 4096)
	off := (a.next + align - 1) &^ (align - 1)
	if off+size > len(a.mem) {
		return nil, ErrNoMemory
	}
	a.next = off + size
	return &Buffer{a: a, off: off, n: n, class: c}, nil
}

func (a *allocator) free(off, class int) {
	a.mu.Lock()
	a.freeLists[class] = append(a.freeLists[class], off)
	a.mu.Unlock()
}
