package hostile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// Clients connects n TCP clients to addr that do what no verbsrt
// client does, and returns once all are connected; each then stays
// silent, sends random bytes, sends a line of 64 MiB or sends a hello
// with a field out of range, and keeps its connection until stop closes
// or the listener hangs up. The returned function waits for them all.
func Clients(t testing.TB, addr string, n int, stop <-chan struct{}) (wait func()) {
	t.Helper()
	bad := []string{
		`{"version":4,"qpn":4294967295,"psn":0,"lid":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4096,"mtu":1024,"max_rd_atomic":16,"max_dest_rd_atomic":16}`,
		`{"version":4,"qpn":17,"psn":0,"lid":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4611686018427387904,"mtu":1024,"max_rd_atomic":16,"max_dest_rd_atomic":16}`,
		`{"version":4,"qpn":17,"psn":16777216,"lid":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4096,"mtu":1024,"max_rd_atomic":16,"max_dest_rd_atomic":16}`,
		`{"version":4,"qpn":17,"psn":0,"lid":0,"gid":"::1","recv_depth":4611686018427387904,"window":1048576,"msg_size":4096,"mtu":1024,"max_rd_atomic":16,"max_dest_rd_atomic":16}`,
		`{"version":4,"qpn":17,"psn":0,"lid":0,"gid":"no GID","recv_depth":64,"window":3,"msg_size":4096,"mtu":1024,"max_rd_atomic":16,"max_dest_rd_atomic":16}`,
		`{"version":99,"qpn":17,"psn":0,"lid":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4096,"mtu":1024,"max_rd_atomic":16,"max_dest_rd_atomic":16}`,
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

// HeapInUse returns the heap's live bytes after a collection.
func HeapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// NeedDescriptors raises the soft limit of open files to the hard one if
// it is below n, and skips the test if even that is too low.
func NeedDescriptors(t testing.TB, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("Getrlimit: %v", err)
	}
	cur, hard := uint64(lim.Cur), uint64(lim.Max) // int64 on freebsd
	if cur >= n {
		return
	}
	if hard < n {
		t.Skipf("the test needs %d open files; RLIMIT_NOFILE allows at most %d (ulimit -Hn)", n, hard)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("raising RLIMIT_NOFILE to %d: %v", n, err)
	}
}

// ClosedListenerTakesNoConnection checks that once Accept has returned,
// or a second Close has, a listener's socket is closed: a TCP client that
// connects then is refused, as by a net.Listener after Close. Each of its
// rounds takes a new listener from listen (its address, its Accept and
// its Close), closes it while an Accept waits on it, from another
// goroutine, and connects the moment Accept returns; Accept and the
// second Close must fail with an error matching closedErr.
func ClosedListenerTakesNoConnection(t testing.TB, listen func() (addr string, accept, close func() error), closedErr error) {
	t.Helper()
	for round := range 200 {
		addr, accept, close := listen()
		accepted := make(chan error, 1)
		go func() { accepted <- accept() }()
		closed := make(chan error, 1)
		go func() { closed <- close() }()
		if err := <-accepted; !errors.Is(err, closedErr) {
			t.Fatalf("round %d: Accept during Close: %v, want %v", round, err, closedErr)
		}
		refusesTCP(t, addr, fmt.Sprintf("round %d, after Accept returned", round))
		if err := close(); !errors.Is(err, closedErr) {
			t.Fatalf("round %d: second Close: %v, want %v", round, err, closedErr)
		}
		refusesTCP(t, addr, fmt.Sprintf("round %d, after a second Close returned", round))
		if err := <-closed; err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
	}
}

// refusesTCP fails t when a TCP connection to addr, a listener's that
// closed, is taken; when says at what point of the test. A socket that
// connected to itself (the kernel chose the closed port as the client's
// own) reached no listener and passes.
func refusesTCP(t testing.TB, addr, when string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	self := c.LocalAddr().String() == c.RemoteAddr().String()
	c.Close()
	if !self {
		t.Fatalf("%s: a TCP connection to %s was taken", when, addr)
	}
}
