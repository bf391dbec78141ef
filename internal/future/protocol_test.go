package future

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// These tests race the parties of a state's protocol (the resolver, the
// consumer, readers on any goroutine, the watch on a queued operation's
// context) over states the pool hands out again and again. None waits for
// time: each round ends when its goroutines do, and a wrong interleaving
// shows as a wrong outcome, a hang or a report of the race detector.

// noSpin is a Waiter that never polls, so Wait parks at once.
type noSpin struct{}

func (noSpin) WaitFor(*State) bool { return false }

// tagErr is an operation's error that says which operation failed.
type tagErr struct{ tag uint32 }

func (e *tagErr) Error() string { return fmt.Sprintf("operation %d failed", e.tag) }

// checkOutcome reports what is wrong with an outcome read through a handle
// of the operation tagged tag: it must be that operation's, or ErrPending,
// or ErrReleased.
func checkOutcome(tag, c uint32, err error) error {
	var te *tagErr
	switch {
	case err == nil:
		if c != tag {
			return fmt.Errorf("operation %d read ByteLen %d", tag, c)
		}
	case errors.Is(err, ErrPending), errors.Is(err, ErrReleased):
	case errors.As(err, &te):
		if te.tag != tag {
			return fmt.Errorf("operation %d read the error of operation %d", tag, te.tag)
		}
	default:
		return fmt.Errorf("operation %d: %v", tag, err)
	}
	return nil
}

// TestWaitCancelRaceLeavesNoToken: a parked Wait whose context ends while
// the resolver wakes it either withdraws before the resolver looks (and
// can wait again) or takes the resolver's token. A token left behind in
// the recycled state would wake the next operation's Wait before its
// operation completes.
func TestWaitCancelRaceLeavesNoToken(t *testing.T) {
	ended, end := context.WithCancel(context.Background())
	end()
	for i := range 3000 {
		tag := uint32(i + 1)
		p, f := NewPromise(1, nil)
		f = f.WithWaiter(noSpin{})
		st := p.s
		ctx, cancel := context.WithCancel(context.Background())
		resolved := make(chan struct{})
		go func() {
			defer close(resolved)
			st.CompleteOne(verbs.WC{ByteLen: tag}, nil, 0)
		}()
		go cancel()
		c, err := Wait(f, ctx, byteLen)
		if errors.Is(err, context.Canceled) {
			// Not consumed: it can be waited again.
			c, err = Wait(f, context.Background(), byteLen)
		}
		if err != nil || c != tag {
			t.Fatalf("round %d: %+v %v", i, c, err)
		}
		<-resolved
		if n := len(st.wake); n != 0 {
			t.Fatalf("round %d: the recycled state holds %d wake token(s)", i, n)
		}

		// The next operation, likely on the same state, is pending: a
		// Wait that parks must not come back with a result.
		q, g := NewPromise(1, nil)
		g = g.WithWaiter(noSpin{})
		if c, err := Wait(g, ended, byteLen); !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: a pending operation's Wait returned %+v %v", i, c, err)
		}
		q.s.CompleteOne(verbs.WC{ByteLen: tag}, nil, 0)
		if c, err := Wait(g, context.Background(), byteLen); err != nil || c != tag {
			t.Fatalf("round %d: %+v %v", i, c, err)
		}
	}
}

