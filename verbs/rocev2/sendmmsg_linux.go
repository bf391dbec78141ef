//go:build linux && (amd64 || arm64)

package rocev2

import (
	"runtime"
	"syscall"
	"unsafe"
)

// sysSendmmsg is sendmmsg(2)'s number: the syscall package names it on
// arm64 only.
var sysSendmmsg = map[string]uintptr{"amd64": 307, "arm64": 269}[runtime.GOARCH]

// mmsghdr is struct mmsghdr on a 64-bit Linux.
type mmsghdr struct {
	hdr syscall.Msghdr
	len uint32
	_   [4]byte
}

// sendmmsg writes out with sendmmsg(2) calls, one for all of them unless
// the socket's buffer fills, and returns how many it wrote: the caller
// writes the rest one by one, and an error stops it.
func (t *Transport) sendmmsg(out []outPacket) (int, error) {
	rc, err := t.conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	hdrs := make([]mmsghdr, len(out))
	iovs := make([]syscall.Iovec, len(out))
	names := make([]syscall.RawSockaddrInet6, len(out))
	for i, o := range out {
		a := &names[i]
		a.Family = syscall.AF_INET6
		p := o.to.Port()
		a.Port = p<<8 | p>>8 // network byte order
		a.Addr = o.to.Addr().As16()
		iovs[i].Base = &o.b[0]
		iovs[i].SetLen(len(o.b))
		hdrs[i].hdr.Name = (*byte)(unsafe.Pointer(a))
		hdrs[i].hdr.Namelen = uint32(unsafe.Sizeof(*a))
		hdrs[i].hdr.Iov = &iovs[i]
		hdrs[i].hdr.Iovlen = 1
	}
	sent := 0
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		for sent < len(hdrs) {
			n, _, errno := syscall.Syscall6(sysSendmmsg, fd, uintptr(unsafe.Pointer(&hdrs[sent])),
				uintptr(len(hdrs)-sent), 0, 0, 0)
			switch {
			case errno == syscall.EAGAIN:
				return false // wait until the socket is writable
			case errno == syscall.EINTR:
				continue
			case errno != 0:
				serr = errno
				return true
			}
			sent += int(n)
		}
		return true
	})
	if err == nil {
		err = serr
	}
	return sent, err
}
