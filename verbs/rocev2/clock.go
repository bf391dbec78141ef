package rocev2

import (
	"slices"
	"sync"
	"time"
)

// Clock is the time source of the transport's timers (local ACK timeout,
// RNR delay, injected delays). Tests use a ManualClock, so every timer
// fires when the test says and never because a machine was slow.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer of a Clock.
type Timer interface {
	// Stop prevents the timer from firing; false if it fired or was
	// stopped already.
	Stop() bool
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// ManualClock is a Clock that moves only when Advance is called. Timers
// fire on the goroutine that calls Advance, in deadline order, outside the
// clock's lock (a callback may arm new timers). Safe for concurrent use.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	armed  chan struct{} // closed and replaced when a timer is armed
}

type manualTimer struct {
	c    *ManualClock
	when time.Time
	f    func()
}

// NewManualClock returns a clock at an arbitrary fixed time.
func NewManualClock() *ManualClock {
	return &ManualClock{now: time.Unix(1<<30, 0), armed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arms a timer that fires when Advance passes now+d.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, when: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	close(c.armed)
	c.armed = make(chan struct{})
	return t
}

func (t *manualTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.timers, t)
	if i < 0 {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	return true
}

// Advance moves the clock forward by d and fires every timer due by then,
// including those that fired timers arm within the window.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		i := -1
		for j, t := range c.timers {
			if !t.when.After(end) && (i < 0 || t.when.Before(c.timers[i].when)) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		t := c.timers[i]
		c.timers = slices.Delete(c.timers, i, i+1)
		if t.when.After(c.now) {
			c.now = t.when
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// Pending returns how many timers are armed.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// PendingWithin returns how many armed timers fire within d from now.
func (c *ManualClock) PendingWithin(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.when.After(c.now.Add(d)) {
			n++
		}
	}
	return n
}

// WaitTimer waits until a timer is armed that fires within d from now.
func (c *ManualClock) WaitTimer(d time.Duration) {
	for {
		armed := c.Armed()
		if c.PendingWithin(d) > 0 {
			return
		}
		<-armed
	}
}

// Armed returns a channel closed when the next timer is armed, so a test
// can wait for a timer without polling.
func (c *ManualClock) Armed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armed
}
