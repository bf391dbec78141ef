package ibv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestCompChannel: a completion wakes GetCQEvent through the netpoller; a
// cancelled or expired context ends the wait.
func TestCompChannel(t *testing.T) {
	a, b := pair(t)
	ch, err := b.ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := b.ctx.CreateCQ(verbs.CQSpec{CQE: 16, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); !errors.Is(err, verbs.ErrBusy) {
		t.Errorf("closing a channel a CQ uses: %v, want ErrBusy", err)
	}
	qa := a.newQP(verbs.QPTypeRC, nil)
	qb, err := b.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: b.cq, RecvCQ: cq, Caps: qpCaps})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, a, qa, b, qb)

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	start := time.Now()
	_, err = ch.GetCQEvent(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("GetCQEvent with nothing armed: %v after %v, want DeadlineExceeded soon", err, time.Since(start))
	}
	gone, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := ch.GetCQEvent(gone); !errors.Is(err, context.Canceled) {
		t.Errorf("GetCQEvent cancelled: %v, want context.Canceled", err)
	}

	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	postRecv(t, qb, verbs.RecvWR{ID: 5, SGL: b.sgl(0, 64)})
	post(t, qa, verbs.SendWR{ID: 6, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: a.sgl(0, 32)})
	wait, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	got, err := ch.GetCQEvent(wait)
	if err != nil {
		t.Fatalf("GetCQEvent: %v", err)
	}
	if got != cq {
		t.Errorf("event for CQ %v, want the armed one", got)
	}
	got.AckEvents(1)
	if wc := waitOK(t, cq, 1)[0]; wc.WRID != 5 {
		t.Errorf("receive %+v", wc)
	}
	waitOK(t, a.cq, 1)
	// Closing with an event read but left unacknowledged must not hang
	// (ibv_destroy_cq waits for acknowledgements): Close acknowledges it.
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	postRecv(t, qb, verbs.RecvWR{ID: 7, SGL: b.sgl(0, 64)})
	post(t, qa, verbs.SendWR{ID: 8, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: a.sgl(0, 32)})
	if _, err := ch.GetCQEvent(wait); err != nil {
		t.Fatalf("second GetCQEvent: %v", err)
	}
	waitOK(t, a.cq, 1)
	if err := qb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cq.Close(); err != nil {
		t.Fatalf("closing the CQ with an unacknowledged event: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("closing the channel after its CQ: %v", err)
	}
}

// TestCQOverrun: rxe drops completions that do not fit and raises one
// CQ_ERR per lost one (SEMANTICS.md 10a); the event names the CQ.
func TestCQOverrun(t *testing.T) {
	a, b := pair(t)
	small, err := a.ctx.CreateCQ(verbs.CQSpec{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	qa, err := a.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: small, RecvCQ: a.cq, Caps: qpCaps})
	if err != nil {
		t.Fatal(err)
	}
	qb := b.newQP(verbs.QPTypeRC, nil)
	connect(t, a, qa, b, qb)
	wrs := make([]verbs.SendWR, small.CQE()+4)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: a.sgl(0, 8), RDMA: b.rdma(0)}
	}
	post(t, qa, wrs...)
	ev := waitEvent(t, a.ctx, verbs.EventCQErr)
	if ev.CQ != small {
		t.Errorf("CQ_ERR names CQ %v, want the small one", ev.CQ)
	}
}
