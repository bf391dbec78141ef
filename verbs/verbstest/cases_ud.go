package verbstest

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// grh is the size of the Global Routing Header that heads every UD
// receive buffer.
const grh = 40

// udSend is a signaled UD SEND of la[off:off+n] to b.
func udSend(id uint64, la *mem, off, n int, ah verbs.AH, b *endpoint) verbs.SendWR {
	return verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: la.sgl(off, n), UD: ud(ah, b)}
}

// wantUDRecv checks a UD receive completion: byte_len counts the GRH, the
// GRH flag is set and src_qp is the sender's QPN.
func wantUDRecv(t *testing.T, wc verbs.WC, id uint64, b, a *endpoint, payload int) {
	t.Helper()
	wantRecv(t, wc, id, verbs.WCRecv, b.qp.QPN(), grh+payload, false, 0)
	if wc.Status != verbs.WCSuccess {
		return
	}
	if wc.Flags&verbs.WCFlagGRH == 0 {
		t.Errorf("UD receive without the GRH flag (flags %v)", wc.Flags)
	}
	if wc.SrcQP != a.qp.QPN() {
		t.Errorf("UD receive src_qp %#x, want the sender's QPN %#x", wc.SrcQP, a.qp.QPN())
	}
}

// UD/GRH (SEMANTICS.md 13a): a 100-byte SEND fills the receive buffer with
// 40 bytes of GRH and then the payload; byte_len is 140, src_qp the
// sender's QPN. (What the GRH bytes hold is not checked.)
func testUDGRH(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b, ah := e.udPair()
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rq := e.b.newMem(512, verbs.AccessLocalWrite)
	data := pattern(100, 140)
	copy(la.buf, data)
	b.recv(rq.recvWR(0xd00, 0, 512))
	a.post(udSend(140, la, 0, 100, ah, b))
	wantOK(t, e.waitWC(a.cq, "A's UD SEND"), 140, verbs.WCSend, a.qp.QPN())
	wantUDRecv(t, e.waitWC(b.cq, "B's RECV"), 0xd00, b, a, 100)
	wantBytes(t, "payload after the GRH", rq.buf[grh:grh+100], data)
	wantFill(t, "B's receive buffer past the message", rq.all[guard+grh+100:])
}

// UD/LargerThanMTU (SEMANTICS.md 13b): a SEND larger than the MTU
// completes with SUCCESS at A and is not delivered; the next SEND of
// exactly the MTU is (it finds the receive the big one did not take).
func testUDLargerThanMTU(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b, ah := e.udPair()
	small := min(e.a.portAttr.ActiveMTU, e.b.portAttr.ActiveMTU).Bytes()
	big := max(e.a.portAttr.ActiveMTU, e.b.portAttr.ActiveMTU).Bytes() + 1
	la := e.a.newMem(big+small, verbs.AccessLocalWrite)
	rq := e.b.newMem(grh+big+64, verbs.AccessLocalWrite)
	copy(la.buf, pattern(big+small, 141))
	b.recv(rq.recvWR(0xd01, 0, grh+big+64))
	a.post(udSend(141, la, 0, big, ah, b), udSend(142, la, big, small, ah, b))
	wcs := e.waitWCs(a.cq, 2, "A's UD SENDs")
	wantOK(t, wcs[0], 141, verbs.WCSend, a.qp.QPN())
	wantOK(t, wcs[1], 142, verbs.WCSend, a.qp.QPN())
	wantUDRecv(t, e.waitWC(b.cq, "B's RECV"), 0xd01, b, a, small)
	wantBytes(t, "payload of the MTU-sized SEND", rq.buf[grh:grh+small], la.buf[big:big+small])
	wantState(t, a, verbs.QPStateRTS)
	wantState(t, b, verbs.QPStateRTS)
}

// UD/WrongQKey (SEMANTICS.md 13c): a SEND with the wrong Q_Key is dropped
// silently; the next one, with the right Q_Key, takes the receive.
func testUDWrongQKey(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b, ah := e.udPair()
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rq := e.b.newMem(256, verbs.AccessLocalWrite)
	copy(la.buf, pattern(256, 142))
	b.recv(rq.recvWR(0xd02, 0, 256))
	wrong := udSend(143, la, 0, 50, ah, b)
	wrong.UD.RemoteQKey = 0x22222222 // high bit clear: the WR's Q_Key is used
	a.post(wrong, udSend(144, la, 64, 64, ah, b))
	wcs := e.waitWCs(a.cq, 2, "A's UD SENDs")
	wantOK(t, wcs[0], 143, verbs.WCSend, a.qp.QPN())
	wantOK(t, wcs[1], 144, verbs.WCSend, a.qp.QPN())
	wantUDRecv(t, e.waitWC(b.cq, "B's RECV"), 0xd02, b, a, 64)
	wantBytes(t, "payload of the right-Q_Key SEND", rq.buf[grh:grh+64], la.buf[64:128])
	wantState(t, b, verbs.QPStateRTS)
}

