package cqpoller

import (
	"context"
	"time"
)

// watchEvents takes the completion channel's events and hands the CQ of
// each to the poller. It is a goroutine of its own, not locked to a
// thread, so that it can wait on the channel (through Go's netpoller, with
// a provider that has a descriptor) while the poller spins on others.
func (p *Poller) watchEvents(ctx context.Context) {
	defer close(p.eventsDone)
	backoff := time.Millisecond
	for {
		cq, err := p.cfg.Channel.GetCQEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !p.waitAfterEventError(ctx, err, backoff) {
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = time.Millisecond
		p.stats.Events.Inc()
		p.mu.Lock()
		// A CQ removed (or never added) is left alone: its owner may have
		// closed it, and a provider acknowledges what is left when it
		// destroys the CQ.
		// A CQ its actor drives needs no poller: the actor handles the
		// completion, and arms the CQ when it hands it back.
		if t := p.byCQ[cq]; t != nil {
			t.CQ.AckEvents(1)
			if !t.driven() {
				p.wakeTargetLocked(t)
			}
		}
		p.mu.Unlock()
	}
}

// waitAfterEventError handles a completion channel that fails (closed
// under the poller, a dead device): its events are lost, so every target
// enters the active set, which finds what they hold as a sweep would, and
// the channel is tried again after backoff (doubling up to a second)
// instead of being spun on. It reports false once the poller closes.
func (p *Poller) waitAfterEventError(ctx context.Context, err error, backoff time.Duration) bool {
	if !p.eventFailed {
		p.eventFailed = true
		p.log.Error("cqpoller: waiting for CQ events failed; every CQ is swept, at most a second apart, until it works again", "err", err)
	}
	p.mu.Lock()
	for _, t := range p.byCQ {
		p.wakeTargetLocked(t)
	}
	p.mu.Unlock()
	select {
	case <-ctx.Done():
		return false
	case <-time.After(backoff):
		return true
	}
}
