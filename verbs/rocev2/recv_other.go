//go:build !unix

package rocev2

import (
	"net"
	"net/netip"
)

// reader reads datagrams with Go's net API, which cannot tell "nothing
// queued" without waiting: every datagram counts as a burst of its own, so
// ACKs are not coalesced across datagrams.
type reader struct {
	c   *net.UDPConn
	buf []byte
}

func newReader(c *net.UDPConn) *reader { return &reader{c: c, buf: make([]byte, maxPacket)} }

func (r *reader) read(noWait bool) (b []byte, from netip.AddrPort, empty bool, err error) {
	if noWait {
		return nil, from, true, nil
	}
	n, from, err := r.c.ReadFromUDPAddrPort(r.buf)
	from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	return r.buf[:n], from, false, err
}