// UD/NoRecvDropped (SEMANTICS.md 13d): a SEND that finds no receive is
// dropped, not kept for a receive posted later; the next SEND is
// delivered.
func testUDNoRecv(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b, ah := e.udPair()
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rq := e.b.newMem(256, verbs.AccessLocalWrite)
	copy(la.buf, pattern(256, 145))
	a.post(udSend(145, la, 0, 64, ah, b))
	wantOK(t, e.waitWC(a.cq, "A's UD SEND"), 145, verbs.WCSend, a.qp.QPN())
	// UD is not acknowledged: nothing tells when B has dropped the message.
	// This bounded wait gives it the time (B must complete nothing
	// meanwhile), then a receive posted afterwards must stay empty for
	// another bounded wait.
	e.noWC(b.cq, quiet, "B without a receive")
	b.recv(rq.recvWR(0xd03, 0, 256))
	e.noWC(b.cq, quiet, "B's receive posted after the message")
	a.post(udSend(146, la, 128, 32, ah, b))
	wantOK(t, e.waitWC(a.cq, "A's second UD SEND"), 146, verbs.WCSend, a.qp.QPN())
	wantUDRecv(t, e.waitWC(b.cq, "B's RECV"), 0xd03, b, a, 32)
	wantBytes(t, "payload of the second SEND", rq.buf[grh:grh+32], la.buf[128:160])
	wantState(t, b, verbs.QPStateRTS)
}

// UD/RecvTooShort (SEMANTICS.md 13e): 100 bytes into a receive of 40+50:
// rxe reports LOC_QP_OP_ERR, the IB spec LOC_LEN_ERR; either is accepted.
// B's UD QP goes to ERR; A's SEND succeeds.
func testUDRecvTooShort(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b, ah := e.udPair()
	la := e.a.newMem(256, verbs.AccessLocalWrite)
	rq := e.b.newMem(256, verbs.AccessLocalWrite)
	b.recv(rq.recvWR(0xd04, 0, grh+50))
	a.post(udSend(147, la, 0, 100, ah, b))
	wantOK(t, e.waitWC(a.cq, "A's UD SEND"), 147, verbs.WCSend, a.qp.QPN())
	wantErrWC(t, e.waitWC(b.cq, "B's RECV"), 0xd04, b.qp.QPN(),
		verbs.WCLocQPOpErr, verbs.WCLocLenErr)
	e.waitState(b, verbs.QPStateErr)
}

// UD/NoAH: a UD send without an address handle is refused at post
// (Validate); the valid WR before it is posted and delivered.
func testUDNoAH(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b, ah := e.udPair()
	la := e.a.newMem(64, verbs.AccessLocalWrite)
	rq := e.b.newMem(256, verbs.AccessLocalWrite)
	b.recv(rq.recvWR(0xd05, 0, 128), rq.recvWR(0xd06, 128, 128))
	noAH := udSend(149, la, 0, 16, nil, b)
	n, err := a.qp.PostSend([]verbs.SendWR{noAH})
	wantWRError(t, "UD SEND without an AH", n, err, 0, 149)
	n, err = a.qp.PostSend([]verbs.SendWR{udSend(150, la, 0, 16, ah, b), noAH, udSend(151, la, 0, 16, ah, b)})
	wantWRError(t, "UD SEND without an AH in a list", n, err, 1, 149)
	wantOK(t, e.waitWC(a.cq, "A's UD SEND"), 150, verbs.WCSend, a.qp.QPN())
	wantUDRecv(t, e.waitWC(b.cq, "B's RECV"), 0xd05, b, a, 16)
	e.noWC(a.cq, quiet, "A after the refused WRs")
	e.emptyNow(b.cq, "B's CQ")
}

// UD/ClosedAH: a UD send naming a closed address handle is refused at post
// with a *WRError, and the WRs before it in the list are posted.
func testUDClosedAH(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b, ah := e.udPair()
	gone, err := e.a.pd.CreateAH(e.a.av(e.b))
	if err != nil {
		t.Fatalf("A: CreateAH: %v", err)
	}
	if err := gone.Close(); err != nil {
		t.Fatalf("A: AH.Close: %v", err)
	}
	la := e.a.newMem(64, verbs.AccessLocalWrite)
	rq := e.b.newMem(256, verbs.AccessLocalWrite)
	b.recv(rq.recvWR(0xd07, 0, 128))
	n, err := a.qp.PostSend([]verbs.SendWR{udSend(152, la, 0, 16, ah, b), udSend(153, la, 0, 16, gone, b)})
	wantWRError(t, "UD SEND with a closed AH in a list", n, err, 1, 153)
	wantOK(t, e.waitWC(a.cq, "A's UD SEND"), 152, verbs.WCSend, a.qp.QPN())
	wantUDRecv(t, e.waitWC(b.cq, "B's RECV"), 0xd07, b, a, 16)
	e.noWC(a.cq, quiet, "A after the refused WR")
}

