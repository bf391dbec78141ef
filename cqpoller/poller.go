package cqpoller

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/qpactor"
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
	Spin    time.Duration // adaptive: spin this long when empty (0: 50 µs)
	Yield   time.Duration // adaptive: then yield between polls this long (0: 200 µs)
	Batch   int           // WCs per Poll call, 1..32 (0: 32)
	Logger  *slog.Logger
}

// Target is a CQ and who its completions go to. A Target belongs to one
// poller at a time, from Add until Remove returns.
type Target struct {
	// CQ is the CQ to poll. The poller finds the target of an event by the
	// CQ the completion channel returns, the provider's own: a CQ that
	// wraps another (a decorator, a test's counter) must say so with an
	// Unwrap() verbs.CQ method, or its events are taken for another CQ's.
	CQ verbs.CQ
	// Send receives the send completions (wr_id without qpactor.RecvBit).
	Send *qpactor.Actor
	// Recv handles receive completions (wr_id with qpactor.RecvBit); nil when the
	// CQ has none.
	Recv func(wc *verbs.WC)
	// Failed, when set, is told of every completion with an error status
	// other than WR_FLUSH_ERR (a WR that moved its QP to the error state),
	// before Send or Recv handles it.
	Failed func(wc *verbs.WC)
	// PollFailed, when set, is called once if the CQ's Poll fails (a
	// provider's ibv_poll_cq failing: verbs.ErrPollFailed), with that
	// error, on a goroutine of its own: it may call DoTarget and Remove.
	// The CQ is polled no more, since polling a CQ that fails would spin
	// on the error and a CQ that failed once can no longer be trusted;
	// its completions are lost, so the owner should fail what waits for
	// them (the runtime fails the endpoint). Nil: the failure is only
	// logged, at error level.
	PollFailed func(err error)

	// mu is held by whoever handles the CQ's completions: the poller, or
	// the actor of Send while it drives them (Driver). One handler at a
	// time keeps a QP's completions in order.
	mu sync.Mutex
	// driven is set while the actor of Send polls the CQ itself: the
	// poller then neither polls nor arms it.
	driven atomic.Bool
	// failed is set once Poll failed: nobody polls or arms the CQ again.
	failed atomic.Bool
	// driveWCs is the batch the driving actor polls into, taken from the
	// poller's pool by Drive(true) and given back by Drive(false), so that
	// an idle target holds none. The actor's goroutine alone uses it.
	driveWCs *[]verbs.WC

	// Under Poller.mu.
	added  bool // between Add and Remove
	queued bool // in Poller.woken
	wokeAt int  // its index there

	// inSet is set, under Poller.mu, when the target enters the poller's
	// active set, and cleared by the poller goroutine after its last touch
	// of the target when it leaves: Remove waits for the poller only while
	// it is set.
	inSet atomic.Bool

	// The poller goroutine's own.
	setAt   int           // index in Poller.active
	hot     bool          // completions found since it entered the active set
	lastHit time.Duration // Poller.now when it last had completions
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
	ErrClosed   = errors.New("cqpoller: closed")
	ErrDupCQ    = errors.New("cqpoller: a target with this CQ is added already")
	ErrNoTarget = errors.New("cqpoller: nil target or CQ")
)

// Poller polls a set of CQs on one locked goroutine. It polls only its
// active set: the targets whose CQ raised an event, that were just added,
// or that need rounds of their own (an abandoned actor's); a target that
// stays empty for the spin window is armed, polled once more and leaves.
// A second goroutine, not locked, waits on the completion channel and
// hands each CQ that fired to the poller.
type Poller struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
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

	wake        chan struct{} // one slot: a sleeping poller's token
	stop        chan struct{}
	done        chan struct{}
	events      context.Context // ends when Close begins
	stopEvents  context.CancelFunc
	eventsDone  chan struct{}
	eventFailed bool // the event goroutine's own: it logged a failure
	stats       Stats
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
		cfg.Spin = 50 * time.Microsecond
	}
	if cfg.Yield <= 0 {
		cfg.Yield = 200 * time.Microsecond
	}
	p := &Poller{cfg: cfg, log: cfg.Logger, byCQ: make(map[verbs.CQ]*Target),
		wcs: make([]verbs.WC, cfg.Batch), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), eventsDone: make(chan struct{})}
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
		return ErrClosed
	}
	if _, dup := p.byCQ[key]; dup {
		return ErrDupCQ
	}
	t.added, t.queued, t.setAt = true, false, -1
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
	if inSet {
		// Also after Close, when Do waits for the goroutine to end first.
		p.Do(func() { p.leave(t) })
	}
}

