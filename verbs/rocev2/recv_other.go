//go:build !unix

package rocev2

import (
	"errors"
	"net"
	"net/netip"
)

// canPollSocket: Go's net API cannot tell "nothing queued" without
// waiting, so pollSocket does nothing and the receive goroutine alone
// reads.
const canPollSocket = false

// reader is the receive goroutine's buffer; tryRead never finds anything.
type reader struct {
	c   *net.UDPConn
	buf []byte
}

func newReader(c *net.UDPConn) (reader, error) {
	return reader{c: c, buf: make([]byte, maxPacket)}, nil
}

func (r *reader) tryRead() (b []byte, from netip.AddrPort, ok bool, err error) {
	return nil, from, false, nil
}

// receive reads datagrams until the socket closes, each a burst of its
// own: ACKs are not coalesced across datagrams.
func (t *Transport) receive() {
	defer close(t.done)
	for {
		n, from, err := t.rd.c.ReadFromUDPAddrPort(t.rd.buf)
		if err != nil {
			if t.closed.Load() || t.rxStop.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error reported on the socket, for instance
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		t.rxMu.Lock()
		t.handle(t.rd.buf[:n], from)
		t.flush()
		t.rxMu.Unlock()
	}
}
