package cqpoller

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/internal/sched"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/verbs"
)

// Policy is what a poller does when its CQs are empty.
type Policy int

// Idle policies.
const (
	Adaptive Policy = iota // spin, yield, then sleep on the completion channel
	Busy                   // spin forever
	Event                  // sleep on the completion channel at once
)

func (p Policy) String() string {
	switch p {
	case Busy:
		return "busy"
	case Event:
		return "event"
	}
	return "adaptive"
}

// MaxBatch is the most WCs one Poll call asks for.
const MaxBatch = 32

// Config describes a poller.
type Config struct {
	Policy Policy
	// Channel is the completion channel every CQ of this poller was created
	// with; required unless Policy is Busy.
	Channel verbs.CompChannel
	Spin    time.Duration // adaptive: spin this long when empty (0: sched.DefaultSpin)
	Yield   time.Duration // adaptive: then yield between polls this long (0: 200 µs)
	Batch   int           // WCs per Poll call, 1..32 (0: 32)
	Logger  *slog.Logger
}

// Stats are the poller's counters, for metrics. PollsHit counts the
// rounds that found completions, the poller's and those of actors driving
// its CQs; PollsEmpty only the poller's own empty rounds (an actor's spin
// is counted by nobody: a counter per spin round would cost the spin).
type Stats struct {
	PollsEmpty  atomic.Uint64
	PollsHit    atomic.Uint64
	Sleeps      atomic.Uint64
	Events      atomic.Uint64     // CQ events taken from the completion channel
	Armed       atomic.Uint64     // ReqNotify calls, the poller's and those of actors handing their CQ back
	Completions [32]atomic.Uint64 // by verbs.WCStatus
	Stale       atomic.Uint64
	Failed      atomic.Uint64 // CQs whose Poll failed (Target.PollFailed)
}

// Errors returned by Add.
var (
	ErrDupCQ    = errors.New("cqpoller: a target with this CQ is added already")
	ErrNoTarget = errors.New("cqpoller: nil target or CQ")
)

// Poller polls a set of CQs on one goroutine. It polls only its
// active set: the targets whose CQ raised an event, that were just added,
// or that need rounds of their own (an abandoned actor's); a target that
// stays empty for the spin window is armed, polled once more and leaves.
// A second goroutine waits on the completion channel and hands each CQ
// that fired to the poller.
type Poller struct {
	cfg Config
	log *slog.Logger

	mu       lockrank.Mutex[lockrank.Poller]
	byCQ     map[verbs.CQ]*Target // the targets added and not removed
	woken    []*Target            // to enter the active set
	hasWoken atomic.Bool          // len(woken) > 0, read without mu
	tasks    []func()
	hasTasks atomic.Bool
	sleeping bool // the poller waits on wake; whoever clears it sends
	closed   bool

	// The poller goroutine's own.
	active []*Target
	wcs    []verbs.WC
	base   time.Time
	now    time.Duration // since base, read every clockStride polls
	polls  int           // since now was read
	hit    bool          // the last round found completions

	wcPool sync.Pool // *[]verbs.WC for driving actors and Drain

	wake        chan int64 // one slot: a sleeping poller's token, the waker's sched.WakeStamp
	stop        chan struct{}
	done        chan struct{}
	events      context.Context // ends when Close begins
	stopEvents  context.CancelFunc
	eventsDone  chan struct{}
	eventFailed bool // the event goroutine's own: it logged a failure
	stats       Stats

	// afterFunc makes the targets' linger timers (cqOwner): time's, or
	// a test's.
	afterFunc func(time.Duration, func()) lingerTimer
}

// New returns a poller; Start runs it.
func New(cfg Config) (*Poller, error) {
	if cfg.Policy != Busy && cfg.Channel == nil {
		return nil, errors.New("cqpoller: adaptive and event policies need a completion channel")
	}
	if cfg.Batch <= 0 || cfg.Batch > MaxBatch {
		cfg.Batch = MaxBatch
	}
	if cfg.Spin <= 0 {
		cfg.Spin = sched.DefaultSpin
	}
	if cfg.Yield <= 0 {
		cfg.Yield = 200 * time.Microsecond
	}
	p := &Poller{cfg: cfg, log: cfg.Logger, byCQ: make(map[verbs.CQ]*Target),
		wcs: make([]verbs.WC, cfg.Batch), wake: make(chan int64, 1),
		stop: make(chan struct{}), done: make(chan struct{}), eventsDone: make(chan struct{}),
		afterFunc: timeAfterFunc}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.wcPool.New = func() any {
		wcs := make([]verbs.WC, cfg.Batch)
		return &wcs
	}
	p.events, p.stopEvents = context.WithCancel(context.Background())
	return p, nil
}

