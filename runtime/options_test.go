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

// TestClosedMatchesNetErrClosed: what a closed endpoint or runtime
// returns matches net.ErrClosed as well as runtime.ErrClosed, as
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
