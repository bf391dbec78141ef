package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// TestErrorStateLeftToItsCompletion: what learns that a QP is in ERR
// without a completion, the background check of the QPs' states or the
// IBV_EVENT_QP_LAST_WQE_REACHED of an SRQ's QP, does not end the endpoint
// with a bare error state while the completion that failed the QP waits
// in the CQ, not yet handled: the endpoint ends with the REM_ACCESS_ERR
// that failed it. With the CQ in another handler's hands it is left to
// that handler; with the poller busy elsewhere (or short of CPU) the
// completion is handled there and then.
func TestErrorStateLeftToItsCompletion(t *testing.T) {
	for _, judge := range []struct {
		name string
		run  func(rt *runtime.Runtime, ep *runtime.Endpoint)
	}{
		{"QP check", func(rt *runtime.Runtime, _ *runtime.Endpoint) { runtime.CheckQPsNow(rt) }},
		{"last WQE event", func(rt *runtime.Runtime, ep *runtime.Endpoint) {
			runtime.HandleEvent(rt, verbs.AsyncEvent{Type: verbs.EventQPLastWQEReached, QP: ep.QP()})
		}},
	} {
		t.Run(judge.name+"/CQ being handled", func(t *testing.T) {
			rt, cli, _ := pair(t)
			ctx := ctxT(t)
			// An actor still awake from connecting would hand its CQ
			// back into the hold and wait there, with the WRITE left
			// to it unposted.
			awaitActorIdle(t, ctx, cli)
			release := runtime.HoldCompletions(cli)
			f := failQPWithBadKey(t, ctx, rt, cli)
			judge.run(rt, cli)
			select {
			case <-cli.Done():
				release()
				t.Fatalf("the endpoint ended (%v) while its CQ's handler had the completion to handle", cli.Err())
			default:
			}
			release()
			wantRemoteAccessCause(t, ctx, cli, f)
		})
		t.Run(judge.name+"/poller busy", func(t *testing.T) {
			// Posted inline, by this goroutine, and not waited for: nobody
			// else is there to handle the completion.
			rt := newRuntimeAsGiven(t)
			cli, _ := connect(t, rt)
			ctx := ctxT(t)
			// An idle actor: the WRITE is posted inline, and no actor
			// goroutine is there to handle its completion meanwhile.
			awaitActorIdle(t, ctx, cli)
			release := runtime.HoldPoller(cli)
			defer release()
			f := failQPWithBadKey(t, ctx, rt, cli)
			judge.run(rt, cli)
			// Nobody waits for f and the poller stays busy: the judge
			// handles the completion, unless another handler has the CQ
			// at that moment (the hand-back that ends a waiter's linger
			// polls it once), and the endpoint ends with its cause.
			wantEndedByRemoteAccess(t, ctx, cli)
			wantRemoteAccessCause(t, ctx, cli, f)
		})
	}
}

// awaitActorIdle returns once ep's actor goroutine has nothing left to do
// and ended its run.
func awaitActorIdle(t *testing.T, ctx context.Context, ep *runtime.Endpoint) {
	t.Helper()
	for !ep.Actor().Idle() {
		if ctx.Err() != nil {
			t.Fatal("the endpoint's actor never went idle")
		}
		time.Sleep(time.Millisecond)
	}
}

// failQPWithBadKey writes with a key the peer never issued, and returns
// once the QP is in ERR.
func failQPWithBadKey(t *testing.T, ctx context.Context, rt *runtime.Runtime, cli *runtime.Endpoint) runtime.Future {
	t.Helper()
	ref := refOf(t, alloc(t, rt, 64))
	ref.RKey ^= 0xff00
	f := cli.Write(ctx, alloc(t, rt, 64).Local(), ref)
	for {
		attr, err := cli.QP().Query()
		if err != nil {
			t.Error(err)
			return f
		}
		if attr.State == verbs.QPStateErr || ctx.Err() != nil {
			return f
		}
		time.Sleep(time.Millisecond)
	}
}

// wantRemoteAccessCause checks that f failed with REM_ACCESS_ERR and that
// the endpoint ended with it as its cause.
func wantRemoteAccessCause(t *testing.T, ctx context.Context, cli *runtime.Endpoint, f runtime.Future) {
	t.Helper()
	if _, err := f.Wait(ctx); !errors.Is(err, verbs.ErrRemoteAccess) {
		t.Errorf("the WRITE: %v, want REM_ACCESS_ERR", err)
	}
	wantEndedByRemoteAccess(t, ctx, cli)
}

