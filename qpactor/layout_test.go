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
