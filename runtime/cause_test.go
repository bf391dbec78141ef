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

// inFlight are the operations a cause test keeps outstanding when the
// endpoint ends.
const inFlight = 64

// writesHeld posts inFlight WRITEs on cli, the device holding the first
// (and the queue behind it) until the endpoint ends, and returns their
// futures once all are posted.
func writesHeld(t *testing.T, ctx context.Context, rt *runtime.Runtime, cli *runtime.Endpoint, remote runtime.RemoteRef) []runtime.Future {
	t.Helper()
	if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	local := alloc(t, rt, 64)
	fs := make([]runtime.Future, inFlight)
	for i := range fs {
		fs[i] = cli.Write(ctx, local.Local(), remote)
	}
	awaitOutstanding(t, ctx, cli, inFlight) // all posted, none done
	return fs
}

// wantCause waits for ep's end and for every future, and checks that each
// failed operation's error matches ep's Err, which must match want, and
// that the flushed ones match verbs.ErrFlushed too; it returns how many
// were flushed, and the errors.
func wantCause(t *testing.T, ctx context.Context, ep *runtime.Endpoint, want error, fs []runtime.Future) (flushed int, errs []error) {
	t.Helper()
	select {
	case <-ep.Done():
	case <-ctx.Done():
		t.Fatal("the endpoint never ended")
	}
	if !errors.Is(ep.Err(), want) {
		t.Fatalf("the endpoint's Err: %v, want %v", ep.Err(), want)
	}
	var missed int
	errs = make([]error, len(fs))
	for i, f := range fs {
		_, err := f.Wait(ctx)
		if errs[i] = err; err == nil {
			continue
		}
		if !errors.Is(err, ep.Err()) || !errors.Is(err, want) {
			if missed++; missed == 1 {
				t.Errorf("operation %d: %v; does not match the endpoint's cause %v", i, err, ep.Err())
			}
		}
		var wce *verbs.WCError
		if errors.As(err, &wce) && wce.Status == verbs.WCWRFlushErr {
			flushed++
			if !errors.Is(err, verbs.ErrFlushed) {
				t.Errorf("operation %d: %v, a flush that does not match verbs.ErrFlushed", i, err)
			}
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d operations do not match the endpoint's cause", missed, len(fs))
	}
	return flushed, errs
}

// TestFlushedOperationsMatchTheCause: operations flushed because their
// endpoint ended match, with errors.Is, the endpoint's cause (its Err)
// as well as verbs.ErrFlushed, whether the cause is the peer's Close,
// a failed operation, or a QP error whose event comes after the flushes
// it explains; and a later Close gives its own cause, ErrClosed.
func TestFlushedOperationsMatchTheCause(t *testing.T) {
	t.Run("peer closed", func(t *testing.T) {
		rt, cli, srv := pair(t)
		ctx := ctxT(t)
		fs := writesHeld(t, ctx, rt, cli, refOf(t, alloc(t, rt, 64)))
		if err := srv.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := wantCause(t, ctx, cli, runtime.ErrPeerClosed, fs); n == 0 {
			t.Error("no operation was flushed: the test shows nothing")
		}
	})
	t.Run("connection failed", func(t *testing.T) {
		// The device loses every transmission: the first WRITE fails with
		// RETRY_EXC_ERR once its retries are spent, the rest flush.
		rt, cli, _ := pair(t)
		ctx := ctxT(t)
		if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultDrop, Count: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		local := alloc(t, rt, 64)
		fs := make([]runtime.Future, inFlight)
		for i := range fs {
			fs[i] = cli.Write(ctx, local.Local(), refOf(t, local))
		}
		n, errs := wantCause(t, ctx, cli, runtime.ErrConnFailed, fs)
		if n == 0 {
			t.Error("no operation was flushed: the test shows nothing")
		}
		if !errors.Is(errs[0], verbs.ErrRetryExceeded) {
			t.Errorf("the first WRITE: %v, want RETRY_EXC_ERR", errs[0])
		}
	})
	t.Run("QP error", func(t *testing.T) {
		// The device moves the QP to ERR, flushes what it holds and raises
		// QP_FATAL: the flushes reach the CQ before the event reaches the
		// endpoint.
		rt, cli, _ := pair(t)
		ctx := ctxT(t)
		fs := writesHeld(t, ctx, rt, cli, refOf(t, alloc(t, rt, 64)))
		if err := soft.Inject(cli.QP(), soft.Fault{Kind: soft.FaultQPError}); err != nil {
			t.Fatal(err)
		}
		if n, _ := wantCause(t, ctx, cli, runtime.ErrQPFatal, fs); n == 0 {
			t.Error("no operation was flushed: the test shows nothing")
		}
	})
	t.Run("local close", func(t *testing.T) {
		rt, cli, _ := pair(t)
		ctx := ctxT(t)
		fs := writesHeld(t, ctx, rt, cli, refOf(t, alloc(t, rt, 64)))
		short, cancel := context.WithCancel(ctx)
		cancel() // Close waits for nothing it need not
		cli.Close(short)
		wantCause(t, ctx, cli, runtime.ErrClosed, fs)
	})
}

// TestKilledPeerIsLostWhicheverSignalFirst: a peer whose process dies ends
// the endpoint with ErrPeerLost whether the endpoint first sees an
// operation fail (REM_ACCESS_ERR when the dying kernel tore the peer's
// memory regions down first, RETRY_EXC_ERR when its QP went first) or
// first sees the link beside the QP close; the failed operations match
// ErrPeerLost too. A live peer that refuses an operation still ends it
// with ErrConnFailed. The dying peer is staged with the test hooks (its
// endpoint muted, then its QP or memory regions, then its link), so each
// order is forced, not raced.
func TestKilledPeerIsLostWhicheverSignalFirst(t *testing.T) {
	// opFirst: the operation fails, while the peer's link is still open;
	// then the peer's kernel closes the link.
	opFirst := func(t *testing.T, tearDown func(srv *runtime.Endpoint, exp *runtime.Exposure), want error, reset bool) {
		rt, cli, srv := pair(t)
		ctx := ctxT(t)
		runtime.SetVerdictWaitForTest(cli, time.Hour) // only the link decides
		exp, err := alloc(t, rt, 64).Expose(runtime.RemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		runtime.MuteForTest(srv)
		tearDown(srv, exp)
		_, opErr := cli.Write(ctx, alloc(t, rt, 64).Local(), exp.RemoteRef()).Wait(ctx)
		if !errors.Is(opErr, want) {
			t.Fatalf("the WRITE to the dying peer: %v, want %v", opErr, want)
		}
		select {
		case <-cli.Done():
			t.Fatalf("the endpoint ended (%v) before its link said whether the peer is alive", cli.Err())
		default:
		}
		if err := runtime.DropLinkForTest(srv, reset); err != nil {
			t.Fatal(err)
		}
		<-cli.Done()
		if !errors.Is(cli.Err(), runtime.ErrPeerLost) {
			t.Errorf("the endpoint's Err: %v, want ErrPeerLost", cli.Err())
		}
		if !errors.Is(opErr, runtime.ErrPeerLost) || !errors.Is(opErr, want) {
			t.Errorf("the WRITE's error: %v, want ErrPeerLost and %v", opErr, want)
		}
	}
	revoke := func(_ *runtime.Endpoint, exp *runtime.Exposure) { exp.Close() }
	destroyQP := func(srv *runtime.Endpoint, _ *runtime.Exposure) {
		if err := srv.QP().Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("REM_ACCESS_ERR first", func(t *testing.T) { opFirst(t, revoke, verbs.ErrRemoteAccess, false) })
	t.Run("RETRY_EXC_ERR first", func(t *testing.T) { opFirst(t, destroyQP, verbs.ErrRetryExceeded, true) })

	t.Run("link first", func(t *testing.T) {
		rt, cli, srv := pair(t)
		ctx := ctxT(t)
		ref := refOf(t, alloc(t, rt, 64))
		runtime.MuteForTest(srv)
		destroyQP(srv, nil) // the WRITE below stays in flight, retried
		f := cli.Write(ctx, alloc(t, rt, 64).Local(), ref)
		for cli.Actor().Outstanding() == 0 && f.Err() == runtime.ErrPending {
			time.Sleep(time.Millisecond)
		}
		if err := runtime.DropLinkForTest(srv, false); err != nil {
			t.Fatal(err)
		}
		<-cli.Done()
		if !errors.Is(cli.Err(), runtime.ErrPeerLost) {
			t.Errorf("the endpoint's Err: %v, want ErrPeerLost", cli.Err())
		}
		if _, err := f.Wait(ctx); !errors.Is(err, runtime.ErrPeerLost) {
			t.Errorf("the WRITE in flight: %v, want ErrPeerLost", err)
		}
	})

	t.Run("live peer refuses", func(t *testing.T) {
		rt, cli, srv := pair(t)
		ctx := ctxT(t)
		exp, err := alloc(t, rt, 64).Expose(runtime.RemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		exp.Close()
		_, opErr := cli.Write(ctx, alloc(t, rt, 64).Local(), exp.RemoteRef()).Wait(ctx)
		<-cli.Done()
		if !errors.Is(cli.Err(), runtime.ErrConnFailed) || !errors.Is(opErr, runtime.ErrConnFailed) || !errors.Is(opErr, verbs.ErrRemoteAccess) {
			t.Errorf("a WRITE a live peer refused: %v, the endpoint's Err %v; want ErrConnFailed and REM_ACCESS_ERR", opErr, cli.Err())
		}
		<-srv.Done() // the peer ends too, and says why
		if srv.Err() == nil {
			t.Error("the peer's endpoint did not end")
		}
	})
}
