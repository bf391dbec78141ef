package runtime

import "testing"

// TestReportDueCountsOnlyBackedCredits: a receiver whose pool owes most of
// its window (no buffer to post for it) reports what it has, half of the
// window the pool backs, instead of waiting for half of the whole window:
// its peer may hold only the credit kept for reports, and the application
// may hold messages until the next one comes.
func TestReportDueCountsOnlyBackedCredits(t *testing.T) {
	for _, c := range []struct {
		target, debt int
		unreported   int64
		due          bool
	}{
		{3, 0, 1, false},
		{3, 0, 2, true}, // a request and its reply pass without a report
		{13, 0, 4, false},
		{13, 8, 4, true}, // the stall: 4 unreported, 8 owed, the peer starved
		{13, 8, 2, false},
		{13, 13, 1, true},
	} {
		r := &recvSide{target: c.target, debt: c.debt}
		r.unreported.Store(c.unreported)
		if got := r.dueLocked(); got != c.due {
			t.Errorf("window %d, %d owed, %d unreported: due %v, want %v", c.target, c.debt, c.unreported, got, c.due)
		}
	}
}

// TestServeWaitingPassesAFullPool: endpoints waiting for receives are
// served from their own pool's spare receives even when an endpoint ahead
// of them waits on a pool with none and no buffer is idle; that one keeps
// waiting, at the back.
func TestServeWaitingPassesAFullPool(t *testing.T) {
	st := &recvStore{}
	full := &recvPool{store: st, maxWR: 100, posted: 10, assigned: 10}
	spare := &recvPool{store: st, maxWR: 100, posted: 10, assigned: 2}
	blocked := &recvSide{ep: &Endpoint{}, pool: full, maxWindow: 16, target: 5, debt: 2, waiting: true}
	behind := &recvSide{ep: &Endpoint{}, pool: spare, maxWindow: 16, target: 5, debt: 3, waiting: true}
	st.waiting = []*recvSide{blocked, behind}
	st.serveWaitingLocked()
	if behind.debt != 0 || behind.assigned != 3 || spare.assigned != 5 || behind.waiting {
		t.Errorf("behind a full pool's endpoint: %d owed, %d assigned (pool %d), waiting %v; want 0 owed, 3 assigned (pool 5), not waiting",
			behind.debt, behind.assigned, spare.assigned, behind.waiting)
	}
	if len(st.waiting) != 1 || st.waiting[0] != blocked || !blocked.waiting || blocked.debt != 2 {
		t.Errorf("the full pool's endpoint: waiting list %d long, its debt %d; want it alone there, owing 2", len(st.waiting), blocked.debt)
	}
}
