package qpactor

import (
	"testing"
	"unsafe"
)

// TestFutStateLayout holds futState to the layout its comment describes:
// what every operation touches fits the first 64-byte line, and the size
// keeps the allocator's 128-byte class (states aligned to 128 bytes).
func TestFutStateLayout(t *testing.T) {
	var s futState
	if end := unsafe.Offsetof(s.err) + unsafe.Sizeof(s.err); end > 64 {
		t.Errorf("the per-operation fields end at byte %d, past the first cache line", end)
	}
	if size := unsafe.Sizeof(s); size != 128 {
		t.Errorf("futState is %d bytes, want 128", size)
	}
}

// TestActorSize holds the Actor within the allocator's 4 KiB size class:
// every endpoint has one, idle or not. An object with pointers larger than
// 512 bytes carries an 8-byte header in front of it, so 4,088 bytes is the
// most that fits; the next class is 4,864 bytes, on spans of 5 objects.
func TestActorSize(t *testing.T) {
	if size := unsafe.Sizeof(Actor{}); size > 4096-8 {
		t.Errorf("Actor is %d bytes, more than 4088", size)
	}
}
