package runtime

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/verbs"
)

// Buffer is registered memory: a block of the runtime's arena (Alloc) or
// memory of the application's own (Register). Its bytes live outside the
// Go heap, so the device may use them after a call returns. Who owns it
// when is said in the package documentation ("Memory"): in short, the
// application until Free, and any operation using it until the device is
// done with that operation. A Buffer may be used from any goroutine.
type Buffer struct {
	// hold counts the operations in flight on the buffer (and, for a
	// receive pool, the messages the application holds); Free closes it,
	// and the memory goes back once the last use is given back.
	hold future.Hold
	mem  []byte
	addr uint64 // of mem[0], in the device's address space
	lkey uint32

	a     *allocator
	ch    *chunk     // the arena chunk of the block (nil for Register's memory)
	off   int        // the block's offset in ch
	class int        // the block's size class (largeClass: a mapping of its own)
	app   bool       // handed out by Runtime.Alloc, not taken by the runtime for itself
	mr    verbs.MR   // Register's own registration (nil for arena blocks)
	mu    sync.Mutex // freed and exps
	freed bool       // Free began: no exposure may be added
	exps  map[*Exposure]struct{}
}

// describe names b in errors: by its length and address, never by its
// bytes, which are the application's data and may be gigabytes.
func (b *Buffer) describe() string {
	return fmt.Sprintf("buffer of %d bytes at %#x", len(b.mem), b.addr)
}

// String names the buffer as errors do, so that a Buffer printed with %v
// (in an error, a log line) shows its length and address, not its bytes.
func (b *Buffer) String() string { return b.describe() }

// usedAfterFree panics, recoverably, with an error naming b and the call.
func (b *Buffer) usedAfterFree(call string) {
	panic(fmt.Errorf("verbsrt: Buffer.%s: %s: %w", call, b.describe(), ErrFreed))
}

// Bytes returns the buffer's memory. The slice holds the buffer's
// contents until Free (a buffer used after Free panics, with an error
// matching ErrFreed). It never faults: kept past the runtime's Close and
// past the last reference to the Buffer (without Free), it stays mapped
// and reads zeros once its memory went back to the system; see the
// package documentation ("Memory").
func (b *Buffer) Bytes() []byte {
	if b.hold.Closed() {
		b.usedAfterFree("Bytes")
	}
	return b.mem
}

// Len returns the buffer's length.
func (b *Buffer) Len() int { return len(b.mem) }

// Local returns the whole buffer as an operation's local memory.
func (b *Buffer) Local() Local { return b.Slice(0, len(b.mem)) }

// Slice returns bytes [off, off+n) of the buffer as an operation's local
// memory. It panics when the range is outside the buffer or the buffer
// was freed.
func (b *Buffer) Slice(off, n int) Local {
	if b.hold.Closed() {
		b.usedAfterFree("Slice")
	}
	if off < 0 || n < 0 || off > len(b.mem)-n {
		panic(fmt.Errorf("verbsrt: Buffer.Slice(%d, %d) outside the %s: %w", off, n, b.describe(), verbs.ErrInvalidArgument))
	}
	return Local{b: b, off: off, n: n}
}

// Expose grants peers the rights given over the whole buffer; see
// ExposeRange.
func (b *Buffer) Expose(rights Rights) (*Exposure, error) {
	return b.ExposeRange(0, len(b.mem), rights)
}

