package verbs_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// statusSentinels are the sentinels a *WCError may match besides ErrQPError.
var statusSentinels = []error{
	verbs.ErrFlushed, verbs.ErrRemoteAccess, verbs.ErrLocalProtection, verbs.ErrRetryExceeded,
	verbs.ErrRNRRetryExceeded, verbs.ErrRemoteOp, verbs.ErrLocalLength,
}

// otherSentinels are never matched by a *WCError.
var otherSentinels = []error{
	verbs.ErrInvalidWR, verbs.ErrInvalidArgument, verbs.ErrQPState, verbs.ErrNotSupported,
	verbs.ErrNoMemory, verbs.ErrClosed, verbs.ErrBusy, verbs.ErrNotFound, verbs.ErrNotPosted, verbs.ErrGoMemory,
}

func TestWCErrorIs(t *testing.T) {
	want := map[verbs.WCStatus]error{ // nil: only ErrQPError
		verbs.WCLocLenErr:        verbs.ErrLocalLength,
		verbs.WCLocQPOpErr:       verbs.ErrLocalLength,
		verbs.WCLocEECOpErr:      nil,
		verbs.WCLocProtErr:       verbs.ErrLocalProtection,
		verbs.WCWRFlushErr:       verbs.ErrFlushed,
		verbs.WCMWBindErr:        nil,
		verbs.WCBadRespErr:       nil,
		verbs.WCLocAccessErr:     verbs.ErrLocalProtection,
		verbs.WCRemInvReqErr:     verbs.ErrRemoteOp,
		verbs.WCRemAccessErr:     verbs.ErrRemoteAccess,
		verbs.WCRemOpErr:         verbs.ErrRemoteOp,
		verbs.WCRetryExcErr:      verbs.ErrRetryExceeded,
		verbs.WCRNRRetryExcErr:   verbs.ErrRNRRetryExceeded,
		verbs.WCLocRDDViolErr:    nil,
		verbs.WCRemInvRDReqErr:   nil,
		verbs.WCRemAbortErr:      nil,
		verbs.WCInvEECNErr:       nil,
		verbs.WCInvEECStateErr:   nil,
		verbs.WCFatalErr:         nil,
		verbs.WCRespTimeoutErr:   nil,
		verbs.WCGeneralErr:       nil,
		verbs.WCTMErr:            nil,
		verbs.WCTMRndvIncomplete: nil,
		verbs.WCStatus(24):       nil, // beyond libibverbs' enum
		verbs.WCStatus(255):      nil,
	}
	if len(want) != 25 {
		t.Fatalf("%d statuses in the table", len(want))
	}
	for st, sentinel := range want {
		for _, err := range []error{
			&verbs.WCError{Status: st, WRID: 1, QPN: 2},
			fmt.Errorf("wrapped: %w", &verbs.WCError{Status: st}),
		} {
			if !errors.Is(err, verbs.ErrQPError) {
				t.Errorf("%s: %v does not match ErrQPError", st.Name(), err)
			}
			for _, s := range statusSentinels {
				if got := errors.Is(err, s); got != (s == sentinel) {
					t.Errorf("%s: errors.Is(%v, %v) = %v", st.Name(), err, s, got)
				}
			}
			for _, s := range otherSentinels {
				if errors.Is(err, s) {
					t.Errorf("%s: %v matches %v", st.Name(), err, s)
				}
			}
			for _, errno := range []syscall.Errno{syscall.EINVAL, syscall.EIO, syscall.ECONNRESET} {
				if errors.Is(err, errno) {
					t.Errorf("%s: %v matches %v", st.Name(), err, errno)
				}
			}
			var e *verbs.WCError
			if !errors.As(err, &e) || e.Status != st {
				t.Errorf("%s: errors.As *WCError: %v", st.Name(), e)
			}
		}
	}
}

