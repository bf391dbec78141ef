package verbs

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// Sentinel errors. Providers wrap them (and the errno they saw) so callers
// match with errors.Is, whichever provider they run on.
var (
	// ErrInvalidWR is returned when a work request breaks a rule of
	// ibv_post_send(3) or ibv_post_recv(3). It comes wrapped in a *WRError
	// that names the WR and the rule.
	ErrInvalidWR = errors.New("invalid work request")
	// ErrInvalidArgument is returned when a spec or attribute is malformed
	// or outside the device's limits (EINVAL outside the data path).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrQPState is returned when the QP's state does not allow the call:
	// posting sends before RTS, receives in RESET, or a state transition
	// (or its attribute mask) the IB spec does not allow.
	ErrQPState = errors.New("QP state does not allow this")
	// ErrNotSupported is returned when the device or provider lacks a
	// feature (EOPNOTSUPP), e.g. XRC on rxe.
	ErrNotSupported = errors.New("not supported")
	// ErrNoMemory is returned when a queue is full or a resource is
	// exhausted (ENOMEM), e.g. posting to a send queue with no free slot.
	ErrNoMemory = errors.New("out of resources")
	// ErrGoMemory is returned by PD.RegMR on every provider, and by
	// CheckRegistrable, for memory the Go runtime owns: the heap (make,
	// new, append) or a package-level variable. A device may write such
	// memory after the collector has freed and reused it. It matches
	// ErrInvalidArgument (and EINVAL) as well.
	ErrGoMemory error = &subError{msg: "memory owned by the Go runtime", parent: ErrInvalidArgument}
	// ErrClosed is returned when an object, or the context it belongs to,
	// has been closed. It matches net.ErrClosed too, as the standard
	// library's closed connections and listeners do.
	ErrClosed error = &subError{msg: "closed", parent: net.ErrClosed}
	// ErrBusy is returned when an object is still in use: closing a PD that
	// has MRs or QPs, or a CQ that QPs still use (EBUSY).
	ErrBusy = errors.New("resource busy")
	// ErrNotFound is returned for an unknown device, port or GID index.
	ErrNotFound = errors.New("not found")
	// ErrNotPosted marks a work request that was not posted because an
	// earlier one in the same list failed (bad_wr semantics). Providers do
	// not return it; layers above use it for the innocent WRs after a bad
	// one.
	ErrNotPosted = errors.New("work request not posted")
	// ErrEventsLost is matched by Context.AsyncErr once a provider closed
	// AsyncEvents because it could no longer read the device's
	// asynchronous events: ibv_get_async_event failed with an errno other
	// than EINTR or EAGAIN, as it does once the device is removed.
	ErrEventsLost = errors.New("asynchronous events can no longer be read")
	// ErrPollFailed is returned by CQ.Poll when the provider's poll failed:
	// ibv_poll_cq returned a negative value, which ibv_poll_cq(3) gives no
	// errno (mlx4 and mlx5 return -2 for a CQE they cannot parse). The
	// CQ can no longer be trusted: completions may have been lost.
	ErrPollFailed = errors.New("polling the CQ failed")

	// ErrQPError matches every *WCError: an error completion means the QP
	// left RTS (or, on UD, that the WR failed).
	ErrQPError = errors.New("work completion error")
	// ErrFlushed matches a WC with status WR_FLUSH_ERR: the WR was flushed
	// because its QP entered the error state.
	ErrFlushed = errors.New("work request flushed")
	// ErrRemoteAccess matches REM_ACCESS_ERR: bad rkey, missing remote
	// permission or out-of-bounds remote address.
	ErrRemoteAccess = errors.New("remote access error")
	// ErrLocalProtection matches LOC_PROT_ERR: bad lkey or missing local
	// permission.
	ErrLocalProtection = errors.New("local protection error")
	// ErrRetryExceeded matches RETRY_EXC_ERR: the peer did not answer
	// within retry_cnt transport retries.
	ErrRetryExceeded = errors.New("transport retry counter exceeded")
	// ErrRNRRetryExceeded matches RNR_RETRY_EXC_ERR: the peer had no
	// receive posted for rnr_retry retries.
	ErrRNRRetryExceeded = errors.New("RNR retry counter exceeded")
	// ErrRemoteOp matches REM_OP_ERR and REM_INV_REQ_ERR: the responder
	// could not execute the request (e.g. its receive buffer was too short).
	ErrRemoteOp = errors.New("remote operation error")
	// ErrLocalLength matches LOC_LEN_ERR and LOC_QP_OP_ERR on a receive: the
	// message did not fit the posted receive buffer.
	ErrLocalLength = errors.New("local length error")
)

// subError is a sentinel that is a kind of another: errors.Is matches it
// and its parent.
type subError struct {
	msg    string
	parent error
}

