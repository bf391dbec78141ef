package verbstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// quiet is how long a check that something does NOT happen waits: far
// longer than a completion or a packet takes on any device the suite runs
// on, emulated Soft-RoCE included.
const quiet = 300 * time.Millisecond

// backoff paces a polling loop: it yields at first (the soft provider runs
// its engine on goroutines of this process), then sleeps briefly so a slow
// device is not polled in a tight loop. It is pacing, not synchronization:
// every wait it serves ends on what it polls or on a deadline.
type backoff int

func (b *backoff) wait() {
	*b++
	if *b < 64 {
		runtime.Gosched()
		return
	}
	time.Sleep(100 * time.Microsecond)
}

// fmtWC renders a completion for failure messages.
func fmtWC(wc verbs.WC) string {
	if wc.Status != verbs.WCSuccess {
		return fmt.Sprintf("{wr %#x %s qpn %#x vendor_err %#x}", wc.WRID, wc.Status.Name(), wc.QPNum, wc.VendorErr)
	}
	return fmt.Sprintf("{wr %#x SUCCESS op %v len %d flags %v imm %#x qpn %#x src_qp %#x}",
		wc.WRID, wc.Opcode, wc.ByteLen, wc.Flags, wc.Imm, wc.QPNum, wc.SrcQP)
}

