package rocev2_test

import "testing"

// TestStreamAllocs checks that a stream of 64-byte WRITEs, and one of
// SENDs, allocates nothing per message in steady state, on either end:
// posting, the packets' encoding, ICRC and system calls, the ACKs, the
// timers and the completions all reuse what the first messages made. The
// average over many messages is what is checked, so a rare allocation of
// the runtime's own (a pool emptied by a collection) does not fail it.
func TestStreamAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what it is given")
	}
	for _, send := range []bool{false, true} {
		s := newStream(t, send)
		for range 2000 { // warm up: queues, pools and batches reach their size
			s.post(t, false)
		}
		s.finish(t)
		allocs := testing.AllocsPerRun(2000, func() { s.post(t, false) })
		s.post(t, true)
		s.finish(t)
		if allocs != 0 {
			t.Errorf("send=%v: %v allocations per message", send, allocs)
		}
	}
}
