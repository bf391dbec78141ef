package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// TestStats: what the endpoints did shows in Stats, by opcode and status,
// and a closed endpoint's counters stay behind.
func TestStats(t *testing.T) {
	rt, cli, srv := pair(t)
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 4096), alloc(t, rt, 4096)
	s0 := rt.Stats()
	// Each endpoint's peer starts with the initial window, backed by as
	// many receives in the shared pool.
	if w := runtime.InitialWindow; s0.Endpoints != 2 || s0.RecvPosted != 2*w || s0.RecvCredits != 2*w || s0.RecvPools != 1 ||
		s0.SQCredits == 0 || s0.InflightWRs != 0 {
		t.Fatalf("idle pair: %+v", s0)
	}
	for i := range 130 {
		if _, err := cli.Write(ctx, local.Slice(i%64*64, 64), refOf(t, remote).At(i%64*64)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Read(ctx, local.Slice(0, 64), refOf(t, remote)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.FetchAdd(ctx, refOf(t, remote).At(512), 1).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	sendAndRelease(t, ctx, cli, srv, local.Slice(0, 9))

	s := rt.Stats()
	for _, c := range []struct {
		op   verbs.Opcode
		want uint64
	}{{verbs.OpWrite, 130}, {verbs.OpRead, 1}, {verbs.OpAtomicFetchAdd, 1}, {verbs.OpSend, 1}} {
		if got := s.WRsPosted[c.op]; got < c.want {
			t.Errorf("%v posted: %d, want at least %d", c.op, got, c.want)
		}
	}
	var batches, samples uint64
	for _, n := range s.PostBatches {
		batches += n
	}
	for _, n := range s.OpLatency[verbs.OpWrite].Buckets {
		samples += n
	}
	if batches != s.PostCalls || s.PostCalls < 133 {
		t.Errorf("%d PostSend calls, %d in the batch histogram", s.PostCalls, batches)
	}
	if samples < 2 || s.OpLatency[verbs.OpWrite].Sum <= 0 {
		t.Errorf("WRITE latency: %d samples, sum %v; want 2 of 130 writes", samples, s.OpLatency[verbs.OpWrite].Sum)
	}
	if s.Completions[verbs.WCSuccess] < 4 || s.PollsHit == 0 || s.Completions[verbs.WCRNRRetryExcErr] != 0 || s.StaleCompletions != 0 {
		t.Errorf("completions: %d success, %d polls hit, %d RNR, %d stale", s.Completions[verbs.WCSuccess], s.PollsHit, s.Completions[verbs.WCRNRRetryExcErr], s.StaleCompletions)
	}
	if s.FuturesPending != 0 || s.InflightWRs != 0 {
		t.Errorf("idle again: %d futures pending, %d WRs in flight", s.FuturesPending, s.InflightWRs)
	}

	if err := cli.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := rt.Stats()
	if after.Endpoints != 1 || after.WRsPosted[verbs.OpWrite] < s.WRsPosted[verbs.OpWrite] || after.PostCalls < s.PostCalls {
		t.Errorf("after closing the client: %d endpoints, %d WRITEs (were %d)", after.Endpoints, after.WRsPosted[verbs.OpWrite], s.WRsPosted[verbs.OpWrite])
	}
	// soft's GID is made up: Stats leaves it out (TestSoftGIDsShownNowhere).
	if s := rt.Stats(); s.Device == "" || s.Port != 1 || !s.GID.IsZero() || s.Provider != "soft" {
		t.Errorf("device %q port %d GID %v provider %q", s.Device, s.Port, s.GID, s.Provider)
	}
}

// TestStatsCountsCreditOnlySends: more SENDs than the initial window, and
// none back, make the receiver send its credits in credit-only SENDs, and
// Stats counts them among the SENDs posted.
func TestStatsCountsCreditOnlySends(t *testing.T) {
	rt, cli, srv := pair(t)
	ctx := ctxT(t)
	local := alloc(t, rt, 64)
	for range 3 * runtime.InitialWindow {
		sendAndRelease(t, ctx, cli, srv, local.Slice(0, 9))
	}
	// The receiver's actor counts a report once its post returns, which
	// may be after the credits it carried reached the sender.
	for deadline := time.Now().Add(10 * time.Second); rt.Stats().CreditOnly == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if s := rt.Stats(); s.CreditOnly == 0 || s.CreditOnly > s.WRsPosted[verbs.OpSend] {
		t.Errorf("%d credit-only SENDs of %d SENDs, want some", s.CreditOnly, s.WRsPosted[verbs.OpSend])
	}
}

// TestStatsAsyncEvents: a CQ overrun is counted as a CQ_ERR event, and the
// write whose completion it lost leaves no future pending.
func TestStatsAsyncEvents(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 4096), alloc(t, rt, 4096)
	if err := soft.InjectCQ(cli.CQ(), soft.Fault{Kind: soft.FaultCQOverrun, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Write(ctx, local.Slice(0, 8), refOf(t, remote)).Wait(ctx); !errors.Is(err, runtime.ErrCQOverrun) {
		t.Fatalf("write: %v, want ErrCQOverrun", err)
	}
	// The future resolved before its resolver counted it: FuturesPending
	// is a sum of counters, exact once the resolver is done.
	s := rt.Stats()
	for s.FuturesPending != 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
		s = rt.Stats()
	}
	if s.AsyncEvents[verbs.EventCQErr] != 1 || s.FuturesPending != 0 {
		t.Errorf("%d CQ_ERR events, %d futures pending; want 1 and 0", s.AsyncEvents[verbs.EventCQErr], s.FuturesPending)
	}
}
