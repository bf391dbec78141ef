package swhca

import (
	"errors"
	"slices"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestDestroyAllRankOrder checks that a closing context destroys what
// uses an object before the object, and that a resource closed later
// learns it was destroyed already.
func TestDestroyAllRankOrder(t *testing.T) {
	var r Registry
	r.Init("owner", 4)
	var got []Rank
	for _, rank := range []Rank{RankPD, RankCQ, RankQP, RankMR, RankChannel, RankSRQ, RankAH, RankXRCD} {
		if err := r.Add("op", new(int), rank, func() { got = append(got, rank) }); err != nil {
			t.Fatal(err)
		}
	}
	if !r.DestroyAll() || r.DestroyAll() {
		t.Fatal("DestroyAll: want true once, then false")
	}
	want := []Rank{RankQP, RankSRQ, RankAH, RankMR, RankXRCD, RankCQ, RankChannel, RankPD}
	if !slices.Equal(got, want) {
		t.Errorf("destroyed in rank order %v, want %v", got, want)
	}
	if r.Remove(new(int)) {
		t.Error("Remove after DestroyAll reported the resource still registered")
	}
	if err := r.Add("ibv_alloc_pd", new(int), RankPD, func() {}); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Add on a closed context: %v, want ErrClosed", err)
	}
}

// TestRaiseDropsWhenFull checks that Raise never blocks: past the buffer
// it counts the events it drops.
func TestRaiseDropsWhenFull(t *testing.T) {
	var r Registry
	r.Init(nil, 2)
	for range 5 {
		r.Raise(verbs.AsyncEvent{Type: verbs.EventCQErr})
	}
	if n := r.DroppedEvents(); n != 3 {
		t.Errorf("dropped %d events, want 3", n)
	}
	r.EndEvents(nil)
	r.Raise(verbs.AsyncEvent{Type: verbs.EventCQErr})
	n := 0
	for range r.AsyncEvents() {
		n++
	}
	if n != 2 {
		t.Errorf("delivered %d events, want 2", n)
	}
}

func TestQueueCapacity(t *testing.T) {
	for _, c := range []struct{ req, want int }{{0, 1}, {1, 1}, {2, 3}, {3, 3}, {4, 7}, {16, 31}, {16384, 32767}} {
		if got := QueueCapacity(c.req); got != c.want {
			t.Errorf("QueueCapacity(%d) = %d, want %d", c.req, got, c.want)
		}
	}
}

// TestSRQLimit walks srq_limit through arming, crossing and re-arming:
// the limit fires once, on the consumption that leaves fewer receives.
func TestSRQLimit(t *testing.T) {
	z, err := NewSRQSize(verbs.SRQSpec{MaxWR: 8, MaxSGE: 0, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if a := z.Attr(); a.MaxWR != 15 || a.MaxSGE != 1 || a.Limit != 3 {
		t.Fatalf("Attr %+v, want max_wr 15, max_sge 1, limit 3", a)
	}
	steps := []struct {
		left int
		fire bool
	}{{5, false}, {3, false}, {2, true}, {1, false}}
	for _, s := range steps {
		if got := z.Consumed(s.left); got != s.fire {
			t.Errorf("Consumed(%d) = %v, want %v", s.left, got, s.fire)
		}
	}
	if err := z.Modify(verbs.SRQAttr{Limit: 16}, verbs.SRQAttrLimit); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("limit above max_wr: %v, want ErrInvalidArgument", err)
	}
	if err := z.Modify(verbs.SRQAttr{MaxWR: 32}, verbs.SRQAttrMaxWR); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("resize: %v, want ErrNotSupported", err)
	}
	if err := z.Modify(verbs.SRQAttr{Limit: 4}, verbs.SRQAttrLimit); err != nil || !z.Consumed(3) {
		t.Errorf("re-armed limit 4 did not fire at 3 left (err %v)", err)
	}
}
