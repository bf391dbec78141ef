package verbstest

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// inlinePair connects an RC pair whose requester asks for 64 bytes of
// inline data; it skips when the device refuses inline data with
// ErrNotSupported, and returns the granted max_inline_data.
func inlinePair(t *testing.T, s *suite) (e *env, a, b *endpoint, granted int) {
	t.Helper()
	e = s.newEnv(t)
	caps := defaultCaps
	caps.MaxInlineData = 64
	a, err := e.a.tryQP(qpOpt{typ: verbs.QPTypeRC, caps: caps})
	if errors.Is(err, verbs.ErrNotSupported) {
		t.Skipf("%s refused an RC QP with max_inline_data 64: %v", e.a.ctx.Device().Name(), err)
	}
	if err != nil {
		t.Fatalf("A: CreateQP with max_inline_data 64: %v", err)
	}
	b = e.b.newQP(qpOpt{typ: verbs.QPTypeRC})
	e.connect(a, b, defaultLink, defaultLink)
	granted = a.caps().MaxInlineData
	if granted < 64 {
		t.Fatalf("max_inline_data 64 asked, %d granted", granted)
	}
	return e, a, b, granted
}

// goSGL is a gather list over Go memory with lkey 0, which only inline
// sends may use. p must be heap memory (the collector does not move it)
// and be kept alive until PostSend returns.
func goSGL(p []byte) []verbs.SGE {
	return []verbs.SGE{{Addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p)))), Length: uint32(len(p))}}
}

// Inline/SendFromGoMemory (SEMANTICS.md 11b): an inline SEND from a plain
// Go slice, lkey 0, is copied when posted: the slice is overwritten as
// soon as PostSend returns and B still receives the original bytes.
func testInlineFromGoMemory(t *testing.T, s *suite) {
	e, a, b, _ := inlinePair(t, s)
	rq := e.b.newMem(256, verbs.AccessLocalWrite)
	want := pattern(64, 120)
	src := bytes.Clone(want) // heap memory
	b.recv(rq.recvWR(0xc00, 0, 256))
	a.post(verbs.SendWR{ID: 120, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendInline, SGL: goSGL(src)})
	for i := range src {
		src[i] = 'Z'
	}
	runtime.KeepAlive(src)
	wantOK(t, e.waitWC(a.cq, "A's inline SEND"), 120, verbs.WCSend, a.qp.QPN())
	wantRecv(t, e.waitWC(b.cq, "B's RECV"), 0xc00, verbs.WCRecv, b.qp.QPN(), 64, false, 0)
	rq.wantOnly(t, "B's receive buffer", 0, want)
}

// Inline/WriteFromGoMemory: an inline RDMA WRITE from Go memory, lkey 0,
// is copied when posted too and lands in B's MR.
func testInlineWrite(t *testing.T, s *suite) {
	e, a, _, _ := inlinePair(t, s)
	rb := e.b.newMem(256, verbs.AccessAllRemote)
	want := pattern(48, 122)
	src := bytes.Clone(want)
	a.post(verbs.SendWR{ID: 124, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled | verbs.SendInline,
		SGL: goSGL(src), RDMA: rb.rdma(16)})
	for i := range src {
		src[i] = 'Z'
	}
	runtime.KeepAlive(src)
	wantOK(t, e.waitWC(a.cq, "A's inline WRITE"), 124, verbs.WCRDMAWrite, a.qp.QPN())
	rb.wantOnly(t, "B's memory", 16, want)
}

// Inline/TooLong (SEMANTICS.md 11b, 11c): in a list of an inline SEND of
// exactly max_inline_data bytes, one of a byte more and a plain SEND, the
// second is refused at post (*WRError, index 1), the first is posted and
// delivered, the third is not posted; the QP stays RTS.
func testInlineTooLong(t *testing.T, s *suite) {
	e, a, b, granted := inlinePair(t, s)
	rq := e.b.newMem(3*(granted+1), verbs.AccessLocalWrite)
	la := e.a.newMem(64, verbs.AccessLocalWrite)
	want := pattern(granted+1, 121)
	src := bytes.Clone(want)
	for k := range 3 {
		b.recv(rq.recvWR(uint64(0xc10+k), k*(granted+1), granted+1))
	}
	wrs := []verbs.SendWR{
		{ID: 121, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendInline, SGL: goSGL(src[:granted])},
		{ID: 122, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendInline, SGL: goSGL(src)},
		{ID: 123, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(0, 16)},
	}
	n, err := a.qp.PostSend(wrs)
	runtime.KeepAlive(src)
	wantWRError(t, "inline SEND of max_inline_data+1 bytes", n, err, 1, 122)
	wantOK(t, e.waitWC(a.cq, "A's first SEND"), 121, verbs.WCSend, a.qp.QPN())
	wantRecv(t, e.waitWC(b.cq, "B's RECV"), 0xc10, verbs.WCRecv, b.qp.QPN(), granted, false, 0)
	wantBytes(t, "B's receive buffer", rq.buf[:granted], want[:granted])
	e.noWC(a.cq, quiet, "A after the refused WR")
	e.emptyNow(b.cq, "B's CQ")
	wantState(t, a, verbs.QPStateRTS)
}