func TestWCErr(t *testing.T) {
	ok := verbs.WC{WRID: 1, Status: verbs.WCSuccess, Opcode: verbs.WCRDMAWrite, ByteLen: 64}
	if err := ok.Err(); err != nil {
		t.Errorf("successful WC: %v", err)
	}
	wc := verbs.WC{WRID: 0x2a, Status: verbs.WCRemAccessErr, VendorErr: 0x88, QPNum: 0x11, Opcode: verbs.WCRDMARead}
	err := wc.Err()
	var e *verbs.WCError
	if !errors.As(err, &e) {
		t.Fatalf("%T is not a *WCError", err)
	}
	if *e != (verbs.WCError{Status: verbs.WCRemAccessErr, VendorErr: 0x88, WRID: 0x2a, QPN: 0x11}) {
		t.Errorf("WCError %+v", *e)
	}
	const msg = "verbs: wr id 0x2a on QP 0x11: remote access error (REM_ACCESS_ERR, vendor_err 0x88)"
	if err.Error() != msg {
		t.Errorf("message %q, want %q", err, msg)
	}
	if !errors.Is(err, verbs.ErrRemoteAccess) || !errors.Is(err, verbs.ErrQPError) || errors.Is(err, verbs.ErrFlushed) {
		t.Errorf("%v matches the wrong sentinels", err)
	}
	flushed := verbs.WC{WRID: 7, Status: verbs.WCWRFlushErr, QPNum: 0x11}
	if err := flushed.Err(); err.Error() != "verbs: wr id 0x7 on QP 0x11: Work Request Flushed Error (WR_FLUSH_ERR, vendor_err 0x0)" {
		t.Errorf("message %q", err)
	}
}

func TestWRErrorUnwrap(t *testing.T) {
	inv := &verbs.WRError{Index: 2, WRID: 0x10, Rule: "some rule", Err: verbs.ErrInvalidWR}
	if !errors.Is(inv, verbs.ErrInvalidWR) || !errors.Is(inv, syscall.EINVAL) {
		t.Errorf("%v does not match ErrInvalidWR and EINVAL", inv)
	}
	if errors.Is(inv, verbs.ErrNotSupported) || errors.Is(inv, syscall.EOPNOTSUPP) || errors.Is(inv, verbs.ErrQPError) {
		t.Errorf("%v matches ErrNotSupported, EOPNOTSUPP or ErrQPError", inv)
	}
	if got := inv.Error(); got != "verbs: wr 2 (id 0x10): some rule" {
		t.Errorf("message %q", got)
	}
	ns := &verbs.WRError{Index: 0, WRID: 0, Rule: "r", Err: verbs.ErrNotSupported}
	if !errors.Is(ns, verbs.ErrNotSupported) || !errors.Is(ns, syscall.EOPNOTSUPP) {
		t.Errorf("%v does not match ErrNotSupported and EOPNOTSUPP", ns)
	}
	if errors.Is(ns, verbs.ErrInvalidWR) || errors.Is(ns, syscall.EINVAL) {
		t.Errorf("%v matches ErrInvalidWR or EINVAL", ns)
	}
	wrapped := fmt.Errorf("qpactor: %w", inv)
	var e *verbs.WRError
	if !errors.As(wrapped, &e) || e.Index != 2 || !errors.Is(wrapped, syscall.EINVAL) {
		t.Errorf("wrapped WRError: %v", wrapped)
	}
}