// Stats returns the poller's counters.
func (p *Poller) Stats() *Stats { return &p.stats }

// Start runs the poller goroutine, and the goroutine that waits for its
// completion channel's events. Call it once.
func (p *Poller) Start() {
	if p.cfg.Policy == Busy {
		close(p.eventsDone) // nothing is armed: there are no events to wait for
	} else {
		go p.watchEvents(p.events)
	}
	go p.run()
}

// Add starts polling t.CQ: t enters the active set, so that what its CQ
// holds already is handled and the CQ is armed, like any target's whose
// CQ stays empty. It costs the same whatever the number of targets.
func (p *Poller) Add(t *Target) error {
	if t == nil || t.CQ == nil {
		return ErrNoTarget
	}
	key := providerCQ(t.CQ)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return verbs.ErrClosed
	}
	if _, dup := p.byCQ[key]; dup {
		return ErrDupCQ
	}
	t.added, t.queued, t.setAt = true, false, -1
	t.own.open(func() { TargetDriver{p, t}.handBack(nil) })
	p.byCQ[key] = t
	p.wakeTargetLocked(t)
	return nil
}

// Remove stops polling cq; once it returns the poller no longer touches it.
// It waits for the poller goroutine only if the target is in the active
// set.
func (p *Poller) Remove(cq verbs.CQ) {
	key := providerCQ(cq)
	p.mu.Lock()
	t := p.byCQ[key]
	if t == nil {
		p.mu.Unlock()
		return
	}
	delete(p.byCQ, key)
	t.added = false
	if t.queued {
		p.unqueueLocked(t)
	}
	inSet := t.inSet.Load()
	p.mu.Unlock()
	t.own.remove() // after a waiter's poll (Driver.Poll); the next sees removed
	if inSet {
		// Also after Close, when Do waits for the goroutine to end first.
		p.Do(func() { p.leave(t) })
	}
}

// Do runs fn on the poller goroutine and waits for it: where the runtime
// fails outstanding WRs without racing completion handling. After Close it
// runs fn on the caller, once the poller goroutine has ended.
func (p *Poller) Do(fn func()) {
	ran := make(chan struct{})
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		fn()
		return
	}
	p.tasks = append(p.tasks, func() { fn(); close(ran) })
	p.hasTasks.Store(true)
	p.wakeLocked()
	p.mu.Unlock()
	<-ran
}

// wakeLocked wakes the poller goroutine if it sleeps.
func (p *Poller) wakeLocked() {
	if p.sleeping {
		p.sleeping = false
		p.wake <- sched.WakeStamp() // never blocks: one token per sleep
	}
}

// Close stops the poller goroutine after a last round of polling and
// queued tasks.
func (p *Poller) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		return
	}
	p.closed = true
	close(p.stop)
	p.mu.Unlock()
	p.stopEvents()
	<-p.done
	<-p.eventsDone
}

func (p *Poller) runTasks() {
	if !p.hasTasks.Load() {
		return
	}
	p.mu.Lock()
	tasks := p.tasks
	p.tasks = nil
	p.hasTasks.Store(false)
	p.mu.Unlock()
	for _, fn := range tasks {
		fn()
	}
}

func (p *Poller) count(got int) {
	if got > 0 {
		p.stats.PollsHit.Inc()
	} else {
		p.stats.PollsEmpty.Inc()
	}
}

// pollLocked drains t's CQ into wcs, as its handler (cqOwner), and
// returns how many completions it handled.
func (p *Poller) pollLocked(t *Target, wcs []verbs.WC) int {
	got := 0
	for !t.own.failed.Load() {
		n, err := t.CQ.Poll(wcs)
		if err != nil {
			p.cqFailed(t, err)
			break
		}
		for i := range wcs[:n] {
			p.handle(t, &wcs[i])
		}
		got += n
		if n < len(wcs) {
			break
		}
	}
	if t.Send != nil {
		if err := t.Send.AbandonedErr(); err != nil {
			// An abandoned QP's completions may never come (a CQ
			// overrun lost them): fail what is outstanding, including
			// WRs whose post the actor published after it broke.
			t.Send.FailOutstanding(err)
		} else if got > 0 {
			t.Send.Polled()
		}
	}
	return got
}

