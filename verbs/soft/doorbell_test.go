package soft_test

import (
	"bytes"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestDoorbellExecutesOnPoster checks the fast path of a doorbell: on an
// idle context the poster's goroutine executes the WQEs itself, so their
// completions are in the CQ when PostSend returns, and the data is in
// place. Posting is then one call, with no hand-off to the engine
// goroutine to wait for.
func TestDoorbellExecutesOnPoster(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	src := a.mr.Bytes()
	for i := range 256 {
		src[i] = byte(i*3 + 1)
	}
	chain := make([]verbs.SendWR, 4)
	for i := range chain {
		chain[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: sge(a.mr, 64*i, 64), RDMA: verbs.RDMA{RemoteAddr: b.mr.Addr() + uint64(64*i), RKey: b.mr.RKey()}}
	}
	if n, err := a.qp.PostSend(chain); n != len(chain) || err != nil {
		t.Fatalf("PostSend: %d posted, %v", n, err)
	}
	wcs := make([]verbs.WC, 8)
	n, err := a.cq.Poll(wcs)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(chain) {
		t.Fatalf("%d completions ready when PostSend returned, want %d", n, len(chain))
	}
	for i, wc := range wcs[:n] {
		if wc.Status != verbs.WCSuccess || wc.WRID != uint64(i) {
			t.Errorf("completion %d: wr_id %d, %s", i, wc.WRID, wc.Status.Name())
		}
	}
	if !bytes.Equal(b.mr.Bytes()[:256], src[:256]) {
		t.Error("the written bytes differ from the source")
	}
}
