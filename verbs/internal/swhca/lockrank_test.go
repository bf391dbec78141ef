//go:build lockrank

package swhca

import (
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestPushUnderRegistryLockPanics pushes a completion while holding the
// registry's lock, a leaf: the CQ's lock ranks below it, so the CQ's Lock
// panics, naming both. It shows the fields carry their ranks: a plain
// build would take the two in the order the table forbids and go on.
func TestPushUnderRegistryLockPanics(t *testing.T) {
	var r Registry
	r.Init("owner", 4)
	q, err := CreateCQ(&r, verbs.CQSpec{CQE: 4}, MaxCQE, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := func() (v any) {
		defer func() { v = recover() }()
		r.mu.Lock()
		defer r.mu.Unlock()
		q.Push(&verbs.WC{}, false)
		return nil
	}()
	err, _ = v.(error)
	if err == nil || !strings.Contains(err.Error(), "locks CQ (rank ") || !strings.Contains(err.Error(), "holds Registry (rank ") {
		t.Fatalf("Push under Registry.mu: panic %v, want an order error naming CQ and Registry", v)
	}

	// In order, the same push passes, and the CQ holds the completion.
	q.Push(&verbs.WC{WRID: 7}, false)
	wcs := make([]verbs.WC, 1)
	if n, err := q.Poll(wcs); n != 1 || err != nil || wcs[0].WRID != 7 {
		t.Fatalf("Poll after the push: %d, %v, %+v", n, err, wcs[0])
	}
}
