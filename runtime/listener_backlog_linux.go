//go:build linux

package runtime

import (
	"net"
	"syscall"
)

// endBacklog accepts, without blocking, every connection still waiting in
// ln's backlog, and ends each with a FIN. Closing a listening socket
// resets the connections its backlog holds, so a client the accept loop
// had not taken would see "connection reset" where one it had taken sees
// the connection end; taking them first makes the two alike. Bytes a
// client sent are read first: closing a socket with unread data resets it
// too. A client that connects while this runs, after the last accept, is
// still reset, as by any listener that closes.
func endBacklog(ln net.Listener) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(lfd uintptr) {
		for {
			// The listener's socket is non-blocking: EAGAIN is an empty
			// backlog.
			fd, _, err := syscall.Accept4(int(lfd), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
			if err != nil {
				return
			}
			discardUnread(fd)
			syscall.Close(fd)
		}
	})
}

// discardUnread reads, without blocking, what the peer of the socket fd
// sent and nobody read: closing a socket with unread data resets the
// connection, and the reset can overtake what was written before it.
func discardUnread(fd int) {
	var b [maxHelloLine]byte
	for {
		if n, _, err := syscall.Recvfrom(fd, b[:], syscall.MSG_DONTWAIT); err != nil || n <= 0 {
			return
		}
	}
}
