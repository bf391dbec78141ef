package cqpoller

import "time"

// wakeTargetLocked puts t in the queue of targets that enter the active
// set, and wakes the poller if it sleeps. A target in the set already is
// queued too: it may be leaving it now, after the arming that raised the
// event.
func (p *Poller) wakeTargetLocked(t *Target) {
	if !t.added || t.queued {
		return
	}
	t.queued, t.wokeAt = true, len(p.woken)
	p.woken = append(p.woken, t)
	p.hasWoken.Store(true)
	p.wakeLocked()
}

// wakeTarget is wakeTargetLocked for a caller without p.mu.
func (p *Poller) wakeTarget(t *Target) {
	p.mu.Lock()
	p.wakeTargetLocked(t)
	p.mu.Unlock()
}

func (p *Poller) unqueueLocked(t *Target) {
	last := len(p.woken) - 1
	moved := p.woken[last]
	p.woken[t.wokeAt], moved.wokeAt = moved, t.wokeAt
	p.woken[last] = nil
	p.woken = p.woken[:last]
	p.hasWoken.Store(last > 0)
	t.queued = false
}

// admit moves the queued targets into the active set.
func (p *Poller) admit() {
	if !p.hasWoken.Load() {
		return
	}
	p.mu.Lock()
	for i, t := range p.woken {
		p.woken[i] = nil
		t.queued = false
		p.enterLocked(t)
	}
	p.woken = p.woken[:0]
	p.hasWoken.Store(false)
	p.mu.Unlock()
}

// enter puts t in the active set from the poller goroutine, unless it was
// removed.
func (p *Poller) enter(t *Target) {
	p.mu.Lock()
	p.enterLocked(t)
	p.mu.Unlock()
}

// enterLocked is enter with p.mu held: under it, so that Remove sees
// inSet set once the poller may touch t.
func (p *Poller) enterLocked(t *Target) {
	if !t.added || t.setAt >= 0 {
		return
	}
	t.inSet.Store(true)
	t.setAt = len(p.active)
	t.hot, t.lastHit = false, p.now
	p.active = append(p.active, t)
}

// leave takes t out of the active set; the last the poller does with t.
func (p *Poller) leave(t *Target) {
	i := t.setAt
	if i < 0 {
		return
	}
	last := len(p.active) - 1
	moved := p.active[last]
	p.active[i], moved.setAt = moved, i
	p.active[last] = nil
	p.active = p.active[:last]
	t.setAt = -1
	t.hot = false
	t.inSet.Store(false)
}

// clockStride is how many polls share one read of the clock, which in a
// VM can cost more than a poll of an empty CQ.
const clockStride = 32

func (p *Poller) tick(polls int) {
	if p.polls += polls; p.polls >= clockStride {
		p.readClock()
	}
}

func (p *Poller) readClock() {
	p.now = time.Since(p.base)
	p.polls = 0
}

// window reports whether t, empty in this round, has been empty long
// enough to leave the active set: under Event at once, under Adaptive
// after the spin and yield phases since its last completion, or at once
// if it had none since it entered (an event for a completion an actor
// took, a new target); under Busy never, as nothing would bring it back.
func (p *Poller) window(t *Target) bool {
	switch p.cfg.Policy {
	case Busy:
		return false
	case Event:
		return true
	}
	return !t.hot || p.now-t.lastHit >= p.cfg.Spin+p.cfg.Yield
}

// pollActive polls every target of the active set once and returns how
// many completions it handled. A target an actor drives leaves the set
// (the actor arms its CQ when it hands it back); one whose completions
// another goroutine is handling right now is skipped; one empty for its
// window is armed, polled once more and leaves, unless that poll found
// completions.
func (p *Poller) pollActive() int {
	if p.hit {
		p.readClock() // for the lastHit stamps of a busy round
	}
	got := 0
	polls := len(p.active)
	for i := 0; i < len(p.active); {
		t := p.active[i]
		if t.driven() {
			p.leave(t) // p.active[i] is another target now
			continue
		}
		n := t.own.tryPoll(func() int { return p.pollLocked(t, p.wcs) })
		if n > 0 {
			got += n
			t.hot, t.lastHit = true, p.now
			i++
			continue
		}
		if p.window(t) {
			n, stays := p.retire(t)
			got += n
			if !stays {
				continue
			}
		}
		i++
	}
	p.count(got)
	p.tick(polls)
	p.hit = got > 0
	return got
}

// retireAll retires every target of the active set now, as the window
// of each would after its time: for a poller that may not spin.
func (p *Poller) retireAll() int {
	got := 0
	for i := 0; i < len(p.active); {
		n, stays := p.retire(p.active[i])
		got += n
		if stays {
			i++
		}
	}
	return got
}

// retire arms t's CQ, polls it once more (a completion that came before
// the arming raises no event) and takes t out of the active set unless
// that found completions; it returns how many it handled and whether t
// stays. The poll waits for whoever handles the CQ now: a completion that
// lands between the other goroutine's poll and the arming would raise no
// event and wait for a next one that may never come. A target whose actor
// was abandoned with WRs outstanding stays: each round fails them
// (pollLocked), since their completions may never come.
func (p *Poller) retire(t *Target) (int, bool) {
	if t.driven() {
		p.leave(t) // its actor arms the CQ when it hands it back
		return 0, false
	}
	if !t.own.failed.Load() {
		p.stats.Armed.Inc()
		if err := t.CQ.ReqNotify(false); err != nil {
			p.log.Debug("cqpoller: ReqNotify", "err", err)
		}
	}
	n := t.own.pollWaiting(func() int { return p.pollLocked(t, p.wcs) })
	if n > 0 {
		t.hot, t.lastHit = true, p.now
		return n, true
	}
	if needsRounds(t) {
		return 0, true
	}
	p.leave(t)
	return 0, false
}