// TestStaleReadersDuringReuse: Result, Err and Done run on other
// goroutines with handles of operations whose states are being consumed,
// recycled and reused. They must see the handle's own operation, pending
// or resolved, or ErrReleased; a closed Done channel means the outcome is
// published. Run with -race: the readers must not race with the next
// operation's writes.
func TestStaleReadersDuringReuse(t *testing.T) {
	type tagged struct {
		f   Future
		tag uint32
	}
	const workers, rounds = 2, 3000
	var slots [8]atomic.Pointer[tagged]
	var stop atomic.Bool
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !stop.Load() {
				for i := range slots {
					h := slots[i].Load()
					if h == nil {
						continue
					}
					c, err := Result(h.f, byteLen)
					if e := checkOutcome(h.tag, c, err); e != nil {
						t.Error("Result:", e)
					}
					if e := checkOutcome(h.tag, h.tag, h.f.Err()); e != nil {
						t.Error("Err:", e)
					}
					select {
					case <-h.f.Done():
						if _, err := Result(h.f, byteLen); errors.Is(err, ErrPending) {
							t.Errorf("operation %d: Done closed while Result is pending", h.tag)
						}
					default:
					}
				}
				runtime.Gosched()
			}
		}()
	}
	var ops sync.WaitGroup
	for w := range workers {
		ops.Add(1)
		go func() {
			defer ops.Done()
			for i := range rounds {
				tag := uint32(w<<24 | (i + 1))
				p, f := NewPromise(1, nil)
				slots[(w*rounds+i)%len(slots)].Store(&tagged{f, tag})
				resolve := func() {
					if i%4 == 0 {
						p.Fail(&tagErr{tag})
					} else {
						p.s.CompleteOne(verbs.WC{ByteLen: tag}, nil, 0)
					}
				}
				if i%2 == 0 {
					go resolve()
				} else {
					resolve()
				}
				c, err := Wait(f, context.Background(), byteLen)
				if errors.Is(err, ErrPending) || errors.Is(err, ErrReleased) {
					t.Errorf("Wait of operation %d: %v", tag, err)
				}
				if e := checkOutcome(tag, c, err); e != nil {
					t.Error("Wait:", e)
				}
			}
		}()
	}
	ops.Wait()
	stop.Store(true)
	readers.Wait()
}

// inlineExec runs each task at once, on the goroutine that submits it.
type inlineExec struct{}

func (inlineExec) Submit(task func()) error { task(); return nil }

// TestThenAndDoneRaceResolution: Then and Done, called while the WRs
// complete on another goroutine, each see the resolution exactly once.
// The callback runs on the goroutine that resolves or on Then's (the
// executor runs it inline), so once both returned it has run, once, with
// its own operation's outcome; and every Done channel handed out is
// closed once the resolver returned, with the outcome published.
func TestThenAndDoneRaceResolution(t *testing.T) {
	for i := range 2000 {
		tag := uint32(i + 1)
		p, f := NewPromise(2, inlineExec{})
		resolved := make(chan struct{})
		go func() { // one poller completes both WRs
			defer close(resolved)
			p.s.CompleteOne(verbs.WC{ByteLen: tag}, nil, 0)
			p.s.CompleteOne(verbs.WC{ByteLen: tag}, nil, 0)
		}()
		var doneReaders sync.WaitGroup
		for range 2 {
			doneReaders.Add(1)
			go func() {
				defer doneReaders.Done()
				ch := f.Done()
				select {
				case <-ch:
					if _, err := Result(f, byteLen); errors.Is(err, ErrPending) {
						t.Errorf("round %d: Done's channel closed before the outcome was published", i)
					}
				case <-resolved:
				}
				<-resolved
				select {
				case <-ch:
				default:
					t.Errorf("round %d: Done's channel is open after the resolution", i)
				}
				c, err := Result(f, byteLen) // ErrReleased once Then's callback ran
				if errors.Is(err, ErrPending) {
					t.Errorf("round %d: pending after the resolution", i)
				}
				if e := checkOutcome(2*tag, c, err); e != nil {
					t.Errorf("round %d: after Done: %v", i, e)
				}
			}()
		}
		var calls atomic.Int32
		var got moved
		var gotErr error
		Then(f, movedOf, func(c moved, err error) {
			calls.Add(1)
			got, gotErr = c, err
		})
		<-resolved
		doneReaders.Wait()
		if n := calls.Load(); n != 1 {
			t.Fatalf("round %d: Then's callback ran %d times", i, n)
		}
		if gotErr != nil || got.byteLen != 2*tag || got.wrs != 2 {
			t.Fatalf("round %d: Then got %+v %v", i, got, gotErr)
		}
	}
}

