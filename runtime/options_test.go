package runtime_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestNewRefusesBadOptions: an option value the runtime cannot honour
// makes New fail with an error that names the option and matches
// verbs.ErrInvalidArgument, instead of a panic, an out-of-memory crash or
// thread exhaustion later.
func TestNewRefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		opt  runtime.Option
		name string
	}{
		{runtime.WithRecvDepth(1 << 62), "WithRecvDepth"},
		{runtime.WithRecvDepth(1<<31 + 1), "WithRecvDepth"},
		{runtime.WithRecvDepth(2), "WithRecvDepth"},
		{runtime.WithSendQueueDepth(0), "WithSendQueueDepth"},
		{runtime.WithSendQueueDepth(-1), "WithSendQueueDepth"},
		{runtime.WithMessageSize(0), "WithMessageSize"},
		{runtime.WithMemoryLimit(-1), "WithMemoryLimit"},
		{runtime.WithGIDIndex(256), "WithGIDIndex"},
		{runtime.WithTuning(runtime.Tuning{RingSize: 1<<31 + 1}), "Tuning.RingSize"},
		{runtime.WithTuning(runtime.Tuning{Pollers: 1 << 20}), "Tuning.Pollers"},
		{runtime.WithTuning(runtime.Tuning{Pollers: -1}), "Tuning.Pollers"},
		{runtime.WithTuning(runtime.Tuning{Spin: -time.Second}), "Tuning.Spin"},
		{runtime.WithTuning(runtime.Tuning{WaitPoll: time.Hour}), "Tuning.WaitPoll"},
		{runtime.WithTuning(runtime.Tuning{SignalEvery: 1 << 20}), "Tuning.SignalEvery"},
		{runtime.WithTuning(runtime.Tuning{CQSize: -5}), "Tuning.CQSize"},
		{runtime.WithTuning(runtime.Tuning{CallbackWorkers: 1 << 30}), "Tuning.CallbackWorkers"},
		{runtime.WithTuning(runtime.Tuning{AckTimeout: -time.Second}), "Tuning.AckTimeout"},
		{runtime.WithTuning(runtime.Tuning{AckTimeout: 24 * time.Hour}), "Tuning.AckTimeout"},
		{runtime.WithTuning(runtime.Tuning{RetryCount: 8}), "Tuning.RetryCount"},
		{runtime.WithTuning(runtime.Tuning{RetryCount: -1}), "Tuning.RetryCount"},
		{runtime.WithTuning(runtime.Tuning{RNRRetry: 8}), "Tuning.RNRRetry"},
	} {
		rt, err := runtime.New(c.opt)
		if err == nil {
			rt.Close(context.Background())
			t.Errorf("%s: New succeeded", c.name)
			continue
		}
		if !errors.Is(err, verbs.ErrInvalidArgument) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: New failed with %q, want ErrInvalidArgument naming the option", c.name, err)
		}
	}
}

// TestTuningComposes: WithTuning sets only the fields it is given, so two
// of them add up, and a runtime made with them works.
func TestTuningComposes(t *testing.T) {
	rt, cli, srv := pair(t, runtime.WithTuning(runtime.Tuning{RingSize: 4}),
		runtime.WithTuning(runtime.Tuning{NoInlinePost: true, CallbackWorkers: 2}))
	ctx := ctxT(t)
	buf := alloc(t, rt, 8)
	done := make(chan error, 1)
	cli.Send(ctx, buf.Local()).Then(func(_ runtime.Completion, err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m, err := srv.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
}

// TestQPsConnectWithTheTuning: the runtime's QPs take the ACK timeout,
// retry counts and first PSN from the runtime's settings and the
// handshake, and each endpoint draws its first PSN at random, so a
// stranger who guesses a QP number does not know where its sequence
// stands.
func TestQPsConnectWithTheTuning(t *testing.T) {
	rt := newRuntime(t, runtime.WithTuning(runtime.Tuning{AckTimeout: 500 * time.Millisecond, RetryCount: 3, RNRRetry: 5}))
	psns := map[uint32]bool{}
	for range 4 {
		cli, srv := connect(t, rt)
		a, err := cli.QP().Query()
		if err != nil {
			t.Fatal(err)
		}
		b, err := srv.QP().Query()
		if err != nil {
			t.Fatal(err)
		}
		// 4.096 us x 2^17 is 537 ms, the first at least 500 ms.
		if a.Timeout != 17 || a.RetryCnt != 3 || a.RNRRetry != 5 {
			t.Fatalf("QP attributes timeout %d, retry_cnt %d, rnr_retry %d, want 17, 3 and 5", a.Timeout, a.RetryCnt, a.RNRRetry)
		}
		if a.SQPSN != b.RQPSN || b.SQPSN != a.RQPSN {
			t.Fatalf("send and expected PSNs do not pair up: %#x/%#x and %#x/%#x", a.SQPSN, a.RQPSN, b.SQPSN, b.RQPSN)
		}
		psns[a.SQPSN], psns[b.SQPSN] = true, true
	}
	if len(psns) < 7 { // 8 draws of 24 bits: a repeat is a 2^-19 chance
		t.Fatalf("8 endpoints started at %d distinct PSNs: %v", len(psns), psns)
	}
}

// TestAckTimeoutDefault: the defaults bear about 1.9 s of silence (7
// retries of about 268 ms), and retry RNR for ever.
func TestAckTimeoutDefault(t *testing.T) {
	if got := runtime.DefaultTuning(); got.AckTimeout < 250*time.Millisecond || got.RetryCount != 7 || got.RNRRetry != 7 {
		t.Fatalf("DefaultTuning: AckTimeout %v, RetryCount %d, RNRRetry %d", got.AckTimeout, got.RetryCount, got.RNRRetry)
	}
}

// TestClosedMatchesNetErrClosed: what a closed endpoint, listener or
// runtime returns matches net.ErrClosed as well as runtime.ErrClosed, as
// the standard library's closed connections do.
func TestClosedMatchesNetErrClosed(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	buf := alloc(t, rt, 8)
	if err := cli.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := cli.Write(ctx, buf.Local(), refOf(t, alloc(t, rt, 8))).Wait(ctx)
	wantClosed(t, "Write on a closed endpoint", err)

	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	_, err = ln.Accept(ctx)
	wantClosed(t, "Accept on a closed listener", err)

	other := newRuntime(t)
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = other.Alloc(8)
	wantClosed(t, "Alloc on a closed runtime", err)
	_, err = other.Dial(ctx, "127.0.0.1:1")
	wantClosed(t, "Dial on a closed runtime", err)
}

func wantClosed(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, net.ErrClosed) || !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("%s: %v, want an error matching net.ErrClosed and runtime.ErrClosed", what, err)
	}
}

