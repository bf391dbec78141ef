package qpactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime"
	"sync"
	stdatomic "sync/atomic"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/internal/ring"
	"github.com/verbsrt/verbsrt/internal/sched"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/verbs"
)

// Errors of the actor.
var (
	// ErrBusy is returned by TrySubmit when the inbox ring is full.
	ErrBusy = errors.New("verbsrt: inbox full")
	// ErrClosed is returned for operations submitted to, or still queued
	// in, an actor that is closing.
	ErrClosed = errors.New("verbsrt: closed")
	// ErrTooLarge is returned for a batch with more WRs than the send
	// queue holds: it could never be posted as one.
	ErrTooLarge = errors.New("verbsrt: batch larger than the send queue")
)

// Op is one operation: a send work request without the wr_id and the
// SIGNALED flag, which the actor owns.
type Op struct {
	Opcode verbs.Opcode
	// Flags may hold FENCE, SOLICITED and INLINE; SIGNALED is ignored.
	Flags verbs.SendFlags
	// Local is the local buffer (gather list of one). Length 0 means no
	// local data. Atomics leave it zero: the actor supplies the 8 bytes
	// their result lands in and reports it as Completion.Value.
	Local verbs.SGE
	// Gather, when set, is the op's gather list (a READ's scatter list)
	// instead of Local: at most MaxGather entries.
	Gather     []verbs.SGE
	Remote     verbs.RDMA // RDMA READ/WRITE, and the target of atomics
	CompareAdd uint64
	Swap       uint64
	Imm        uint32
	// Hold, when set, is a use of the op's memory the caller took
	// (Hold.Acquire). Submitting the op hands it over: it is given back
	// once the device is done with the op, before its future resolves, or
	// at once when the op never reaches the device (Submit's error too).
	Hold *Hold
}

// MaxGather is the longest gather list an op may carry (Op.Gather).
const MaxGather = 4

// Scratch is registered memory the actor owns: 8 bytes per send-queue slot
// where atomics write the value they found.
type Scratch struct {
	Bytes []byte
	Addr  uint64
	LKey  uint32
}

// Config describes an actor.
type Config struct {
	QP verbs.QP
	// ID tells this actor's completions apart in wr_ids (see WRID): at
	// most wrid.MaxActorID, and different from the ID of every other actor
	// whose completions may arrive on the same CQ.
	ID uint16
	// RingSize is the inbox capacity in submissions (0: 1024). The inbox
	// starts with room for a few and grows as it fills (ring.NewGrowing).
	RingSize int
	// SendDepth caps the send-queue slots the actor fills: what was asked
	// of the provider, which may have rounded max_send_wr up (rxe and soft
	// make 256 into 511). 0: all of the QP's max_send_wr.
	SendDepth int
	// SignalEvery signals every k-th WR (and the last of each drain); 0:
	// a quarter of the send queue.
	SignalEvery int
	// Spin is how long the actor polls an empty inbox before it goes idle
	// (0: 50 µs).
	Spin time.Duration
	// Park makes an idle actor park its goroutine, locked to its OS
	// thread, instead of ending it. By default an idle actor's goroutine
	// ends and gives its thread back, and the next Wake (a submission, a
	// completion, credits, Close) starts a new one: an idle endpoint then
	// holds no thread and no goroutine, and waking costs a goroutine start
	// instead of handing a parked thread its goroutine back (bench/README.md
	// compares the two).
	Park bool
	// InlinePost makes a submission that finds the actor idle (its
	// goroutine ended) drain the inbox and post on the submitting
	// goroutine, locked to its OS thread while it posts, instead of
	// starting an actor goroutine: the WR reaches the QP without a
	// hand-off between threads, which costs a goroutine start on another
	// OS thread (100-150 µs in a TCG guest, bench/README.md). What the
	// drain leaves queued (waiting for credits), and a closing actor's
	// last sweep, go to an actor goroutine as without it. No effect with
	// Park.
	InlinePost bool
	// WaitPoll makes a goroutine that waits for one of the actor's
	// futures (Future.Wait, WaitUntil) poll the actor's CQ through its
	// Driver for at least this long before it parks (longer when the
	// actor's waits are: waitWindow), so that the completion it waits
	// for is handled on its own thread instead of by a poller that must
	// be woken for it and then wake the waiter. 0: the waiter
	// only yields before it parks (YieldUntil); kept in whole µs, rounded
	// up.
	WaitPoll time.Duration
	// Scratch must hold 8 bytes per send-queue slot (ScratchSize).
	Scratch  Scratch
	Executor Executor
	Logger   *slog.Logger
}

// Driver lets an actor handle its own completions while it is awake: it
// polls between drains instead of leaving every completion to a poller
// goroutine, so a busy QP needs one spinning locked goroutine instead of
// two (cqpoller.Poller.Driver).
type Driver interface {
	// Drive(true) says the actor is awake and will call Progress;
	// Drive(false), that it stopped (it is about to park or exit) and
	// the poller must watch the CQ again.
	Drive(on bool)
	// Progress polls the CQ once, unless someone else is handling it,
	// and returns how many completions it handled.
	Progress() int
	// Poll is Progress for any goroutine, driving or not: a waiter
	// polling for its own completion (Config.WaitPoll). It returns 0 once
	// the CQ is no longer polled (its owner removed it).
	Poll() int
	// WaitBegin says a waiter is about to Poll, WaitEnd that it stopped:
	// a CQ polled by the actor (Drive) or by waiters needs no events, and
	// the last to stop hands it back. parking says the waiter gave up and
	// parks, and needs the CQ watched at once; a waiter that got its
	// result may be followed by another wait soon (a request, then its
	// reply), about linger later, and the CQ may be handed back once
	// that has passed with no wait.
	WaitBegin()
	WaitEnd(parking bool, linger time.Duration)
}

// ScratchSize returns how many bytes of registered scratch an actor that
// fills maxSendWR send-queue slots needs.
func ScratchSize(maxSendWR int) int { return scratchSlot * shadowSize(maxSendWR) }

const (
	// scratchSlot is the scratch of one send-queue slot: an atomic's
	// result, or a SEND's header (peercredits.go).
	scratchSlot = 8
	// sgesPerWR is the gather list room of a chained WR: a SEND's header
	// and the caller's gather list.
	sgesPerWR = MaxGather + 1
	// inboxStart is the room a new inbox has, in submissions: it doubles
	// as it fills, up to Config.RingSize.
	inboxStart = 8
	// postStart is the room the per-post arrays get when a drain first
	// needs them (growPost); shadowStart the first shadow table's
	// entries (growShadow).
	postStart   = 4
	shadowStart = 8
)

func shadowSize(maxSendWR int) int {
	n := 2
	for n < maxSendWR {
		n <<= 1
	}
	return n
}

// submission is one caller's request in the inbox: one op, or a batch
// sharing one future.
type submission struct {
	one   [1]Op
	batch []Op
	fut   *futState
	// ctx is the submission's context when it can end (nil otherwise).
	// The actor checks it when it takes the submission, and watches it
	// (context.AfterFunc, setting fut.stopCancel) only when it is about to
	// sleep with the submission still queued: a submission taken soon
	// costs no registration.
	ctx context.Context
}

func (s *submission) ops() []Op {
	if s.batch != nil {
		return s.batch
	}
	return s.one[:]
}