// wantEndedByRemoteAccess checks that ep ends, with ErrConnFailed and the
// REM_ACCESS_ERR that caused it.
func wantEndedByRemoteAccess(t *testing.T, ctx context.Context, ep *runtime.Endpoint) {
	t.Helper()
	select {
	case <-ep.Done():
	case <-ctx.Done():
		t.Fatal("Done did not close after an operation failed the connection")
	}
	if err := ep.Err(); !errors.Is(err, runtime.ErrConnFailed) || !errors.Is(err, verbs.ErrRemoteAccess) {
		t.Errorf("Err: %v, want ErrConnFailed with the REM_ACCESS_ERR that caused it", err)
	}
}

// TestRemoteAccessErrorFlushesLaterOps: a write with a bad rkey in the
// middle of a stream fails with REM_ACCESS_ERR; the writes queued behind it
// fail with WR_FLUSH_ERR; those before it succeed. The endpoint is over
// then (Done, Err), and a later write fails without reaching the device.
func TestRemoteAccessErrorFlushesLaterOps(t *testing.T) {
	rt, cli, srv := pair(t)
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 4096), alloc(t, rt, 4096)
	// Hold the stream until all 30 are posted, so the bad write is
	// mid-queue when it executes.
	if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var fs []runtime.Future
	for i := range 30 {
		ref := refOf(t, remote).At(8 * i)
		if i == 10 {
			ref.RKey ^= 0xff00 // a key the peer never issued
		}
		fs = append(fs, cli.Write(ctx, local.Slice(8*i, 8), ref))
	}
	awaitOutstanding(t, ctx, cli, 30)
	if err := soft.EndDelay(cli.QP()); err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		_, err := f.Wait(ctx)
		switch {
		case i < 10 && err != nil:
			t.Errorf("write %d before the bad one: %v", i, err)
		case i == 10 && !errors.Is(err, verbs.ErrRemoteAccess):
			t.Errorf("bad write: %v, want REM_ACCESS_ERR", err)
		case i > 10 && !errors.Is(err, verbs.ErrFlushed):
			t.Errorf("write %d after the bad one: %v, want a flush", i, err)
		}
	}
	// The connection is gone (both QPs in ERR): the endpoint says so, and
	// later operations fail at once with the same.
	wantEndedByRemoteAccess(t, ctx, cli)
	// The responder's QP went to ERR too (its receives flushed): its end
	// is over as well, and its Recv returns.
	select {
	case <-srv.Done():
	case <-ctx.Done():
		t.Fatal("the responder's Done did not close")
	}
	if _, err := srv.Recv(ctx); !errors.Is(err, runtime.ErrConnFailed) {
		t.Errorf("the responder's Recv: %v, want ErrConnFailed", err)
	}
	before, _ := verbs.PostedWRs(cli.QP())
	if _, err := cli.Write(ctx, local.Slice(0, 8), refOf(t, remote)).Wait(ctx); !errors.Is(err, runtime.ErrConnFailed) {
		t.Errorf("write after the error: %v, want ErrConnFailed", err)
	}
	if after, _ := verbs.PostedWRs(cli.QP()); after != before {
		t.Errorf("the write after the failure reached the device")
	}
}

// TestQPFatalFailsPendingFutures: a QP forced to ERR (as a catastrophic
// device error does) fails every pending future with a typed error.
func TestQPFatalFailsPendingFutures(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 4096), alloc(t, rt, 4096)
	if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var fs []runtime.Future
	for i := range 20 {
		fs = append(fs, cli.Write(ctx, local.Slice(8*i, 8), refOf(t, remote).At(8*i)))
	}
	if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultQPError}); err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		_, err := f.Wait(ctx)
		if !errors.Is(err, verbs.ErrFlushed) && !errors.Is(err, runtime.ErrQPFatal) {
			t.Errorf("future %d: %v, want a flush or ErrQPFatal", i, err)
		}
	}
	// The endpoint is failed for good: new operations fail at once.
	_, err := cli.Write(ctx, local.Slice(0, 8), refOf(t, remote)).Wait(ctx)
	if !errors.Is(err, runtime.ErrQPFatal) && !errors.Is(err, verbs.ErrFlushed) {
		t.Errorf("after the fatal error: %v", err)
	}
}

