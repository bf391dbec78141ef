//go:build lockrank

package lockrank

import (
	"runtime"
	"unsafe"
)

// goid is the calling goroutine's id. Go has no API for it; the id is a
// field of the runtime's goroutine structure, which getg (assembly, for
// the architectures that have it) finds. Where the field's offset was not
// found at init, the id comes from the first line of the goroutine's
// stack trace, which costs a traceback per call.
func goid() uint64 {
	if goidOffset >= 0 {
		return goidAt(getg(), goidOffset)
	}
	return stackGoid()
}

// goidOffset is the offset of the id in the runtime's goroutine
// structure, -1 when unknown.
var goidOffset = findGoidOffset()

// gScan is how many bytes of a goroutine structure findGoidOffset
// searches; the id sits well within them.
const gScan = 256

// findGoidOffset searches the goroutine structures of a few goroutines
// for the words that hold each one's id (as its stack trace tells it);
// the one offset where every goroutine's id sits is the id's. Any doubt
// (no getg, no such offset, more than one) leaves it unknown.
func findGoidOffset() int {
	type sample struct {
		g  unsafe.Pointer
		id uint64
	}
	const n = 4
	samples := make(chan sample, n)
	release := make(chan struct{})
	for range n {
		go func() {
			samples <- sample{getg(), stackGoid()}
			<-release // alive, and its structure not reused, until the search ends
		}()
	}
	got := make([]sample, 0, n)
	for range n {
		got = append(got, <-samples)
	}
	defer close(release)
	found := -1
	for off := 0; off+8 <= gScan; off += 8 {
		match := true
		for _, s := range got {
			if s.g == nil || goidAt(s.g, off) != s.id {
				match = false
				break
			}
		}
		if match {
			if found >= 0 {
				return -1
			}
			found = off
		}
	}
	return found
}

// goidAt reads the word at off in the goroutine structure g, which the
// pointer checks cannot tell the size of.
//
//go:norace
//go:nocheckptr
func goidAt(g unsafe.Pointer, off int) uint64 {
	return *(*uint64)(unsafe.Add(g, off))
}

// stackGoid reads the id from the first line of the calling goroutine's
// stack trace ("goroutine 12 [running]:").
func stackGoid() uint64 {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	var id uint64
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