// TestDoneWhileWaitRecycles: a Done channel handed out before the
// resolution closes even though the consumer's Wait sees the outcome and
// recycles the state while the resolver is still at work.
func TestDoneWhileWaitRecycles(t *testing.T) {
	for i := range 3000 {
		tag := uint32(i + 1)
		p, f := NewPromise(1, nil)
		done := f.Done()
		resolved := make(chan struct{})
		go func() {
			defer close(resolved)
			p.s.CompleteOne(verbs.WC{ByteLen: tag}, nil, 0)
		}()
		if c, err := Wait(f, context.Background(), byteLen); err != nil || c != tag {
			t.Fatalf("round %d: %+v %v", i, c, err)
		}
		<-resolved
		select {
		case <-done:
		default:
			t.Fatalf("round %d: Done's channel is open after the resolution", i)
		}
	}
}

// TestReleasePendingFuture: Release of a pending future makes its handle
// stale at once and leaves the state to the resolver, which still
// resolves it (closing the Done channel handed out before), and never to
// the pool.
func TestReleasePendingFuture(t *testing.T) {
	for i := range 2000 {
		tag := uint32(i + 1)
		p, f := NewPromise(1, nil)
		st := p.s
		done := f.Done()
		resolved := make(chan struct{})
		resolve := func() {
			defer close(resolved)
			st.CompleteOne(verbs.WC{ByteLen: tag}, nil, 0)
		}
		if i%2 == 0 {
			f.Release() // certainly pending
			if err := f.Err(); !errors.Is(err, ErrReleased) {
				t.Fatalf("round %d: Err after Release: %v", i, err)
			}
			if _, err := Wait(f, context.Background(), byteLen); !errors.Is(err, ErrReleased) {
				t.Fatalf("round %d: Wait after Release: %v", i, err)
			}
			select {
			case <-f.Done():
			default:
				t.Fatalf("round %d: Done after Release is open", i)
			}
			go resolve()
		} else {
			// Release racing with resolution: either comes first.
			go resolve()
			f.Release()
			if err := f.Err(); !errors.Is(err, ErrReleased) {
				t.Fatalf("round %d: Err after Release: %v", i, err)
			}
		}
		<-resolved
		select {
		case <-done:
		default:
			t.Fatalf("round %d: the Done channel handed out before Release is open", i)
		}
		if i%2 == 0 {
			// The resolver held the state until now: it must not be in
			// the pool.
			next, g := NewPromise(1, nil)
			if next.s == st {
				t.Fatalf("round %d: a state released while pending was pooled", i)
			}
			g.Release()
		}
	}
}

// TestWatchRacesTake: the end of a queued operation's context races the
// consumer's Take, over recycled states. Exactly one resolves the
// operation: Take's winner posts it and it completes, or the watch fails
// it with its own operation's error and the state is never pooled. In
// every other round the watch is held up in its failure function until
// the operation was taken, completed and consumed: it then cancels late,
// while the state likely belongs to the next round's operation, which it
// must leave alone.
func TestWatchRacesTake(t *testing.T) {
	for i := range 2000 {
		tag := uint32(i + 1)
		s, f := New(1, nil)
		ctx, cancel := context.WithCancel(context.Background())
		late := i%2 == 0
		gate := make(chan struct{})
		failure := func(error) error {
			if late {
				<-gate
			}
			return &tagErr{tag}
		}
		s.WatchContext(ctx, failure, func() {})
		if late {
			cancel() // the watch starts, and waits for the gate
		} else {
			go cancel()
		}
		taken := s.Take()
		if late && !taken {
			t.Fatalf("round %d: the held-up watch took the operation", i)
		}
		if taken {
			if s.CancelledWhileQueued() {
				t.Fatalf("round %d: taken and cancelled", i)
			}
			s.CompleteOne(verbs.WC{ByteLen: tag}, nil, 0)
			if c, err := Wait(f, context.Background(), byteLen); err != nil || c != tag {
				t.Fatalf("round %d: taken: %+v %v", i, c, err)
			}
			close(gate)
			continue
		}
		if !s.CancelledWhileQueued() {
			t.Fatalf("round %d: not taken, not cancelled", i)
		}
		c, err := Wait(f, context.Background(), byteLen)
		if e := checkOutcome(tag, c, err); e != nil || err == nil {
			t.Fatalf("round %d: cancelled: %+v %v", i, c, err)
		}
		if next, g := New(1, nil); next == s {
			t.Fatalf("round %d: a state its watch resolved was pooled", i)
		} else {
			g.Release()
		}
	}
}
