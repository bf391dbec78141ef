//go:build unix

package rocev2

import (
	"errors"
	"net"
	"net/netip"
	"syscall"

	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
)

// canPollSocket: a read can tell "nothing queued" without waiting.
const canPollSocket = true

// reader reads datagrams from a UDP socket without waiting, which Go's net
// API cannot do: an expired read deadline fails before the system call is
// tried. It reads through RawConn.Control, which takes no read lock of the
// descriptor, so a read from pollSocket never waits behind the receive
// goroutine parked in RawConn.Read; the socket is non-blocking (Go opens
// it so), and rxMu orders the readers. It reads up to readBatch datagrams
// a system call (recvmmsg where the platform has it) into frames made
// once, and allocates nothing.
type reader struct {
	rc     syscall.RawConn
	frames [][]byte // frameLen each: wire.ICRCHeadroom, then the datagram
	lens   []int    // the datagrams' lengths, of the last read
	froms  []netip.AddrPort
	sys    readSys // the platform's system call arguments
	fn     func(fd uintptr)
	want   int   // the datagrams the read asks for
	n      int   // and those it got
	err    error // its error
}

func newReader(c *net.UDPConn) (*reader, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &reader{rc: rc, frames: make([][]byte, readBatch), lens: make([]int, readBatch),
		froms: make([]netip.AddrPort, readBatch)}
	for i := range r.frames {
		r.frames[i] = make([]byte, frameLen)
	}
	r.sys.init(r)
	r.fn = r.readSys
	return r, nil
}

// batch is how many datagrams a read may return.
func (r *reader) batch() int { return len(r.frames) }

// read reads up to want datagrams (at most batch) without waiting, and
// returns how many it got: 0 when none is queued.
func (r *reader) read(want int) (int, error) {
	r.want, r.n, r.err = min(max(want, 1), len(r.frames)), 0, nil
	err := r.rc.Control(r.fn)
	if err == nil {
		err = r.err
	}
	switch {
	case r.n > 0:
		return r.n, nil // an error after some datagrams comes back on the next read
	case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
		return 0, nil
	}
	return 0, err
}

// frame returns the i-th datagram of the last read, after its
// wire.ICRCHeadroom bytes of scratch; valid until the next read.
func (r *reader) frame(i int) []byte { return r.frames[i][:wire.ICRCHeadroom+r.lens[i]] }

// from returns the source of the i-th datagram of the last read.
func (r *reader) from(i int) netip.AddrPort { return r.froms[i] }

// receive is the transport's receive goroutine: it waits in Go's network
// poller until the socket is readable, then takes rxMu and drains the
// socket. The drain runs inside RawConn.Read's function, after the
// poller's readiness was reset, so a packet that comes after the drain saw
// the socket empty wakes it again; one that pollSocket took in between
// makes a wake-up that finds nothing. It ends when the socket closes.
func (t *Transport) receive() {
	defer close(t.done)
	for {
		err := t.rd.rc.Read(func(uintptr) bool {
			t.rxMu.Lock()
			empty, err := t.drain(0)
			t.rxMu.Unlock()
			// An error other than "nothing queued" (the socket closing, an
			// ICMP error reported on it) returns, to look at t.closed.
			return !empty || err != nil
		})
		if t.closed.Load() || t.rxStop.Load() || errors.Is(err, net.ErrClosed) {
			return
		}
	}
}