func fmtWCs(wcs []verbs.WC) string {
	s := make([]string, len(wcs))
	for i, wc := range wcs {
		s[i] = fmtWC(wc)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// waitWCs polls cq until it has returned n completions, and fails the test
// if they do not all come within the Timeout. It never takes more than n.
func (e *env) waitWCs(cq verbs.CQ, n int, what string) []verbs.WC {
	e.t.Helper()
	got := make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, n)
	deadline := time.Now().Add(e.cfg.Timeout)
	var b backoff
	for len(got) < n {
		k, err := cq.Poll(buf[:n-len(got)])
		if err != nil {
			e.t.Fatalf("%s: Poll: %v (after %s)", what, err, fmtWCs(got))
		}
		got = append(got, buf[:k]...)
		if k > 0 {
			continue
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %d of %d completions within %v: %s", what, len(got), n, e.cfg.Timeout, fmtWCs(got))
		}
		b.wait()
	}
	return got
}

// waitWC waits for one completion on cq.
func (e *env) waitWC(cq verbs.CQ, what string) verbs.WC {
	e.t.Helper()
	return e.waitWCs(cq, 1, what)[0]
}

// noWC polls cq for d and fails the test on any completion. d bounds a
// check that something does not happen.
func (e *env) noWC(cq verbs.CQ, d time.Duration, what string) {
	e.t.Helper()
	buf := make([]verbs.WC, 16)
	deadline := time.Now().Add(d)
	var b backoff
	for {
		k, err := cq.Poll(buf)
		if err != nil {
			e.t.Fatalf("%s: Poll: %v", what, err)
		}
		if k > 0 {
			e.t.Errorf("%s: unexpected completions %s", what, fmtWCs(buf[:k]))
			return
		}
		if time.Now().After(deadline) {
			return
		}
		b.wait()
	}
}

// emptyNow fails the test if cq holds a completion now (no wait: used where
// a completion could only have come before what the case already waited
// for).
func (e *env) emptyNow(cq verbs.CQ, what string) {
	e.t.Helper()
	buf := make([]verbs.WC, 16)
	k, err := cq.Poll(buf)
	if err != nil {
		e.t.Fatalf("%s: Poll: %v", what, err)
	}
	if k > 0 {
		e.t.Errorf("%s: unexpected completions %s", what, fmtWCs(buf[:k]))
	}
}

// wantOK checks a successful completion's wr_id, status, opcode and qp_num.
func wantOK(t *testing.T, wc verbs.WC, id uint64, op verbs.WCOpcode, qpn uint32) bool {
	t.Helper()
	if wc.WRID != id || wc.Status != verbs.WCSuccess || wc.Opcode != op || wc.QPNum != qpn {
		t.Errorf("got %s, want {wr %#x SUCCESS op %v qpn %#x}", fmtWC(wc), id, op, qpn)
		return false
	}
	if err := wc.Err(); err != nil {
		t.Errorf("wr %#x: successful WC has Err() = %v", id, err)
	}
	return true
}

// wantLen checks byte_len.
func wantLen(t *testing.T, wc verbs.WC, n int) {
	t.Helper()
	if wc.ByteLen != uint32(n) {
		t.Errorf("wr %#x: byte_len %d, want %d (%s)", wc.WRID, wc.ByteLen, n, fmtWC(wc))
	}
}

// wantRecv checks a successful receive completion: opcode, byte_len, the
// QP it arrived on and whether it carries immediate data. imm is checked
// bit for bit when withImm.
func wantRecv(t *testing.T, wc verbs.WC, id uint64, op verbs.WCOpcode, qpn uint32, n int, withImm bool, imm uint32) {
	t.Helper()
	if !wantOK(t, wc, id, op, qpn) {
		return
	}
	wantLen(t, wc, n)
	if got := wc.Flags&verbs.WCFlagWithImm != 0; got != withImm {
		t.Errorf("wr %#x: WITH_IMM flag %v, want %v (flags %v)", id, got, withImm, wc.Flags)
	}
	if withImm && wc.Imm != imm {
		t.Errorf("wr %#x: imm_data %#08x, want %#08x bit for bit", id, wc.Imm, imm)
	}
}

// statusSentinel is the sentinel of package verbs that a *WCError of
// status s must match besides ErrQPError (the contract in verbs/errors.go).
var statusSentinel = map[verbs.WCStatus]error{
	verbs.WCWRFlushErr:     verbs.ErrFlushed,
	verbs.WCRemAccessErr:   verbs.ErrRemoteAccess,
	verbs.WCLocProtErr:     verbs.ErrLocalProtection,
	verbs.WCLocAccessErr:   verbs.ErrLocalProtection,
	verbs.WCRetryExcErr:    verbs.ErrRetryExceeded,
	verbs.WCRNRRetryExcErr: verbs.ErrRNRRetryExceeded,
	verbs.WCRemOpErr:       verbs.ErrRemoteOp,
	verbs.WCRemInvReqErr:   verbs.ErrRemoteOp,
	verbs.WCLocLenErr:      verbs.ErrLocalLength,
	verbs.WCLocQPOpErr:     verbs.ErrLocalLength,
}

// wantErrWC checks a failed completion. Only wr_id, status and qp_num are
// checked (ibv_poll_cq(3): nothing else is valid on an error WC). The status
// must be one of statuses, and wc.Err() must be a *verbs.WCError matching
// ErrQPError and the sentinel of the status.
func wantErrWC(t *testing.T, wc verbs.WC, id uint64, qpn uint32, statuses ...verbs.WCStatus) {
	t.Helper()
	names := make([]string, len(statuses))
	for i, s := range statuses {
		names[i] = s.Name()
	}
	if wc.WRID != id || wc.QPNum != qpn || !slices.Contains(statuses, wc.Status) {
		t.Errorf("got %s, want {wr %#x %s qpn %#x}", fmtWC(wc), id, strings.Join(names, " or "), qpn)
		return
	}
	err := wc.Err()
	if !errors.Is(err, verbs.ErrQPError) {
		t.Errorf("wr %#x: Err() = %v, want a match for verbs.ErrQPError", id, err)
	}
	if s, ok := statusSentinel[wc.Status]; ok && !errors.Is(err, s) {
		t.Errorf("wr %#x: Err() = %v, want a match for %v", id, err, s)
	}
	var we *verbs.WCError
	if !errors.As(err, &we) || we.Status != wc.Status || we.WRID != id || we.QPN != qpn {
		t.Errorf("wr %#x: Err() = %#v, want a *verbs.WCError for it", id, err)
	}
}

// wantFlushed checks a WR_FLUSH_ERR completion.
func wantFlushed(t *testing.T, wc verbs.WC, id uint64, qpn uint32) {
	t.Helper()
	wantErrWC(t, wc, id, qpn, verbs.WCWRFlushErr)
}

// wantState checks ep's QP state now.
func wantState(t *testing.T, ep *endpoint, st verbs.QPState) {
	t.Helper()
	if got := ep.state(); got != st {
		t.Errorf("%v is %v, want %v", ep, got, st)
	}
}

// waitState polls ep's state until it is st, for up to the Timeout: a QP
// leaves RTS asynchronously (the responder of a NAK, for one).
func (e *env) waitState(ep *endpoint, st verbs.QPState) {
	e.t.Helper()
	deadline := time.Now().Add(e.cfg.Timeout)
	var b backoff
	for {
		got := ep.state()
		if got == st {
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("%v is %v after %v, want %v", ep, got, e.cfg.Timeout, st)
			return
		}
		b.wait()
	}
}

// wantStateErr checks that a post was refused for the QP's state: nothing
// posted, an error matching ErrQPState.
func wantStateErr(t *testing.T, what string, posted int, err error) {
	t.Helper()
	if posted != 0 || !errors.Is(err, verbs.ErrQPState) {
		t.Errorf("%s: posted %d, err %v; want 0 posted and an error matching verbs.ErrQPState", what, posted, err)
	}
}

// wantWRError checks that a post stopped at wrs[index] with a *WRError
// naming it and matching sentinel (ErrInvalidWR, with EINVAL).
func wantWRError(t *testing.T, what string, posted int, err error, index int, id uint64) {
	t.Helper()
	if posted != index {
		t.Errorf("%s: posted %d, want %d (the WRs before the bad one)", what, posted, index)
	}
	var we *verbs.WRError
	if !errors.As(err, &we) {
		t.Errorf("%s: err %v (%T), want a *verbs.WRError", what, err, err)
		return
	}
	if we.Index != index || we.WRID != id {
		t.Errorf("%s: WRError index %d id %#x, want index %d id %#x (%v)", what, we.Index, we.WRID, index, id, err)
	}
	if !errors.Is(err, verbs.ErrInvalidWR) || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("%s: err %v does not match verbs.ErrInvalidWR and EINVAL", what, err)
	}
}

