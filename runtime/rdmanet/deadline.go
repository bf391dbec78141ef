package rdmanet

import (
	"context"
	"sync"
	"time"
)

// deadline is one direction's deadline: a channel that closes when the
// deadline passes (or the conn closes), which a blocked Read or Write
// waits on. Moving the deadline while one waits moves the time its channel
// closes; only a channel already closed is replaced, so a waiter never
// holds a channel that no longer counts.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	expire chan struct{} // closed once the deadline has passed
	final  bool          // the conn closed: expire stays closed
}

func newDeadline() *deadline { return &deadline{expire: make(chan struct{})} }

// set moves the deadline to t; the zero t means none.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.final {
		return
	}
	if d.timer != nil && !d.timer.Stop() {
		// The timer fired, or is about to: expire is (or will be) closed.
		// Wait no longer for it; closeLocked below is idempotent.
		d.closeLocked()
	}
	d.timer = nil
	if isClosed(d.expire) {
		d.expire = make(chan struct{})
	}
	if t.IsZero() {
		return
	}
	if dur := time.Until(t); dur > 0 {
		ch := d.expire
		d.timer = time.AfterFunc(dur, func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.expire == ch {
				d.closeLocked()
			}
		})
		return
	}
	d.closeLocked()
}

// wait returns the channel that closes when the deadline passes.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.expire
}

// end closes the channel for good: the conn is closed.
func (d *deadline) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.final = true
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.closeLocked()
}

func (d *deadline) closeLocked() {
	if !isClosed(d.expire) {
		close(d.expire)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitContext is the context a blocked Read gives Endpoint.Recv: done when
// the read deadline passes or the conn closes. One per conn, reused under
// its read lock, so a Read allocates none.
type waitContext struct{ done <-chan struct{} }

func (w *waitContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (w *waitContext) Done() <-chan struct{}       { return w.done }
func (w *waitContext) Value(any) any               { return nil }
func (w *waitContext) Err() error {
	if isClosed(w.done) {
		return context.DeadlineExceeded
	}
	return nil
}
