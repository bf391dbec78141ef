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

// Target is a CQ and who its completions go to.
type Target struct {
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
	mu  sync.Mutex
	wcs []verbs.WC // under mu
	// driven is set while the actor of Send polls the CQ itself: the
	// poller then neither polls nor arms it.
	driven atomic.Bool
	// failed is set once Poll failed: nobody polls or arms the CQ again.
	failed atomic.Bool
}

// Stats are the poller's counters, for metrics. PollsHit counts the
// rounds that found completions, the poller's and those of actors driving
// its CQs; PollsEmpty only the poller's own empty rounds (an actor's spin
// is counted by nobody: a counter per spin round would cost the spin).
type Stats struct {
	PollsEmpty  atomic.Uint64
	PollsHit    atomic.Uint64
	Sleeps      atomic.Uint64
	Completions [32]atomic.Uint64 // by verbs.WCStatus
	Stale       atomic.Uint64
	Failed      atomic.Uint64 // CQs whose Poll failed (Target.PollFailed)
}

// ErrClosed is returned by Add on a closed poller.
var ErrClosed = errors.New("cqpoller: closed")

// Poller polls a set of CQs on one locked goroutine.
type Poller struct {
	cfg Config
	log *slog.Logger

	targets atomic.Pointer[[]*Target]

	mu       sync.Mutex
	targetsV uint64 // bumped under mu by Add and Remove: sleep re-arms on a change
	tasks    []func()
	hasTasks atomic.Bool
	wakeFn   context.CancelFunc
	closed   bool

	stop  chan struct{}
	done  chan struct{}
	stats Stats
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
	p := &Poller{cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), done: make(chan struct{})}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.targets.Store(&[]*Target{})
	return p, nil
}

// Stats returns the poller's counters.
func (p *Poller) Stats() *Stats { return &p.stats }

// Start runs the poller goroutine.
func (p *Poller) Start() { go p.run() }

// Add starts polling t.CQ.
func (p *Poller) Add(t *Target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	t.wcs = make([]verbs.WC, p.cfg.Batch)
	old := *p.targets.Load()
	n := append(append(make([]*Target, 0, len(old)+1), old...), t)
	p.targets.Store(&n)
	p.targetsV++
	p.wakeLocked()
	return nil
}

// Remove stops polling cq; once it returns the poller no longer touches it.
func (p *Poller) Remove(cq verbs.CQ) {
	p.mu.Lock()
	old := *p.targets.Load()
	n := make([]*Target, 0, len(old))
	for _, t := range old {
		if t.CQ != cq {
			n = append(n, t)
		}
	}
	p.targets.Store(&n)
	p.targetsV++
	p.mu.Unlock()
	p.Do(func() {}) // a round trip: the loop has moved past any old view
}

// Do runs fn on the poller goroutine and waits for it: where the runtime
// fails outstanding WRs without racing completion handling. After Close it
// runs fn on the caller.
func (p *Poller) Do(fn func()) {
	ran := make(chan struct{})
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		fn()
		return
	}
	p.tasks = append(p.tasks, func() { fn(); close(ran) })
	p.hasTasks.Store(true)
	p.wakeLocked()
	p.mu.Unlock()
	<-ran
}

func (p *Poller) wakeLocked() {
	if p.wakeFn != nil {
		p.wakeFn()
		p.wakeFn = nil
	}
}

// Close stops the poller goroutine after a last round of polling and
// queued tasks.
func (p *Poller) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	p.wakeLocked()
	p.mu.Unlock()
	<-p.done
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

// pollAll polls every CQ that no actor drives once and returns how many
// completions it handled. A CQ whose completions another goroutine is
// handling right now is skipped, unless last is set: the poll before a
// sleep must see every CQ, or a completion that lands after the other
// goroutine's poll and before the arming raises no event and waits for a
// next one that may never come.
func (p *Poller) pollAll(last bool) int {
	got := 0
	for _, t := range *p.targets.Load() {
		if t.driven.Load() || !t.take(last) {
			continue // its actor, or someone else now, handles the completions
		}
		got += p.pollLocked(t)
		t.mu.Unlock()
	}
	p.count(got)
	return got
}

// take takes the handling of t's completions: waiting for it with wait,
// else only when nobody has it now.
func (t *Target) take(wait bool) bool {
	if wait {
		t.mu.Lock()
		return true
	}
	return t.mu.TryLock()
}

func (p *Poller) count(got int) {
	if got > 0 {
		p.stats.PollsHit.Inc()
	} else {
		p.stats.PollsEmpty.Inc()
	}
}

