//go:build unix

package verbs

import (
	"os"
	"sync"
	"syscall"
)

// Arena is memory mapped outside the Go heap, for registration. The
// collector never moves or frees it, so a device may read and write it after
// the call that posted a WR has returned; Close unmaps it.
//
// Bytes may be used concurrently; Close must not race with users of the
// memory (close the MRs over it first).
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
