package uses_test

import (
	"sync"
	stdatomic "sync/atomic"
	"testing"

	"github.com/verbsrt/verbsrt/internal/uses"
)

// TestIdleOnceAfterLastUse: however Acquire, Release and Close race,
// idle runs exactly once, only after Close and the last use given back,
// and no use is taken after Close.
func TestIdleOnceAfterLastUse(t *testing.T) {
	for range 200 {
		var h uses.Count
		var idle, inUse stdatomic.Int32
		h.Init(func() {
			if inUse.Load() != 0 {
				t.Error("idle ran while a use was taken")
			}
			idle.Add(1)
		})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 100 {
					if h.Acquire() {
						inUse.Add(1)
						inUse.Add(-1)
						h.Release()
					}
				}
			})
		}
		wg.Go(func() { h.Close() })
		wg.Wait()
		if h.Close() {
			t.Fatal("Close reported closing a closed hold")
		}
		if h.Acquire() {
			t.Fatal("Acquire succeeded after Close")
		}
		if n := idle.Load(); n != 1 {
			t.Fatalf("idle ran %d times, want 1", n)
		}
	}
}
