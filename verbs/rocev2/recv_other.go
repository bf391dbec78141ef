//go:build !unix

package rocev2

import (
	"errors"
	"net"
	"net/netip"

	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
)

// canPollSocket: Go's net API cannot tell "nothing queued" without
// waiting, so pollSocket does nothing and the receive goroutine alone
// reads.
const canPollSocket = false

// reader is the receive goroutine's buffer; read never finds anything.
type reader struct {
	c   *net.UDPConn
	buf []byte // frameLen: wire.ICRCHeadroom, then the datagram
}

func newReader(c *net.UDPConn) (*reader, error) {
	return &reader{c: c, buf: make([]byte, frameLen)}, nil
}

func (r *reader) batch() int              { return 1 }
func (r *reader) read(int) (int, error)   { return 0, nil }
func (r *reader) frame(int) []byte        { return nil }
func (r *reader) from(int) netip.AddrPort { return netip.AddrPort{} }

// receive reads datagrams until the socket closes, each a burst of its
// own: ACKs are not coalesced across datagrams.
func (t *Transport) receive() {
	defer close(t.done)
	for {
		n, from, err := t.rd.c.ReadFromUDPAddrPort(t.rd.buf[wire.ICRCHeadroom:])
		if err != nil {
			if t.closed.Load() || t.rxStop.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error reported on the socket, for instance
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		t.rxMu.Lock()
		t.handleFrame(t.rd.buf[:wire.ICRCHeadroom+n], from)
		t.flush()
		t.rxMu.Unlock()
	}
}
