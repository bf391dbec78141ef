package qpactor

import (
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/ring"
)

// TestGatherLoneCaller: drains of one submission never make the next one
// wait, except the probe every probeEvery drains, which a drain of one
// ends.
func TestGatherLoneCaller(t *testing.T) {
	inbox := ring.New[submission](64)
	var g gatherer
	waits := 0
	for range 10 * probeEvery {
		g.drained(1)
		if g.stream {
			waits++
			g.drained(1) // the probe found the caller alone
		}
		if g.stream {
			t.Fatal("a drain of one after a wait left stream mode on")
		}
		if !g.due(inbox) {
			t.Fatal("a lone caller's next drain has to wait")
		}
	}
	if waits != 10 {
		t.Fatalf("%d probes in %d drains, want 10", waits, 10*probeEvery)
	}
}

// TestGatherStream: after a drain of several, the next drain waits until
// gatherTarget submissions are queued or the wait bound passed; each
// further drain of several doubles the bound, up to maxGather.
func TestGatherStream(t *testing.T) {
	inbox := ring.New[submission](64)
	var g gatherer
	g.drained(3)
	if !g.stream || g.wait != probeGather {
		t.Fatalf("after a drain of 3: stream %v, wait %v", g.stream, g.wait)
	}
	// The queue alone decides while the wait runs; a long bound keeps the
	// clock (and a slow -race run) out of it.
	g.wait = time.Hour
	for range 4 * gatherStride {
		if g.due(inbox) {
			t.Fatal("due with an empty inbox right after the drain")
		}
	}
	for range gatherTarget {
		inbox.TryPush(&submission{})
	}
	due := false
	for range gatherStride {
		due = due || g.due(inbox)
	}
	if !due {
		t.Fatal("not due with gatherTarget submissions queued")
	}
	g.wait = probeGather
	for range 10 {
		g.drained(gatherTarget)
	}
	if g.wait != maxGather {
		t.Fatalf("wait %v after many full drains, want %v", g.wait, maxGather)
	}
	g.since = time.Now().Add(-maxGather)
	due = false
	for range gatherStride {
		due = due || g.due(ring.New[submission](64))
	}
	if !due {
		t.Fatal("not due after the wait bound passed")
	}
}