// providerCQ returns the CQ that cq wraps, if it does (Target.CQ), else
// cq.
func providerCQ(cq verbs.CQ) verbs.CQ {
	for {
		w, ok := cq.(interface{ Unwrap() verbs.CQ })
		if !ok {
			return cq
		}
		cq = w.Unwrap()
	}
}

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
		p.wake <- struct{}{} // never blocks: one token per sleep
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
			if !t.driven.Load() {
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
		if t.driven.Load() {
			p.leave(t) // p.active[i] is another target now
			continue
		}
		if !t.mu.TryLock() {
			i++ // its actor, or someone else now, handles the completions
			continue
		}
		n := p.pollLocked(t, p.wcs)
		t.mu.Unlock()
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
	if t.driven.Load() {
		p.leave(t) // its actor arms the CQ when it hands it back
		return 0, false
	}
	if !t.failed.Load() {
		p.stats.Armed.Inc()
		if err := t.CQ.ReqNotify(false); err != nil {
			p.log.Debug("cqpoller: ReqNotify", "err", err)
		}
	}
	t.mu.Lock()
	n := p.pollLocked(t, p.wcs)
	t.mu.Unlock()
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

// needsRounds reports whether t's actor was abandoned with WRs still
// outstanding: then its CQ's completions may never come, and whoever
// handles it fails what is outstanding after every poll.
func needsRounds(t *Target) bool {
	return t.Send != nil && t.Send.AbandonedErr() != nil && t.Send.Outstanding() > 0
}

func (p *Poller) count(got int) {
	if got > 0 {
		p.stats.PollsHit.Inc()
	} else {
		p.stats.PollsEmpty.Inc()
	}
}

// pollLocked drains t's CQ into wcs, with t.mu held, and returns how many
// completions it handled.
func (p *Poller) pollLocked(t *Target, wcs []verbs.WC) int {
	got := 0
	for !t.failed.Load() {
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
		}
	}
	return got
}

// cqFailed marks t failed and reports err once, on a goroutine of its own:
// the caller holds t.mu, and the report's handler takes it (DoTarget), or
// is the poller goroutine, whose Do the handler waits for.
func (p *Poller) cqFailed(t *Target, err error) {
	if !t.failed.CompareAndSwap(false, true) {
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
		t.mu.Lock()
		fn()
		t.mu.Unlock()
		if needsRounds(t) && !t.driven.Load() {
			p.enter(t)
		}
	})
}

// Drain handles every completion in t's CQ now, waiting for whoever
// handles it: for a caller that must have seen what arrived before some
// event outside the CQ (the runtime, before it takes an rdma_cm disconnect
// for a lost peer, looks for the peer's goodbye).
func (p *Poller) Drain(t *Target) {
	wcs := p.wcPool.Get().(*[]verbs.WC)
	defer p.wcPool.Put(wcs)
	d := targetDriver{p, t}
	for d.poll(true, *wcs) > 0 {
	}
}

// Driver returns what t's actor calls to poll t's CQ itself while it is
// awake (qpactor.Driver).
func (p *Poller) Driver(t *Target) qpactor.Driver { return targetDriver{p, t} }

// targetDriver lets an actor handle its own CQ: with a busy actor and a
// busy poller each holding one of a small machine's Ps, the goroutines
// that wait for the futures get neither, and a locked goroutine cannot
// yield its P cheaply. An actor that polls its CQ between drains keeps one
// P for everything else and hands the CQ back when it parks.
type targetDriver struct {
	p *Poller
	t *Target
}