// pollLocked drains t's CQ, with t.mu held, and returns how many
// completions it handled.
func (p *Poller) pollLocked(t *Target) int {
	got := 0
	for !t.failed.Load() {
		n, err := t.CQ.Poll(t.wcs)
		if err != nil {
			p.cqFailed(t, err)
			break
		}
		for i := range t.wcs[:n] {
			p.handle(t, &t.wcs[i])
		}
		got += n
		if n < len(t.wcs) {
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
// A nil t (an endpoint that never started) is Do.
func (p *Poller) DoTarget(t *Target, fn func()) {
	if t == nil {
		p.Do(fn)
		return
	}
	p.Do(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		fn()
	})
}

// Drain handles every completion in t's CQ now, waiting for whoever
// handles it: for a caller that must have seen what arrived before some
// event outside the CQ (the runtime, before it takes an rdma_cm disconnect
// for a lost peer, looks for the peer's goodbye).
func (p *Poller) Drain(t *Target) {
	for (targetDriver{p, t}).poll(true) > 0 {
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
	if on {
		d.t.driven.Store(true)
		return
	}
	d.t.driven.Store(false)
	// Arm the CQ for the poller, then poll once more (a completion that
	// came before the arming raises no event): a sleeping poller wakes on
	// the CQ's next completion, without being woken now for nothing. A
	// failed CQ is armed by nobody.
	if !d.t.failed.Load() {
		if err := d.t.CQ.ReqNotify(false); err != nil {
			// Cannot arm: have the poller go round and take the CQ back.
			d.p.mu.Lock()
			d.p.targetsV++
			d.p.wakeLocked()
			d.p.mu.Unlock()
		}
	}
	// Wait for the CQ: the poller, having seen driven go false, may be
	// polling it right now, in the last poll before its sleep. A
	// completion that lands after that poll and before the arming above
	// raises no event and would be missed by both if this poll gave way.
	d.poll(true)
}

func (d targetDriver) Progress() int { return d.poll(false) }

// poll polls the CQ once, as Target.take(wait) allows, and returns how
// many completions it handled.
func (d targetDriver) poll(wait bool) int {
	if !d.t.take(wait) {
		return 0
	}
	got := d.p.pollLocked(d.t)
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
	var clock qpactor.IdleClock
	var spin qpactor.SpinSlot
	defer spin.Release()
	// hot: completions came since the poller last woke. A poller woken for
	// nothing (an actor's CQ armed when it parked, then driven again) goes
	// back to sleep at once instead of spinning for traffic that is not
	// its.
	hot := true
	for {
		p.runTasks()
		if p.pollAll(false) > 0 {
			clock.Busy()
			hot = true
			continue
		}
		select {
		case <-p.stop:
			p.runTasks()
			return
		default:
		}
		idle := clock.Idle()
		switch {
		case p.cfg.Policy == Busy:
			if idle > p.cfg.Spin || !spin.Acquire() {
				runtime.Gosched() // spin, but let others run on a small machine
			}
			continue
		case p.cfg.Policy == Adaptive && hot && idle < p.cfg.Spin+p.cfg.Yield && spin.AcquireIdle():
			// Spin, then yield, with a spin slot.
			if idle >= p.cfg.Spin {
				runtime.Gosched()
			}
			continue
		case p.cfg.Policy == Adaptive && hot && idle < p.cfg.Spin+p.cfg.Yield && qpactor.SpinSlotsHeld() == 0:
			// No slot to be had (one P): yield through both phases. But
			// when a slot is held, an actor is driving its CQ on the P
			// this goroutine would take each time it yields (a locked
			// goroutine's yield hands its P to another thread): sleep,
			// which costs one wake-up, instead.
			runtime.Gosched()
			continue
		}
		spin.Release()
		p.sleep()
		hot = false
		clock.Busy()
	}
}

// sleep arms every CQ, polls once more (a completion that arrived before
// the arming raises no event), and waits for an event, a task, a new target
// or Close.
func (p *Poller) sleep() {
	p.mu.Lock()
	armedV := p.targetsV
	p.mu.Unlock()
	for _, t := range *p.targets.Load() {
		if t.driven.Load() || t.failed.Load() {
			continue // its actor polls it and arms it when it parks; or it failed
		}
		if err := t.CQ.ReqNotify(false); err != nil {
			p.log.Debug("cqpoller: ReqNotify", "err", err)
		}
	}
	if p.pollAll(true) > 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	// A CQ added after the arming above is not armed: its completions would
	// not wake us. Go round once more instead of sleeping.
	if p.closed || p.hasTasks.Load() || p.targetsV != armedV {
		p.mu.Unlock()
		cancel()
		return
	}
	p.wakeFn = cancel
	p.mu.Unlock()
	p.stats.Sleeps.Inc()
	cq, err := p.cfg.Channel.GetCQEvent(ctx)
	p.mu.Lock()
	p.wakeFn = nil
	p.mu.Unlock()
	cancel()
	if err == nil && cq != nil {
		cq.AckEvents(1)
	}
}
