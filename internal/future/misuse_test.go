package future

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// gateWaiter is a Waiter that tells when a Wait entered it and holds it
// there until the gate opens.
type gateWaiter struct {
	entered chan struct{}
	gate    chan struct{}
}

func (w *gateWaiter) WaitFor(s *State) bool {
	w.entered <- struct{}{}
	<-w.gate
	return s.Resolved()
}

// TestConcurrentWaitsOnCopiesConsumeOnce: two Waits at once on copies of
// one future (a misuse) never both consume it: the second fails at once,
// before it reads or releases anything, so the state goes back to the
// pool once and no later operation shares it.
func TestConcurrentWaitsOnCopiesConsumeOnce(t *testing.T) {
	w := &gateWaiter{entered: make(chan struct{}, 2), gate: make(chan struct{})}
	s, f := New(1, nil)
	f = f.WithWaiter(w)
	first := make(chan error, 1)
	go func() { _, err := Wait(f, context.Background(), byteLen); first <- err }()
	<-w.entered
	second := make(chan error, 1)
	go func() { _, err := Wait(f, context.Background(), byteLen); second <- err }()
	select {
	case <-w.entered:
		t.Error("a second Wait on a copy entered the wait while the first was in it")
	case err := <-second:
		if !errors.Is(err, ErrReleased) {
			t.Errorf("the second Wait: %v, want an error matching ErrReleased", err)
		}
	}
	s.CompleteOne(verbs.WC{ByteLen: 8}, nil, 0)
	close(w.gate)
	if err := <-first; err != nil {
		t.Errorf("the first Wait: %v", err)
	}
	select {
	case err := <-second:
		if err == nil {
			t.Error("both Waits consumed the future")
		}
	default:
	}
}

// TestMisuseOfCopiesLeavesOthersAlone: copies of one future given to
// Wait, Then and Release from many goroutines at once consume it once;
// every other operation, made meanwhile, resolves with its own outcome.
func TestMisuseOfCopiesLeavesOthersAlone(t *testing.T) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 2000 {
		s, f := New(1, nil)
		var consumed sync.WaitGroup
		for i := range 3 {
			consumed.Add(1)
			go func() {
				defer consumed.Done()
				switch i {
				case 0:
					Wait(f, ctx, byteLen)
				case 1:
					done := make(chan struct{})
					Then(f, byteLen, func(uint32, error) { close(done) })
					<-done
				case 2:
					f.Release()
				}
			}()
		}
		s.CompleteOne(verbs.WC{ByteLen: 8}, nil, 0)
		consumed.Wait()
		// Another operation now: it must own its state alone.
		wg.Add(1)
		go func() {
			defer wg.Done()
			s2, f2 := New(1, nil)
			s2.CompleteOne(verbs.WC{ByteLen: 16}, nil, 0)
			if c, err := Wait(f2, ctx, byteLen); err != nil || c != 16 {
				t.Errorf("an unrelated operation: %+v, %v", c, err)
			}
		}()
		wg.Wait()
	}
}

// TestZeroFutureSaysSo: a zero Future, which no operation returned, says
// so, rather than that it was consumed.
func TestZeroFutureSaysSo(t *testing.T) {
	var f Future
	_, err := Wait(f, context.Background(), byteLen)
	if !errors.Is(err, verbs.ErrInvalidArgument) || errors.Is(err, ErrReleased) {
		t.Errorf("Wait of the zero Future: %v, want an error matching ErrInvalidArgument, not ErrReleased", err)
	}
	if _, err := Result(f, byteLen); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("Result of the zero Future: %v", err)
	}
	got := make(chan error, 1)
	Then(f, byteLen, func(_ uint32, err error) { got <- err })
	if err := <-got; !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("Then of the zero Future: %v", err)
	}
}
