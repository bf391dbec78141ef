package verbs

import (
	"fmt"
	"runtime"
	"strings"
)

// CheckRegistrable returns nil when buf may be registered with PD.RegMR: it
// is not empty, and neither its first nor its last byte is memory the Go
// runtime owns. Every provider's RegMR calls it first; an application may
// call it to fail before it has a PD.
//
// A device reads and writes registered memory after the calls that posted
// its WRs have returned, for as long as the MR lives. The collector may
// free and reuse heap memory the program no longer references meanwhile,
// and the cgo rules forbid C keeping a pointer to any Go memory (a
// package-level variable included). Memory from NewArena, syscall.Mmap or
// C's allocator is not Go's and is accepted.
//
// The error, an *Error, matches ErrGoMemory (and ErrInvalidArgument, and
// EINVAL) for Go memory, ErrInvalidArgument for an empty buf. It costs one
// registration of a cleanup with the runtime (runtime.AddCleanup, stopped
// at once) per end of buf: for RegMR, not for a data path.
func CheckRegistrable(buf []byte) error {
	const op = "ibv_reg_mr"
	if len(buf) == 0 {
		return NewError(op, ErrInvalidArgument, "empty buffer")
	}
	for _, p := range [2]*byte{&buf[0], &buf[len(buf)-1]} {
		if where := goMemory(p); where != "" {
			return Errorf(op, ErrGoMemory, "%d bytes at %p: %s; register memory from verbs.NewArena, "+
				"syscall.Mmap or C's malloc instead", len(buf), &buf[0], where)
		}
	}
	return nil
}

// Where goMemory says Go memory lies, and why a device must not keep it.
const (
	inGoHeap = "in the Go heap, which the collector may free and reuse while the device still " +
		"writes to it"
	inGoData = "in a package-level variable, Go memory that C and the device may not keep once a " +
		"call returns (the cgo pointer rules)"
)

// notGoMemory is the panic of runtime.AddCleanup for a pointer outside the
// heap and the binary's data and bss (go1.24 to go1.26 at least: see
// $GOROOT/src/runtime/mcleanup.go).
const notGoMemory = "not in allocated block"

// goMemory says where p lies when the Go runtime owns it, or returns "" for
// memory it does not own. It asks the runtime to attach a cleanup to p,
// which the runtime does for a heap object (the cleanup is stopped at
// once), ignores for its data and bss (a zero Cleanup), and refuses with a
// panic for anything else: mmap'd memory, C's heap. Any other panic, say
// for memory of a GOEXPERIMENT=arenas arena, counts as Go memory, so that
// a runtime that words its refusal differently fails closed. (Under
// GODEBUG=sbrk=1 the runtime ignores every cleanup, so all memory looks
// like data and is refused.)
func goMemory(p *byte) (where string) {
	defer func() {
		if r := recover(); r != nil {
			if msg := fmt.Sprint(r); !strings.Contains(msg, notGoMemory) {
				where = "memory the Go runtime owns (runtime.AddCleanup: " + msg + ")"
			}
		}
	}()
	c := runtime.AddCleanup(p, noCleanup, struct{}{})
	if c == (runtime.Cleanup{}) {
		return inGoData
	}
	c.Stop()
	runtime.KeepAlive(p)
	return inGoHeap
}

func noCleanup(struct{}) {}
