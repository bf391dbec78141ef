package future

import (
	"context"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestSteadyPathAllocatesNothing: an operation that is made, resolved,
// read and consumed by Wait or Release takes its state from the pool and
// allocates nothing. The race detector empties pools at random: run
// without it to see 0.
func TestSteadyPathAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	op := func() {
		s, f := New(1, nil)
		s.CompleteOne(verbs.WC{ByteLen: 8}, nil, 0)
		if _, err := Result(f, byteLen); err != nil {
			t.Fatal(err)
		}
		if _, err := Wait(f, ctx, byteLen); err != nil {
			t.Fatal(err)
		}
		s, f = New(2, nil)
		s.CompleteOne(verbs.WC{ByteLen: 8}, nil, 0)
		s.CompleteOne(verbs.WC{ByteLen: 8}, nil, 0)
		f.Release()
	}
	for range 100 { // warm the pool
		op()
	}
	if allocs := testing.AllocsPerRun(1000, op); allocs > 0 && !raceEnabled {
		t.Errorf("%.2f allocations per operation, want 0", allocs)
	}
}
