package wrid

import (
	"math"
	"testing"
)

// TestWRIDLayout checks the one wr_id layout at its boundaries: every actor
// ID the runtime hands out, the sequence numbers at both ends, and
// receives; a send's wr_id is never taken for a receive's, and each
// decodes to what was encoded.
func TestWRIDLayout(t *testing.T) {
	seqs := []uint64{0, 1, 12345, 1<<47 - 1, 1 << 47, seqMask}
	for _, n := range []uint32{0, 1, 0x3fff, 0x4000, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xffff, 0x10000, 0x17fff,
		math.MaxUint32} {
		id := ActorID(n)
		if id > MaxActorID {
			t.Fatalf("ActorID(%#x) = %#x, above MaxActorID", n, id)
		}
		for _, seq := range seqs {
			w := Send(id, seq)
			if IsRecv(w) {
				t.Fatalf("actor %#x seq %#x: wr_id %#x reads as a receive", id, seq, w)
			}
			if gotID, gotSeq := DecodeSend(w); gotID != id || gotSeq != seq {
				t.Fatalf("actor %#x seq %#x: wr_id %#x decodes to %#x %#x", id, seq, w, gotID, gotSeq)
			}
		}
	}
	// Every 16-bit counter value maps to an ID whose wr_ids are sends.
	for n := range uint32(1 << 16) {
		if w := Send(ActorID(n), seqMask); IsRecv(w) {
			t.Fatalf("ActorID(%#x): wr_id %#x reads as a receive", n, w)
		}
	}
	// Consecutive IDs differ until they wrap.
	if ActorID(MaxActorID) == ActorID(MaxActorID-1) || ActorID(MaxActorID+1) != 0 {
		t.Fatal("ActorID does not wrap at MaxActorID+1")
	}
	for _, idx := range []int{0, 1, 1023, 1 << 31, 1<<62 - 1} {
		w := Recv(idx)
		if !IsRecv(w) || RecvIndex(w) != idx {
			t.Fatalf("receive %d: wr_id %#x (receive %t, index %d)", idx, w, IsRecv(w), RecvIndex(w))
		}
	}
}
