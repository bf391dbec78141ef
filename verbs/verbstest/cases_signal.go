package verbstest

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// sigSetup connects an RC pair whose requester does not signal every WR
// (sq_sig_all off), asking for sendWR send-queue entries, with n 8-byte
// slots of memory on each side. It returns the granted send-queue
// capacity.
func sigSetup(t *testing.T, s *suite, sendWR, n int) (e *env, a *endpoint, la, rb *mem, capacity int) {
	t.Helper()
	e = s.newEnv(t)
	caps := defaultCaps
	caps.MaxSendWR = sendWR
	a, _ = e.pair(qpOpt{typ: verbs.QPTypeRC, caps: caps}, qpOpt{typ: verbs.QPTypeRC})
	capacity = a.caps().MaxSendWR
	if capacity < sendWR {
		t.Fatalf("%v: granted max_send_wr %d, asked %d", a, capacity, sendWR)
	}
	n = max(n, capacity+8)
	la = e.a.newMem(8*n, verbs.AccessLocalWrite)
	rb = e.b.newMem(8*n, verbs.AccessAllRemote)
	copy(la.buf, pattern(8*n, 80))
	return e, a, la, rb, capacity
}

// slotWrite is a WRITE of slot i of la to slot i of rb.
func slotWrite(id uint64, i int, flags verbs.SendFlags, la, rb *mem) verbs.SendWR {
	return verbs.SendWR{ID: id, Opcode: verbs.OpWrite, Flags: flags, SGL: la.sgl(8*i, 8), RDMA: rb.rdma(8 * i)}
}

// Signaling/UnsignaledOnlySignaledCompletes (SEMANTICS.md 8a): 16
// unsignaled WRITEs and a signaled one in one list give exactly one
// completion, and all 17 are executed.
func testSigOneSignaled(t *testing.T, s *suite) {
	e, a, la, rb, _ := sigSetup(t, s, 32, 17)
	wrs := make([]verbs.SendWR, 17)
	for i := range wrs {
		wrs[i] = slotWrite(uint64(801+i), i, 0, la, rb)
	}
	wrs[16].Flags = verbs.SendSignaled
	a.post(wrs...)
	wantOK(t, e.waitWC(a.cq, "the signaled WRITE"), 817, verbs.WCRDMAWrite, a.qp.QPN())
	e.noWC(a.cq, quiet, "A after the one signaled completion")
	rb.wantOnly(t, "B's memory", 0, la.buf[:8*17])
}

// Signaling/UnsignaledSeparateCalls (SEMANTICS.md 8c): the same with one
// PostSend call per WR.
func testSigSeparateCalls(t *testing.T, s *suite) {
	e, a, la, rb, _ := sigSetup(t, s, 32, 17)
	for i := range 17 {
		var f verbs.SendFlags
		if i == 16 {
			f = verbs.SendSignaled
		}
		a.post(slotWrite(uint64(801+i), i, f, la, rb))
	}
	wantOK(t, e.waitWC(a.cq, "the signaled WRITE"), 817, verbs.WCRDMAWrite, a.qp.QPN())
	e.noWC(a.cq, quiet, "A after the one signaled completion")
	rb.wantOnly(t, "B's memory", 0, la.buf[:8*17])
}

// Signaling/EveryFourthSignaled (SEMANTICS.md 8d): (3 unsignaled + 1
// signaled) x 4 in one list give exactly the 4 signaled completions, in
// order.
func testSigEveryFourth(t *testing.T, s *suite) {
	e, a, la, rb, _ := sigSetup(t, s, 32, 16)
	wrs := make([]verbs.SendWR, 16)
	for i := range wrs {
		var f verbs.SendFlags
		if i%4 == 3 {
			f = verbs.SendSignaled
		}
		wrs[i] = slotWrite(uint64(8201+i), i, f, la, rb)
	}
	a.post(wrs...)
	for i, wc := range e.waitWCs(a.cq, 4, "the signaled WRITEs") {
		wantOK(t, wc, uint64(8204+4*i), verbs.WCRDMAWrite, a.qp.QPN())
	}
	e.noWC(a.cq, quiet, "A after the 4 signaled completions")
	rb.wantOnly(t, "B's memory", 0, la.buf[:8*16])
}

// Signaling/SendQueueOverflow (SEMANTICS.md 8b): a list of unsignaled
// WRITEs longer than the send queue stops at index capacity (the granted
// max_send_wr, read back from Query) with ENOMEM; the prefix is posted and
// executed, the rest is not.
func testSigOverflow(t *testing.T, s *suite) {
	e, a, la, rb, capacity := sigSetup(t, s, 16, 0)
	n := capacity + 8
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = slotWrite(uint64(8300+i), i, 0, la, rb)
	}
	posted, err := a.qp.PostSend(wrs)
	if posted != capacity || !errors.Is(err, verbs.ErrNoMemory) || !errors.Is(err, syscall.ENOMEM) {
		t.Errorf("PostSend of %d unsignaled WRITEs on a send queue of %d: posted %d, err %v; "+
			"want %d posted and an error matching verbs.ErrNoMemory and ENOMEM", n, capacity, posted, err, capacity)
	}
	// Unsignaled WRITEs complete nothing: watch B's memory, with a
	// deadline, until the prefix has landed.
	want := la.buf[:8*capacity]
	deadline := time.Now().Add(e.cfg.Timeout)
	var b backoff
	for !bytes.Equal(rb.buf[:8*capacity], want) {
		if time.Now().After(deadline) {
			t.Fatalf("the %d posted WRITEs did not all land within %v", capacity, e.cfg.Timeout)
		}
		b.wait()
	}
	rb.wantOnly(t, "B's memory (the WRITEs after the failed one were not posted)", 0, want)
	e.emptyNow(a.cq, "A's CQ (nothing was signaled)")
	wantState(t, a, verbs.QPStateRTS)
}

// Signaling/SigAll: with sq_sig_all every WR completes, signaled or not.
func testSigAll(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, _ := e.pair(qpOpt{typ: verbs.QPTypeRC, sigAll: true}, qpOpt{typ: verbs.QPTypeRC})
	la := e.a.newMem(64, verbs.AccessLocalWrite)
	rb := e.b.newMem(64, verbs.AccessAllRemote)
	copy(la.buf, pattern(32, 81))
	wrs := make([]verbs.SendWR, 4)
	for i := range wrs {
		wrs[i] = slotWrite(uint64(8400+i), i, 0, la, rb)
	}
	a.post(wrs...)
	for i, wc := range e.waitWCs(a.cq, 4, "A's WRITEs") {
		wantOK(t, wc, uint64(8400+i), verbs.WCRDMAWrite, a.qp.QPN())
	}
	rb.wantOnly(t, "B's memory", 0, la.buf[:32])
}
