//go:build unix

package rocev2

import (
	"net"
	"net/netip"
	"syscall"
)

// reader reads datagrams from a UDP socket and can tell "nothing queued"
// without waiting, which Go's net API cannot: an expired read deadline
// fails before the system call is tried.
type reader struct {
	rc  syscall.RawConn
	buf []byte
	err error
}

func newReader(c *net.UDPConn) *reader {
	r := &reader{buf: make([]byte, maxPacket)}
	r.rc, r.err = c.SyscallConn()
	return r
}

// read returns the next datagram and its source. With noWait it returns
// empty when none is queued, instead of waiting for one.
func (r *reader) read(noWait bool) (b []byte, from netip.AddrPort, empty bool, err error) {
	if r.err != nil {
		return nil, from, false, r.err
	}
	var n int
	var sa syscall.Sockaddr
	var rerr error
	err = r.rc.Read(func(fd uintptr) bool {
		n, sa, rerr = syscall.Recvfrom(int(fd), r.buf, 0)
		if rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK {
			if noWait {
				empty = true
				return true
			}
			return false // wait until the socket is readable
		}
		return true
	})
	if empty {
		return nil, from, true, nil
	}
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, from, false, err
	}
	switch a := sa.(type) {
	case *syscall.SockaddrInet6:
		from = netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	case *syscall.SockaddrInet4:
		from = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	}
	return r.buf[:n], from, false, nil
}
