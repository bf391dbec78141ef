package runtime_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// pair returns a runtime and two connected endpoints on it (client, server).
func pair(t testing.TB, opts ...runtime.Option) (*runtime.Runtime, *runtime.Endpoint, *runtime.Endpoint) {
	t.Helper()
	rt := newRuntime(t, opts...)
	cli, srv := connect(t, rt)
	return rt, cli, srv
}

// newRuntime returns a runtime that the test's cleanup closes, made
// without the caller-thread defaults when actorOnlyEnv says so.
func newRuntime(t testing.TB, opts ...runtime.Option) *runtime.Runtime {
	t.Helper()
	return newRuntimeAsGiven(t, append(actorOnlyOpts(), opts...)...)
}

// newRuntimeAsGiven is newRuntime whatever actorOnlyEnv says: for the
// tests of the caller-thread defaults themselves.
func newRuntimeAsGiven(t testing.TB, opts ...runtime.Option) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return rt
}

// twoHosts returns two runtimes on two devices of one soft fabric, as two
// hosts on one switch (runtimes reach each other over the soft provider
// only when they share it); optsB go to the second.
func twoHosts(t testing.TB, optsB ...runtime.Option) (*runtime.Runtime, *runtime.Runtime) {
	t.Helper()
	fabric := soft.New(soft.Config{Devices: 2})
	t.Cleanup(func() { fabric.Close() }) // after the runtimes: cleanups run last first
	rtA := newRuntime(t, runtime.WithProvider(fabric), runtime.WithDevice("soft0"))
	rtB := newRuntime(t, append([]runtime.Option{runtime.WithProvider(fabric), runtime.WithDevice("soft1")}, optsB...)...)
	return rtA, rtB
}

// connect returns two more endpoints of rt connected to each other
// (client, server).
func connect(t testing.TB, rt *runtime.Runtime) (*runtime.Endpoint, *runtime.Endpoint) {
	t.Helper()
	return connectRuntimes(t, rt, rt)
}

// connectRuntimes returns an endpoint of cliRT connected to one of srvRT
// (client, server).
func connectRuntimes(t testing.TB, cliRT, srvRT *runtime.Runtime) (*runtime.Endpoint, *runtime.Endpoint) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, srv, err := runtime.Pipe(ctx, cliRT, srvRT)
	if err != nil {
		t.Fatal(err)
	}
	return cli, srv
}

func alloc(t testing.TB, rt *runtime.Runtime, n int) *runtime.Buffer {
	t.Helper()
	b, err := rt.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allRights is every right a peer may be granted.
const allRights = runtime.RemoteRead | runtime.RemoteWrite | runtime.RemoteAtomic

// exposed holds refOf's exposures, one per buffer.
var exposed sync.Map // *runtime.Buffer -> runtime.RemoteRef

// refOf exposes the whole of b with every right, once for the test, and
// returns the reference a peer needs.
func refOf(t testing.TB, b *runtime.Buffer) runtime.RemoteRef {
	t.Helper()
	if ref, ok := exposed.Load(b); ok {
		return ref.(runtime.RemoteRef)
	}
	e, err := b.Expose(allRights)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exposed.Delete(b)
		e.Close()
	})
	exposed.Store(b, e.RemoteRef())
	return e.RemoteRef()
}

// sendAndRelease sends l from one endpoint, waits for the SEND, receives
// the message at the other and releases it.
func sendAndRelease(t testing.TB, ctx context.Context, from, to *runtime.Endpoint, l runtime.Local) {
	t.Helper()
	if _, err := from.Send(ctx, l).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := to.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// actorOnlyEnv, set to 1, runs every test whose runtime newRuntime makes
// without the caller-thread defaults (Tuning.NoInlinePost and
// Tuning.NoWaitPoll): posting and completion handling then happen only on
// actor and poller goroutines, and must keep every behaviour the tests
// check (make test runs the package both ways).
const actorOnlyEnv = "VERBSRT_TEST_ACTOR_ONLY"

func actorOnlyOpts() []runtime.Option {
	if os.Getenv(actorOnlyEnv) != "1" {
		return nil
	}
	return []runtime.Option{runtime.WithTuning(runtime.Tuning{NoInlinePost: true, NoWaitPoll: true})}
}

// awaitOutstanding waits until ep has n WRs outstanding, as a stream held
// by a FaultDelay has once all of it is posted.
func awaitOutstanding(t *testing.T, ctx context.Context, ep *runtime.Endpoint, n int) {
	t.Helper()
	for ep.Actor().Outstanding() < n {
		if ctx.Err() != nil {
			t.Fatalf("%d WRs outstanding, want %d", ep.Actor().Outstanding(), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
