package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// failureBound is the matrix's stated bound: after a failure, every future
// resolves, Recv returns on both sides and Done closes within it. The
// slowest path is Close waiting for the flush of what the device holds
// (flushWait, 5 s, reached only when a CQ overrun lost completions) and a
// goodbye the peer never acknowledges (0.5 s).
const failureBound = 7 * time.Second

// matrixEvent is one way an endpoint's connection ends, seen from endpoint
// a, whose peer is b.
type matrixEvent struct {
	name string
	// do makes it happen.
	do func(t *testing.T, m *matrix)
	// errA and errB say what a's and b's Err may be afterwards; bDies: b's
	// process is gone (its own end is left to its runtime's Close).
	errA, errB []error
	bDies      bool
}

// matrix is one case: two runtimes on two devices of one soft fabric, a
// in rtA connected to b in rtB.
type matrix struct {
	rtA, rtB *runtime.Runtime
	a, b     *runtime.Endpoint
	memA     *runtime.Buffer
	memB     *runtime.Buffer
}

// TestFailureMatrix: {peer's graceful Close, peer killed, local Close, QP
// forced to error, CQ overrun} x {idle, 1,000 operations in flight, sends
// waiting for the peer's credits}: every future of either side resolves
// exactly once within failureBound with a typed error (or success), Recv
// returns on both sides, Done closes, both Errs say what happened, and no
// goroutine is left once both runtimes closed.
func TestFailureMatrix(t *testing.T) {
	events := []matrixEvent{
		{name: "PeerClose", do: func(t *testing.T, m *matrix) {
			closeWithin(t, m.b)
		}, errA: []error{runtime.ErrPeerClosed}, errB: []error{runtime.ErrClosed}},
		{name: "PeerKilled", do: func(t *testing.T, m *matrix) {
			if err := runtime.KillForTest(m.b, false); err != nil {
				t.Fatal(err)
			}
		}, errA: []error{runtime.ErrPeerLost, runtime.ErrConnFailed}, bDies: true},
		{name: "LocalClose", do: func(t *testing.T, m *matrix) {
			closeWithin(t, m.a)
		}, errA: []error{runtime.ErrClosed}, errB: []error{runtime.ErrPeerClosed}},
		{name: "QPError", do: func(t *testing.T, m *matrix) {
			if err := soft.Inject(m.a.QP(), soft.Fault{Kind: soft.FaultQPError}); err != nil {
				t.Fatal(err)
			}
		}, errA: []error{runtime.ErrQPFatal, runtime.ErrConnFailed}, errB: []error{runtime.ErrPeerLost, runtime.ErrConnFailed}},
		{name: "CQOverrun", do: func(t *testing.T, m *matrix) {
			if err := soft.InjectCQ(m.a.CQ(), soft.Fault{Kind: soft.FaultCQOverrun}); err != nil {
				t.Fatal(err)
			}
			// The overrun needs a completion to lose: a message from b
			// (a receives in every case; a's own sends may be waiting).
			m.b.Send(context.Background(), m.memB.Slice(0, 8)).Release()
		}, errA: []error{runtime.ErrCQOverrun}, errB: []error{runtime.ErrPeerLost, runtime.ErrConnFailed}},
	}
	loads := []string{"Idle", "InFlight", "WaitingForCredits"}
	for _, ev := range events {
		for _, load := range loads {
			t.Run(ev.name+"/"+load, func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				runMatrixCase(t, ev, load)
			})
		}
	}
}

const matrixRecvDepth = 8

