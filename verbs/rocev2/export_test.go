package rocev2

import (
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"time"
)

// PollEvery exports pollEvery to the tests.
const PollEvery = pollEvery

// StopReceiving ends t's receive goroutine and waits for it to end: the
// socket is then read only by the polls of its device's CQs, as when the
// scheduler never runs the goroutine. Close still closes t.
func (t *Transport) StopReceiving() {
	t.rxStop.Store(true)
	t.conn.SetReadDeadline(time.Unix(1, 0))
	<-t.done
}

// ExpectedPSN returns the PSN the RC QP qpn of transport i's device
// expects next, as an attacker who reads the traffic on the path knows
// it; false when no RC QP qpn is there.
func (p *Provider) ExpectedPSN(i int, qpn uint32) (wire.PSN, bool) {
	t := p.Transport(i)
	if t == nil {
		return 0, false
	}
	t.mu.Lock()
	reg, ok := t.receivers[qpn&wire.Mask24]
	t.mu.Unlock()
	q, isRC := reg.r.(*rcQP)
	if !ok || !isRC {
		return 0, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ePSN, true
}