// ExposeRange grants peers the rights given over bytes [off, off+n) of the
// buffer, and nothing more: the Exposure's RemoteRef carries a key of its
// own (a memory region registered for that range and those rights), so
// the device refuses any access outside the range or needing another
// right (the peer's operation fails with REM_ACCESS_ERR and touches
// nothing), and no other memory of the runtime is reachable with it.
// Exposure.Close revokes the key; Free revokes every exposure of the
// buffer before its memory can be reused.
func (b *Buffer) ExposeRange(off, n int, rights Rights) (*Exposure, error) {
	if rights == 0 || rights&^allRights != 0 {
		return nil, fmt.Errorf("verbsrt: expose the %s: rights %v: want a combination of RemoteRead, RemoteWrite and RemoteAtomic: %w",
			b.describe(), rights, verbs.ErrInvalidArgument)
	}
	if n <= 0 {
		return nil, fmt.Errorf("verbsrt: expose %d bytes of the %s: the length must be positive: %w", n, b.describe(), verbs.ErrInvalidArgument)
	}
	if off < 0 || off > len(b.mem)-n {
		return nil, fmt.Errorf("verbsrt: expose [%d, %d+%d) outside the %s: %w", off, off, n, b.describe(), verbs.ErrInvalidArgument)
	}
	// The buffer stays in use while it is being exposed, so a Free racing
	// this call waits for it, and then revokes what it made.
	if !b.hold.Acquire() {
		return nil, fmt.Errorf("verbsrt: expose %s: %w", b.describe(), ErrFreed)
	}
	defer b.hold.Release()
	if err := b.a.usable(); err != nil {
		return nil, fmt.Errorf("verbsrt: expose %s: %w", b.describe(), err)
	}
	mr, err := b.a.pd.RegMR(b.mem[off:off+n], rights.access())
	if err != nil {
		return nil, fmt.Errorf("verbsrt: expose %s: %w", b.describe(), err)
	}
	b.a.revoked.reused(mr.RKey())
	e := &Exposure{b: b, mr: mr, rights: rights}
	b.mu.Lock()
	if b.freed {
		// Free ran while the key was being made, and revoked what it
		// found: this one must not outlive it.
		b.mu.Unlock()
		e.revoke()
		return nil, fmt.Errorf("verbsrt: expose %s: %w", b.describe(), ErrFreed)
	}
	if b.exps == nil {
		b.exps = make(map[*Exposure]struct{})
	}
	b.exps[e] = struct{}{}
	b.mu.Unlock()
	return e, nil
}

// Free gives the buffer back: it revokes the buffer's exposures at once,
// and its memory returns to the arena (or, for Register's memory, is
// deregistered) as soon as no operation uses it any more: an operation
// still in flight keeps it until the device is done with it, even if its
// waiter gave up. Using the buffer after Free panics, and operations
// given a part of it fail with ErrFreed. Freeing twice is a no-op.
func (b *Buffer) Free() {
	b.mu.Lock()
	if b.freed {
		b.mu.Unlock()
		return
	}
	b.freed = true
	exps := b.exps
	b.exps = nil
	b.mu.Unlock()
	for e := range exps {
		e.revoke()
	}
	b.hold.Close() // idle (giveBack) runs once the last operation is done
}

// giveBack runs once the buffer is freed and idle.
func (b *Buffer) giveBack() {
	if b.mr != nil {
		if err := b.a.deregister(b.mr); err != nil {
			b.a.log.Warn("verbsrt: deregistering freed memory", "buffer", b.describe(), "err", err)
		}
		return
	}
	b.a.free(b)
}

// Local is a byte range of a Buffer: the local memory of an operation
// (Buffer.Local, Buffer.Slice). The zero Local is no memory, for a message
// without data.
type Local struct {
	b      *Buffer
	off, n int
}

// Len returns the range's length in bytes.
func (l Local) Len() int { return l.n }

func (l Local) sge() verbs.SGE {
	if l.b == nil {
		return verbs.SGE{}
	}
	return verbs.SGE{Addr: l.b.addr + uint64(l.off), Length: uint32(l.n), LKey: l.b.lkey}
}

// maxOpBytes is the most one operation moves: the IB spec's 2^31.
const maxOpBytes = 1 << 31

// useOne takes a use of l's memory for an operation of a's runtime: the
// hold the actor gives back when the device is done with it (nil for no
// memory).
func (a *allocator) useOne(l Local) (*future.Hold, error) {
	if l.b == nil {
		return nil, nil
	}
	if l.b.a != a {
		// Its key is another protection domain's: the device would fail
		// the operation, and the connection with it.
		return nil, fmt.Errorf("verbsrt: %s belongs to another runtime: %w", l.b.describe(), verbs.ErrInvalidArgument)
	}
	if !l.b.hold.Acquire() {
		return nil, fmt.Errorf("verbsrt: %s: %w", l.b.describe(), ErrFreed)
	}
	return &l.b.hold, nil
}

