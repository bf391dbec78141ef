package qpactor

import (
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/sched"
)

// TestWaitWindowCoversParkCost: a waiter polls for WaitPoll, or as long as
// a park would cost (three wake-ups: sched.SetWakeUpCost takes the
// netpoller's to cost as much as the others) where that is longer, up to
// 10 * time.Millisecond.
func TestWaitWindowCoversParkCost(t *testing.T) {
	const base = 200 * time.Microsecond
	for _, c := range []struct{ wakeUp, want time.Duration }{
		{0, base},                     // no wake-up measured yet
		{10 * time.Microsecond, base}, // hardware: parks are cheap
		{100 * time.Microsecond, 300 * time.Microsecond}, // soft on a slow machine
		{time.Millisecond, 3 * time.Millisecond},         // a TCG guest
		{time.Second, 10 * time.Millisecond},
	} {
		restore := sched.SetWakeUpCost(c.wakeUp)
		a := &Actor{waitPollMicros: waitPollMicros(base)}
		if got := a.waitWindow(); got != c.want {
			t.Errorf("wake-up %v: window %v, want %v", c.wakeUp, got, c.want)
		}
		restore()
	}
}
