package main

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

// TestNetConn runs golang.org/x/net/nettest's net.Conn suite, unmodified,
// against two rdmanet Conns of two runtimes.
func TestNetConn(t *testing.T) {
	rtA, rtB := runtimes(t)
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		ln, err := rdmanet.Listen(rtB, "127.0.0.1:0")
		if err != nil {
			return nil, nil, nil, err
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				t.Errorf("Accept: %v", err)
			}
			accepted <- c
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c1, err = rdmanet.Dial(ctx, rtA, ln.Addr().String())
		if err != nil {
			return nil, nil, nil, err
		}
		c2 = <-accepted
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}

func runtimes(t *testing.T) (a, b *runtime.Runtime) {
	t.Helper()
	mk := func() *runtime.Runtime {
		rt, err := runtime.New()
		if err != nil {
			t.Fatal(err)
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
	return mk(), mk()
}