func (e *subError) Error() string { return e.msg }
func (e *subError) Unwrap() error { return e.parent }

// statusSentinel maps a WC status to the sentinel a *WCError matches besides
// ErrQPError.
func statusSentinel(s WCStatus) error {
	switch s {
	case WCWRFlushErr:
		return ErrFlushed
	case WCRemAccessErr:
		return ErrRemoteAccess
	case WCLocProtErr, WCLocAccessErr:
		return ErrLocalProtection
	case WCRetryExcErr:
		return ErrRetryExceeded
	case WCRNRRetryExcErr:
		return ErrRNRRetryExceeded
	case WCRemOpErr, WCRemInvReqErr:
		return ErrRemoteOp
	case WCLocLenErr, WCLocQPOpErr:
		return ErrLocalLength
	}
	return nil
}

// WCError is a work completion that failed.
type WCError struct {
	Status    WCStatus
	VendorErr uint32
	WRID      uint64
	QPN       uint32
}

func (e *WCError) Error() string {
	return fmt.Sprintf("verbs: wr id %#x on QP %#x: %s (%s, vendor_err %#x)",
		e.WRID, e.QPN, e.Status, e.Status.Name(), e.VendorErr)
}

// Is matches ErrQPError and the sentinel of the status (ErrFlushed for
// WR_FLUSH_ERR, ErrRemoteAccess for REM_ACCESS_ERR, ...).
func (e *WCError) Is(target error) bool {
	if target == ErrQPError {
		return true
	}
	s := statusSentinel(e.Status)
	return s != nil && s == target
}

// WRError is a work request rejected when posted. Index is its position in
// the list passed to PostSend, PostRecv or Validate; the WRs before it were
// posted (or are valid), it and those after were not.
type WRError struct {
	Index int
	WRID  uint64
	Rule  string // the rule it broke, in words
	Err   error  // ErrInvalidWR or ErrNotSupported (with EINVAL or EOPNOTSUPP)
}

func (e *WRError) Error() string {
	return fmt.Sprintf("verbs: wr %d (id %#x): %s", e.Index, e.WRID, e.Rule)
}

// Unwrap returns the sentinel and the errno libibverbs would have returned.
func (e *WRError) Unwrap() []error {
	if e.Err == ErrNotSupported {
		return []error{e.Err, syscall.EOPNOTSUPP}
	}
	return []error{e.Err, syscall.EINVAL}
}

// Error is a failed verb other than a rejected WR: which call, the sentinel
// that classifies it and the errno the provider saw (0 when none).
type Error struct {
	Op     string // the libibverbs verb, e.g. "ibv_modify_qp"
	Err    error  // a sentinel of this package
	Errno  syscall.Errno
	Detail string
}

func (e *Error) Error() string {
	s := "verbs: " + e.Op + ": " + e.Err.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Errno != 0 {
		s += " (" + e.Errno.Error() + ")"
	}
	return s
}

// Unwrap returns the sentinel and the errno, so errors.Is matches either.
func (e *Error) Unwrap() []error {
	if e.Errno == 0 {
		return []error{e.Err}
	}
	return []error{e.Err, e.Errno}
}

// NewError builds an *Error; the errno is derived from the sentinel when
// errno is 0 (EINVAL for ErrInvalidArgument, ENOMEM for ErrNoMemory, ...).
func NewError(op string, sentinel error, detail string) *Error {
	return &Error{Op: op, Err: sentinel, Errno: errnoOf(sentinel), Detail: detail}
}

// Errorf is NewError with a formatted detail.
func Errorf(op string, sentinel error, format string, args ...any) *Error {
	return NewError(op, sentinel, fmt.Sprintf(format, args...))
}

// FromErrno classifies an errno returned by a C verb.
func FromErrno(op string, errno syscall.Errno, detail string) *Error {
	var s error
	switch errno {
	case syscall.EINVAL:
		s = ErrInvalidArgument
	case syscall.ENOMEM, syscall.ENOSPC, syscall.EAGAIN:
		s = ErrNoMemory
	case syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EPROTONOSUPPORT:
		s = ErrNotSupported
	case syscall.EBUSY:
		s = ErrBusy
	case syscall.ENODEV, syscall.ENOENT, syscall.ENXIO:
		s = ErrNotFound
	default:
		s = errors.New("system error")
	}
	return &Error{Op: op, Err: s, Errno: errno, Detail: detail}
}

func errnoOf(sentinel error) syscall.Errno {
	switch sentinel {
	case ErrInvalidArgument, ErrInvalidWR, ErrQPState, ErrGoMemory:
		return syscall.EINVAL
	case ErrNoMemory:
		return syscall.ENOMEM
	case ErrNotSupported:
		return syscall.EOPNOTSUPP
	case ErrBusy:
		return syscall.EBUSY
	case ErrNotFound:
		return syscall.ENODEV
	}
	return 0
}
