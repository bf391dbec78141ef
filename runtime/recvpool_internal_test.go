package runtime

import "testing"

// owing returns an endpoint's receive side in pool p that owes its peer
// owed credits: its peer spent them, no receive backs them yet, and it
// waits for a buffer.
func owing(p *recvPool, owed int) *recvSide {
	r := &recvSide{ep: &Endpoint{}, pool: p, maxWindow: 16, waiting: true}
	r.credits.Join(initialWindow, r.maxWindow)
	for range owed {
		r.credits.Consumed()
	}
	return r
}

// TestServeWaitingPassesAFullPool: endpoints waiting for receives are
// served from their own pool's spare receives even when an endpoint ahead
// of them waits on a pool with none and no buffer is idle; that one keeps
// waiting, at the back.
func TestServeWaitingPassesAFullPool(t *testing.T) {
	st := &recvStore{}
	full := &recvPool{store: st, maxWR: 100, posted: 10, assigned: 10}
	spare := &recvPool{store: st, maxWR: 100, posted: 10, assigned: 2}
	blocked, behind := owing(full, 2), owing(spare, 3)
	st.waiting = []*recvSide{blocked, behind}
	st.serveWaitingLocked()
	if behind.credits.Owed() != 0 || behind.credits.Backed() != 3 || spare.assigned != 5 || behind.waiting {
		t.Errorf("behind a full pool's endpoint: %d owed, %d backed (pool %d), waiting %v; want 0 owed, 3 backed (pool 5), not waiting",
			behind.credits.Owed(), behind.credits.Backed(), spare.assigned, behind.waiting)
	}
	if len(st.waiting) != 1 || st.waiting[0] != blocked || !blocked.waiting || blocked.credits.Owed() != 2 {
		t.Errorf("the full pool's endpoint: waiting list %d long, it owes %d; want it alone there, owing 2", len(st.waiting), blocked.credits.Owed())
	}
}
