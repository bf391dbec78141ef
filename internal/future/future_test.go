package future

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// byteLen reads the bytes a successful operation moved, which the tests
// tag operations by.
func byteLen(s *State) uint32 { return s.ByteLen() }

// moved is what movedOf reads of a successful operation.
type moved struct {
	byteLen uint32
	wrs     int
}

func movedOf(s *State) moved { return moved{s.ByteLen(), s.WRs()} }

func TestFutureResolvesOnceForAllWRs(t *testing.T) {
	p, f := NewPromise(3, nil)
	p.s.CompleteOne(verbs.WC{ByteLen: 8, Opcode: verbs.WCRDMAWrite}, nil, 0)
	p.s.CompleteOne(verbs.WC{ByteLen: 8, Opcode: verbs.WCRDMAWrite}, nil, 0)
	if _, err := Result(f, byteLen); !errors.Is(err, ErrPending) {
		t.Fatalf("after 2 of 3 WRs: %v, want ErrPending", err)
	}
	p.s.CompleteOne(verbs.WC{ByteLen: 8, Opcode: verbs.WCRDMAWrite}, nil, 0)
	c, err := Wait(f, context.Background(), movedOf)
	if err != nil || c.byteLen != 24 || c.wrs != 3 {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := Wait(f, context.Background(), byteLen); !errors.Is(err, ErrReleased) {
		t.Fatalf("second Wait: %v, want ErrReleased", err)
	}
}

func TestFutureFirstErrorWins(t *testing.T) {
	p, f := NewPromise(2, nil)
	p.s.CompleteOne(verbs.WC{}, verbs.ErrRemoteAccess, 0)
	p.s.CompleteOne(verbs.WC{}, verbs.ErrFlushed, 0)
	if _, err := Wait(f, context.Background(), byteLen); !errors.Is(err, verbs.ErrRemoteAccess) {
		t.Fatalf("%v", err)
	}
}

func TestFutureWaitContext(t *testing.T) {
	p, f := NewPromise(1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := Wait(f, ctx, byteLen); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	// A deadline does not consume the future: it still resolves and can be
	// waited on again.
	p.s.CompleteOne(verbs.WC{}, nil, 0)
	if _, err := Wait(f, context.Background(), byteLen); err != nil {
		t.Fatal(err)
	}
}

type syncExec struct{ n int }

func (e *syncExec) Submit(task func()) error { e.n++; task(); return nil }

func TestFutureThenAndDone(t *testing.T) {
	exec := &syncExec{}
	p, f := NewPromise(1, exec)
	got := make(chan error, 1)
	Then(f, byteLen, func(_ uint32, err error) { got <- err })
	p.s.CompleteOne(verbs.WC{}, verbs.ErrFlushed, 0)
	if err := <-got; !errors.Is(err, verbs.ErrFlushed) || exec.n != 1 {
		t.Fatalf("%v, %d tasks", err, exec.n)
	}

	p2, f2 := NewPromise(1, exec)
	done := f2.Done()
	select {
	case <-done:
		t.Fatal("Done closed before the operation completed")
	default:
	}
	p2.s.CompleteOne(verbs.WC{}, nil, 0)
	<-done
	if err := f2.Err(); err != nil {
		t.Fatal(err)
	}
	f2.Release()
	if err := f2.Err(); !errors.Is(err, ErrReleased) {
		t.Fatalf("after Release: %v", err)
	}
}

// TestFutureRecycleRace: waiters release states as soon as they see them
// done, while resolvers are still finishing; recycled states must never be
// touched by their previous resolver (a Done channel closed twice, a Then
// run for another operation).
func TestFutureRecycleRace(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				p, f := NewPromise(1, nil)
				go p.s.CompleteOne(verbs.WC{ByteLen: uint32(i)}, nil, 0)
				if i%2 == 0 {
					<-f.Done()
				}
				c, err := Wait(f, context.Background(), byteLen)
				if err != nil || c != uint32(i) {
					t.Errorf("op %d: %+v %v", i, c, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestFailedFuture(t *testing.T) {
	f := Failed(verbs.ErrClosed, nil)
	if _, err := Wait(f, context.Background(), byteLen); !errors.Is(err, verbs.ErrClosed) {
		t.Fatal(err)
	}
}

// TestFutureReadersRaceWait: Err, Result and Done, documented as callable
// from any goroutine, may run while another goroutine's Wait consumes the
// future and its state goes on to the next operation: they report
// ErrReleased (or the result), never read the next operation's state, and
// -race finds nothing.
func TestFutureReadersRaceWait(t *testing.T) {
	const rounds = 2000
	for range rounds {
		p, f := NewPromise(1, nil)
		stop := make(chan struct{})
		readerDone := make(chan struct{})
		go func() {
			defer close(readerDone)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := Result(f, byteLen); !errors.Is(err, ErrPending) && !errors.Is(err, ErrReleased) && !errors.Is(err, verbs.ErrClosed) {
					t.Errorf("Result: %v", err)
				}
				_ = f.Err()
				select {
				case <-f.Done():
				default:
				}
				// Back off: on one P, Fail and Wait run only when this
				// loop yields, or else at each preemption (some 40 ms under
				// -race: 80 s for the test with GOMAXPROCS=1).
				runtime.Gosched()
			}
		}()
		go p.Fail(verbs.ErrClosed)
		if _, err := Wait(f, context.Background(), byteLen); !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("Wait: %v", err)
		}
		// The state goes to the next operation, still pending while the
		// reader runs: the old handle must not see its Done channel.
		_, next := NewPromise(1, nil)
		select {
		case <-f.Done():
		default:
			t.Fatal("the consumed future's Done is the next operation's channel")
		}
		close(stop)
		<-readerDone
		next.Release()
	}
}

// TestGiveBackOnlyAfterSuccess: what SetGiveBack gives back returns once
// the state succeeded and its consumer consumed it, by Wait, Then or
// Release, and never for a state that failed or that Release left
// pending, nor for a Wait that its context ended.
func TestGiveBackOnlyAfterSuccess(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// consume resolves p and consumes f, in the case's order.
		consume func(p Promise, f Future)
		want    int
	}{
		{"Wait after success", func(p Promise, f Future) {
			p.s.CompleteOne(verbs.WC{}, nil, 0)
			Wait(f, ctx, byteLen)
		}, 1},
		{"Wait that parks, then success", func(p Promise, f Future) {
			go func() {
				time.Sleep(time.Millisecond)
				p.s.CompleteOne(verbs.WC{}, nil, 0)
			}()
			Wait(f, ctx, byteLen)
		}, 1},
		{"Wait after failure", func(p Promise, f Future) {
			p.s.CompleteOne(verbs.WC{}, verbs.ErrFlushed, 0)
			Wait(f, ctx, byteLen)
		}, 0},
		{"Wait whose context ended", func(p Promise, f Future) {
			ended, cancel := context.WithCancel(ctx)
			cancel()
			Wait(f, ended, byteLen)
		}, 0},
		{"Then after success", func(p Promise, f Future) {
			done := make(chan struct{})
			Then(f, byteLen, func(uint32, error) { close(done) })
			p.s.CompleteOne(verbs.WC{}, nil, 0)
			<-done
		}, 1},
		{"Then after failure", func(p Promise, f Future) {
			done := make(chan struct{})
			Then(f, byteLen, func(uint32, error) { close(done) })
			p.s.CompleteOne(verbs.WC{}, verbs.ErrFlushed, 0)
			<-done
		}, 0},
		{"Release after success", func(p Promise, f Future) {
			p.s.CompleteOne(verbs.WC{}, nil, 0)
			f.Release()
		}, 1},
		{"Release while pending", func(p Promise, f Future) {
			f.Release()
			p.s.CompleteOne(verbs.WC{}, nil, 0)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var given atomic.Int32
			p, f := NewPromise(1, &syncExec{})
			p.s.SetGiveBack(func() { given.Add(1) })
			tc.consume(p, f)
			// Then's task gives back after its callback returned: wait
			// for the state to be recycled.
			for deadline := time.Now().Add(time.Second); int(given.Load()) < tc.want && time.Now().Before(deadline); {
				runtime.Gosched()
			}
			if n := int(given.Load()); n != tc.want {
				t.Fatalf("given back %d times, want %d", n, tc.want)
			}
		})
	}
}
