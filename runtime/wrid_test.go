package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
)

// TestActorIDsPastBit15: a runtime that has made 32,767 endpoints and more
// still completes every operation: the actor ID in a send's wr_id never
// reaches the bit that marks receives (the 32,768th endpoint's sends went
// to the receive handler and never resolved).
func TestActorIDsPastBit15(t *testing.T) {
	for _, start := range []uint32{0x7ffd, 0xfffd, 0x17ffd} {
		rt, _, _ := pair(t)
		runtime.SetNextActorID(rt, start)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for range 3 { // IDs start+1 .. start+6
			cli, srv := connect(t, rt)
			buf := alloc(t, rt, 64)
			copy(buf.Bytes(), "hello")
			for _, ep := range []*runtime.Endpoint{cli, srv} {
				if _, err := ep.Write(ctx, buf.Slice(0, 8), refOf(t, buf).At(32)).Wait(ctx); err != nil {
					t.Fatalf("actor %d (from %#x): write: %v", ep.QPN(), start, err)
				}
				if _, err := ep.Send(ctx, buf.Slice(0, 8)).Wait(ctx); err != nil {
					t.Fatalf("actor %d (from %#x): send: %v", ep.QPN(), start, err)
				}
			}
			for _, ep := range []*runtime.Endpoint{srv, cli} {
				m, err := ep.Recv(ctx)
				if err != nil {
					t.Fatalf("actor %d: recv: %v", ep.QPN(), err)
				}
				if string(m.Bytes()[:5]) != "hello" {
					t.Errorf("actor %d: received %q", ep.QPN(), m.Bytes())
				}
				m.Release()
			}
			cli.Close(ctx)
			srv.Close(ctx)
		}
		cancel()
	}
}
