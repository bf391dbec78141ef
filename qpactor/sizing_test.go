package qpactor_test

import (
	"context"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestSendDepthCapsCredits: an actor told the send-queue depth that was
// asked for fills no more than that, though the provider rounded
// max_send_wr up (256 asked, 511 granted), and needs scratch for that
// depth only.
func TestSendDepthCapsCredits(t *testing.T) {
	r := newRig(t, 256, func(c *qpactor.Config) {
		c.SendDepth = 256
		c.Scratch.Bytes = c.Scratch.Bytes[:qpactor.ScratchSize(256)]
	})
	attr, _ := r.actor.QP().Query()
	if attr.Cap.MaxSendWR != 511 {
		t.Fatalf("max_send_wr 256 granted %d, want 511", attr.Cap.MaxSendWR)
	}
	if got := r.actor.Credits(); got != 256 {
		t.Fatalf("Credits %d, want 256", got)
	}
	var fs []future.Future
	for i := range 300 {
		op := r.write(i % 1000)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	r.actor.Start()
	for deadline := time.Now().Add(10 * time.Second); r.actor.Stats().WRsPosted.Load() < 256; {
		if time.Now().After(deadline) {
			t.Fatalf("%d WRs posted, want 256", r.actor.Stats().WRsPosted.Load())
		}
		backOff()
	}
	time.Sleep(10 * time.Millisecond)
	if n := r.actor.Stats().WRsPosted.Load(); n != 256 || r.actor.Outstanding() != 256 {
		t.Fatalf("%d WRs posted, %d outstanding before any completion, want 256", n, r.actor.Outstanding())
	}
	r.poll(t, fs...)
	for i, f := range fs {
		if _, err := future.Wait(f, context.Background(), byteLen); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if got := r.actor.Credits(); got != 256 {
		t.Fatalf("Credits %d after every completion, want 256", got)
	}
}

// TestShadowGrowsWithOutstandingWRs: the table that maps outstanding WRs
// to their futures starts small and grows while WRs are outstanding,
// without holding back what is queued: 40 FETCH_ADDs submitted behind 8
// outstanding ones go out before any of those completes, and every
// future resolves with its own result (each sees a different value: no
// two atomics shared a scratch slot across the tables).
func TestShadowGrowsWithOutstandingWRs(t *testing.T) {
	r := newRig(t, 256)
	fetchAdd := func() future.Future {
		t.Helper()
		op := qpactor.Op{Opcode: verbs.OpAtomicFetchAdd, CompareAdd: 1,
			Remote: verbs.RDMA{RemoteAddr: r.peer.Addr() + 256<<10, RKey: r.peer.RKey()}}
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	r.actor.Start()
	// 13 first, one at a time: the sequence numbers no longer start at a
	// table's first entry, so the tables map them to different slots.
	var adds []future.Future
	for range 13 {
		f := fetchAdd()
		r.poll(t, f)
		adds = append(adds, f)
	}
	for range 8 { // as many as the first table holds
		adds = append(adds, fetchAdd())
	}
	waitOutstanding := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); r.actor.Outstanding() < n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d WRs outstanding, want %d", r.actor.Outstanding(), n)
			}
			backOff()
		}
	}
	waitOutstanding(8)
	// Nobody polls yet: the 8 stay outstanding while 40 more go out, one
	// at a time, through tables of 16, 32 and 64.
	for range 40 {
		adds = append(adds, fetchAdd())
		waitOutstanding(len(adds) - 13)
	}
	r.poll(t, adds...)
	seen := make(map[uint64]bool)
	for i, f := range adds {
		v, err := future.Wait(f, context.Background(), (*future.State).Value)
		if err != nil {
			t.Fatalf("fetch-add %d: %v", i, err)
		}
		if v >= 61 || seen[v] {
			t.Fatalf("fetch-add %d found %d: each of the 61 must find a different value below 61", i, v)
		}
		seen[v] = true
	}
	if st := r.actor.Stats(); r.actor.Outstanding() != 0 || st.Stale.Load() != 0 {
		t.Fatalf("%d outstanding, %d stale completions", r.actor.Outstanding(), st.Stale.Load())
	}
}
