package main

import (
	"cmp"
	"context"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

// TestNetConn runs golang.org/x/net/nettest's net.Conn suite, unmodified,
// against two rdmanet Conns of two runtimes.
func TestNetConn(t *testing.T) {
	rtA, rtB := runtimes(t)
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a, b, err := rdmanet.Pipe(ctx, rtA, rtB)
		if err != nil {
			return nil, nil, nil, err
		}
		return a, b, func() { a.Close(); b.Close() }, nil
	})
}

// runtimes returns two runtimes: on the soft provider, or with
// RDMANET_PROVIDER=ibv on the ibv provider's first two devices (rxe0 and
// rxe1 in the rxevm guest, where verbs/ibv/rxevm/test-rxe runs these tests
// as its rdmanet suite).
func runtimes(t *testing.T) (a, b *runtime.Runtime) {
	t.Helper()
	provider := cmp.Or(os.Getenv("RDMANET_PROVIDER"), "soft")
	var opts []runtime.Option
	if provider != "soft" {
		opts = append(opts, runtime.WithMemoryLimit(32<<20))
	}
	mk := func(i int) *runtime.Runtime {
		rt, err := benchkit.OpenRuntime(provider, "", i, opts...)
		if err != nil {
			t.Fatalf("RDMANET_PROVIDER=%s: %v", provider, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := rt.Close(ctx); err != nil {
				t.Errorf("runtime Close: %v", err)
			}
		})
		return rt
	}
	a, b = mk(0), mk(1)
	if provider != "soft" {
		t.Logf("runtimes on %s: %s and %s", provider, a.Stats().Device, b.Stats().Device)
	}
	return a, b
}