// shadowTable maps the sequence numbers of the outstanding WRs posted since
// it replaced the table before it (from since on) to their entries:
// entries[seq&mask]. The WRs posted before stay in prev until completion
// handling has retired them: growing never moves an entry that completion
// handling may be reading. The actor writes a table before it publishes
// it (Actor.shadow), and never reads prev; after that, only completion
// handling writes prev, to drop the tables it is done with.
type shadowTable struct {
	entries []entry
	mask    uint64
	since   uint64
	prev    *shadowTable
}

// entry returns the entry of the WR with sequence number seq, in the
// table it was posted with, or nil when that table was dropped (all its
// WRs retired).
func (t *shadowTable) entry(seq uint64) *entry {
	for seq < t.since {
		if t = t.prev; t == nil {
			return nil
		}
	}
	return &t.entries[seq&t.mask]
}

// entry shadows one outstanding WR. seq holds the WR's sequence number + 1
// while it is outstanding (0: free); the actor writes the other fields
// before it stores seq, the poller reads seq before the other fields.
type entry struct {
	seq    atomic.Uint64
	fut    *futState
	opcode verbs.Opcode
	length uint32
	raddr  uint64 // remote memory, for the WR's error
	rkey   uint32
}

// Actor owns one QP: it is the only code that posts sends to it. Callers
// submit from any goroutine; whoever handles the QP's CQ reports its send
// completions with Complete: a poller goroutine, or the actor itself
// through its Driver, one at a time.
type Actor struct {
	id uint16
	// Config.InlinePost, and Config.WaitPoll in µs: beside id, in what
	// would be padding (TestActorSize).
	inline         bool
	waitPollMicros uint32
	// waitsForCredits: the actor went to sleep (or left) able to use
	// credits of either kind (sleepsOnCredits); completions wake only
	// such an actor. sync/atomic's, 4 bytes.
	waitsForCredits stdatomic.Bool
	qp              verbs.QP
	limits          verbs.SendLimits
	sqDepth         int32 // int32, so that postCost fits beside it (TestActorSize)
	// postCost is what a PostSend takes, in ns, as sampled every
	// postCostEvery calls (learnPostCost); it decides inlineWorthIt.
	postCost stdatomic.Uint32
	exec     Executor
	log      *slog.Logger
	spin     time.Duration
	scratch  Scratch

	inbox *ring.Ring[submission]
	waker *ring.Waker
	room  roomSignal // producers waiting for room in the inbox

	// credits is the number of send-queue slots the actor may fill: the
	// poller adds what it retires.
	credits    atomic.Int64
	closing    atomic.Bool
	started    atomic.Bool
	stopped    atomic.Bool  // the actor goroutine has made its last sweep
	exitMu     sync.Mutex   // the consumer role after stopped
	broken     atomic.Error // set when the QP takes no more work
	abandoned  atomic.Error // set when its outstanding WRs' completions may never come
	postedTail atomic.Uint64

	// Actor goroutine only.
	seq         uint64
	sinceSignal int32
	signalEvery int32 // at most sqDepth: a drain signals its last WR anyway
	// The per-post arrays: chain, chainSGE (sgesPerWR per WR), owners,
	// drained and peer.uses share one capacity, which starts at 0 and
	// doubles as drains need it (growPost), up to the send queue: an
	// endpoint that was never used has none, one used a WR at a time a
	// few.
	chain    []verbs.SendWR
	chainSGE []verbs.SGE
	owners   []*submission
	drained  []submission
	peer     peerCredits // the peer's receive credits (peercredits.go)
	watched  int         // queued submissions, from the head, whose contexts are watched
	// scratchMask maps a WR's sequence number to its scratch slot: one
	// mapping for the actor's life, whatever table holds the WR.
	scratchMask uint64

	// shadow is written by the actor (growShadow), read by the actor and
	// by completion handling.
	shadow atomic.Pointer[shadowTable]

	// Completion handling only (Complete, FailOutstanding).
	retired []retiredWR // kept for the next call: it grows to the most a call retired
	head    uint64

	stats  Stats
	lat    sampler  // post times of the WRs sampled for latency
	local  net.Addr // the connection's ends, for errors (SetAddrs)
	remote net.Addr
	driver Driver // set before Start, or nil
	done   chan struct{}
}

// Stats are counters the actor keeps for metrics. Read them with Load.
type Stats struct {
	PostCalls atomic.Uint64 // PostSend calls (doorbells)
	WRsPosted atomic.Uint64
	Stale     atomic.Uint64 // completions whose wr_id matched no outstanding WR
	Ops       OpStats       // by opcode, batch sizes, futures, latency (stats.go)
}

