package qpactor_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/qpactor"
)

// actorGoroutines counts the goroutines running an actor's loop.
func actorGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "qpactor.(*Actor).run(")
}

// waitActorGoroutines waits until n goroutines run actors.
func waitActorGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for actorGoroutines() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines run actors, want %d", actorGoroutines(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIdleActorEndsItsGoroutine: an actor with nothing to do ends its
// goroutine (and gives its OS thread back); the next submission starts a
// new one, which posts it. With Park the goroutine stays, parked.
func TestIdleActorEndsItsGoroutine(t *testing.T) {
	base := actorGoroutines()
	r := newRig(t, 64)
	r.actor.Start()
	waitActorGoroutines(t, base) // idle past its spin: gone
	for i := range 3 {
		op := r.write(i)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		r.poll(t, f)
		if _, err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitActorGoroutines(t, base)
	}

	parked := newRig(t, 64, func(c *qpactor.Config) { c.Park = true })
	parked.actor.Start()
	time.Sleep(10 * time.Millisecond) // well past its spin
	if n := actorGoroutines(); n != base+1 {
		t.Fatalf("%d goroutines run actors with Park, want %d", n, base+1)
	}
}
