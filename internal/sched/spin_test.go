package sched

import (
	"runtime"
	"testing"
)

// TestSpinSlots: with GOMAXPROCS 2 one locked goroutine may spin flat out;
// a second is refused, and one spinning only in hope (AcquireIdle) gives
// its slot up to a goroutine that Acquire refused.
func TestSpinSlots(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	var actor1, actor2, poller SpinSlot
	if !actor1.Acquire() {
		t.Fatal("the first Acquire was refused")
	}
	if actor2.Acquire() {
		t.Fatal("a second slot was handed out with GOMAXPROCS 2")
	}
	actor1.Release()
	if poller.AcquireIdle() {
		t.Fatal("AcquireIdle took the slot an Acquire is waiting for")
	}
	if !actor2.Acquire() {
		t.Fatal("the free slot was refused")
	}
	actor2.Release()
	if !poller.AcquireIdle() {
		t.Fatal("AcquireIdle refused a free slot nobody waits for")
	}
	if actor1.Acquire() {
		t.Fatal("the idle spinner's slot was handed out twice")
	}
	if poller.AcquireIdle() {
		t.Fatal("the idle spinner kept its slot while an actor waits")
	}
	if !actor1.Acquire() {
		t.Fatal("the slot given up was refused")
	}
	actor1.Release()
	if n := lockedSpinners.Load(); n != 0 {
		t.Fatalf("%d slots held after every Release", n)
	}
}

// TestSpinSlotsOneP: on one P no locked goroutine may spin without
// yielding (it would hold the only P), and a slot held when GOMAXPROCS
// goes down is given back.
func TestSpinSlotsOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	var held, fresh SpinSlot
	if !held.Acquire() {
		t.Fatal("refused with GOMAXPROCS 2")
	}
	runtime.GOMAXPROCS(1)
	if fresh.Acquire() || fresh.AcquireIdle() {
		t.Fatal("a slot was handed out on one P")
	}
	for i := 0; held.Acquire(); i++ {
		if i > 2*limitRefresh {
			t.Fatal("a slot held since before GOMAXPROCS went to 1 was kept")
		}
	}
	if n := lockedSpinners.Load(); n != 0 {
		t.Fatalf("%d slots held on one P", n)
	}
}

// TestSpinWantedEndsWithTheWanter: a goroutine that Acquire refused stops
// wanting a slot when it Releases (parks): an idle spinner may then spin
// again; a want that stayed set until some later Acquire succeeded would
// keep every idle poller from spinning.
func TestSpinWantedEndsWithTheWanter(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	var busy, refused, poller SpinSlot
	if !busy.Acquire() {
		t.Fatal("the first Acquire was refused")
	}
	if refused.Acquire() {
		t.Fatal("a second slot was handed out with GOMAXPROCS 2")
	}
	refused.Acquire() // still wanting: counted once
	if n := spinWanters.Load(); n != 1 {
		t.Fatalf("%d goroutines want a slot, want 1", n)
	}
	refused.Release() // it parks
	busy.Release()
	if !poller.AcquireIdle() {
		t.Fatal("AcquireIdle refused a free slot after the goroutine that wanted one parked")
	}
	poller.Release()
	if n, w := lockedSpinners.Load(), spinWanters.Load(); n != 0 || w != 0 {
		t.Fatalf("%d slots held and %d wanted after every Release", n, w)
	}
}
