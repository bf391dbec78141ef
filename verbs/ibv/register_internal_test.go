//go:build linux && cgo

package ibv

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestRegMRAcceptsCMemory: memory from C's allocator is not Go's, and
// RegMR takes it; Go heap memory beside it is refused before libibverbs
// sees it. The C memory is the inline scratch of a send queue's calloc'd block (test files
// cannot use cgo themselves). Without a device only the check runs.
func TestRegMRAcceptsCMemory(t *testing.T) {
	const size = 64 << 10
	q, err := newSendQueue(64, 1, size/64) // inline scratch: size bytes
	if err != nil {
		t.Fatal(err)
	}
	defer q.free()
	cmem := unsafe.Slice((*byte)(unsafe.Pointer(q.scratch)), size)
	if err := verbs.CheckRegistrable(cmem); err != nil {
		t.Fatalf("CheckRegistrable(calloc'd memory): %v, want nil", err)
	}
	devs, err := New().Devices()
	if err != nil || len(devs) == 0 {
		t.Skipf("no RDMA device (%v): only the check ran", err)
	}
	ctx, err := devs[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	mr, err := pd.RegMR(cmem, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatalf("RegMR(calloc'd memory): %v", err)
	}
	if mr.Addr() != uint64(uintptr(unsafe.Pointer(&cmem[0]))) || mr.Len() != size {
		t.Errorf("MR at %#x, %d bytes; want %p, %d", mr.Addr(), mr.Len(), &cmem[0], size)
	}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.RegMR(make([]byte, size), verbs.AccessLocalWrite); !errors.Is(err, verbs.ErrGoMemory) {
		t.Errorf("RegMR(make([]byte)): %v, want verbs.ErrGoMemory", err)
	}
}
