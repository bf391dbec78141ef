package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []runtime.OpEvent
}

func (r *recorder) ObserveOp(e runtime.OpEvent) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// take returns the events seen so far and forgets them.
func (r *recorder) take() []runtime.OpEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// checkLifecycles checks that events are n operations of opcode and bytes
// on ep, each started, posted and completed in that order with status,
// and returns their completions.
func checkLifecycles(t *testing.T, events []runtime.OpEvent, ep *runtime.Endpoint, op verbs.Opcode, bytes, n int, status verbs.WCStatus) []runtime.OpEvent {
	t.Helper()
	var phases [3]int
	var done []runtime.OpEvent
	for _, e := range events {
		if e.Endpoint != ep || e.Opcode != op || e.Bytes != bytes {
			t.Fatalf("event %+v, want one of %v of %d bytes on %v", e, op, bytes, ep)
		}
		phases[e.Phase]++
		// Each phase is reached by no more operations than the one before.
		if e.Phase > 0 && phases[e.Phase] > phases[e.Phase-1] {
			t.Fatalf("phase %d seen %d times before phase %d was seen as often: %+v", e.Phase, phases[e.Phase], e.Phase-1, events)
		}
		if e.Latency < 0 || (e.Phase == runtime.OpStarted && e.Latency != 0) {
			t.Fatalf("latency %v at phase %d", e.Latency, e.Phase)
		}
		if e.Phase == runtime.OpCompleted {
			if e.Status != status || (e.Err == nil) != (status == verbs.WCSuccess) {
				t.Fatalf("completed with status %v, err %v; want status %v", e.Status, e.Err, status)
			}
			done = append(done, e)
		}
	}
	if phases != [3]int{n, n, n} {
		t.Fatalf("started, posted, completed: %v, want %d of each: %+v", phases, n, events)
	}
	return done
}

// TestObserverSeesEachOperation: an observer sees each operation of each
// kind start, be posted and complete, with its opcode, bytes, endpoint
// and status, before the operation's Wait returns.
func TestObserverSeesEachOperation(t *testing.T) {
	rec := &recorder{}
	rt, cli, srv := pair(t, runtime.WithObserver(rec))
	ctx := ctxT(t)
	local, target := alloc(t, rt, 64), alloc(t, rt, 64)
	remote := refOf(t, target)
	wait := func(f runtime.Future) {
		t.Helper()
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wait(cli.Write(ctx, local.Slice(0, 40), remote))
	checkLifecycles(t, rec.take(), cli, verbs.OpWrite, 40, 1, verbs.WCSuccess)
	wait(srv.Read(ctx, local.Slice(0, 16), remote))
	checkLifecycles(t, rec.take(), srv, verbs.OpRead, 16, 1, verbs.WCSuccess)
	wait(cli.FetchAdd(ctx, remote.Slice(0, 8), 1))
	checkLifecycles(t, rec.take(), cli, verbs.OpAtomicFetchAdd, 8, 1, verbs.WCSuccess)

	wait(cli.Send(ctx, local.Slice(0, 24)))
	m, err := srv.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
	checkLifecycles(t, rec.take(), cli, verbs.OpSend, 24, 1, verbs.WCSuccess) // the receive is not reported

	batch := make([]runtime.Op, 3)
	for i := range batch {
		batch[i] = runtime.Op{Opcode: verbs.OpWrite, Local: []runtime.Local{local.Slice(i*8, 8)}, Remote: remote.Slice(i*8, 8)}
	}
	wait(cli.Post(ctx, batch))
	done := checkLifecycles(t, rec.take(), cli, verbs.OpWrite, 8, 3, verbs.WCSuccess)
	for _, e := range done {
		if e.Latency <= 0 {
			t.Errorf("completed after %v", e.Latency)
		}
	}
}

// TestObserverSeesFailures: an operation the device fails completes with
// its status and error.
func TestObserverSeesFailures(t *testing.T) {
	rec := &recorder{}
	rt, cli, _ := pair(t, runtime.WithObserver(rec))
	ctx := ctxT(t)
	local, target := alloc(t, rt, 64), alloc(t, rt, 64)
	readOnly, err := target.Expose(runtime.RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	defer readOnly.Close()
	if _, err := cli.Write(ctx, local.Slice(0, 8), readOnly.RemoteRef().Slice(0, 8)).Wait(ctx); err == nil {
		t.Fatal("a WRITE into read-only memory succeeded")
	}
	done := checkLifecycles(t, rec.take(), cli, verbs.OpWrite, 8, 1, verbs.WCRemAccessErr)
	var wcErr *verbs.WCError
	if !errors.As(done[0].Err, &wcErr) || wcErr.Status != verbs.WCRemAccessErr {
		t.Errorf("completed with %v, want a *verbs.WCError of REM_ACCESS_ERR", done[0].Err)
	}
}

// TestObserverSeesOperationsThatNeverPost: operations queued behind sends
// that wait for the peer's credits (the peer does not receive) complete
// for the observer too, without being posted: a WRITE whose context is
// cancelled with context.Canceled, the sends Close fails with ErrClosed.
// Every operation that started completes once.
func TestObserverSeesOperationsThatNeverPost(t *testing.T) {
	const depth = 8
	rec := &recorder{}
	rt, cli, _ := pair(t, runtime.WithObserver(rec), runtime.WithRecvDepth(depth))
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 64), refOf(t, alloc(t, rt, 64))
	var sends []runtime.Future
	for range 4 * depth { // more than the peer's largest window
		sends = append(sends, cli.Send(ctx, local.Slice(0, 8)))
	}
	wctx, cancel := context.WithCancel(ctx)
	write := cli.Write(wctx, local.Slice(0, 16), remote)
	cancel()
	if _, err := write.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled WRITE: %v, want context.Canceled", err)
	}
	if err := cli.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed := 0
	for _, f := range sends {
		if _, err := f.Wait(ctx); errors.Is(err, runtime.ErrClosed) {
			closed++
		}
	}
	if closed == 0 {
		t.Fatal("no send waited for credits until Close")
	}
	var started, posted, completed, flushed, writes int
	for _, e := range rec.take() {
		switch e.Phase {
		case runtime.OpStarted:
			started++
		case runtime.OpPosted:
			posted++
			if e.Opcode == verbs.OpWrite {
				t.Errorf("the cancelled WRITE was posted: %+v", e)
			}
		case runtime.OpCompleted:
			completed++
			if e.Opcode == verbs.OpWrite {
				writes++
				if !errors.Is(e.Err, context.Canceled) || e.Status != verbs.WCWRFlushErr || e.Bytes != 16 {
					t.Errorf("the cancelled WRITE completed as %+v", e)
				}
			} else if errors.Is(e.Err, runtime.ErrClosed) {
				flushed++
			}
		}
	}
	if started != 4*depth+1 || completed != started || writes != 1 || flushed != closed || posted != started-1-closed {
		t.Errorf("started %d, posted %d, completed %d (the WRITE %d, closed sends %d of %d)", started, posted, completed, writes, flushed, closed)
	}
}
