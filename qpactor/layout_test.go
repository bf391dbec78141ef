package qpactor

import (
	"testing"
	"unsafe"
)

// TestActorSize holds the Actor within the allocator's 4 KiB size class:
// every endpoint has one, idle or not. An object with pointers larger than
// 512 bytes carries an 8-byte header in front of it, so 4,088 bytes is the
// most that fits; the next class is 4,864 bytes, on spans of 5 objects.
func TestActorSize(t *testing.T) {
	if size := unsafe.Sizeof(Actor{}); size > 4096-8 {
		t.Errorf("Actor is %d bytes, more than 4088", size)
	}
}
