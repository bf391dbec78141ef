package cqpoller

import (
	"sync"
	"time"
)

// ManualLinger makes the linger timers of p's targets added after it
// fire only when Fire is called: tests of what a linger does then, with
// no dependence on how long anything takes.
type ManualLinger struct {
	mu     sync.Mutex
	timers []*manualTimer
}

type manualTimer struct {
	ml    *ManualLinger
	f     func()
	armed bool
}

// UseManualLinger installs a ManualLinger on p, before its first Add.
func UseManualLinger(p *Poller) *ManualLinger {
	ml := &ManualLinger{}
	p.afterFunc = func(_ time.Duration, f func()) lingerTimer {
		ml.mu.Lock()
		defer ml.mu.Unlock()
		t := &manualTimer{ml: ml, f: f, armed: true}
		ml.timers = append(ml.timers, t)
		return t
	}
	return ml
}

func (t *manualTimer) Reset(time.Duration) bool { return t.arm(true) }

func (t *manualTimer) Stop() bool { return t.arm(false) }

// arm arms or disarms t and reports whether it was armed.
func (t *manualTimer) arm(on bool) (was bool) {
	t.ml.mu.Lock()
	defer t.ml.mu.Unlock()
	was, t.armed = t.armed, on
	return was
}

// Fire runs the function of every armed timer, as their expiry would,
// and reports how many ran.
func (ml *ManualLinger) Fire() int {
	ml.mu.Lock()
	var due []*manualTimer
	for _, t := range ml.timers {
		if t.armed {
			t.armed = false
			due = append(due, t)
		}
	}
	ml.mu.Unlock()
	for _, t := range due {
		t.f()
	}
	return len(due)
}

// Armed reports how many timers are armed.
func (ml *ManualLinger) Armed() int {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	n := 0
	for _, t := range ml.timers {
		if t.armed {
			n++
		}
	}
	return n
}
