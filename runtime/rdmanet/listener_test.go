package rdmanet_test

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	goruntime "runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

// hostileClients connects n TCP clients to addr that do what no verbsrt
// client does, and returns once all are connected; each then stays
// silent, sends random bytes, sends a line of 64 MiB or sends a hello
// with a field out of range, and keeps its connection until stop closes
// or the listener hangs up. The returned function waits for them all.
func hostileClients(t testing.TB, addr string, n int, stop <-chan struct{}) (wait func()) {
	t.Helper()
	bad := []string{
		`{"version":3,"qpn":4294967295,"psn":0,"lid":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4096}`,
		`{"version":3,"qpn":17,"psn":0,"lid":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4611686018427387904}`,
		`{"version":3,"qpn":17,"psn":16777216,"lid":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4096}`,
		`{"version":3,"qpn":17,"psn":0,"lid":0,"gid":"::1","recv_depth":4611686018427387904,"window":1048576,"msg_size":4096}`,
		`{"version":3,"qpn":17,"psn":0,"lid":0,"gid":"no GID","recv_depth":64,"window":3,"msg_size":4096}`,
		`{"version":99,"qpn":17,"psn":0,"lid":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4096}`,
	}
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	var connected, done sync.WaitGroup
	connected.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			c, err := net.Dial("tcp", addr)
			connected.Done()
			if err != nil {
				t.Errorf("hostile client %d: %v", i, err)
				return
			}
			defer c.Close()
			go func() {
				<-stop
				c.Close()
			}()
			switch i % 10 {
			case 0, 1, 2, 3, 4, 5: // silent
			case 6, 7: // random bytes
				b := make([]byte, 4096)
				rand.Read(b)
				c.Write(b)
			case 8: // a hello out of range
				c.Write([]byte(bad[i/10%len(bad)] + "\n"))
			case 9:
				if i%50 == 9 { // a line of 64 MiB, without its newline
					for range 1024 {
						if _, err := c.Write(chunk); err != nil {
							break
						}
					}
				} else { // random bytes, then a newline
					b := make([]byte, 200)
					rand.Read(b)
					c.Write(append(b, '\n'))
				}
			}
			io.Copy(io.Discard, c) // until the listener or stop hangs up
		}()
	}
	connected.Wait()
	return done.Wait
}

// heapInUse returns the heap's live bytes after a collection.
func heapInUse() uint64 {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// needDescriptors raises the soft limit of open files to the hard one if
// it is below n, and skips the test if even that is too low.
func needDescriptors(t testing.TB, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("Getrlimit: %v", err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("the test needs %d open files; RLIMIT_NOFILE allows at most %d (ulimit -Hn)", n, lim.Max)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("raising RLIMIT_NOFILE to %d: %v", n, err)
	}
}

// TestHostileClientsDoNotStallTheListener: 1,000 TCP clients that connect
// and stay silent or send garbage (random bytes, a line of 64 MiB, hellos
// out of range) while 100 Conns Dial: every Dial connects within a second
// and its Conn reaches Accept, the heap does not grow by the garbage
// (less than 64 MiB), every hostile client is counted as a failed
// handshake and none reaches Accept, and the listener serves a Conn
// afterwards.
func TestHostileClientsDoNotStallTheListener(t *testing.T) {
	const (
		hostileN = 1000
		realN    = 100
		// Below the 5 s a runtime's listener gives a silent client to send
		// its hello: waiting for one hostile client, or handshakes one at
		// a time, exceed it, a busy machine's slowness does not.
		realBound = 3750 * time.Millisecond
		heapBound = 64 << 20
	)
	if testing.Short() {
		t.Skip("2,200 sockets")
	}
	needDescriptors(t, 2*(hostileN+realN)+200)
	srvRT, cliRT := newRuntime(t), newRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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
	heapBefore := heapInUse()
	stop := make(chan struct{})
	waitHostile := hostileClients(t, ln.Addr().String(), hostileN, stop)
	// The real clients Dial ten at a time, one after the other in each of
	// ten goroutines: all at once, on a busy machine of two cores under
	// -race, the last of them waits for the others' handshakes (and
	// endpoints) rather than for the hostile clients'.
	var wg sync.WaitGroup
	for g := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < realN; i += 10 {
				start := time.Now()
				c, err := rdmanet.Dial(ctx, cliRT, ln.Addr().String())
				took := time.Since(start)
				if err != nil {
					t.Errorf("real client %d among hostile ones: %v after %v", i, err, took)
					continue
				}
				if took > realBound {
					t.Errorf("real client %d among hostile ones connected after %v, want within %v", i, took, realBound)
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	if grown := int64(heapInUse()) - int64(heapBefore); grown >= heapBound {
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
