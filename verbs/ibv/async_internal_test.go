//go:build linux && cgo

package ibv

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// readStep is what one call of the reader's read returns.
type readStep struct {
	n   int
	err error
}

// TestAsyncLoop drives the event reader's loop with scripted reads, no
// device needed: transient errors are retried, events are handled even as
// the reader stops, and a persistent error ends the loop with an error
// matching verbs.ErrEventsLost and the errno, never silently.
func TestAsyncLoop(t *testing.T) {
	eintr, eagain := -int(syscall.EINTR), -int(syscall.EAGAIN)
	tests := []struct {
		name  string
		steps []readStep
		// stopAt sets stopping before the read of that index (-1: never),
		// as stop does before it closes the fd.
		stopAt    int
		handled   int
		wantErrno syscall.Errno // with wantLost
		wantLost  bool
	}{
		{name: "EINTR and EAGAIN are retried, EIO ends it",
			steps:  []readStep{{n: 2}, {n: eintr}, {n: eagain}, {n: 1}, {n: -int(syscall.EIO)}},
			stopAt: -1, handled: 3, wantLost: true, wantErrno: syscall.EIO},
		{name: "another errno ends it",
			steps:  []readStep{{n: -int(syscall.EBADF)}},
			stopAt: -1, wantLost: true, wantErrno: syscall.EBADF},
		{name: "a failed wait on the fd ends it",
			steps:  []readStep{{n: 1}, {err: errors.New("netpoll failure")}},
			stopAt: -1, handled: 1, wantLost: true},
		{name: "stop ends it cleanly",
			steps:  []readStep{{n: 1}, {err: os.ErrClosed}},
			stopAt: 1, handled: 1},
		{name: "events read as stop closes the fd are still handled",
			steps:  []readStep{{n: 3}, {err: os.ErrClosed}},
			stopAt: 0, handled: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &asyncReader{x: &devContext{dev: &device{name: "rxe0"}}}
			i, handled := 0, 0
			read := func() (int, error) {
				if i == tt.stopAt {
					a.stopping.Store(true)
				}
				if i == len(tt.steps) {
					t.Fatalf("loop read again after its last scripted step")
				}
				s := tt.steps[i]
				i++
				return s.n, s.err
			}
			err := a.loop(read, func(n int) { handled += n })
			if i != len(tt.steps) {
				t.Errorf("loop ended after %d reads, want %d", i, len(tt.steps))
			}
			if handled != tt.handled {
				t.Errorf("handled %d events, want %d", handled, tt.handled)
			}
			if !tt.wantLost {
				if err != nil {
					t.Errorf("loop: %v, want nil after stop", err)
				}
				return
			}
			if !errors.Is(err, verbs.ErrEventsLost) {
				t.Fatalf("loop: %v, want an error matching verbs.ErrEventsLost", err)
			}
			if tt.wantErrno != 0 && !errors.Is(err, tt.wantErrno) {
				t.Errorf("loop: %v, want it to match %v", err, tt.wantErrno)
			}
		})
	}
}

// TestPollError: ibv_poll_cq's negative return is no errno. mlx5's -2 must
// not read as ENOENT, and the error matches verbs.ErrPollFailed.
func TestPollError(t *testing.T) {
	err := pollError(-2)
	if !errors.Is(err, verbs.ErrPollFailed) {
		t.Errorf("%v: want it to match verbs.ErrPollFailed", err)
	}
	if errors.Is(err, syscall.ENOENT) {
		t.Errorf("%v: matches ENOENT, as if -2 were an errno", err)
	}
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Op != "ibv_poll_cq" || ve.Errno != 0 {
		t.Errorf("%v: want a *verbs.Error of ibv_poll_cq with no errno", err)
	}
}
