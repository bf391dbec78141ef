package lockrank

import (
	"sync"
	"testing"
)

// TestMutexExcludes checks that a Mutex, with or without the tag, is a
// mutex: its zero value is unlocked, one holder at a time, TryLock fails
// while it is held, and another goroutine may unlock it.
func TestMutexExcludes(t *testing.T) {
	var mu Mutex[CQOwner]
	n := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n != 8000 {
		t.Fatalf("n = %d after 8000 increments under the lock", n)
	}

	if !mu.TryLock() {
		t.Fatal("TryLock of a free mutex failed")
	}
	if mu.TryLock() {
		t.Fatal("TryLock of a held mutex succeeded")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		mu.Unlock() // sync.Mutex allows it, and so must Mutex
	}()
	<-done
	if !mu.TryLock() {
		t.Fatal("TryLock failed after another goroutine unlocked")
	}
	mu.Unlock()
}

// TestRanksFollowTheTable checks that the classes have distinct ranks,
// rising in the table's order, so no two classes can nest both ways.
func TestRanksFollowTheTable(t *testing.T) {
	classes := []class{
		Poller{}, CQOwner{}, RecvStore{},
		SoftExec{}, SoftQP{}, SoftSRQ{},
		RoCEQP{}, RoCERx{}, RoCEReceiver{}, RoCESRQ{}, RoCEDeliver{},
		CQ{}, CompChannel{},
		RoCETransport{}, Registry{}, RegistryEvents{},
	}
	for i, c := range classes {
		if c.rank() != Rank(i+1) {
			t.Errorf("%T has rank %d, want %d (its place in the table)", c, c.rank(), i+1)
		}
	}
}

// The pair shows the cost of a Mutex against a sync.Mutex; without the
// tag they must be the same.
func BenchmarkMutex(b *testing.B) {
	var mu Mutex[CQ]
	n := 0
	for b.Loop() {
		mu.Lock()
		n++
		mu.Unlock()
	}
}

func BenchmarkSyncMutex(b *testing.B) {
	var mu sync.Mutex
	n := 0
	for b.Loop() {
		mu.Lock()
		n++
		mu.Unlock()
	}
}
