//go:build unix

package verbs

import (
	"os"
	"sync"
	"syscall"
)

// Arena is memory mapped outside the Go heap, for registration. The
// collector never moves or frees it, so a device may read and write it after
// the call that posted a WR has returned; Close unmaps it, and Retire
// gives its memory back while keeping its addresses mapped.
//
// Bytes may be used concurrently; Close and Retire must not race with the
// device's use of the memory (close the MRs over it first), and Close must
// not race with any user of it.
type Arena struct {
	mu  sync.Mutex
	mem []byte
}

// NewArena maps size bytes (rounded up to a whole page) of anonymous, zeroed
// memory.
func NewArena(size int) (*Arena, error) {
	if size <= 0 {
		return nil, Errorf("mmap", ErrInvalidArgument, "arena size %d", size)
	}
	page := os.Getpagesize()
	size = (size + page - 1) &^ (page - 1)
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_ANON|syscall.MAP_PRIVATE|mapPopulate)
	if err != nil {
		errno, _ := err.(syscall.Errno)
		return nil, FromErrno("mmap", errno, "arena")
	}
	return &Arena{mem: mem}, nil
}

// Bytes returns the whole mapping, or nil after Close.
func (a *Arena) Bytes() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mem
}

// Len returns the size of the mapping in bytes (0 after Close).
func (a *Arena) Len() int { return len(a.Bytes()) }

// Retire gives the arena's pages back to the system but leaves its
// address range mapped, readable and writable, for the rest of the
// process: a slice of it that escaped where nobody can recall it (Go
// cannot tell when a slice into memory outside its heap is dropped) keeps
// working instead of faulting. On Linux the pages are dropped
// (MADV_DONTNEED): such a slice reads zeros, and what the process keeps
// is address space, not memory; elsewhere the pages stay as they are.
// After Retire, Bytes returns nil and Close does nothing.
func (a *Arena) Retire() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return nil
	}
	err := dropPages(a.mem)
	a.mem = nil
	return err
}

// Close unmaps the arena. Closing twice is a no-op.
func (a *Arena) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return nil
	}
	err := syscall.Munmap(a.mem)
	a.mem = nil
	return err
}
