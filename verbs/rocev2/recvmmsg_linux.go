//go:build linux && (amd64 || arm64)

package rocev2

import (
	"net/netip"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
)

// sysRecvmmsg is recvmmsg(2)'s number.
var sysRecvmmsg = map[string]uintptr{"amd64": 299, "arm64": 243}[runtime.GOARCH]

// readBatch is how many datagrams one recvmmsg may return: a window of one
// peer (maxWindow packets).
const readBatch = maxWindow

// readSys is recvmmsg's argument arrays, pointing at the reader's frames.
type readSys struct {
	hdrs  []mmsghdr
	iovs  []syscall.Iovec
	names []syscall.RawSockaddrInet6
}

func (s *readSys) init(r *reader) {
	n := len(r.frames)
	s.hdrs, s.iovs, s.names = make([]mmsghdr, n), make([]syscall.Iovec, n), make([]syscall.RawSockaddrInet6, n)
	for i := range n {
		s.iovs[i].Base = &r.frames[i][wire.ICRCHeadroom]
		s.iovs[i].SetLen(maxPacket)
		s.hdrs[i].hdr.Iov = &s.iovs[i]
		s.hdrs[i].hdr.Iovlen = 1
		s.hdrs[i].hdr.Name = (*byte)(unsafe.Pointer(&s.names[i]))
	}
}

// readSys is what RawConn.Control runs: one recvmmsg for up to r.want
// datagrams, which returns what the socket holds, or EAGAIN when it holds
// nothing.
func (r *reader) readSys(fd uintptr) {
	s := &r.sys
	for i := range r.want {
		s.hdrs[i].hdr.Namelen = uint32(unsafe.Sizeof(s.names[i]))
		s.hdrs[i].hdr.Flags = 0
	}
	var n uintptr
	var errno syscall.Errno
	for {
		n, _, errno = syscall.Syscall6(sysRecvmmsg, fd, uintptr(unsafe.Pointer(&s.hdrs[0])), uintptr(r.want), 0, 0, 0)
		if errno != syscall.EINTR {
			break
		}
	}
	if errno != 0 {
		r.err = errno
		return
	}
	r.n = int(n)
	for i := range r.n {
		r.lens[i] = min(int(s.hdrs[i].len), maxPacket)
		a := &s.names[i]
		var from netip.AddrPort
		switch a.Family {
		case syscall.AF_INET6:
			p := (*[2]byte)(unsafe.Pointer(&a.Port))
			from = netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(p[0])<<8|uint16(p[1]))
		case syscall.AF_INET:
			a4 := (*syscall.RawSockaddrInet4)(unsafe.Pointer(a))
			p := (*[2]byte)(unsafe.Pointer(&a4.Port))
			from = netip.AddrPortFrom(netip.AddrFrom4(a4.Addr), uint16(p[0])<<8|uint16(p[1]))
		}
		r.froms[i] = from
	}
}
