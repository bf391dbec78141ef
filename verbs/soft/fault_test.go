package soft_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

func write(id uint64, a, b *side, off, n int) verbs.SendWR {
	return verbs.SendWR{ID: id, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: sge(a.mr, off, n),
		RDMA: verbs.RDMA{RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey()}}
}

func mustPost(t *testing.T, qp verbs.QP, wrs ...verbs.SendWR) {
	t.Helper()
	if n, err := qp.PostSend(wrs); err != nil || n != len(wrs) {
		t.Fatalf("PostSend posted %d of %d: %v", n, len(wrs), err)
	}
}

func waitEvent(t *testing.T, c verbs.Context, typ verbs.EventType) verbs.AsyncEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-c.AsyncEvents():
			if ev.Type == typ {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event", typ)
		}
	}
}

func qpState(t *testing.T, qp verbs.QP) verbs.QPState {
	t.Helper()
	a, err := qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	return a.State
}

func TestFaultDropRetransmits(t *testing.T) {
	// retry_cnt 2: two lost transmissions are retransmitted, the write lands.
	a, b := newPair(t, pairOpts{retry: 2, timeout: 1})
	copy(a.mr.Bytes()[0:], "retransmitted")
	if err := soft.Inject(a.qp, soft.Fault{Kind: soft.FaultDrop, Count: 2}); err != nil {
		t.Fatal(err)
	}
	mustPost(t, a.qp, write(1, a, b, 0, 13))
	if wc := pollN(t, a.cq, 1)[0]; wc.Status != verbs.WCSuccess {
		t.Fatalf("%+v", wc)
	}
	if got := string(b.mr.Bytes()[:13]); got != "retransmitted" {
		t.Fatalf("remote %q", got)
	}
}

func TestFaultDropRetryExceeded(t *testing.T) {
	// Three lost transmissions exceed retry_cnt 2: RETRY_EXC_ERR, the QP
	// goes to ERR and the WR behind it flushes.
	a, b := newPair(t, pairOpts{retry: 2, timeout: 1})
	if err := soft.Inject(a.qp, soft.Fault{Kind: soft.FaultDrop, Count: 3}); err != nil {
		t.Fatal(err)
	}
	mustPost(t, a.qp, write(1, a, b, 0, 8), write(2, a, b, 8, 8))
	wcs := pollN(t, a.cq, 2)
	if wcs[0].Status != verbs.WCRetryExcErr || wcs[0].WRID != 1 {
		t.Fatalf("first %+v", wcs[0])
	}
	if !errors.Is(wcs[0].Err(), verbs.ErrRetryExceeded) || !errors.Is(wcs[1].Err(), verbs.ErrFlushed) {
		t.Fatalf("errors %v, %v", wcs[0].Err(), wcs[1].Err())
	}
	if s := qpState(t, a.qp); s != verbs.QPStateErr {
		t.Fatalf("A in %s", s)
	}
	if s := qpState(t, b.qp); s != verbs.QPStateRTS {
		t.Fatalf("B in %s", s)
	}
}

func TestFaultRNR(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rnrRetry uint8
		forced   int
		want     verbs.WCStatus
	}{
		{"retry0", 0, 1, verbs.WCRNRRetryExcErr},
		{"retried", 2, 2, verbs.WCSuccess},
		{"exceeded", 2, 3, verbs.WCRNRRetryExcErr},
		{"forever", 7, 5, verbs.WCSuccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newPair(t, pairOpts{rnrRetry: tc.rnrRetry, minRNR: 1})
			if _, err := b.qp.PostRecv([]verbs.RecvWR{{ID: 9, SGL: sge(b.mr, 0, 64)}}); err != nil {
				t.Fatal(err)
			}
			if err := soft.Inject(b.qp, soft.Fault{Kind: soft.FaultRNR, Count: tc.forced}); err != nil {
				t.Fatal(err)
			}
			mustPost(t, a.qp, verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: sge(a.mr, 0, 16)})
			if wc := pollN(t, a.cq, 1)[0]; wc.Status != tc.want {
				t.Fatalf("got %s, want %s", wc.Status.Name(), tc.want.Name())
			}
			if tc.want == verbs.WCSuccess {
				if rw := pollN(t, b.cq, 1)[0]; rw.Status != verbs.WCSuccess || rw.WRID != 9 || rw.ByteLen != 16 {
					t.Fatalf("receive %+v", rw)
				}
			}
		})
	}
}