// TestCQOverrunFailsPendingFutures: a CQ overrun loses a completion; the
// runtime fails the future that waits for it with ErrCQOverrun instead of
// letting it hang, and the endpoint refuses further work with it.
func TestCQOverrunFailsPendingFutures(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 4096), alloc(t, rt, 4096)
	if err := soft.InjectCQ(cli.CQ(), soft.Fault{Kind: soft.FaultCQOverrun, Count: 1}); err != nil {
		t.Fatal(err)
	}
	// One write: its completion is the one the overrun loses.
	_, err := cli.Write(ctx, local.Slice(0, 8), refOf(t, remote)).Wait(ctx)
	var ae *runtime.AsyncError
	if !errors.Is(err, runtime.ErrCQOverrun) || !errors.As(err, &ae) || ae.Event != verbs.EventCQErr {
		t.Fatalf("lost completion: %v, want an *AsyncError matching ErrCQOverrun", err)
	}
	for i := range 5 {
		if _, err := cli.Write(ctx, local.Slice(8*i, 8), refOf(t, remote).At(8*i)).Wait(ctx); !errors.Is(err, runtime.ErrCQOverrun) {
			t.Errorf("write %d after the overrun: %v, want ErrCQOverrun", i, err)
		}
	}
}

// logBuffer collects a runtime's log lines, for tests that check what is
// logged at which level.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelError}))
}

// waitOver waits for ep's Done and returns its Err.
func waitOver(t *testing.T, ep *runtime.Endpoint, what string) error {
	t.Helper()
	select {
	case <-ep.Done():
		return ep.Err()
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the endpoint is not over", what)
		return nil
	}
}

// TestPollFailureFailsEndpoint: a CQ whose Poll fails (a provider's
// ibv_poll_cq returning a negative value) fails its endpoint with an error
// matching verbs.ErrPollFailed, logged at error level: the future whose
// completion sits in that CQ resolves, later operations fail at once, and
// nothing spins on the failing CQ.
func TestPollFailureFailsEndpoint(t *testing.T) {
	var log logBuffer
	rt, cli, _ := pair(t, runtime.WithLogger(log.logger()))
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 4096), alloc(t, rt, 4096)
	if err := soft.InjectCQ(cli.CQ(), soft.Fault{Kind: soft.FaultPollError}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Write(ctx, local.Slice(0, 8), refOf(t, remote)).Wait(ctx); !errors.Is(err, verbs.ErrPollFailed) {
		t.Fatalf("write whose completion the failing CQ holds: %v, want verbs.ErrPollFailed", err)
	}
	if err := waitOver(t, cli, "after the poll failure"); !errors.Is(err, verbs.ErrPollFailed) {
		t.Errorf("Err: %v, want verbs.ErrPollFailed", err)
	}
	if _, err := cli.Write(ctx, local.Slice(8, 8), refOf(t, remote).At(8)).Wait(ctx); !errors.Is(err, verbs.ErrPollFailed) &&
		!errors.Is(err, verbs.ErrFlushed) {
		t.Errorf("write after the failure: %v, want verbs.ErrPollFailed or a flush", err)
	}
	if s := log.String(); !strings.Contains(s, "level=ERROR") || !strings.Contains(s, "polling the CQ failed") {
		t.Errorf("the failure is not logged at error level; log:\n%s", s)
	}
}

