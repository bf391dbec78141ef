//go:build lockrank

//lint:file-ignore SA2001 these locks guard nothing: taking them is the test

package lockrank

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// lockPanics runs lock and returns what it panicked with, nil if it
// returned.
func lockPanics(lock func()) (v any) {
	defer func() { v = recover() }()
	lock()
	return nil
}

// wantOrderError fails t unless v is the order error of taking `want`
// while holding `held`, naming both with their ranks.
func wantOrderError(t *testing.T, v any, taking string, holding ...string) {
	t.Helper()
	err, ok := v.(error)
	var oe *orderError
	if !ok || !errors.As(err, &oe) {
		t.Fatalf("Lock panicked with %v, want an order error", v)
	}
	msg := oe.Error()
	if !strings.Contains(msg, "locks "+taking+" (rank ") {
		t.Errorf("message %q does not name the lock taken, %s", msg, taking)
	}
	for _, h := range holding {
		if !strings.Contains(msg, "holds "+h+" (rank ") && !strings.Contains(msg, ", "+h+" (rank ") {
			t.Errorf("message %q does not name the lock held, %s", msg, h)
		}
	}
}

// TestInvertedOrderPanics takes the cross-package chain backwards: a
// goroutine holding a CQ's lock (the provider's side) locks the runtime's
// receive store, as code re-posting receives from a completion callback
// under the CQ's lock would. Lock panics before it waits, and what was
// held stays held and releasable.
func TestInvertedOrderPanics(t *testing.T) {
	var cq Mutex[CQ]
	var store Mutex[RecvStore]
	cq.Lock()
	v := lockPanics(store.Lock)
	wantOrderError(t, v, "RecvStore", "CQ")
	cq.Unlock()

	// The store is free, and the goroutine holds nothing now.
	store.Lock()
	cq.Lock()
	cq.Unlock()
	store.Unlock()
	assertNothingHeld(t)
}

// TestSameRankPanics nests two locks of one rank, and one lock in itself:
// the first is how two goroutines deadlock, the second how one does.
func TestSameRankPanics(t *testing.T) {
	var a, b Mutex[CQOwner]
	a.Lock()
	wantOrderError(t, lockPanics(b.Lock), "CQOwner", "CQOwner")
	wantOrderError(t, lockPanics(a.Lock), "CQOwner", "CQOwner")
	a.Unlock()
	assertNothingHeld(t)
}

// TestInversionNamesEveryLockAbove holds three locks and takes one below
// two of them: the message names both.
func TestInversionNamesEveryLockAbove(t *testing.T) {
	var owner Mutex[CQOwner]
	var qp Mutex[SoftQP]
	var cq Mutex[CQ]
	var srq Mutex[SoftSRQ]
	owner.Lock()
	qp.Lock()
	cq.Lock()
	v := lockPanics(qp.Lock)
	wantOrderError(t, v, "SoftQP", "SoftQP", "CQ")
	if msg := v.(error).Error(); strings.Contains(msg, "CQOwner") {
		t.Errorf("message %q names a lock below the one taken", msg)
	}
	wantOrderError(t, lockPanics(srq.Lock), "SoftSRQ", "CQ")
	cq.Unlock()
	qp.Unlock()
	owner.Unlock()
	assertNothingHeld(t)
}

// TestChainInOrderPasses walks the chain of the table in order, releases
// out of order, and takes again what ranks above what is still held.
func TestChainInOrderPasses(t *testing.T) {
	var poller Mutex[Poller]
	var owner Mutex[CQOwner]
	var store Mutex[RecvStore]
	var srq Mutex[RoCESRQ]
	var cq Mutex[CQ]
	var ch Mutex[CompChannel]
	var reg Mutex[Registry]
	var ev Mutex[RegistryEvents]
	poller.Lock()
	owner.Lock()
	store.Lock()
	srq.Lock()
	cq.Lock()
	ch.Lock()
	reg.Lock()
	ev.Lock()
	cq.Unlock() // out of order: the rest stay held
	store.Unlock()
	ev.Unlock()
	reg.Unlock()
	ch.Unlock()
	// Highest held now: the SRQ's lock; the CQ's ranks above it.
	cq.Lock()
	cq.Unlock()
	srq.Unlock()
	store.Lock() // above the owner, the highest held
	store.Unlock()
	owner.Unlock()
	poller.Unlock()
	assertNothingHeld(t)
}

