//go:build linux && cgo

package ibv

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAHShutWaitsForPosts: shut, the first half of an AH's Close, returns
// only once the posts holding the AH have released it, and no post takes
// it afterwards. No device needed: the C object is never touched.
func TestAHShutWaitsForPosts(t *testing.T) {
	a := newAH(nil, nil)
	for range 2 {
		if !a.uses.Acquire() {
			t.Fatal("acquire of an open AH failed")
		}
	}
	shut := make(chan struct{})
	go func() { a.shut(); close(shut) }()
	for !a.uses.Closed() {
		time.Sleep(time.Millisecond)
	}
	if a.uses.Acquire() {
		t.Fatal("acquire succeeded once Close had begun")
	}
	a.uses.Release()
	select {
	case <-shut:
		t.Fatal("shut returned with a post still holding the AH")
	case <-time.After(20 * time.Millisecond):
	}
	a.uses.Release()
	select {
	case <-shut:
	case <-time.After(10 * time.Second):
		t.Fatal("shut did not return after the last release")
	}
	a.shut() // again, as a Close retried after a failed destroy: returns at once
}

// TestAHShutRace: posters acquire and release in loops while the AH is
// shut; nothing holds it once shut returns (run with -race).
func TestAHShutRace(t *testing.T) {
	for range 200 {
		a := newAH(nil, nil)
		var holding atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for a.uses.Acquire() {
					holding.Add(1)
					holding.Add(-1)
					a.uses.Release()
				}
			}()
		}
		a.shut()
		if n := holding.Load(); n != 0 {
			t.Fatalf("%d posts hold the AH after shut returned", n)
		}
		wg.Wait()
		if !a.uses.Closed() || a.uses.Uses() != 0 {
			t.Fatalf("%d uses, closed %v, after every post ended; want closed and none", a.uses.Uses(), a.uses.Closed())
		}
	}
}