// TestEventsLostFailsEveryEndpoint: the device's asynchronous events
// ending before the runtime closes (the ibv provider's reader failing for
// good) is logged at error level and fails every endpoint, pending work
// included, with an error matching verbs.ErrEventsLost (its peer, seeing
// that first, may end with ErrPeerLost); no endpoint starts
// after it, since nothing would report its failures.
func TestEventsLostFailsEveryEndpoint(t *testing.T) {
	var log logBuffer
	rt, cli, srv := pair(t, runtime.WithLogger(log.logger()))
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 4096), alloc(t, rt, 4096)
	// Hold the write on the wire: it is pending when the events end.
	if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	f := cli.Write(ctx, local.Slice(0, 8), refOf(t, remote))
	if err := soft.InjectContext(runtime.DeviceContext(rt), soft.Fault{Kind: soft.FaultEventsLost}); err != nil {
		t.Fatal(err)
	}
	// The two ends are on the one runtime, and the first to fail hangs up
	// the link to the other, which may notice that first: ErrPeerLost is
	// the right end for it too. The first failed by the lost events cannot
	// have seen anything else.
	if _, err := f.Wait(ctx); !errors.Is(err, verbs.ErrEventsLost) && !errors.Is(err, verbs.ErrFlushed) &&
		!errors.Is(err, runtime.ErrPeerLost) {
		t.Errorf("pending write: %v, want verbs.ErrEventsLost, a flush or ErrPeerLost", err)
	}
	lost := 0
	for _, ep := range []*runtime.Endpoint{cli, srv} {
		switch err := waitOver(t, ep, "after the events ended"); {
		case errors.Is(err, verbs.ErrEventsLost):
			lost++
		case !errors.Is(err, runtime.ErrPeerLost):
			t.Errorf("Err: %v, want verbs.ErrEventsLost (or ErrPeerLost, its peer's failure seen first)", err)
		}
	}
	if lost == 0 {
		t.Error("no endpoint failed with verbs.ErrEventsLost")
	}
	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if ep, err := ln.Accept(ctx); err == nil {
			ep.Close(ctx)
		}
	}()
	if ep, err := rt.Dial(ctx, ln.Addr().String()); !errors.Is(err, verbs.ErrEventsLost) {
		if err == nil {
			ep.Close(ctx)
		}
		t.Errorf("Dial after the events ended: %v, want verbs.ErrEventsLost", err)
	}
	if s := log.String(); !strings.Contains(s, "level=ERROR") || !strings.Contains(s, "asynchronous events can no longer be read") {
		t.Errorf("the end of the events is not logged at error level; log:\n%s", s)
	}
}

