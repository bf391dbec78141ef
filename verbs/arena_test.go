//go:build linux

package verbs_test

import (
	"testing"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestArenaRetire: a retired arena's memory stays mapped, readable and
// writable, and reads zeros (its pages went back to the system); Bytes is
// nil afterwards and Close does nothing.
func TestArenaRetire(t *testing.T) {
	ar, err := verbs.NewArena(3 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	kept := ar.Bytes()
	for i := range kept {
		kept[i] = 0x5a
	}
	if err := ar.Retire(); err != nil {
		t.Fatal(err)
	}
	if ar.Bytes() != nil || ar.Len() != 0 {
		t.Errorf("Bytes of a retired arena: %d bytes, want none", ar.Len())
	}
	if err := ar.Close(); err != nil {
		t.Errorf("Close after Retire: %v", err)
	}
	for i, b := range kept {
		if b != 0 {
			t.Fatalf("byte %d of a retired arena at %p: %#x, want 0", i, unsafe.Pointer(&kept[0]), b)
		}
	}
	kept[len(kept)-1] = 1 // still writable
	if err := ar.Retire(); err != nil {
		t.Errorf("Retire twice: %v", err)
	}
}
