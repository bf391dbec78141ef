package rdmanet_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/hostile"
	"github.com/verbsrt/verbsrt/internal/testhook"
	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

// TestHostileClientsDoNotStallTheListener: 1,000 TCP clients that connect
// and stay silent or send garbage (random bytes, a line of 64 MiB, hellos
// out of range) while 100 Conns Dial: every Dial connects and its Conn
// reaches Accept, the heap does not grow by the garbage (less than 64
// MiB), every hostile client is counted as a failed handshake once it
// hangs up and none reaches Accept, and the listener serves a Conn
// afterwards. The runtime listener's hello timeout is set beyond the
// test's end (testhook), so no silent client leaves before the test lets
// it: a Dial or an Accept that waited for one would wait until the test's
// context ends and fail, however fast or slow the machine.
func TestHostileClientsDoNotStallTheListener(t *testing.T) {
	const (
		hostileN  = 1000
		realN     = 100
		heapBound = 64 << 20
		// stallWait is reached only by a stalled listener: no bound on
		// how fast real clients connect.
		stallWait = 2 * time.Minute
	)
	if testing.Short() {
		t.Skip("2,200 sockets")
	}
	hostile.NeedDescriptors(t, 2*(hostileN+realN)+200)
	t.Cleanup(testhook.SetListenHandshakeTimeout(time.Hour))
	srvRT, cliRT := newRuntime(t), newRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), stallWait)
	defer cancel()
	ln, err := rdmanet.Listen(srvRT, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conns := make(chan net.Conn, realN+1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- c
		}
	}()
	heapBefore := hostile.HeapInUse()
	stop := make(chan struct{})
	waitHostile := hostile.Clients(t, ln.Addr().String(), hostileN, stop)
	// The real clients Dial ten at a time, one after the other in each of
	// ten goroutines, while every hostile client holds its connection.
	var wg sync.WaitGroup
	for g := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < realN; i += 10 {
				c, err := rdmanet.Dial(ctx, cliRT, ln.Addr().String())
				if err != nil {
					t.Errorf("real client %d among hostile ones: %v (a silent client held it up)", i, err)
					continue
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	if grown := int64(hostile.HeapInUse()) - int64(heapBefore); grown >= heapBound {
		t.Errorf("the heap grew by %d MiB among hostile clients, want less than %d", grown>>20, heapBound>>20)
	}
	for i := range realN {
		select {
		case c := <-conns:
			c.Close()
		case <-ctx.Done():
			t.Fatalf("%d of %d real clients reached Accept", i, realN)
		}
	}
	close(stop)
	waitHostile()
	for srvRT.Stats().FailedHandshakes < hostileN && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	if n := srvRT.Stats().FailedHandshakes; n != hostileN {
		t.Errorf("Stats.FailedHandshakes: %d, want the %d hostile clients", n, hostileN)
	}
	// Served afterwards: a Conn carries bytes.
	c, err := rdmanet.Dial(ctx, cliRT, ln.Addr().String())
	if err != nil {
		t.Fatalf("Dial after the hostile clients: %v", err)
	}
	defer c.Close()
	srv := <-conns
	if srv == nil {
		t.Fatal("Accept failed after the hostile clients")
	}
	defer srv.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(srv, b); err != nil || string(b) != "ping" {
		t.Fatalf("read %q, %v; want ping", b, err)
	}
}

// TestClosedListenerTakesNoConnection: once Accept has returned
// net.ErrClosed, or a second Close has, the listening socket is closed: a
// client that connects then is refused, as by a net.Listener after Close.
func TestClosedListenerTakesNoConnection(t *testing.T) {
	rt := newRuntime(t)
	hostile.ClosedListenerTakesNoConnection(t, func() (string, func() error, func() error) {
		ln, err := rdmanet.Listen(rt, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		accept := func() error {
			_, err := ln.Accept()
			return err
		}
		return ln.Addr().String(), accept, ln.Close
	}, net.ErrClosed)
}
