package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
)

// pair returns a runtime and two connected endpoints on it (client, server).
func pair(t testing.TB, opts ...runtime.Option) (*runtime.Runtime, *runtime.Endpoint, *runtime.Endpoint) {
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
	cli, srv := connect(t, rt)
	return rt, cli, srv
}

// connect returns two more endpoints of rt connected to each other
// (client, server).
func connect(t testing.TB, rt *runtime.Runtime) (*runtime.Endpoint, *runtime.Endpoint) {
	t.Helper()
	return connectRuntimes(t, rt, rt)
}

func alloc(t testing.TB, rt *runtime.Runtime, n int) *runtime.Buffer {
	t.Helper()
	b, err := rt.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