func runMatrixCase(t *testing.T, ev matrixEvent, load string) {
	fabric := soft.New(soft.Config{Devices: 2})
	defer fabric.Close()
	opts := []runtime.Option{runtime.WithProvider(fabric), runtime.WithRecvDepth(matrixRecvDepth), runtime.WithMemoryLimit(8 << 20)}
	m := &matrix{}
	var err error
	if m.rtA, err = runtime.New(append(opts, runtime.WithDevice("soft0"))...); err != nil {
		t.Fatal(err)
	}
	if m.rtB, err = runtime.New(append(opts, runtime.WithDevice("soft1"))...); err != nil {
		t.Fatal(err)
	}
	m.a, m.b = connectRuntimes(t, m.rtA, m.rtB)
	m.memA, m.memB = alloc(t, m.rtA, 64<<10), alloc(t, m.rtB, 64<<10)
	ctx := context.Background() // the operations' own contexts never end: the failure must resolve them

	// Receivers: a's always; b's at once, except while a's sends are to
	// wait for its credits.
	recvA := receive(m.a)
	var recvB <-chan error
	if load != "WaitingForCredits" {
		recvB = receive(m.b)
	}

	var fs []runtime.Future
	switch load {
	case "InFlight":
		// Held by the device so that they are in flight when the event
		// comes: 1,000 writes and reads from a, 100 writes from b.
		if err := soft.Inject(m.a.QP(), soft.Fault{Kind: soft.FaultDelay, Count: 1, Delay: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		for i := range 1000 {
			off := 8 * (i % 1024)
			if i%2 == 0 {
				fs = append(fs, m.a.Write(ctx, m.memA.Slice(off, 8), refOf(t, m.memB).At(off)))
			} else {
				fs = append(fs, m.a.Read(ctx, m.memA.Slice(8192+off, 8), refOf(t, m.memB).At(off)))
			}
		}
		for i := range 100 {
			fs = append(fs, m.b.Write(ctx, m.memB.Slice(8*i, 8), refOf(t, m.memA).At(16384+8*i)))
		}
	case "WaitingForCredits":
		for range 4 * matrixRecvDepth {
			fs = append(fs, m.a.Send(ctx, m.memA.Slice(0, 16)))
		}
		waitPosted(t, m.a)
	}

	ev.do(t, m)
	if recvB == nil {
		recvB = receive(m.b)
	}

	deadline := time.Now().Add(failureBound)
	wantAllResolve(t, fs, deadline, func() string {
		st := m.a.Actor().Stats()
		return fmt.Sprintf("a: Err %v, outstanding %d, taken %d, resolved %d+%d; b: Err %v",
			m.a.Err(), m.a.Actor().Outstanding(), st.Ops.Taken.Load(), st.Ops.ResolvedByActor.Load(), st.Ops.ResolvedByPoller.Load(), m.b.Err())
	})
	wantOver(t, "a", m.a, deadline, ev.errA)
	if !ev.bDies {
		wantOver(t, "b", m.b, deadline, ev.errB)
	}
	wantRecvEnds(t, "a", recvA, deadline)
	if !ev.bDies {
		wantRecvEnds(t, "b", recvB, deadline)
	}

	for _, rt := range []*runtime.Runtime{m.rtA, m.rtB} {
		cctx, cancel := context.WithTimeout(context.Background(), 2*failureBound)
		if err := rt.Close(cctx); err != nil {
			t.Errorf("runtime Close: %v", err)
		}
		cancel()
	}
	if ev.bDies {
		wantRecvEnds(t, "b", recvB, time.Now().Add(failureBound))
	}
}

// wantAllResolve: every future in fs resolves once, before deadline, with
// success or a typed end of the connection; state says what the endpoint
// looked like when one did not.
func wantAllResolve(t *testing.T, fs []runtime.Future, deadline time.Time, state func() string, also ...error) {
	t.Helper()
	for i, f := range fs {
		wctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, err := f.Wait(wctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("operation %d of %d did not resolve within %v (%s)", i, len(fs), failureBound, state())
		}
		if err != nil && !isEndOfConnection(err) && !isAny(err, also) {
			t.Errorf("operation %d: %v, not a typed end of the connection", i, err)
		}
		if _, err := f.Wait(context.Background()); !errors.Is(err, runtime.ErrReleased) {
			t.Fatalf("operation %d answered a second Wait: %v", i, err)
		}
	}
}

// receive runs ep.Recv until it fails and reports that error (io.EOF for a
// graceful end).
func receive(ep *runtime.Endpoint) <-chan error {
	done := make(chan error, 1)
	go func() {
		for {
			m, err := ep.Recv(context.Background())
			if err != nil {
				done <- err
				return
			}
			m.Release()
		}
	}()
	return done
}

func wantRecvEnds(t *testing.T, side string, recv <-chan error, deadline time.Time) {
	t.Helper()
	select {
	case err := <-recv:
		if !errors.Is(err, io.EOF) && !isEndOfConnection(err) {
			t.Errorf("%s's Recv: %v, want io.EOF or a typed end of the connection", side, err)
		}
	case <-time.After(time.Until(deadline)):
		t.Errorf("%s's Recv still blocked %v after the event", side, failureBound)
	}
}

func wantOver(t *testing.T, side string, ep *runtime.Endpoint, deadline time.Time, want []error) {
	t.Helper()
	select {
	case <-ep.Done():
	case <-time.After(time.Until(deadline)):
		t.Errorf("%s's Done not closed %v after the event", side, failureBound)
		return
	}
	for _, w := range want {
		if errors.Is(ep.Err(), w) {
			return
		}
	}
	t.Errorf("%s's Err: %v, want one of %v", side, ep.Err(), want)
}

// isEndOfConnection reports whether err is one of the typed errors an
// operation gets when its connection ends under it.
func isAny(err error, targets []error) bool {
	for _, e := range targets {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func isEndOfConnection(err error) bool {
	for _, e := range []error{runtime.ErrPeerClosed, runtime.ErrPeerLost, runtime.ErrClosed, runtime.ErrConnFailed,
		runtime.ErrQPFatal, runtime.ErrCQOverrun, verbs.ErrFlushed, verbs.ErrRetryExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func closeWithin(t *testing.T, ep *runtime.Endpoint) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failureBound)
	defer cancel()
	if err := ep.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}