func TestFaultDelayKeepsOrder(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	if err := soft.Inject(a.qp, soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mustPost(t, a.qp, write(1, a, b, 0, 8), write(2, a, b, 8, 8))
	wcs := pollN(t, a.cq, 2)
	if wcs[0].WRID != 1 || wcs[1].WRID != 2 || wcs[0].Status != verbs.WCSuccess || wcs[1].Status != verbs.WCSuccess {
		t.Fatalf("%+v", wcs)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("completed after %v, before the injected delay", el)
	}
}

// TestEndDelayLetsTheHeldStreamGo: WQEs held by a FaultDelay longer than
// any test waits execute, in order, once EndDelay ends the hold, and none
// before.
func TestEndDelayLetsTheHeldStreamGo(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	if err := soft.Inject(a.qp, soft.Fault{Kind: soft.FaultDelay, Count: 2, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	mustPost(t, a.qp, write(1, a, b, 0, 8), write(2, a, b, 8, 8))
	if n, err := a.cq.Poll(make([]verbs.WC, 2)); n != 0 || err != nil {
		t.Fatalf("Poll of a held stream: %d completions, %v", n, err)
	}
	if err := soft.EndDelay(a.qp); err != nil {
		t.Fatal(err)
	}
	wcs := pollN(t, a.cq, 2)
	if wcs[0].WRID != 1 || wcs[1].WRID != 2 || wcs[0].Status != verbs.WCSuccess || wcs[1].Status != verbs.WCSuccess {
		t.Fatalf("%+v", wcs)
	}
}

func TestFaultQPErrorFlushesAndRaisesFatal(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	if err := soft.Inject(a.qp, soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	mustPost(t, a.qp, write(1, a, b, 0, 8), write(2, a, b, 8, 8))
	if _, err := a.qp.PostRecv([]verbs.RecvWR{{ID: 3, SGL: sge(a.mr, 100, 8)}}); err != nil {
		t.Fatal(err)
	}
	if err := soft.Inject(a.qp, soft.Fault{Kind: soft.FaultQPError}); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, a.ctx, verbs.EventQPFatal)
	if ev.QP != a.qp {
		t.Fatalf("event names QP %v", ev.QP)
	}
	wcs := pollN(t, a.cq, 3)
	for _, wc := range wcs {
		if !errors.Is(wc.Err(), verbs.ErrFlushed) {
			t.Fatalf("%+v is not a flush", wc)
		}
	}
	if wcs[0].WRID != 3 {
		t.Fatalf("receives flush first, as rxe orders them: %+v", wcs)
	}
}

func TestFaultCQOverrun(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	if err := soft.InjectCQ(a.cq, soft.Fault{Kind: soft.FaultCQOverrun, Count: 1}); err != nil {
		t.Fatal(err)
	}
	mustPost(t, a.qp, write(1, a, b, 0, 8), write(2, a, b, 8, 8))
	ev := waitEvent(t, a.ctx, verbs.EventCQErr)
	if ev.CQ != a.cq {
		t.Fatalf("event names CQ %v", ev.CQ)
	}
	if wc := pollN(t, a.cq, 1)[0]; wc.WRID != 2 {
		t.Fatalf("the first completion should be lost, got %+v", wc)
	}
}

func TestCQOverrunWhenFull(t *testing.T) {
	// SEMANTICS 10a: CQE 4 grants 7; 20 signaled WRITEs lose 13 completions,
	// one CQ_ERR each; the QPs stay RTS and the CQ keeps working.
	a, b := newPair(t, pairOpts{cqe: 4})
	if a.cq.CQE() != 7 {
		t.Fatalf("CQE %d, want 7", a.cq.CQE())
	}
	var wrs []verbs.SendWR
	for i := range 20 {
		wrs = append(wrs, write(uint64(i), a, b, i*8, 8))
	}
	mustPost(t, a.qp, wrs...)
	for range 13 {
		waitEvent(t, a.ctx, verbs.EventCQErr)
	}
	got := pollN(t, a.cq, 7)
	if extra, _ := a.cq.Poll(make([]verbs.WC, 4)); extra != 0 || got[6].WRID != 6 {
		t.Fatalf("%d extra completions, last %+v", extra, got[6])
	}
	if s := qpState(t, a.qp); s != verbs.QPStateRTS {
		t.Fatalf("A in %s", s)
	}
	mustPost(t, a.qp, write(100, a, b, 0, 8))
	if wc := pollN(t, a.cq, 1)[0]; wc.WRID != 100 || wc.Status != verbs.WCSuccess {
		t.Fatalf("%+v", wc)
	}
}

// TestFaultPollError: a Poll that finds a completion fails with
// ErrPollFailed, leaving it in the CQ; an empty Poll is untouched.
func TestFaultPollError(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	if err := soft.InjectCQ(a.cq, soft.Fault{Kind: soft.FaultPollError}); err != nil {
		t.Fatal(err)
	}
	wcs := make([]verbs.WC, 4)
	if n, err := a.cq.Poll(wcs); n != 0 || err != nil {
		t.Fatalf("Poll of the empty CQ: %d, %v; want 0, nil", n, err)
	}
	mustPost(t, a.qp, write(1, a, b, 0, 8))
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := a.cq.Poll(wcs)
		if err != nil {
			if !errors.Is(err, verbs.ErrPollFailed) {
				t.Fatalf("Poll: %v, want verbs.ErrPollFailed", err)
			}
			break
		}
		if n != 0 {
			t.Fatalf("Poll returned %d completions, want the injected failure", n)
		}
		if time.Now().After(deadline) {
			t.Fatal("no completion to fail the Poll on")
		}
		time.Sleep(50 * time.Microsecond)
	}
	if wc := pollN(t, a.cq, 1)[0]; wc.WRID != 1 {
		t.Fatalf("after the failure: %+v, want the completion of WR 1", wc)
	}
}

// TestFaultEventsLost: AsyncEvents closes before the context, and AsyncErr
// says why (nil before, and nil after a plain Close).
func TestFaultEventsLost(t *testing.T) {
	a, _ := newPair(t, pairOpts{})
	if err := a.ctx.AsyncErr(); err != nil {
		t.Fatalf("AsyncErr of an open context: %v", err)
	}
	if err := soft.InjectContext(a.ctx, soft.Fault{Kind: soft.FaultEventsLost}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev, ok := <-a.ctx.AsyncEvents():
		if ok {
			t.Fatalf("event %v, want AsyncEvents closed", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AsyncEvents still open")
	}
	if err := a.ctx.AsyncErr(); !errors.Is(err, verbs.ErrEventsLost) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("AsyncErr: %v, want verbs.ErrEventsLost and EIO", err)
	}
	// Events raised after the end go nowhere, and Close still works.
	if err := soft.Inject(a.qp, soft.Fault{Kind: soft.FaultQPError}); err != nil {
		t.Fatal(err)
	}
	if err := a.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := soft.InjectContext(a.ctx, soft.Fault{Kind: soft.FaultQPError}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("InjectContext of a QP fault: %v, want verbs.ErrInvalidArgument", err)
	}
}

func TestInjectRejectsForeignObjects(t *testing.T) {
	if err := soft.Inject(nil, soft.Fault{Kind: soft.FaultDrop}); !errors.Is(err, verbs.ErrNotSupported) {
		t.Fatalf("got %v", err)
	}
}

func TestCompChannelCancel(t *testing.T) {
	p := soft.New(soft.Config{})
	defer p.Close()
	devs, _ := p.Devices()
	c, err := devs[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := c.CreateCompChannel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := ch.GetCQEvent(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}