// TestTryLockTakesAnyRank: a TryLock never waits, so it may take a lock
// below what is held (the inline drain's poll tries a CQ's handler lock
// under the provider's); the Locks after it still see what is held.
func TestTryLockTakesAnyRank(t *testing.T) {
	var qp Mutex[RoCEQP]
	var owner, other Mutex[CQOwner]
	var store Mutex[RecvStore]
	qp.Lock()
	if !owner.TryLock() {
		t.Fatal("TryLock of a free mutex failed")
	}
	if other.TryLock() != true {
		t.Fatal("TryLock of a second free mutex of one rank failed")
	}
	wantOrderError(t, lockPanics(store.Lock), "RecvStore", "RoCEQP")
	qp.Unlock()
	// Held now: the two handler locks; the store ranks above both.
	store.Lock()
	store.Unlock()
	other.Unlock()
	owner.Unlock()
	assertNothingHeld(t)
}

// TestUnlockByAnotherGoroutine: the goroutine that locked a Mutex another
// one unlocked holds it no more.
func TestUnlockByAnotherGoroutine(t *testing.T) {
	var cq Mutex[CQ]
	var store Mutex[RecvStore]
	cq.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cq.Unlock()
	}()
	<-done
	store.Lock()
	store.Unlock()
	assertNothingHeld(t)
}

// TestManyHolders runs many goroutines through the chain at once, with
// more holders than share a home in the table, and checks the table is
// empty after.
func TestManyHolders(t *testing.T) {
	var owners [64]Mutex[CQOwner]
	var store Mutex[RecvStore]
	var cqs [8]Mutex[CQ]
	var wg sync.WaitGroup
	for i := range 256 {
		wg.Go(func() {
			for k := range 200 {
				o := &owners[(i+k)%len(owners)]
				o.Lock()
				store.Lock()
				c := &cqs[(i*k)%len(cqs)]
				c.Lock()
				store.Unlock()
				c.Unlock()
				o.Unlock()
			}
		})
	}
	wg.Wait()
	assertNothingHeld(t)
}

// TestGoroutineIDs checks goid tells goroutines apart.
func TestGoroutineIDs(t *testing.T) {
	ids := make(chan uint64, 16)
	var wg sync.WaitGroup
	for range cap(ids) {
		wg.Go(func() { ids <- goid() })
	}
	wg.Wait()
	close(ids)
	seen := map[uint64]bool{goid(): true}
	for id := range ids {
		if id == 0 || seen[id] {
			t.Fatalf("goid returned %d twice or zero", id)
		}
		seen[id] = true
	}
}

func assertNothingHeld(t *testing.T) {
	t.Helper()
	raceDisable()
	table.mu.Lock()
	n := holders()
	table.mu.Unlock()
	raceEnable()
	if n != 0 {
		t.Fatalf("%d goroutines still recorded as holding ranked locks", n)
	}
}

//go:norace
func holders() int {
	n := 0
	for i := range table.h {
		if table.h[i].g != 0 {
			n++
		}
	}
	return n
}

// TestGoidOffsetFound checks the fast goroutine id is in use where getg
// exists, and agrees with the stack trace's.
func TestGoidOffsetFound(t *testing.T) {
	if getg() == nil {
		t.Skip("no getg on this architecture")
	}
	if goidOffset < 0 {
		t.Fatal("the goroutine id's offset was not found")
	}
	for range 4 {
		done := make(chan [2]uint64)
		go func() { done <- [2]uint64{goid(), stackGoid()} }()
		if ids := <-done; ids[0] != ids[1] {
			t.Fatalf("goid %d, stack trace says %d", ids[0], ids[1])
		}
	}
}