func TestNewError(t *testing.T) {
	for _, c := range []struct {
		sentinel error
		errno    syscall.Errno
	}{
		{verbs.ErrInvalidArgument, syscall.EINVAL},
		{verbs.ErrInvalidWR, syscall.EINVAL},
		{verbs.ErrQPState, syscall.EINVAL},
		{verbs.ErrNoMemory, syscall.ENOMEM},
		{verbs.ErrNotSupported, syscall.EOPNOTSUPP},
		{verbs.ErrBusy, syscall.EBUSY},
		{verbs.ErrNotFound, syscall.ENODEV},
		{verbs.ErrClosed, 0},
		{verbs.ErrNotPosted, 0},
	} {
		e := verbs.NewError("ibv_create_qp", c.sentinel, "detail")
		if e.Errno != c.errno || e.Err != c.sentinel || e.Op != "ibv_create_qp" || e.Detail != "detail" {
			t.Errorf("NewError(%v) = %+v", c.sentinel, *e)
		}
		var err error = e
		if !errors.Is(err, c.sentinel) {
			t.Errorf("%v does not match %v", err, c.sentinel)
		}
		if c.errno != 0 && !errors.Is(err, c.errno) {
			t.Errorf("%v does not match %v", err, c.errno)
		}
		for _, s := range otherSentinels {
			if s != c.sentinel && errors.Is(err, s) {
				t.Errorf("%v matches %v", err, s)
			}
		}
		if errors.Is(err, verbs.ErrQPError) {
			t.Errorf("%v matches ErrQPError", err)
		}
		if c.errno == 0 {
			if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.Errno(0)) {
				t.Errorf("%v matches an errno", err)
			}
		}
	}

	err := verbs.Errorf("ibv_modify_qp", verbs.ErrInvalidArgument, "bad %s %d", "mtu", 7)
	if got, want := err.Error(), "verbs: ibv_modify_qp: invalid argument: bad mtu 7 (invalid argument)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	closed := verbs.NewError("ibv_post_send", verbs.ErrClosed, "")
	if got, want := closed.Error(), "verbs: ibv_post_send: closed"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	busy := &verbs.Error{Op: "ibv_dealloc_pd", Err: verbs.ErrBusy, Errno: syscall.EBUSY}
	if got, want := busy.Error(), "verbs: ibv_dealloc_pd: resource busy (device or resource busy)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("runtime: %w", busy)
	var e *verbs.Error
	if !errors.As(wrapped, &e) || e.Op != "ibv_dealloc_pd" || !errors.Is(wrapped, syscall.EBUSY) || !errors.Is(wrapped, verbs.ErrBusy) {
		t.Errorf("wrapped Error: %v", wrapped)
	}
}

func TestFromErrno(t *testing.T) {
	for _, c := range []struct {
		errno    syscall.Errno
		sentinel error
	}{
		{syscall.EINVAL, verbs.ErrInvalidArgument},
		{syscall.ENOMEM, verbs.ErrNoMemory},
		{syscall.ENOSPC, verbs.ErrNoMemory},
		{syscall.EAGAIN, verbs.ErrNoMemory},
		{syscall.EOPNOTSUPP, verbs.ErrNotSupported},
		{syscall.ENOSYS, verbs.ErrNotSupported},
		{syscall.EPROTONOSUPPORT, verbs.ErrNotSupported},
		{syscall.EBUSY, verbs.ErrBusy},
		{syscall.ENODEV, verbs.ErrNotFound},
		{syscall.ENOENT, verbs.ErrNotFound},
		{syscall.ENXIO, verbs.ErrNotFound},
		{syscall.EIO, nil},
		{syscall.EPERM, nil},
	} {
		err := verbs.FromErrno("ibv_reg_mr", c.errno, "buf")
		if !errors.Is(err, c.errno) {
			t.Errorf("FromErrno(%v) = %v does not match the errno", c.errno, err)
		}
		for _, s := range otherSentinels {
			if got := errors.Is(err, s); got != (s == c.sentinel) {
				t.Errorf("FromErrno(%v): errors.Is %v = %v", c.errno, s, got)
			}
		}
		if err.Op != "ibv_reg_mr" || err.Detail != "buf" || err.Errno != c.errno {
			t.Errorf("FromErrno(%v) = %+v", c.errno, *err)
		}
	}
	if got, want := verbs.FromErrno("ibv_reg_mr", syscall.EIO, "").Error(), "verbs: ibv_reg_mr: system error (input/output error)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

// kindOf holds the sentinels that are a kind of another, and match it.
var kindOf = map[error]error{verbs.ErrGoMemory: verbs.ErrInvalidArgument}

func TestSentinelsDistinct(t *testing.T) {
	all := append(append([]error{verbs.ErrQPError}, statusSentinels...), otherSentinels...)
	seen := map[string]bool{}
	for i, a := range all {
		if a == nil || a.Error() == "" {
			t.Errorf("sentinel %d is nil or has no message", i)
			continue
		}
		if seen[a.Error()] {
			t.Errorf("two sentinels read %q", a)
		}
		seen[a.Error()] = true
		for j, b := range all {
			if i != j && errors.Is(a, b) != (kindOf[a] == b) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, errors.Is(a, b))
			}
		}
	}
}