// use takes one use of each buffer that the local ranges of ops name,
// for one submission: the hold the actor gives back when the device is
// done with all of them (nil for no memory). A buffer named many times,
// as a batch's ranges mostly are slices of one, is held once. On an
// error it returns the index of the op whose range was refused.
func (a *allocator) use(ops []Op) (*future.Hold, int, error) {
	var hs future.Holds
	for i := range ops {
		for _, l := range ops[i].Local {
			if l.b == nil || hs.Has(&l.b.hold) {
				continue
			}
			h, err := a.useOne(l)
			if err != nil {
				hs.Release()
				return nil, i, err
			}
			hs.Add(h)
		}
	}
	return hs.One(), 0, nil
}

// Rights are what a peer may do with exposed memory.
type Rights uint8

// Rights.
const (
	RemoteRead   Rights = 1 << iota // RDMA READ from it
	RemoteWrite                     // RDMA WRITE into it
	RemoteAtomic                    // compare-and-swap and fetch-and-add on its 8-byte words

	allRights = RemoteRead | RemoteWrite | RemoteAtomic
)

func (r Rights) access() verbs.Access {
	a := verbs.AccessLocalWrite // the IB spec: remote write and atomics need it
	if r&RemoteRead != 0 {
		a |= verbs.AccessRemoteRead
	}
	if r&RemoteWrite != 0 {
		a |= verbs.AccessRemoteWrite
	}
	if r&RemoteAtomic != 0 {
		a |= verbs.AccessRemoteAtomic
	}
	return a
}

func (r Rights) String() string {
	s := ""
	for _, n := range []struct {
		r    Rights
		name string
	}{{RemoteRead, "RemoteRead"}, {RemoteWrite, "RemoteWrite"}, {RemoteAtomic, "RemoteAtomic"}} {
		if r&n.r != 0 {
			if s != "" {
				s += "|"
			}
			s += n.name
		}
	}
	if rest := r &^ allRights; rest != 0 || s == "" {
		if s != "" {
			s += "|"
		}
		s += fmt.Sprintf("%#x", uint8(rest))
	}
	return s
}

// Exposure is remote access to a range of a Buffer, with the rights
// granted, under a key of its own (Buffer.ExposeRange). Hand its
// RemoteRef to a peer; Close revokes it.
type Exposure struct {
	b       *Buffer
	mr      verbs.MR
	rights  Rights
	once    sync.Once
	err     error
	revoked atomic.Bool // revoke began
	leaseMu sync.Mutex  // lease
	lease   lease
}

// RemoteRef returns the reference a peer needs: the range's address, its
// key and its length.
func (e *Exposure) RemoteRef() RemoteRef {
	return RemoteRef{Addr: e.mr.Addr(), RKey: e.mr.RKey(), Len: uint64(len(e.mr.Bytes()))}
}

// Close revokes the exposure: once it returns, the device refuses every
// access with its key (REM_ACCESS_ERR at the peer), whatever becomes of
// the memory. Closing twice, or a nil Exposure, is a no-op.
func (e *Exposure) Close() error {
	if e == nil {
		return nil
	}
	e.b.mu.Lock()
	delete(e.b.exps, e)
	e.b.mu.Unlock()
	return e.revoke()
}

func (e *Exposure) revoke() error {
	e.once.Do(func() {
		e.revoked.Store(true)
		e.leaseMu.Lock()
		if e.lease.stop != nil {
			e.lease.stop() // the key goes now: its lease's timer need not keep e
		}
		why := ErrKeyRevoked
		if e.lease.expired {
			why = ErrLeaseExpired
		}
		e.leaseMu.Unlock()
		// Recorded before the device refuses the key, so that a peer's
		// word about a refused access finds it.
		e.b.a.revoked.revoked(e.mr.RKey(), why)
		e.err = e.b.a.deregister(e.mr)
	})
	return e.err
}