// TestNilContextRefused: every call that takes a context refuses a nil
// one with an error matching verbs.ErrInvalidArgument, and changes
// nothing: after Close(nil) the endpoint still works and closes properly.
func TestNilContextRefused(t *testing.T) {
	rt, cli, srv := pair(t)
	ctx := ctxT(t)
	buf := alloc(t, rt, 64)
	ref := refOf(t, alloc(t, rt, 64))
	var nilCtx context.Context
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, verbs.ErrInvalidArgument) || !strings.Contains(err.Error(), "nil Context") {
			t.Errorf("%s with a nil Context: %v, want an error naming it", what, err)
		}
	}
	for what, f := range map[string]runtime.Future{
		"Write":          cli.Write(nilCtx, buf.Local(), ref),
		"Read":           cli.Read(nilCtx, buf.Local(), ref),
		"Send":           cli.Send(nilCtx, buf.Local()),
		"SendBytes":      cli.SendBytes(nilCtx, []byte("x")),
		"SendImm":        cli.SendImm(nilCtx, buf.Local(), 1),
		"WriteImm":       cli.WriteImm(nilCtx, buf.Local(), ref, 1),
		"CompareAndSwap": cli.CompareAndSwap(nilCtx, ref.Slice(0, 8), 0, 1),
		"FetchAdd":       cli.FetchAdd(nilCtx, ref.Slice(0, 8), 1),
		"Post":           cli.Post(nilCtx, []runtime.Op{{Opcode: verbs.OpWrite, Local: []runtime.Local{buf.Local()}, Remote: ref}}),
	} {
		_, err := f.Wait(ctx)
		refused(what, err)
	}
	if uses := runtime.Uses(buf); uses != 0 {
		t.Errorf("the refused operations left %d uses of their buffer", uses)
	}
	f := cli.Write(ctx, buf.Local(), ref)
	_, err := f.Wait(nilCtx)
	refused("Future.Wait", err)
	if _, err := f.Wait(ctx); err != nil {
		t.Errorf("Wait after a refused Wait: %v", err)
	}
	_, err = srv.Recv(nilCtx)
	refused("Recv", err)
	_, err = rt.Dial(nilCtx, "127.0.0.1:1")
	refused("Dial", err)
	_, _, err = runtime.Pipe(nilCtx, rt, rt)
	refused("Pipe", err)
	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ln.Accept(nilCtx)
	refused("Accept", err)
	ln.Close()

	refused("Endpoint.Close", cli.Close(nilCtx))
	if _, err := cli.Write(ctx, buf.Local(), ref).Wait(ctx); err != nil {
		t.Errorf("a write after Close(nil): %v", err)
	}
	if err := cli.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cli.Done():
	case <-ctx.Done():
		t.Fatal("Done never closed after Close")
	}
	refused("Runtime.Close", rt.Close(nilCtx))
	if _, err := rt.Alloc(8); err != nil {
		t.Errorf("Alloc after Runtime.Close(nil): %v", err)
	}
}