// New builds an actor over cfg.QP, which must be in RTS. Start runs it.
func New(cfg Config) (*Actor, error) {
	if cfg.ID > wrid.MaxActorID {
		return nil, fmt.Errorf("qpactor: actor ID %d does not fit a wr_id (at most %d; see ActorID)", cfg.ID, wrid.MaxActorID)
	}
	attr, err := cfg.QP.Query()
	if err != nil {
		return nil, err
	}
	depth := attr.Cap.MaxSendWR
	if cfg.SendDepth > 0 {
		depth = min(depth, cfg.SendDepth)
	}
	if len(cfg.Scratch.Bytes) < ScratchSize(depth) {
		return nil, fmt.Errorf("qpactor: scratch of %d bytes, need %d", len(cfg.Scratch.Bytes), ScratchSize(depth))
	}
	a := &Actor{
		id: cfg.ID, qp: cfg.QP, sqDepth: int32(depth), exec: cfg.Executor, log: cfg.Logger,
		spin: cfg.Spin, inline: cfg.InlinePost && !cfg.Park, scratch: cfg.Scratch,
		waitPollMicros: waitPollMicros(cfg.WaitPoll),
		limits:         verbs.SendLimits{Type: cfg.QP.Type(), MaxSendSGE: attr.Cap.MaxSendSGE, MaxInlineData: attr.Cap.MaxInlineData},
		signalEvery:    int32(min(cfg.SignalEvery, depth)),
		done:           make(chan struct{}),
	}
	a.scratchMask = uint64(shadowSize(depth) - 1)
	n := min(shadowStart, shadowSize(depth))
	a.shadow.Store(&shadowTable{entries: make([]entry, n), mask: uint64(n - 1)})
	if cfg.Park {
		a.waker = ring.NewWaker()
	} else {
		a.waker = ring.NewRestartingWaker(func() { go a.run() })
	}
	a.lat.init(shadowSize(depth))
	if a.signalEvery <= 0 {
		a.signalEvery = int32(max(1, depth/4))
	}
	if a.spin <= 0 {
		a.spin = 50 * time.Microsecond
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	capacity := cfg.RingSize
	if capacity <= 0 {
		capacity = 1024
	}
	a.inbox = ring.NewGrowing[submission](inboxStart, capacity)
	a.credits.Store(int64(depth))
	return a, nil
}

// waitPollMicros is d in whole µs as the Actor keeps it: 0 (off) for d <= 0,
// at least 1 for a positive d, at most about 71 minutes.
func waitPollMicros(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	return uint32(min(max(1, (d+time.Microsecond-1)/time.Microsecond), math.MaxUint32))
}

// ID returns the actor's ID.
func (a *Actor) ID() uint16 { return a.id }

// QP returns the QP the actor owns.
func (a *Actor) QP() verbs.QP { return a.qp }

// Stats returns the actor's counters.
func (a *Actor) Stats() *Stats { return &a.stats }

// Credits returns how many send-queue slots are free now.
func (a *Actor) Credits() int { return int(a.credits.Load()) }

// Outstanding returns how many posted WRs have not completed.
func (a *Actor) Outstanding() int { return int(a.sqDepth) - a.Credits() }

// SetDriver makes the actor poll its completions through d while it is
// awake. Call it before Start.
func (a *Actor) SetDriver(d Driver) { a.driver = d }

// Start runs the actor goroutine, locked to its OS thread while it runs.
// Call it once.
func (a *Actor) Start() {
	if a.started.CompareAndSwap(false, true) {
		go a.run()
	}
}

// Submit queues op and returns its future. When the inbox is full it waits
// for room until ctx ends. Errors about op itself (a rule of
// ibv_post_send(3) it breaks) come through the future, as a *verbs.WRError.
//
// ctx also bounds the wait in the inbox: if it ends before the actor takes
// op, op is removed and never reaches the QP, and its future fails with
// ctx.Err(). Once taken, op is posted and its future resolves with its
// completion, whatever ctx does: a posted WR cannot be recalled, and its
// memory is the device's until it completes. The actor checks ctx when it
// takes op, and watches it (context.AfterFunc, so the future fails as
// soon as ctx ends) only while it sleeps with op still queued: an op taken
// without waiting costs nothing more.
func (a *Actor) Submit(ctx context.Context, op *Op) (Future, error) {
	return a.submitNew(ctx, submission{one: [1]Op{*op}}, 1, true)
}

// SubmitBatch queues ops to be posted together (in one PostSend when
// credits allow) with one future for all; the caller must not modify ops
// until the future resolves.
func (a *Actor) SubmitBatch(ctx context.Context, ops []Op) (Future, error) {
	if len(ops) == 0 {
		return Future{}, fmt.Errorf("verbsrt: empty batch: %w", verbs.ErrInvalidArgument)
	}
	return a.submitNew(ctx, submission{batch: ops}, len(ops), true)
}

// TrySubmit is Submit that fails with ErrBusy instead of waiting.
func (a *Actor) TrySubmit(op *Op) (Future, error) {
	return a.submitNew(context.Background(), submission{one: [1]Op{*op}}, 1, false)
}

// submitNew queues sub, of n WRs, with a new future; a submission that
// never reached the inbox gives its future's state back to the pool.
func (a *Actor) submitNew(ctx context.Context, sub submission, n int, wait bool) (Future, error) {
	if err := ctx.Err(); err != nil {
		if h := sub.hold(); h != nil {
			h.Release()
		}
		return Future{}, err
	}
	p, f := NewPromise(n, a.exec)
	f.a = a
	sub.fut = p.s
	p.s.hold = sub.hold()
	if ctx.Done() != nil {
		sub.ctx = ctx
	}
	if err := a.push(ctx, sub, n, wait); err != nil {
		if h := p.s.hold; h != nil {
			p.s.hold = nil
			h.Release()
		}
		p.s.release()
		return Future{}, err
	}
	return f, nil
}

// hold returns the one hold standing for the uses of memory the
// submission's ops took (Op.Hold).
func (s *submission) hold() *Hold {
	if s.batch == nil {
		return s.one[0].Hold
	}
	var hs []*Hold
	for i := range s.batch {
		if h := s.batch[i].Hold; h != nil {
			hs = append(hs, h)
		}
	}
	switch len(hs) {
	case 0:
		return nil
	case 1:
		return hs[0]
	}
	return HoldAll(hs)
}

// take claims the submission s at the head of the inbox for the actor,
// which then posts or fails it. It reports false when s's context ended
// first: s is then resolved with the context's error (by the watch on the
// context, or here) and the actor only drops it.
func (a *Actor) take(s *submission) bool {
	if s.ctx == nil {
		return true
	}
	f := s.fut
	if f.stopCancel != nil {
		// Watched: the context's end may be resolving it right now.
		taken := f.claim.CompareAndSwap(claimOpen, claimTaken)
		f.stopCancel()
		return taken
	}
	if err := s.ctx.Err(); err != nil {
		f.failN(a.submissionError(s, err), len(s.ops()))
		return false
	}
	return true
}

// cancelled reports whether s's context ended while it was queued; take
// then resolves it, if the watch on the context has not.
func (s *submission) cancelled() bool {
	if s.ctx == nil {
		return false
	}
	if s.fut.stopCancel != nil {
		return s.fut.claim.Load() == claimCancelled
	}
	return s.ctx.Err() != nil
}

// watchQueued watches the contexts of the queued submissions not yet
// watched: the actor is about to sleep, and a submission waiting behind a
// head that waits for credits must fail when its context ends, not when
// the actor reaches it. Submissions the actor takes without sleeping are
// never watched, so a cancellable context costs no allocation then.
func (a *Actor) watchQueued() {
	for s := a.inbox.PeekAt(a.watched); s != nil; s = a.inbox.PeekAt(a.watched) {
		a.watched++
		if s.ctx == nil || s.fut.stopCancel != nil {
			continue
		}
		f, ctx, gen := s.fut, s.ctx, s.fut.gen.Load()
		info, n := infoOf(&s.ops()[0]), len(s.ops())
		// The end of ctx fails the future unless the actor took the
		// submission first, and wakes the actor, which drops it when it
		// meets it: one waiting for credits at the head of the inbox must
		// not hold back those behind it.
		f.stopCancel = context.AfterFunc(ctx, func() {
			if f.cancel(gen, a.opError(info, n, ctx.Err())) {
				a.waker.Wake()
			}
		})
	}
}

// pop releases the head of the inbox.
func (a *Actor) pop() {
	a.inbox.Pop()
	if a.watched > 0 {
		a.watched--
	}
}

// TrySubmitPromise queues ops for a promise made with NewPromise for
// len(ops) WRs (one op: a one-element slice, copied; more: the caller keeps
// them unchanged until the future resolves). It fails with ErrBusy when
// the inbox is full, leaving the promise to the caller.
func (a *Actor) TrySubmitPromise(ops []Op, p Promise) error {
	sub := submission{fut: p.s}
	if len(ops) == 1 {
		sub.one[0] = ops[0]
	} else {
		sub.batch = ops
	}
	return a.push(context.Background(), sub, len(ops), false)
}

// TrySubmitPromiseOp is TrySubmitPromise for one op, copied: the caller's
// op does not escape, so a send costs no allocation.
func (a *Actor) TrySubmitPromiseOp(op *Op, p Promise) error {
	sub := submission{fut: p.s}
	sub.one[0] = *op
	return a.push(context.Background(), sub, 1, false)
}

func (a *Actor) push(ctx context.Context, sub submission, n int, wait bool) error {
	if a.closing.Load() {
		return ErrClosed
	}
	if err := a.broken.Load(); err != nil {
		return err
	}
	if n > int(a.sqDepth) {
		return ErrTooLarge
	}
	if err := a.checkPeerWindow(sub.ops()); err != nil {
		return err
	}
	for !a.inbox.TryPush(&sub) {
		if !wait {
			return ErrBusy
		}
		if err := a.waitRoom(ctx); err != nil {
			return err
		}
	}
	if a.inline && a.inlineWorthIt() && a.waker.Claim() {
		a.runInline()
	} else {
		a.waker.Wake()
	}
	if a.stopped.Load() {
		// The actor goroutine is gone: whatever we queued after its last
		// sweep would wait forever. Be its consumer once more.
		a.exitMu.Lock()
		a.failQueued(ErrClosed)
		a.exitMu.Unlock()
	}
	return nil
}

// roomSignal wakes the producers waiting for room in a full inbox: the
// actor closes the channel they wait on when it takes something, if any
// wait.
type roomSignal struct {
	waiting atomic.Int32
	mu      sync.Mutex
	ch      chan struct{}
}

// listen registers a waiter and returns the channel to wait on; leave
// undoes the registration.
func (r *roomSignal) listen() <-chan struct{} {
	r.waiting.Inc()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ch == nil {
		r.ch = make(chan struct{})
	}
	return r.ch
}

func (r *roomSignal) leave() { r.waiting.Dec() }

// broadcast wakes every waiter.
func (r *roomSignal) broadcast() {
	r.mu.Lock()
	if r.ch != nil {
		close(r.ch)
		r.ch = nil
	}
	r.mu.Unlock()
}

// roomMade tells producers waiting for room that the actor took
// submissions from the inbox.
func (a *Actor) roomMade() {
	if a.room.waiting.Load() > 0 {
		a.room.broadcast()
	}
}

// waitRoom waits until the actor takes something from the full inbox, the
// actor closes or ctx ends. The waiter registers before it looks at the
// inbox again, and the actor looks for waiters after it took something:
// one of the two sees the other, so no wake-up is lost.
func (a *Actor) waitRoom(ctx context.Context) error {
	ch := a.room.listen()
	defer a.room.leave()
	if a.closing.Load() {
		return ErrClosed
	}
	if !a.inbox.Full() {
		return nil
	}
	select {
	case <-ch:
		if a.closing.Load() {
			return ErrClosed
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the actor goroutine: drain, post, handle completions while a
// Driver is set, and park when idle.
func (a *Actor) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a.waker.StopLater() // this run is the wake-up a runInline arranged, or makes it moot
	a.stats.Ops.Runs.Inc()
	if a.loop() {
		close(a.done)
	}
}

// loop runs the actor until it stops for good (true) or, when its waker
// restarts it, until it goes idle (false): then nothing of this run may
// touch the actor any more, since a Wake may already have started the next.
func (a *Actor) loop() (stopped bool) {
	d := a.driver
	if d != nil {
		d.Drive(true)
	}
	var (
		idle   sched.IdleClock
		gather gatherer
		spin   sched.SpinSlot
	)
	for {
		worked := false
		waited := !gather.due(a.inbox)
		if !waited {
			k := a.drain()
			gather.drained(k)
			worked = k > 0
		}
		if d != nil && d.Progress() > 0 {
			worked = true
		}
		if worked || waited {
			idle.Busy()
			if waited && !spin.Acquire() {
				// Gathering is spinning too: without a slot, yield, so
				// that the callers filling the inbox get the P.
				runtime.Gosched()
			}
			continue
		}
		if a.finished() {
			spin.Release()
			a.postGoodbye()
			a.exitMu.Lock()
			a.stopped.Store(true)
			a.failQueued(ErrClosed)
			a.exitMu.Unlock()
			if d != nil {
				d.Drive(false) // before done closes: Close's caller finds the poller watching
			}
			return true
		}
		if idle.Idle() < a.spin {
			if !spin.Acquire() {
				runtime.Gosched()
			}
			continue
		}
		spin.Release()
		if a.rest(d) {
			return false // the next Wake starts the next run
		}
		if d != nil {
			d.Drive(true)
		}
		idle.Busy()
	}
}

// rest is what an actor with nothing to do does: it gives back the peer's
// credits it holds beyond its window, hands its CQ back to the poller (d),
// and sleeps, or, restarting, leaves, and then reports true: the run is
// over, and nothing of it may touch the actor any more. It reports false
// when it finds work again (or wakes).
func (a *Actor) rest(d Driver) (left bool) {
	return a.restWatching(d, true)
}

// restWatching is rest; with watch false it leaves the contexts of what
// stays queued unwatched (watching one allocates), for a run that
// arranged a wake-up (ring.Waker.WakeAfter) whose actor goroutine watches them.
func (a *Actor) restWatching(d Driver, watch bool) (left bool) {
	if a.peer.on && a.peer.credits.Load() > a.peer.initial && a.inbox.Peek() == nil {
		a.returnIdle()
	}
	if d != nil {
		d.Drive(false)
	}
	// Watch the contexts of what stays queued (waiting for credits), so
	// that their ends wake the actor; anything queued after this look is
	// seen by the second look below, or wakes it.
	seen := a.watched
	if watch {
		a.watchQueued()
		seen = a.watched
	} else {
		for a.inbox.PeekAt(seen) != nil {
			seen++
		}
	}
	// Before the second look, which reads the credits of both kinds.
	a.waitsForCredits.Store(a.sleepsOnCredits())
	a.waker.PrepareSleep()
	// A closing actor with submissions waiting for credits sleeps too:
	// returning credits (Complete), Break and Close wake it.
	if a.canDrain() || a.finished() || a.inbox.PeekAt(seen) != nil {
		a.waker.CancelSleep()
	} else if a.waker.Restarts() {
		return a.waker.Leave()
	} else {
		a.waker.Sleep(nil)
	}
	return false
}

// inlineWorthIt reports whether a submission that finds the actor idle
// should be posted by its submitter (Config.InlinePost): always when a
// PostSend is cheap, and otherwise only when nothing is in flight. Where
// PostSend is a system call that runs the protocol (rxe: 60-400 µs in a
// TCG guest), a caller that keeps operations in flight and posts each
// itself rings a doorbell per WR; the actor goroutine it hands them to
// chains what comes while it posts into the next PostSend. With inline
// posting for everything, 64-byte WRITEs from one caller keeping 128 in
// flight ran at 0.29-0.46x ib_write_bw's message rate in the guest,
// against 1.0-1.2x through the actor (bench/README.md). A caller that
// waits for each operation (request/response) has nothing in flight when
// it submits, and keeps posting inline.
func (a *Actor) inlineWorthIt() bool {
	return time.Duration(a.postCost.Load()) < costlyPost || a.Outstanding() == 0
}

// costlyPost is the PostSend time beyond which a submitter with
// operations in flight hands its submission to the actor goroutine
// (inlineWorthIt): PostSend takes 0.1-0.3 µs on soft and on NICs that map
// their doorbell into the process, tens of µs or more where it is a
// system call.
const costlyPost = 10 * time.Microsecond

// postCostEvery is how often PostSend is timed: the first call, then one
// in this many (two clock reads each).
const postCostEvery = 64

// learnPostCost moves the learned PostSend time a quarter of the way to d.
func (a *Actor) learnPostCost(d time.Duration) {
	cost := time.Duration(a.postCost.Load())
	if cost == 0 {
		cost = d
	} else {
		cost += (d - cost) / 4
	}
	a.postCost.Store(uint32(min(max(cost, 0), math.MaxUint32)))
}

// runInline is a run of the actor on a submitter that found it gone idle
// (Config.InlinePost) and now owns its next run (ring.Waker.Claim): one drain,
// posted from the submitter's thread, then the actor leaves as an idle one
// does. Work that came meanwhile, or a close, goes to an actor goroutine,
// so a submitter never becomes the actor of a crowd; work that waits for
// credits waits for the grant or completion that brings them, which runs
// the actor again (GrantPeerCredits, on the goroutine that handles it),
// or for an actor goroutine started after the spin window. A submitter
// never waits for credits itself.
func (a *Actor) runInline() {
	a.stats.Ops.InlineRuns.Inc()
	runtime.LockOSThread()
	a.drain()
	runtime.UnlockOSThread()
	switch {
	case a.finished():
		go a.run()
	case a.inbox.Peek() == nil:
		if !a.rest(nil) {
			go a.run()
		}
	default:
		// The drain left work waiting for credits, usually a moment
		// away: the peer's grant (GrantPeerCredits) or a completion that
		// brings them runs the actor again. An actor goroutine started
		// now would often take the caller's P for its spin (on 2 cores a
		// one-way stream of SENDs took 8x as long); one starts after the
		// spin window if they have not come, and watches the contexts of
		// what waits, which this rest leaves unwatched (a watch
		// allocates).
		a.waker.WakeAfter(a.spin)
		if !a.restWatching(nil, false) {
			a.waker.StopLater()
			go a.run()
		}
	}
}

// WaitUntil is how a goroutine waiting for this actor's completions spins
// before it parks (Future.Wait, and the runtime's Recv): with WaitPoll set
// and a Driver, it polls the actor's CQ itself until ready reports true or
// the wait window has passed (waitWindow), yielding between polls (the
// goroutines its completions wake may need its P); otherwise it yields as
// YieldUntil does. It reports whether ready did.
func (a *Actor) WaitUntil(ready func() bool) bool {
	d := a.driver
	if a.waitPollMicros == 0 || d == nil || !sched.AcquirePollingWaiter() {
		if sched.YieldUntil(ready) {
			return true
		}
		a.stats.Ops.WaitsParked.Inc()
		return false
	}
	defer sched.ReleasePollingWaiter()
	if ready() {
		return true
	}
	window := a.waitWindow()
	d.WaitBegin()
	var idle sched.IdleClock
	for {
		// Poll, then look: the look before parking follows the last poll.
		n := d.Poll()
		if ready() {
			d.WaitEnd(false, window)
			return true
		}
		if n > 0 {
			idle.Busy()
			continue
		}
		if idle.Idle() >= window {
			d.WaitEnd(true, 0)
			a.stats.Ops.WaitsParked.Inc()
			return false
		}
		runtime.Gosched()
	}
}

// waitWindow is how long a waiter polls before it parks: Config.WaitPoll,
// or what a park is expected to cost where that is more (parkCost,
// wakecost.go), as a ski rental buys skis once renting has cost their
// price.
//
// A waiter that parks pays a wake-up: on soft and on hardware some µs,
// but in a TCG guest over rxe 0.2-2.6 ms per goroutine on the way, more
// than the round trip it waited for; there the window is milliseconds,
// and a ping-pong parks now and then instead of on most waits.
//
// The window is not learned from how long the waits take. It once was
// (10 times their 90th percentile, up to 25 times WaitPoll), and a waiter
// whose waits were long polled through them: a reader faster than its
// writer, on a 2-core machine, spun on the CPU the writer's side needed,
// which made its waits longer and the window with them. A 4 KiB stream
// over rdmanet on soft ran at 310-330 MB/s that way, and runs at 750-990
// with this window. The learned window had also covered the stalls of a
// ping-pong in a TCG guest whose measured wake-ups were short: in 3
// rounds of 11 there such a ping-pong now parks on a wait in 15
// (bench/README.md, session 17). Polling longer than a park costs buys
// latency with CPU the machine may not have.
func (a *Actor) waitWindow() time.Duration {
	return max(time.Duration(a.waitPollMicros)*time.Microsecond, sched.ParkCost())
}

// sleepsOnCredits reports whether the actor, going to sleep, may wait for
// credits of either kind (send-queue slots that completions give back,
// receives the peer reports): something is queued, a credit report is
// wanted, or what it holds beyond its initial window is still to be given
// back (postReturn needs a send-queue slot).
//
// Only such an actor is woken by a completion. A completion that comes
// after the actor went idle (on a device slower than the spin window: an
// RDMA WRITE of 64 KiB takes milliseconds on rxe) would otherwise start a
// goroutine on a locked OS thread (about 15 µs) and spin it for the spin
// window, to find nothing to do. Against the actor going to sleep: it
// stores waitsForCredits, then looks at the credits once more (loop's
// second look); a completion adds credits, then loads waitsForCredits.
// One of the two sees the other's write. (A peer's grant wakes any actor:
// GrantPeerCredits says why.)
func (a *Actor) sleepsOnCredits() bool {
	return a.inbox.Peek() != nil ||
		a.peer.on && (a.peer.report.Load() || a.peer.credits.Load() > a.peer.initial)
}

// finished reports whether a closing actor may stop: nothing is queued, or
// the QP is broken and what is queued fails.
func (a *Actor) finished() bool {
	return a.closing.Load() && (a.inbox.Peek() == nil || a.broken.Load() != nil)
}

// gatherer spaces the drains of an actor that takes a stream of
// submissions from many callers, so that one PostSend carries many. An
// actor that posts every submission as it arrives rings a doorbell per WR
// whenever it posts faster than its callers submit, and its reads of the
// inbox take the slot's cache line from the next producer each time.
//
// From the actor's side a lone caller and a crowd look alike (a drain of
// one, then another one a little later); only waiting tells them apart: a
// crowd fills the inbox while the actor waits, a lone caller, blocked on
// the write just posted, does not. So the actor goes into stream mode
// after a drain of two or more, and otherwise on every probeEvery-th
// drain. In stream mode it drains once gatherTarget submissions are
// queued, or when the wait since the last drain reaches the current
// bound: probeGather at first, doubled by each drain of two or more up to
// maxGather. A drain of one (or none) after a wait ends stream mode: a
// lone caller pays a short wait once every probeEvery operations.
type gatherer struct {
	stream bool
	wait   time.Duration // the bound of the current wait, in stream mode
	since  time.Time     // the last drain that took something
	drains uint32
	rounds uint32 // checks of the current wait, for the clock stride
}

const (
	gatherTarget = 16                   // submissions a drain waits for
	probeGather  = 1 * time.Microsecond // first wait of a stream
	maxGather    = 8 * time.Microsecond // longest wait
	probeEvery   = 64                   // drains between probes
	gatherStride = 8                    // checks per clock read
)

// due reports whether the actor should drain now.
func (g *gatherer) due(inbox *ring.Ring[submission]) bool {
	if !g.stream {
		return true
	}
	if g.rounds++; g.rounds%gatherStride != 0 {
		return false
	}
	return inbox.Reached(min(gatherTarget, inbox.Cap())) || time.Since(g.since) >= g.wait
}

// drained records a drain of k submissions.
func (g *gatherer) drained(k int) {
	if k == 0 && !g.stream {
		return
	}
	g.drains++
	switch {
	case k >= 2 && g.stream:
		g.wait = min(2*g.wait, maxGather)
	case k >= 2 || g.drains%probeEvery == 0:
		g.stream, g.wait = true, probeGather
	default:
		g.stream = false
	}
	if g.stream {
		g.since, g.rounds = time.Now(), 0
	}
}

// canDrain reports whether drain would post something now.
func (a *Actor) canDrain() bool {
	if a.broken.Load() != nil {
		return a.inbox.Peek() != nil
	}
	sq := a.credits.Load()
	if a.peer.on && a.peer.report.Load() && sq > 0 && a.peer.credits.Load() > 0 {
		return true
	}
	s := a.inbox.Peek()
	if s != nil && s.cancelled() {
		return true // drain drops it
	}
	if s == nil || int64(len(s.ops())) > sq {
		return false
	}
	if !a.peer.on {
		return true
	}
	// A closing actor fails what waits for the peer's credits: draining
	// does that too.
	need := peerNeed(s.ops())
	left := a.peer.credits.Load()
	return need == 0 || need <= left-1 || a.closing.Load() ||
		!a.peer.wanted && left >= 2 // drain asks for a larger window
}

// drain chains everything queued, up to the credits held, into one PostSend
// and returns how many submissions it took from the inbox.
func (a *Actor) drain() int {
	if err := a.broken.Load(); err != nil {
		return a.failQueued(err)
	}
	credits := int(a.credits.Load())
	room := a.shadowRoom(credits)
	a.chain, a.owners = a.chain[:0], a.owners[:0]
	a.peer.uses = a.peer.uses[:0]
	a.drained = a.drained[:0]
	peerLeft := a.peer.credits.Load()
	taken := 0
	var starved int64 // the peer credits the next submission needs and lacks
	for {
		s := a.inbox.Peek()
		if s == nil {
			break
		}
		if s.cancelled() && !a.take(s) {
			a.dropCancelled()
			taken++
			continue
		}
		ops := s.ops()
		if len(ops) > credits-len(a.chain) {
			break // wait for credits; order is kept
		}
		if len(ops) > room-len(a.chain) {
			a.growShadow(int(a.sqDepth) - credits + len(a.chain) + len(ops))
			room = a.shadowRoom(credits)
		}
		var need int64
		if a.peer.on {
			if need = peerNeed(ops); need > 0 && need > peerLeft-1 {
				if a.closing.Load() {
					// The peer's credits may never come (it may be gone):
					// a closing actor does not wait for them.
					taken += a.failQueued(ErrClosed)
				} else {
					starved = need
				}
				break // wait for the peer's credits; order is kept
			}
		}
		if len(ops) > cap(a.chain)-len(a.chain) || len(a.drained) == cap(a.drained) {
			if cap(a.chain) >= int(a.sqDepth) {
				break // drained is full at its largest: the rest goes next time
			}
			a.growPost(max(2*cap(a.chain), len(a.chain)+len(ops)))
		}
		if !a.take(s) { // its context ended a moment ago
			a.dropCancelled()
			taken++
			continue
		}
		a.drained = append(a.drained, *s)
		a.pop()
		taken++
		if need > 0 {
			a.peer.wanted = false // a want is for the submission at the head
		}
		sub := &a.drained[len(a.drained)-1]
		start := len(a.chain)
		if err := a.appendOps(sub); err != nil {
			if sub.fut.failN(err, len(sub.ops())) {
				a.stats.Ops.ResolvedByActor.Inc()
			}
		} else if a.peer.on {
			a.stampChain(start, need)
			peerLeft -= need
		}
	}
	if a.peer.on {
		if starved > 0 {
			a.markBacklog()
			peerLeft = a.appendWant(credits, peerLeft, starved)
		}
		a.appendReport(credits, peerLeft)
	}
	if taken > 0 {
		a.stats.Ops.Taken.Add(uint64(taken))
		a.roomMade()
	}
	if len(a.chain) > 0 {
		a.post()
	}
	return taken
}

// shadowRoom returns how many more WRs the shadow table takes, the actor
// holding credits send-queue credits: its entries less the WRs
// outstanding, in it or in the tables before it (counting those keeps the
// sums simple and costs nothing once the table has grown). The WRs
// outstanding are the sequence numbers from completion handling's head to
// a.seq, so room for them all keeps two of them off one entry.
func (a *Actor) shadowRoom(credits int) int {
	return len(a.shadow.Load().entries) - (int(a.sqDepth) - credits)
}

// growShadow replaces the shadow table by one of at least n entries, and
// twice the old one's (at most the full size, where it has room for every
// credit), for the WRs from a.seq on. The outstanding WRs stay where they
// are (shadowTable.prev).
func (a *Actor) growShadow(n int) {
	old := a.shadow.Load()
	size := 2 * len(old.entries)
	for size < n {
		size <<= 1
	}
	size = min(size, int(a.scratchMask)+1)
	a.shadow.Store(&shadowTable{entries: make([]entry, size), mask: uint64(size - 1), since: a.seq, prev: old})
}

// growPost gives the per-post arrays room for n WRs and submissions (at
// least postStart, at most the send queue), keeping what the chain being
// built holds: its gather lists move to the new chainSGE and its owners to
// the new drained, so that a burst still goes out in one PostSend. The
// actor calls it while it builds a chain, never while post runs.
func (a *Actor) growPost(n int) {
	n = min(max(n, postStart), int(a.sqDepth))
	sge := make([]verbs.SGE, sgesPerWR*n)
	copy(sge, a.chainSGE)
	chain := make([]verbs.SendWR, len(a.chain), n)
	for i, wr := range a.chain {
		if k := len(wr.SGL); k > 0 {
			// WR i's gather list starts at sgesPerWR*i (buildWR).
			b := sgesPerWR * i
			wr.SGL = sge[b : b+k : b+cap(wr.SGL)]
		}
		chain[i] = wr
	}
	drained := make([]submission, len(a.drained), n)
	copy(drained, a.drained)
	owners := make([]*submission, len(a.owners), n)
	j := 0 // owners are in drained's order
	for i, o := range a.owners {
		owners[i] = o
		for k := j; k < len(a.drained); k++ {
			if &a.drained[k] == o {
				owners[i], j = &drained[k], k
				break
			}
		}
	}
	uses := make([]peerUse, len(a.peer.uses), n)
	copy(uses, a.peer.uses)
	a.chain, a.chainSGE, a.owners, a.drained, a.peer.uses = chain, sge, owners, drained, uses
}

// appendOps validates a submission's ops and appends them to the chain; on
// a rule broken, nothing of the submission is appended.
func (a *Actor) appendOps(sub *submission) error {
	start := len(a.chain)
	ops := sub.ops()
	for i, op := range ops {
		if len(op.Gather) > MaxGather {
			a.chain = a.chain[:start]
			a.owners = a.owners[:start]
			return a.opError(infoOf(&ops[i]), len(ops), fmt.Errorf("%w: gather list of %d entries, at most %d",
				verbs.ErrInvalidArgument, len(op.Gather), MaxGather))
		}
		wr := a.buildWR(&op, len(a.chain))
		if err := a.limits.Check(i, &wr); err != nil {
			a.chain = a.chain[:start]
			a.owners = a.owners[:start]
			return a.opError(infoOf(&ops[i]), len(ops), err)
		}
		a.chain = append(a.chain, wr)
		a.owners = append(a.owners, sub)
	}
	return nil
}

// buildWR turns op into the WR at position pos of the chain; the wr_id,
// the shadow entry and signaling are set by post. With peer credits, a
// SEND gets room for its header in front of op's data (withHeader).
func (a *Actor) buildWR(op *Op, pos int) verbs.SendWR {
	wr := verbs.SendWR{Opcode: op.Opcode, Flags: op.Flags &^ verbs.SendSignaled, Imm: op.Imm, RDMA: op.Remote}
	sge := sgesPerWR * pos
	if op.Opcode.IsAtomic() {
		wr.Atomic = verbs.Atomic{RemoteAddr: op.Remote.RemoteAddr, RKey: op.Remote.RKey,
			CompareAdd: op.CompareAdd, Swap: op.Swap}
		wr.RDMA = verbs.RDMA{}
		a.chainSGE[sge] = verbs.SGE{Length: 8, LKey: a.scratch.LKey} // Addr set in post
		wr.SGL = a.chainSGE[sge : sge+1 : sge+1]
		return wr
	}
	// op's gather list: Gather, or Local when it has bytes.
	sgl, one := op.Gather, [1]verbs.SGE{op.Local}
	if sgl == nil && op.Local.Length > 0 {
		sgl = one[:]
	}
	if a.peer.on && op.Opcode.IsSend() {
		wr.SGL = a.withHeader(pos, sgl)
	} else if len(sgl) > 0 {
		n := copy(a.chainSGE[sge:sge+MaxGather], sgl)
		wr.SGL = a.chainSGE[sge : sge+n : sge+n]
	}
	return wr
}

// post assigns sequence numbers and shadow entries, signals every k-th WR
// and the last, and rings the doorbell once for the chain. When PostSend
// stops at a bad WR, the submission owning it fails and the innocent WRs
// after it go out in the next PostSend.
func (a *Actor) post() {
	for len(a.chain) > 0 {
		posted, err := a.postOnce()
		if err == nil {
			return
		}
		// The WRs from posted on never reached the queue: their entries
		// and credits go back.
		base, tab := a.seq, a.shadow.Load()
		a.credits.Add(int64(len(a.chain) - posted))
		for i := posted; i < len(a.chain); i++ {
			tab.entries[(base+uint64(i-posted))&tab.mask].seq.Store(0)
		}
		var wrErr *verbs.WRError
		if !errors.As(err, &wrErr) {
			// Not about one WR (the QP's state, a closed QP): nothing after
			// posted can go out either.
			a.unusePeer(posted, len(a.chain))
			for i := posted; i < len(a.chain); i++ {
				if f := a.owners[i].fut; f != nil && f.completeOne(verbs.WC{}, a.opError(wrInfo(&a.chain[i]), int(f.wrs), err), 0) {
					a.stats.Ops.ResolvedByActor.Inc()
				}
			}
			return
		}
		failed := a.owners[posted]
		n := 0
		for i := posted; i < len(a.chain) && a.owners[i] == failed; i++ {
			n++
		}
		a.unusePeer(posted, posted+n)
		if failed.fut != nil && failed.fut.failN(a.opError(wrInfo(&a.chain[posted]), int(failed.fut.wrs), err), n) {
			a.stats.Ops.ResolvedByActor.Inc()
		}
		if a.peer.on {
			// The innocent WRs keep what they took, at their new places.
			a.peer.uses = append(a.peer.uses[:0], a.peer.uses[posted+n:]...)
		}
		rest, restOwners := a.chain[posted+n:], a.owners[posted+n:]
		if len(rest) == 0 && posted > 0 && a.chain[posted-1].Flags&verbs.SendSignaled == 0 {
			// The posted prefix ends unsignaled and nothing follows it: its
			// completions would wait for the next drain, maybe forever.
			// A zero-length signaled WRITE (no key is checked) retires it.
			s, _ := newFuture(1, nil)
			a.stats.Ops.Taken.Inc() // the poller resolves it
			rest = []verbs.SendWR{{Opcode: verbs.OpWrite}}
			restOwners = []*submission{{fut: s}}
			if a.peer.on {
				a.peer.uses = append(a.peer.uses[:0], peerUse{})
			}
		}
		a.log.Debug("qpactor: reposting after a bad WR", "qpn", a.qp.QPN(), "wrs", len(rest), "err", err)
		a.chain = append(a.chain[:0], rest...)
		a.owners = append(a.owners[:0], restOwners...)
		for i := range a.chain {
			if n := len(a.chain[i].SGL); n > 0 {
				// From a later position: copying in order overwrites no
				// gather list still to be moved.
				sgl := a.chainSGE[sgesPerWR*i : sgesPerWR*i+n : sgesPerWR*i+n]
				copy(sgl, a.chain[i].SGL)
				a.chain[i].SGL = sgl
			}
			a.chain[i].Flags &^= verbs.SendSignaled
		}
	}
}

// postOnce prepares the chain and calls PostSend once. a.seq advances by
// the WRs posted.
func (a *Actor) postOnce() (int, error) {
	base, tab := a.seq, a.shadow.Load()
	for i := range a.chain {
		wr := &a.chain[i]
		seq := base + uint64(i)
		slot := seq & a.scratchMask
		wr.ID = wrid.Send(a.id, seq)
		a.sinceSignal++
		if a.sinceSignal >= a.signalEvery || i == len(a.chain)-1 {
			wr.Flags |= verbs.SendSignaled
			a.sinceSignal = 0
		}
		length := uint32(wr.Length())
		if wr.Opcode.IsAtomic() {
			wr.SGL[0].Addr = a.scratch.Addr + 8*slot
		} else if a.peer.on && wr.Opcode.IsSend() {
			a.placeHeader(i, wr, slot)
			length -= HeaderSize // the caller's bytes
		}
		e := &tab.entries[seq&tab.mask]
		e.fut, e.opcode, e.length = a.owners[i].fut, wr.Opcode, length
		e.raddr, e.rkey = wr.RDMA.RemoteAddr, wr.RDMA.RKey
		if wr.Opcode.IsAtomic() {
			e.raddr, e.rkey = wr.Atomic.RemoteAddr, wr.Atomic.RKey
		}
		a.lat.stamp(seq)
		e.seq.Store(seq + 1)
	}
	a.credits.Sub(int64(len(a.chain)))
	// Counted before the call, corrected after: the WRs may complete, and
	// their caller read the counters, before PostSend returns.
	timed := a.stats.PostCalls.Inc()%postCostEvery == 1
	a.stats.WRsPosted.Add(uint64(len(a.chain)))
	var start time.Time
	if timed {
		start = time.Now()
	}
	posted, err := a.qp.PostSend(a.chain)
	if timed {
		a.learnPostCost(time.Since(start))
	}
	if posted < len(a.chain) {
		a.stats.WRsPosted.Sub(uint64(len(a.chain) - posted))
	}
	a.countPosted(posted)
	a.seq = base + uint64(posted)
	a.postedTail.Store(a.seq)
	return posted, err
}

// failN fails n WRs of the operation that were never posted and reports
// whether that resolved the future.
func (s *futState) failN(err error, n int) (resolved bool) {
	for range n {
		resolved = s.completeOne(verbs.WC{}, err, 0)
	}
	return resolved
}

// failQueued fails everything still in the inbox with err.
func (a *Actor) failQueued(err error) int {
	n := 0
	for s := a.inbox.Peek(); s != nil; s = a.inbox.Peek() {
		fut, k := s.fut, len(s.ops())
		var failure error // nil: its context's end resolved it
		if a.take(s) {
			failure = a.submissionError(s, err)
		}
		a.pop()
		if failure != nil {
			fut.failN(failure, k)
		}
		n++
	}
	if n > 0 {
		a.roomMade()
	}
	return n
}

// dropCancelled pops the submission at the head of the inbox, which its
// context's end resolved: it never reaches the QP.
func (a *Actor) dropCancelled() {
	a.pop()
	a.stats.Ops.Cancelled.Inc()
	a.stats.Ops.ResolvedByActor.Inc()
}

// Complete handles a send completion of this actor's QP and reports
// whether its wr_id matched an outstanding WR (false: stale or unknown,
// counted and dropped). A signaled completion completes, in order, every
// earlier unsignaled WR. Only the goroutine handling the QP's CQ (its
// poller, or the actor through its Driver) may call it.
func (a *Actor) Complete(wc *verbs.WC) bool {
	id, seq := wrid.DecodeSend(wc.WRID)
	tab := a.shadow.Load()
	if e := tab.entry(seq); id != a.id || e == nil || e.seq.Load() != seq+1 || seq < a.head {
		a.stats.Stale.Inc()
		return false
	}
	// Retire every WR the completion covers first, and give their slots
	// back as credits, before any future resolves: a caller woken by its
	// future must find the WR no longer outstanding (Outstanding, the
	// in-flight gauge).
	done := a.retired[:0]
	for ; a.head <= seq; a.head++ {
		e := tab.entry(a.head)
		if e == nil || e.seq.Load() != a.head+1 {
			continue
		}
		if a.head == seq {
			done = append(done, a.retire(e, *wc))
		} else {
			// An unsignaled WR before a later completion succeeded: RC
			// executes in order and a failed WR always completes.
			done = append(done, a.retire(e, verbs.WC{Opcode: verbs.WCOpcodeOf(e.opcode), ByteLen: e.length}))
		}
	}
	dropRetiredTables(tab, a.head)
	a.credits.Add(int64(len(done)))
	a.resolve(done, nil)
	a.retired = done[:0]
	if a.waitsForCredits.Load() {
		a.waker.Wake()
	}
	return true
}

// retiredWR is a WR taken off the send queue whose future is still to be
// told.
type retiredWR struct {
	fut   *futState
	wc    verbs.WC
	value uint64
	info  opInfo // for its error
}

func (e *entry) info() opInfo {
	return opInfo{opcode: e.opcode, remoteAddr: e.raddr, rkey: e.rkey, length: e.length}
}

func wrInfo(wr *verbs.SendWR) opInfo {
	info := opInfo{opcode: wr.Opcode, remoteAddr: wr.RDMA.RemoteAddr, rkey: wr.RDMA.RKey, length: uint32(wr.Length())}
	if wr.Opcode.IsAtomic() {
		info.remoteAddr, info.rkey = wr.Atomic.RemoteAddr, wr.Atomic.RKey
	}
	return info
}

// dropRetiredTables lets go of the tables before tab whose WRs are all
// retired: those before head. Completion handling only.
func dropRetiredTables(tab *shadowTable, head uint64) {
	for t := tab; t.prev != nil; t = t.prev {
		if head >= t.since {
			t.prev = nil
			return
		}
	}
}

// retire takes the WR at head, e, off the send queue, reading what its
// completion returns (an atomic's original value, from the slot's
// scratch, which the next WR in the slot overwrites).
func (a *Actor) retire(e *entry, wc verbs.WC) retiredWR {
	var value uint64
	if wc.Status == verbs.WCSuccess {
		if e.opcode.IsAtomic() {
			off := 8 * (a.head & a.scratchMask)
			value = leUint64(a.scratch.Bytes[off : off+8])
		} else if a.peer.on && e.opcode.IsSend() {
			wc.ByteLen = e.length // without the header
		}
		a.sample(a.head, e.opcode)
	}
	r := retiredWR{fut: e.fut, wc: wc, value: value, info: e.info()}
	e.fut = nil
	e.seq.Store(0)
	return r
}

// resolve tells the futures of retired WRs their outcome: err when it is not
// nil, else each WR's completion.
func (a *Actor) resolve(done []retiredWR, err error) {
	var resolved uint64
	for i := range done {
		r := &done[i]
		e := err
		if e == nil {
			e = r.wc.Err()
		}
		if r.fut != nil && r.fut.completeOne(r.wc, a.opError(r.info, int(r.fut.wrs), e), r.value) { // nil: a credit-only SEND
			resolved++
		}
		*r = retiredWR{}
	}
	if resolved > 0 {
		a.stats.Ops.ResolvedByPoller.Add(resolved)
	}
}

func leUint64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// FailOutstanding fails every posted WR that has not completed with err:
// for completions that will never come (a CQ overrun lost them, or the
// runtime is shutting down). Later completions for them count as stale.
// Only the goroutine handling the QP's CQ may call it (as Complete).
func (a *Actor) FailOutstanding(err error) int {
	tail, tab := a.postedTail.Load(), a.shadow.Load()
	done := a.retired[:0]
	for ; a.head < tail; a.head++ {
		e := tab.entry(a.head)
		if e == nil || e.seq.Load() != a.head+1 {
			continue
		}
		done = append(done, retiredWR{fut: e.fut, info: e.info()})
		e.fut = nil
		e.seq.Store(0)
	}
	dropRetiredTables(tab, a.head)
	freed := len(done)
	if freed > 0 {
		// The poller calls this every round for an abandoned actor: wake
		// the actor only when credits came back and it may wait for them.
		a.credits.Add(int64(freed))
		a.resolve(done, err)
		if a.waitsForCredits.Load() {
			a.waker.Wake()
		}
	}
	a.retired = done[:0]
	return freed
}

// BrokenErr returns the error Break recorded, or nil.
func (a *Actor) BrokenErr() error { return a.broken.Load() }

// Break marks the QP unusable: queued and new operations fail with err.
// What is outstanding stays the device's: the caller moves the QP to ERR,
// and the flush completions resolve those futures once the device gave
// their WRs back.
func (a *Actor) Break(err error) {
	a.broken.CompareAndSwap(nil, err)
	a.waker.Wake()
}

// Abandon is Break for a QP whose completions may never come (a CQ overrun
// lost them, the device died): whoever handles its CQ fails what is
// outstanding with err, now and after every poll (AbandonedErr).
func (a *Actor) Abandon(err error) {
	a.Break(err)
	a.abandoned.CompareAndSwap(nil, err)
}

// AbandonedErr returns the error Abandon recorded, or nil.
func (a *Actor) AbandonedErr() error { return a.abandoned.Load() }

// Close stops accepting operations, posts what is queued while credits
// allow until ctx ends, fails the rest with ErrClosed and stops the actor
// goroutine. Outstanding WRs are the poller's to finish.
func (a *Actor) Close(ctx context.Context) error {
	a.closing.Store(true)
	a.room.broadcast() // a producer waiting for room fails with ErrClosed
	if a.started.CompareAndSwap(false, true) {
		// Never started: there is no goroutine to drain the inbox.
		a.exitMu.Lock()
		a.stopped.Store(true)
		a.failQueued(ErrClosed)
		a.exitMu.Unlock()
		close(a.done)
		return nil
	}
	a.waker.Wake()
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		a.Break(ErrClosed)
		<-a.done
		return ctx.Err()
	}
}
