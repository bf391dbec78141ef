package sched

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"sync"
	stdatomic "sync/atomic"
	"time"
)

// The first wake-up of a park's chain is the netpoller's: the CQ's
// completion channel becomes readable and the netpoller runs the goroutine
// that reads it. Nothing stamps that hop (the event carries no time), so a
// probe measures the netpoller instead: a goroutine parked reading a pipe,
// woken by a write that carries the time. Where a thread's wake-up is cheap
// it costs what the other hops cost. On an emulated machine one in ten or
// more takes milliseconds against tens of µs for the rest: a park pays
// those as surely as the fast ones, and they make most of its expected
// cost. The mean of so heavy a tail, learned from a few samples a second,
// swings by its last slow one; its 90th percentile holds still and
// covers it. So that is the probe's figure.
//
// The probe runs at most once every netpollProbeEvery, when asked
// (ProbeNetpoll: a poller going to sleep, the start of a park's chain),
// and only in a quiet process: no actor or poller spinning, no waiter
// yielding or polling. A goroutine spinning meanwhile holds a P the
// reader may need, and the probe would measure the spinner; a window
// grown by that would spin longer still, and measure more of itself.
// Its reader ends, closing the pipe, once no probe came for
// netpollReaderIdle, so an idle process keeps no goroutine and no file
// for it; the probe that finds it gone starts it and measures at the
// next one.
const (
	netpollProbeEvery = 5 * time.Millisecond
	netpollReaderIdle = 100 * time.Millisecond
	netpollQuantile   = 9 // the figure rests where one sample in 1+9 is above it
)

var (
	netpollHop    stdatomic.Int64 // learned 90th percentile of the netpoller's wake-ups, ns; 0: none yet
	netpollPinned stdatomic.Int32 // tests that set netpollHop: learn nothing meanwhile

	netpollProbe probeState
)

// probeState is the probe's: its pipe, its reader, when it last ran.
type probeState struct {
	mu      sync.Mutex
	r, w    *os.File
	failed  bool // the pipe failed: never probe again
	reading bool // a reader goroutine runs
	parked  bool // it waits for a stamp, and none is on its way
	last    time.Time
}

// endLocked is the reader ending: the pipe closes, and failed says whether
// for good.
func (p *probeState) endLocked(failed bool) {
	p.r.Close()
	p.w.Close()
	p.r, p.w = nil, nil
	p.parked, p.reading = false, false
	p.failed = p.failed || failed
}

// ProbeNetpoll measures one wake-up by the netpoller, unless one was
// measured within netpollProbeEvery or is under way, or the process is
// not quiet. It does not wait for the measurement.
func ProbeNetpoll() {
	if lockedSpinners.Load() > 0 || spinners.Load() > 0 || pollingWaiters.Load() > 0 {
		return
	}
	p := &netpollProbe
	if !p.mu.TryLock() {
		return // another caller probes now
	}
	defer p.mu.Unlock()
	now := time.Now()
	if p.failed || now.Sub(p.last) < netpollProbeEvery {
		return
	}
	p.last = now
	switch {
	case !p.reading:
		var err error
		if p.r, p.w, err = os.Pipe(); err != nil {
			p.failed = true
			return
		}
		p.reading = true
		go readNetpollProbes(p.r)
	case p.parked:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(WakeStamp()))
		if _, err := p.w.Write(b[:]); err != nil {
			p.failed = true // the reader ends at its deadline
			return
		}
		p.parked = false
	}
}

// readNetpollProbes is the probe's reader: it parks in the netpoller
// reading a stamp, learns how long the wake-up took, and ends after
// netpollReaderIdle without one, closing the pipe.
func readNetpollProbes(r *os.File) {
	p := &netpollProbe
	var b [8]byte
	for {
		p.mu.Lock()
		p.parked = true
		p.mu.Unlock()
		r.SetReadDeadline(time.Now().Add(netpollReaderIdle))
		_, err := io.ReadFull(r, b[:])
		if err == nil {
			learnNetpoll(time.Duration(WakeStamp() - int64(binary.LittleEndian.Uint64(b[:]))))
			continue
		}
		idle := errors.Is(err, os.ErrDeadlineExceeded)
		p.mu.Lock()
		if p.parked || !idle {
			// Idle with no stamp on its way, or the pipe failed.
			p.endLocked(!idle)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		// A stamp was written as the deadline came: read it, and drop
		// it, since it was read late.
		r.SetReadDeadline(time.Time{})
		if _, err := io.ReadFull(r, b[:]); err != nil {
			p.mu.Lock()
			p.endLocked(true)
			p.mu.Unlock()
			return
		}
	}
}

// learnNetpoll moves the learned netpoller wake-up towards d: up by
// netpollQuantile sixteenths of itself, down by one, so that it rests
// where one sample in 1+netpollQuantile is above it, the 90th percentile.
// The first sample is taken as it is.
func learnNetpoll(d time.Duration) {
	if netpollPinned.Load() > 0 {
		return
	}
	hop := netpollHop.Load()
	switch {
	case hop == 0:
		hop = int64(d)
	case int64(d) > hop:
		hop += max(netpollQuantile*hop/16, 1)
	default:
		hop -= hop / 16
	}
	netpollHop.Store(max(hop, 1))
}

// NetpollCost reports the learned wake-up by the netpoller, the 90th
// percentile of those the probe measured (0: none yet).
func NetpollCost() time.Duration { return time.Duration(netpollHop.Load()) }
