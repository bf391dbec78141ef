package ibv

import (
	"errors"
	"syscall"

	"github.com/verbsrt/verbsrt/verbs"
)

// errnoOf returns the errno err carries, or fallback when it carries none
// (a NULL return from a verb that did not set errno).
func errnoOf(err error, fallback syscall.Errno) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok && e != 0 {
		return e
	}
	return fallback
}

// installHint ends the error of a build or a machine without rdma-core's
// libraries: what to install, and that the soft provider needs none.
const installHint = "the ibv provider needs rdma-core's libraries at run time " +
	"(Debian, Ubuntu: apt install libibverbs1 ibverbs-providers librdmacm1; " +
	"Fedora, RHEL: dnf install libibverbs librdmacm); the soft provider needs nothing"

// ErrProtocol is returned when a peer breaks a connection-setup protocol:
// a malformed ibv_rc_pingpong address message (UnmarshalDest and the
// exchanges), or private data too short for what it should carry.
var ErrProtocol = errors.New("ibv: malformed message from the peer")

// errClosed is returned by methods of an object (or of an object whose
// context) that has been closed. Built once: it is on the data path.
var errClosed = verbs.NewError("ibv", verbs.ErrClosed, "object or its context is closed")
