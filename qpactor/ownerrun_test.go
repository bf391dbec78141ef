package qpactor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/qpactor"
)

// TestDrainWithoutTheRunPanics: drain, post and failQueued belong to the
// run's holder; called by a goroutine when no run is held (an actor not
// started, and one gone idle), each panics and names the state it found.
func TestDrainWithoutTheRunPanics(t *testing.T) {
	r := newRig(t, 16)
	calls := map[string]func(){
		"drain":      r.actor.DrainUnheld,
		"post":       r.actor.PostUnheld,
		"failQueued": r.actor.FailQueuedUnheld,
	}
	check := func(when string) {
		t.Helper()
		for name, call := range calls {
			msg := panicOf(call)
			if !strings.Contains(msg, name+" without the run") || !strings.Contains(msg, "state") {
				t.Errorf("%s %s: panic %q, want one naming %q and the state", name, when, msg, name+" without the run")
			}
		}
	}
	check("before Start")
	r.actor.Start()
	waitIdle(t, r.actor)
	check("on an idle actor")
}

// TestViewCountsQueuedWork: what a kick decides on sees the inbox whether
// or not the actor posts inline: a completion's kick (Polled) must find
// work left queued on any actor.
func TestViewCountsQueuedWork(t *testing.T) {
	for _, inline := range []bool{false, true} {
		r := newRig(t, 16, func(c *qpactor.Config) { c.InlinePost = inline })
		for i := range 3 {
			op := r.write(i)
			if _, err := r.actor.Submit(context.Background(), &op); err != nil {
				t.Fatal(err)
			}
		}
		if n := r.actor.QueuedInView(); n != 3 {
			t.Errorf("inline %v: the view counts %d queued, want 3", inline, n)
		}
	}
}

func panicOf(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg, _ = p.(string)
			if msg == "" {
				msg = "non-string panic"
			}
		}
	}()
	f()
	return ""
}

// waitIdle waits until a's run goes idle (its spin, short in the rig,
// passed with nothing to do). A hang is the failure.
func waitIdle(t *testing.T, a *qpactor.Actor) {
	t.Helper()
	a.SetSpin(time.Microsecond)
	for !a.Idle() {
		time.Sleep(time.Millisecond)
	}
}
