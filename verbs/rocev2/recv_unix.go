//go:build unix

package rocev2

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
)

// canPollSocket: a read can tell "nothing queued" without waiting.
const canPollSocket = true

// reader reads datagrams from a UDP socket without waiting, which Go's net
// API cannot do: an expired read deadline fails before the system call is
// tried. It reads through RawConn.Control, which takes no read lock of the
// descriptor, so a read from pollSocket never waits behind the receive
// goroutine parked in RawConn.Read; the socket is non-blocking (Go opens
// it so), and rxMu orders the readers.
type reader struct {
	rc  syscall.RawConn
	buf []byte
}

func newReader(c *net.UDPConn) (reader, error) {
	rc, err := c.SyscallConn()
	return reader{rc: rc, buf: make([]byte, maxPacket)}, err
}

// tryRead returns the next datagram and its source, or ok false when none
// is queued. b is valid until the next call.
func (r *reader) tryRead() (b []byte, from netip.AddrPort, ok bool, err error) {
	var n int
	var sa syscall.Sockaddr
	var rerr error
	err = r.rc.Control(func(fd uintptr) {
		for {
			n, sa, rerr = syscall.Recvfrom(int(fd), r.buf, 0)
			if rerr != syscall.EINTR {
				return
			}
		}
	})
	if err == nil {
		err = rerr
	}
	switch {
	case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
		return nil, from, false, nil
	case err != nil:
		return nil, from, false, err
	}
	switch a := sa.(type) {
	case *syscall.SockaddrInet6:
		from = netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	case *syscall.SockaddrInet4:
		from = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	}
	return r.buf[:n], from, true, nil
}

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
