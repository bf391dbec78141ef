//go:build linux

package runtime

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"
)

// spareFD is a file descriptor a listener keeps in reserve for the moment
// its process runs out: accept then fails with EMFILE, and the client
// waits in the kernel's backlog for a descriptor that may never come, its
// Dial for its whole timeout. With the reserve given up for a moment, the
// listener accepts that client, writes it a refusal that names the cause,
// closes the connection and takes its reserve back (the technique of
// libev's documentation, "special problem of accept()ing when you can't").
// Only the accept loop uses it.
type spareFD struct{ f *os.File }

func (s *spareFD) reserve() {
	if s.f == nil {
		if f, err := os.Open(os.DevNull); err == nil {
			s.f = f
		}
	}
}

func (s *spareFD) release() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// refuse accepts the client waiting in ln's backlog, if there is one, on
// the reserve descriptor, and refuses it with acceptErr.
func (s *spareFD) refuse(ln net.Listener, acceptErr error, log *slog.Logger) {
	tl, ok := ln.(*net.TCPListener)
	if !ok || s.f == nil {
		s.reserve()
		return
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return
	}
	s.release()
	defer s.reserve()
	fd := -1
	cerr := rc.Control(func(lfd uintptr) {
		// The listener's socket is non-blocking: no client waiting
		// (EAGAIN) is no one to tell.
		fd, _, err = syscall.Accept4(int(lfd), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
	})
	if cerr != nil || err != nil || fd < 0 {
		return
	}
	defer syscall.Close(fd)
	line := refusal(fmt.Errorf("verbsrt: the listener could not accept the connection: %w", acceptErr))
	if _, err := syscall.Write(fd, line); err != nil {
		log.Debug("verbsrt: refusing a client for want of descriptors", "err", err)
		return
	}
	// The FIN follows the refusal; the client's hello, read if it is
	// there, is not left unread, which would make the close a reset that
	// can overtake the refusal.
	syscall.Shutdown(fd, syscall.SHUT_WR)
	discardUnread(fd)
}