func (d targetDriver) Drive(on bool) {
	t := d.t
	if on {
		if t.driveWCs == nil {
			t.driveWCs = d.p.wcPool.Get().(*[]verbs.WC)
		}
		t.driven.Store(true)
		return
	}
	t.driven.Store(false)
	wcs := t.driveWCs
	if wcs == nil {
		wcs = d.p.wcPool.Get().(*[]verbs.WC)
	}
	t.driveWCs = nil
	defer d.p.wcPool.Put(wcs)
	if d.p.cfg.Policy == Busy {
		// Nothing is armed under Busy: the CQ goes back to the active
		// set, which the poller polls whatever happens.
		d.p.wakeTarget(t)
		return
	}
	// Arm the CQ for the poller, then poll once more (a completion that
	// came before the arming raises no event): a sleeping poller wakes on
	// the CQ's next completion, without being woken now for nothing. A
	// failed CQ is armed by nobody.
	if !t.failed.Load() {
		d.p.stats.Armed.Inc()
		if err := t.CQ.ReqNotify(false); err != nil {
			// Cannot arm: the poller takes the CQ back, and polls it
			// until it can.
			d.p.wakeTarget(t)
		}
	}
	// Wait for the CQ: the poller, having seen driven go false, may be
	// polling it right now, in the last poll before it lets it go. A
	// completion that lands after that poll and before the arming above
	// raises no event and would be missed by both if this poll gave way.
	d.poll(true, *wcs)
	if needsRounds(t) {
		d.p.wakeTarget(t)
	}
}

// yield lets others run, and reads the clock: a locked goroutine's yield
// can take longer than clockStride spinning polls.
func (p *Poller) yield() {
	runtime.Gosched()
	p.readClock()
}

func (d targetDriver) Progress() int {
	wcs := d.t.driveWCs
	if wcs == nil { // Progress without Drive(true): not the protocol, but harmless
		wcs = d.p.wcPool.Get().(*[]verbs.WC)
		defer d.p.wcPool.Put(wcs)
	}
	return d.poll(false, *wcs)
}

// poll polls the CQ once into wcs, waiting for whoever handles it with
// wait, else only if nobody does now, and returns how many completions it
// handled.
func (d targetDriver) poll(wait bool, wcs []verbs.WC) int {
	if wait {
		d.t.mu.Lock()
	} else if !d.t.mu.TryLock() {
		return 0
	}
	got := d.p.pollLocked(d.t, wcs)
	d.t.mu.Unlock()
	if got > 0 {
		d.p.stats.PollsHit.Inc()
	}
	return got
}

func (p *Poller) handle(t *Target, wc *verbs.WC) {
	p.stats.Completions[wc.Status&31].Inc()
	if wc.Status != verbs.WCSuccess && wc.Status != verbs.WCWRFlushErr && t.Failed != nil {
		t.Failed(wc)
	}
	if qpactor.IsRecv(wc.WRID) {
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

func (p *Poller) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(p.done)
	p.base = time.Now()
	var clock qpactor.IdleClock
	var spin qpactor.SpinSlot
	defer spin.Release()
	for {
		p.runTasks()
		p.admit()
		if p.pollActive() > 0 {
			clock.Busy()
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
			case qpactor.SpinSlotsHeld() == 0:
				// No slot to be had (one P): yield through both phases.
				p.yield()
				continue
			}
			// Under Event, or when a slot is held by another (an actor
			// driving its CQ on the P this goroutine would take each time
			// it yields: a locked goroutine's yield hands its P to another
			// thread): arm and let go of every target now, which costs
			// one wake-up later instead.
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
// goroutine, Add, Do or Close to wake it. The goroutine stays locked to
// its thread while it sleeps: one that gave its thread back woke faster
// (cqpoller's BenchmarkIdleTargets/after-sleep, 75-85 against 108-132 µs;
// a one-pair SEND/Recv round trip 62-183 against 186-219 µs), but then a
// one-pair WRITE+Wait fell into its slow state (85 µs against 1 µs) in 36
// of 66 runs of bench/scale, against 1 of 42 locked and 11 of 66 before
// the active set.
func (p *Poller) sleep() {
	p.mu.Lock()
	if p.closed || p.hasTasks.Load() || len(p.woken) > 0 {
		p.mu.Unlock()
		return
	}
	p.sleeping = true
	p.mu.Unlock()
	p.stats.Sleeps.Inc()
	select {
	case <-p.wake:
	case <-p.stop:
	}
	p.readClock()
}
