package bench

import (
	"bytes"
	"fmt"
	"testing"
)

// TestVariants runs every benchmark variant for a few hundred writes and
// checks that the bytes arrived and the doorbell counts add up.
func TestVariants(t *testing.T) {
	const ops = 300
	for _, n := range callerCounts {
		t.Run(fmt.Sprintf("runtime/callers=%d", n), func(t *testing.T) {
			v := newViaRuntime(t, n, runtimeOpts()...)
			fill(v.src.Bytes())
			if err := drive(t, n, ops, v.write); err != nil {
				t.Fatal(err)
			}
			if s := v.stats(); s.wrs != ops || s.calls == 0 || s.calls > ops {
				t.Fatalf("%d WRs in %d PostSends, want %d WRs", s.wrs, s.calls, ops)
			}
			if !bytes.Equal(v.dst.Bytes(), v.src.Bytes()) {
				t.Fatal("targets differ from sources")
			}
		})
		t.Run(fmt.Sprintf("naive/callers=%d", n), func(t *testing.T) {
			nv := newNaive(t, n)
			src, dst := nv.lb.halves()
			fill(src)
			if err := drive(t, n, ops, nv.write); err != nil {
				t.Fatal(err)
			}
			if s := nv.stats(); s.wrs != ops || s.calls != ops {
				t.Fatalf("%d WRs in %d PostSends, want %d in %d", s.wrs, s.calls, ops, ops)
			}
			if !bytes.Equal(dst, src) {
				t.Fatal("targets differ from sources")
			}
		})
	}
	t.Run("pipelined-post/callers=1", func(t *testing.T) {
		depth := pipelineDepths[0]
		v := newViaRuntime(t, depth, runtimeOpts()...)
		fill(v.src.Bytes())
		if err := v.pipelinePosts(ops, depth); err != nil { // the last Post short
			t.Fatal(err)
		}
		if s := v.stats(); s.wrs != ops || s.calls == 0 || s.calls > (ops+postBatch-1)/postBatch {
			t.Fatalf("%d WRs in %d PostSends, want %d WRs in at most one a Post", s.wrs, s.calls, ops)
		}
		if !bytes.Equal(v.dst.Bytes(), v.src.Bytes()) {
			t.Fatal("targets differ from sources")
		}
	})
	t.Run("direct/callers=1", func(t *testing.T) {
		d := newDirect(t)
		src, dst := d.lb.halves()
		fill(src)
		runFloor(t, d.run, d.stats, ops)
		if !bytes.Equal(dst, src) {
			t.Fatal("targets differ from sources")
		}
	})
}

// TestSendVariants runs the SEND stream's pipelined variant and its Go
// floor for a few hundred messages; the floor's receives are checked to
// hold what was sent.
func TestSendVariants(t *testing.T) {
	const ops = 300
	t.Run("pipelined/size=64/callers=1", func(t *testing.T) {
		depth := pipelineDepths[0]
		s := newSendPair(t, depth, 64)
		if err := s.pipeline(ops, depth); err != nil {
			t.Fatal(err)
		}
		if st := s.stats(); st.wrs < ops || st.calls == 0 {
			t.Fatalf("%d WRs in %d PostSends, want at least %d WRs", st.wrs, st.calls, ops)
		}
	})
	t.Run("direct/size=64/callers=1", func(t *testing.T) {
		d := newDirectSend(t)
		src, dst := d.lb.halves()
		fill(src)
		runFloor(t, d.run, d.stats, ops)
		// Message i came from source slot i%directBatch into receive
		// slot i.
		for i := range ops {
			got, want := dst[i*opSize:(i+1)*opSize], src[i%directBatch*opSize:(i%directBatch+1)*opSize]
			if !bytes.Equal(got, want) {
				t.Fatalf("message %d: received % x..., sent % x...", i, got[:8], want[:8])
			}
		}
	})
}

// runFloor runs a Go floor for ops operations and checks it posted them in
// chains of directBatch.
func runFloor(t *testing.T, run func(int) error, stats func() postStats, ops int) {
	t.Helper()
	if err := run(ops); err != nil {
		t.Fatal(err)
	}
	want := uint64((ops + directBatch - 1) / directBatch)
	if s := stats(); s.wrs != uint64(ops) || s.calls != want {
		t.Fatalf("%d WRs in %d PostSends, want %d in %d", s.wrs, s.calls, ops, want)
	}
}

// fill writes a pattern no slot shares with another.
func fill(b []byte) {
	for i := range b {
		b[i] = byte(i*7 + i/opSize)
	}
}