// TestBadWRFailsOnlyItsSubmission: eight goroutines post batches of 64;
// one batch holds a misaligned atomic. Only that batch fails, with the WR
// and the rule named; the others complete.
func TestBadWRFailsOnlyItsSubmission(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	remote := refOf(t, alloc(t, rt, 8*64*8))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local, err := rt.Alloc(64 * 8)
			if err != nil {
				errs[g] = err
				return
			}
			defer local.Free()
			ops := make([]runtime.Op, 64)
			for i := range ops {
				ref := remote.Slice(8*(64*g+i), 8)
				ops[i] = runtime.Op{Opcode: verbs.OpWrite, Local: []runtime.Local{local.Slice(8*i, 8)}, Remote: ref}
			}
			if g == 3 {
				// A rule of ibv_post_send(3) that only the QP's
				// validation checks: SOLICITED on a WRITE.
				ops[17].Flags = verbs.SendSolicited
			}
			c, err := cli.Post(ctx, ops).Wait(ctx)
			if err == nil && c.WRs != 64 {
				err = fmt.Errorf("completion covers %d WRs", c.WRs)
			}
			errs[g] = err
		}()
	}
	wg.Wait()
	for g, err := range errs {
		if g != 3 {
			if err != nil {
				t.Errorf("batch %d: %v", g, err)
			}
			continue
		}
		var we *verbs.WRError
		if !errors.As(err, &we) || we.Index != 17 || !errors.Is(err, verbs.ErrInvalidWR) {
			t.Errorf("bad batch: %v, want a *verbs.WRError for WR 17", err)
		}
	}
	// The connection is still good.
	local := alloc(t, rt, 8)
	if _, err := cli.Write(ctx, local.Local(), remote.Slice(0, 8)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNoRNRWithSlowReceiver: with rnr_retry 0 an RNR NAK would fail the
// QP at once. 100k sends to a receiver that is slow on purpose all arrive,
// in order: senders wait for receive credits instead.
func TestNoRNRWithSlowReceiver(t *testing.T) {
	n := 100000
	if testing.Short() {
		n = 5000
	}
	rt, cli, srv := pair(t, runtime.WithRNRRetry(0), runtime.WithRecvDepth(16))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	local := alloc(t, rt, 8*32)
	done := make(chan error, 1)
	go func() {
		for i := range n {
			m, err := srv.Recv(ctx)
			if err != nil {
				done <- fmt.Errorf("message %d: %w", i, err)
				return
			}
			if want := fmt.Sprintf("%08d", i); !bytes.Equal(m.Bytes(), []byte(want)) {
				done <- fmt.Errorf("message %d is %q", i, m.Bytes())
				return
			}
			m.Release()
			if i%1000 == 0 {
				time.Sleep(time.Millisecond) // slow on purpose
			}
		}
		done <- nil
	}()
	// Keep a window of sends in flight, each with its own slot of local:
	// a slot is reused only after its send completed.
	const window = 32
	var inflight [window]runtime.Future
	for i := range n {
		slot := i % window
		if i >= window {
			if _, err := inflight[slot].Wait(ctx); err != nil {
				t.Fatalf("send %d: %v", i-window, err)
			}
		}
		copy(local.Bytes()[8*slot:], fmt.Sprintf("%08d", i))
		inflight[slot] = cli.Send(ctx, local.Slice(8*slot, 8))
	}
	for i := max(0, n-window); i < n; i++ {
		if _, err := inflight[i%window].Wait(ctx); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCloseUnderLoad: closing the runtime while 64 goroutines keep issuing
// operations resolves every future (success, ErrClosed or a flush) and
// leaves no goroutine behind (TestMain checks). An operation whose peer QP
// closed first may also end with RETRY_EXC_ERR (its packets go
// unanswered), or ErrPeerClosed once the peer's goodbye arrived.
func TestCloseUnderLoad(t *testing.T) {
	rt, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	cli, srv, err := runtime.Pipe(ctx, rt, rt)
	if err != nil {
		t.Fatal(err)
	}
	remote := refOf(t, alloc(t, rt, 64*64))
	var wg sync.WaitGroup
	var resolved, issued sync.Map
	var completed atomic.Int64
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local, err := rt.Alloc(64)
			if err != nil {
				return // closed already
			}
			for i := 0; ; i++ {
				var f runtime.Future
				if i%2 == 0 {
					f = cli.Write(ctx, local.Local(), remote.Slice(64*g, 64))
				} else {
					f = srv.Read(ctx, local.Local(), remote.Slice(64*g, 64))
				}
				issued.Store([2]int{g, i}, true)
				_, err := f.Wait(ctx)
				resolved.Store([2]int{g, i}, true)
				completed.Add(1)
				if err != nil {
					if !errors.Is(err, runtime.ErrClosed) && !errors.Is(err, verbs.ErrFlushed) &&
						!errors.Is(err, verbs.ErrRetryExceeded) && !errors.Is(err, runtime.ErrPeerClosed) {
						t.Errorf("goroutine %d op %d: %v", g, i, err)
					}
					return
				}
			}
		}()
	}
	// Let the load build up: every goroutine's first operations done.
	for completed.Load() < 2*64 {
		if ctx.Err() != nil {
			t.Fatalf("%d operations completed, want the load to build up", completed.Load())
		}
		time.Sleep(time.Millisecond)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rt.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	n := 0
	issued.Range(func(k, _ any) bool {
		n++
		if _, ok := resolved.Load(k); !ok {
			t.Errorf("op %v never resolved", k)
		}
		return true
	})
	if n == 0 {
		t.Fatal("no operation was issued")
	}
}

// TestCloseWaitsForTheDevice: Close with a context already spent still
// lets the device finish with the endpoint's memory before any future
// resolves: the outstanding WRITEs resolve with their flush completions
// (verbs.ErrFlushed: the device gave them back), not with ErrClosed while
// the device may still write, and no flush completion arrives later as a
// stale one.
func TestCloseWaitsForTheDevice(t *testing.T) {
	rt, cli, _ := pair(t)
	local, remote := alloc(t, rt, 4096), alloc(t, rt, 4096)
	// Held until Close flushes them.
	if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var fs []runtime.Future
	for i := range 20 {
		fs = append(fs, cli.Write(context.Background(), local.Slice(8*i, 8), refOf(t, remote).At(8*i)))
	}
	awaitOutstanding(t, ctxT(t), cli, 20)
	spent, cancel := context.WithCancel(context.Background())
	cancel()
	cli.Close(spent)
	for i, f := range fs {
		_, err := f.Wait(ctxT(t))
		if err != nil && !errors.Is(err, verbs.ErrFlushed) {
			t.Errorf("write %d: %v, want success or its flush completion", i, err)
		}
	}
	if st := cli.Actor().Stats(); st.Stale.Load() != 0 {
		t.Errorf("%d completions arrived after their futures had resolved", st.Stale.Load())
	}
}