// UD/CloseAHWhilePosting: an address handle closed while another goroutine
// posts UD SENDs naming it, in lists of 4 (run the suite with -race). The
// ibv provider hands the AH to libibverbs, which reads it during
// ibv_post_send, so Close must wait for the posts in flight; a post that
// begins after Close has returned is refused with a *WRError. Every WR
// that was posted completes once: SUCCESS, or, since what a device does
// with posted WRs whose AH is destroyed is not specified, LOC_QP_OP_ERR
// and the flush of the WRs after it.
func testUDCloseAHWhilePosting(t *testing.T, s *suite) {
	e := s.newEnv(t)
	a, b, _ := e.udPair()
	ah, err := e.a.pd.CreateAH(e.a.av(e.b))
	if err != nil {
		t.Fatalf("A: CreateAH: %v", err)
	}
	own(t, "A's second AH", ah)
	la := e.a.newMem(64, verbs.AccessLocalWrite)
	const batch, before = 4, 50 // WRs per post; posts before the Close
	room := min(a.caps().MaxSendWR, a.cq.CQE()) - batch

	type result struct {
		posted, completed int // WRs posted, completions polled
		wcs               []verbs.WC
		n                 int   // what the last post returned
		err               error // its error, or why the poster stopped
		lateOK            bool  // a post that began after Close returned succeeded
	}
	var closed atomic.Bool // Close has returned
	var posts atomic.Int64
	done := make(chan result, 1)
	go func() {
		var r result
		wrs := make([]verbs.SendWR, batch)
		buf := make([]verbs.WC, 64)
		deadline := time.Now().Add(e.cfg.Timeout)
		for {
			for r.posted-r.completed > room { // keep the queue and the CQ from filling
				k, err := a.cq.Poll(buf)
				if err != nil || time.Now().After(deadline) {
					r.err = fmt.Errorf("reaping completions: %d, %v", k, err)
					done <- r
					return
				}
				r.wcs = append(r.wcs, buf[:k]...)
				r.completed += k
				runtime.Gosched()
			}
			after := closed.Load()
			for i := range wrs {
				wrs[i] = udSend(uint64(r.posted+i), la, 0, 16, ah, b)
			}
			r.n, r.err = a.qp.PostSend(wrs)
			r.posted += r.n
			if r.err != nil || after {
				r.lateOK = after && r.err == nil
				done <- r
				return
			}
			posts.Add(1)
		}
	}()
	var bo backoff
	for deadline := time.Now().Add(e.cfg.Timeout); posts.Load() < before; bo.wait() {
		if time.Now().After(deadline) {
			break // the poster stopped early or is slow: Close anyway, the result says which
		}
	}
	if err := ah.Close(); err != nil {
		t.Errorf("AH.Close while posting: %v", err)
	}
	closed.Store(true)
	var r result
	select {
	case r = <-done:
	case <-time.After(e.cfg.Timeout):
		t.Fatalf("the poster did not stop within %v of the AH's Close", e.cfg.Timeout)
	}
	if r.lateOK {
		t.Errorf("a post that began after AH.Close returned was accepted (%d WRs)", r.n)
	}
	var we *verbs.WRError
	if !errors.As(r.err, &we) || we.Index != r.n || !errors.Is(r.err, verbs.ErrInvalidWR) {
		t.Errorf("the post that met the closed AH: posted %d, err %v; want a *verbs.WRError at index %d matching ErrInvalidWR",
			r.n, r.err, r.n)
	}
	wcs := append(r.wcs, e.waitWCs(a.cq, r.posted-r.completed, "A's UD SENDs")...)
	statuses := map[string]int{}
	for i, wc := range wcs {
		statuses[wc.Status.Name()]++
		if wc.Status == verbs.WCSuccess {
			wantOK(t, wc, uint64(i), verbs.WCSend, a.qp.QPN())
		} else {
			wantErrWC(t, wc, uint64(i), a.qp.QPN(), verbs.WCLocQPOpErr, verbs.WCWRFlushErr)
		}
	}
	t.Logf("%d WRs posted in %d posts before the refused one, completions %v", r.posted, posts.Load(), statuses)
	e.noWC(a.cq, quiet, "A after its UD SENDs")
	n, err := a.qp.PostSend([]verbs.SendWR{udSend(0xd08, la, 0, 16, ah, b)})
	wantWRError(t, "UD SEND with the AH closed", n, err, 0, 0xd08)
}
