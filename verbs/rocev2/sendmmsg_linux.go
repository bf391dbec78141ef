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

// mmsgSend is the argument arrays of sendmmsg and the function RawConn.Write
// runs, kept with a txBatch so that a batch allocates nothing: they grow to
// the largest batch sent, and the function, made once, reads its inputs and
// leaves its results in the struct.
type mmsgSend struct {
	hdrs  []mmsghdr
	iovs  []syscall.Iovec
	names []syscall.RawSockaddrInet6
	fn    func(fd uintptr) bool
	sent  int
	err   error
}

// write is what RawConn.Write runs: sendmmsg until every header is
// written, waiting in Go's poller while the socket's buffer is full.
func (m *mmsgSend) write(fd uintptr) bool {
	for m.sent < len(m.hdrs) {
		n, _, errno := syscall.Syscall6(sysSendmmsg, fd, uintptr(unsafe.Pointer(&m.hdrs[m.sent])),
			uintptr(len(m.hdrs)-m.sent), 0, 0, 0)
		switch {
		case errno == syscall.EAGAIN:
			return false // wait until the socket is writable
		case errno == syscall.EINTR:
			continue
		case errno != 0:
			m.err = errno
			return true
		}
		m.sent += int(n)
	}
	return true
}

// sendmmsg writes out with sendmmsg(2) calls, one for all of them unless
// the socket's buffer fills, and returns how many it wrote: the caller
// writes the rest one by one, and an error stops it. m is its scratch.
func (t *Transport) sendmmsg(m *mmsgSend, out []outPacket) (int, error) {
	if cap(m.hdrs) < len(out) {
		m.hdrs = make([]mmsghdr, len(out))
		m.iovs = make([]syscall.Iovec, len(out))
		m.names = make([]syscall.RawSockaddrInet6, len(out))
	}
	if m.fn == nil {
		m.fn = m.write
	}
	m.hdrs, m.iovs, m.names = m.hdrs[:len(out)], m.iovs[:len(out)], m.names[:len(out)]
	for i, o := range out {
		a := &m.names[i]
		a.Family = syscall.AF_INET6
		p := o.to.Port()
		a.Port = p<<8 | p>>8 // network byte order
		a.Addr = o.to.Addr().As16()
		m.iovs[i].Base = &o.b[0]
		m.iovs[i].SetLen(len(o.b))
		m.hdrs[i] = mmsghdr{}
		m.hdrs[i].hdr.Name = (*byte)(unsafe.Pointer(a))
		m.hdrs[i].hdr.Namelen = uint32(unsafe.Sizeof(*a))
		m.hdrs[i].hdr.Iov = &m.iovs[i]
		m.hdrs[i].hdr.Iovlen = 1
	}
	m.sent, m.err = 0, nil
	err := t.rd.rc.Write(m.fn)
	if err == nil {
		err = m.err
	}
	sent := m.sent
	clear(m.iovs) // no packet stays referenced
	return sent, err
}
