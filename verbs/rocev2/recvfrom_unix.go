//go:build unix && !(linux && (amd64 || arm64))

package rocev2

import (
	"net/netip"
	"syscall"

	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
)

// readBatch is one datagram a read: without recvmmsg, recvfrom.
const readBatch = 1

// readSys needs no arguments of its own here.
type readSys struct{}

func (s *readSys) init(*reader) {}

// readSys is what RawConn.Control runs: one recvfrom.
func (r *reader) readSys(fd uintptr) {
	var n int
	var sa syscall.Sockaddr
	var err error
	for {
		n, sa, err = syscall.Recvfrom(int(fd), r.frames[0][wire.ICRCHeadroom:], 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		r.err = err
		return
	}
	var from netip.AddrPort
	switch a := sa.(type) {
	case *syscall.SockaddrInet6:
		from = netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	case *syscall.SockaddrInet4:
		from = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	}
	r.n, r.lens[0], r.froms[0] = 1, n, from
}