// wantBytes compares memory with what it should hold.
func wantBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Errorf("%s: %d bytes differ, the first at offset %d (got %d bytes, want %d)",
		what, countDiff(got, want), i, len(got), len(want))
}

func countDiff(a, b []byte) int {
	n := max(len(a), len(b)) - min(len(a), len(b))
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// wantOnly checks that m holds data at off and fillByte everywhere else,
// the unregistered bytes around it included. data nil checks that nothing
// was written.
func (m *mem) wantOnly(t *testing.T, what string, off int, data []byte) {
	t.Helper()
	want := bytes.Repeat([]byte{fillByte}, len(m.all))
	copy(want[m.lead+off:], data)
	if bytes.Equal(m.all, want) {
		return
	}
	var bad []string
	for i := range m.all {
		if m.all[i] != want[i] {
			bad = append(bad, fmt.Sprint(i-m.lead))
			if len(bad) == 8 {
				bad = append(bad, "...")
				break
			}
		}
	}
	t.Errorf("%s: memory differs at offsets %s (relative to the MR start; %d bytes differ)",
		what, strings.Join(bad, " "), countDiff(m.all, want))
}

// wantFill checks that b holds fillByte only: nothing wrote there.
func wantFill(t *testing.T, what string, b []byte) {
	t.Helper()
	for i, v := range b {
		if v != fillByte {
			t.Errorf("%s: written at offset %d (and %d bytes in all)", what, i, countDiff(b, bytes.Repeat([]byte{fillByte}, len(b))))
			return
		}
	}
}

// drainEvents discards the events s's context has delivered so far.
func drainEvents(s *side) {
	for {
		select {
		case _, ok := <-s.ctx.AsyncEvents():
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// waitEvent waits up to the Timeout for an event of type typ on s's
// context, skipping (and logging) others.
func (e *env) waitEvent(s *side, typ verbs.EventType, what string) verbs.AsyncEvent {
	e.t.Helper()
	timer := time.NewTimer(e.cfg.Timeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.ctx.AsyncEvents():
			if !ok {
				e.t.Fatalf("%s: %s's AsyncEvents closed while waiting for %q", what, s.name, typ)
			}
			if ev.Type == typ {
				return ev
			}
			e.t.Logf("%s: %s's context delivered %q while waiting for %q", what, s.name, ev.Type, typ)
		case <-timer.C:
			e.t.Fatalf("%s: no %q event on %s's context within %v", what, typ, s.name, e.cfg.Timeout)
		}
	}
}

// noEvent fails the test if an event of type typ arrives on s's context
// within d, a bounded wait for something that must not happen.
func (e *env) noEvent(s *side, typ verbs.EventType, d time.Duration, what string) {
	e.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.ctx.AsyncEvents():
			if !ok {
				e.t.Fatalf("%s: %s's AsyncEvents closed", what, s.name)
			}
			if ev.Type == typ {
				e.t.Errorf("%s: unexpected %q event on %s's context", what, typ, s.name)
				return
			}
			e.t.Logf("%s: %s's context delivered %q", what, s.name, ev.Type)
		case <-timer.C:
			return
		}
	}
}

// waitCQEvent waits up to d for ch to report a CQ.
func waitCQEvent(t *testing.T, ch verbs.CompChannel, d time.Duration) (verbs.CQ, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return ch.GetCQEvent(ctx)
}