// cqFailed marks t failed and reports err once, on a goroutine of its own:
// the caller handles t's CQ, and the report's handler waits for that
// (DoTarget), or is the poller goroutine, whose Do the handler waits for.
func (p *Poller) cqFailed(t *Target, err error) {
	if !t.own.failed.CompareAndSwap(false, true) {
		return
	}
	p.stats.Failed.Inc()
	if t.PollFailed == nil {
		p.log.Error("cqpoller: polling a CQ failed; it is polled no more", "err", err)
		return
	}
	go t.PollFailed(err)
}

// DoTarget runs fn on the poller goroutine while nobody handles t's
// completions, and waits for it: where the runtime fails an actor's
// outstanding WRs without racing the poller or the actor driving them.
// A target whose actor is abandoned with WRs still outstanding afterwards
// enters the active set, whose rounds fail them. A nil t (an endpoint
// that never started) is Do.
func (p *Poller) DoTarget(t *Target, fn func()) {
	if t == nil {
		p.Do(fn)
		return
	}
	p.Do(func() {
		t.own.exclusive(fn)
		if needsRounds(t) && !t.driven() {
			p.enter(t)
		}
	})
}

// yield lets others run, and reads the clock: a yield can take longer
// than clockStride spinning polls.
func (p *Poller) yield() {
	runtime.Gosched()
	p.readClock()
}

func (p *Poller) handle(t *Target, wc *verbs.WC) {
	p.stats.Completions[wc.Status&31].Inc()
	if wc.Status != verbs.WCSuccess && wc.Status != verbs.WCWRFlushErr && t.Failed != nil {
		t.Failed(wc)
	}
	if wrid.IsRecv(wc.WRID) {
		if t.Recv != nil {
			t.Recv(wc)
			return
		}
	} else if t.Send != nil && t.Send.Complete(wc) {
		return
	}
	p.stats.Stale.Inc()
	p.log.Debug("cqpoller: stale or unknown completion", "wr_id", wc.WRID, "status", wc.Status.Name())
}

// run is the poller goroutine: it runs the tasks given it, takes in the
// targets woken, polls its active set, and sleeps when the set is empty.
//
// The goroutine is not locked to its OS thread: the waiters its
// completions wake go to its P's run queue, and it yields after every
// round that handled some, so that they run at once instead of waiting
// for another P to steal them; a locked goroutine could only yield by
// handing its P to another thread and sleeping until it got one back.
func (p *Poller) run() {
	defer close(p.done)
	p.base = time.Now()
	var clock sched.IdleClock
	var spin sched.SpinSlot
	defer spin.Release()
	for {
		p.runTasks()
		p.admit()
		if p.pollActive() > 0 {
			clock.Busy()
			runtime.Gosched() // the goroutines this round woke
			continue
		}
		select {
		case <-p.stop:
			p.runTasks()
			return
		default:
		}
		idle := clock.Idle()
		if p.cfg.Policy == Busy {
			if idle > p.cfg.Spin || !spin.Acquire() {
				runtime.Gosched() // spin, but let others run on a small machine
			}
			continue
		}
		if len(p.active) > 0 {
			switch {
			case p.cfg.Policy != Adaptive:
			case spin.AcquireIdle():
				// Spin, then yield, with a spin slot, while a target is
				// in its window.
				if idle >= p.cfg.Spin {
					p.yield()
				}
				continue
			case sched.SlotsHeld() == 0:
				// No slot to be had (one P): yield through both phases.
				p.yield()
				continue
			}
			// Under Event, or when a slot is held by another (an actor
			// driving its CQ on one P, so that a poller that kept
			// polling would take the other from the callers): arm and
			// let go of every target now, which costs one wake-up later
			// instead.
			if p.retireAll() > 0 {
				clock.Busy()
				continue
			}
			if len(p.active) > 0 {
				runtime.Gosched() // an abandoned actor's rounds
				continue
			}
		}
		spin.Release()
		p.sleep()
		clock.Busy()
	}
}

// sleep waits, unless a target or a task is queued, for the event
// goroutine, Add, Do or Close to wake it.
func (p *Poller) sleep() {
	p.mu.Lock()
	if p.closed || p.hasTasks.Load() || len(p.woken) > 0 {
		p.mu.Unlock()
		return
	}
	p.sleeping = true
	p.mu.Unlock()
	p.stats.Sleeps.Inc()
	// A waiter of this poller's CQs that parks now is woken through the
	// netpoller first (the CQ's event): keep its cost measured.
	sched.ProbeNetpoll()
	select {
	case stamp := <-p.wake:
		// A wake-up of the chain a parked waiter's goes through: it
		// teaches the wait window what a park costs (sched.WokeUp).
		sched.WokeUp(stamp)
	case <-p.stop:
	}
	p.readClock()
}
