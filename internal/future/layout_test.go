package future

import (
	"testing"
	"unsafe"
)

// TestStateLayout holds State to the layout its comment describes:
// what every operation touches fits the first 64-byte line, the fields
// set per state or on demand start the second, and the size keeps the
// allocator's 128-byte class (states aligned to 128 bytes).
func TestStateLayout(t *testing.T) {
	var s State
	if end := unsafe.Offsetof(s.err) + unsafe.Sizeof(s.err); end > 64 {
		t.Errorf("the per-operation fields end at byte %d, past the first cache line", end)
	}
	if off := unsafe.Offsetof(s.hold); off != 64 {
		t.Errorf("the second line's fields start at byte %d, want 64", off)
	}
	if size := unsafe.Sizeof(s); size != 128 {
		t.Errorf("State is %d bytes, want 128", size)
	}
}
