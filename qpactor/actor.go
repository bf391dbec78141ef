package qpactor

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	stdatomic "sync/atomic"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/opstats"
	"github.com/verbsrt/verbsrt/internal/ring"
	"github.com/verbsrt/verbsrt/internal/sched"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/verbs"
)

// Op is one operation: a send work request without the wr_id and the
// SIGNALED flag, which the actor owns.
type Op struct {
	Opcode verbs.Opcode
	// Flags may hold FENCE, SOLICITED and INLINE; SIGNALED is ignored.
	Flags verbs.SendFlags
	// Local is the local buffer (gather list of one). Length 0 means no
	// local data. Atomics leave it zero: the actor supplies the 8 bytes
	// their result lands in and reports it as the future's value
	// (future.State.Value).
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
	Hold *future.Hold
}

// DefaultRingSize, 1024, is an inbox's capacity in submissions unless
// Config.RingSize says otherwise: the runtime's default too.
const DefaultRingSize = 1024

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
	// RingSize is the inbox capacity in submissions (0:
	// DefaultRingSize). The inbox starts with room for a few and grows as
	// it fills (ring.NewGrowing).
	RingSize int
	// SendDepth caps the send-queue slots the actor fills: what was asked
	// of the provider, which may have rounded max_send_wr up (rxe and soft
	// make 256 into 511). 0: all of the QP's max_send_wr.
	SendDepth int
	// SignalEvery signals every k-th WR (and the last of each drain); 0:
	// a quarter of the send queue.
	SignalEvery int
	// Spin is how long the actor polls an empty inbox before it goes idle
	// (0: sched.DefaultSpin).
	Spin time.Duration
	// Park makes an idle actor park its goroutine, locked to its OS
	// thread, instead of ending it. By default an idle actor's goroutine
	// ends and gives its thread back, and the next kick (a submission, a
	// completion, credits, Close) starts a new one: an idle endpoint then
	// holds no thread and no goroutine, and waking costs a goroutine start
	// instead of handing a parked thread its goroutine back.
	Park bool
	// InlinePost makes a submission that finds the actor idle (its
	// goroutine ended) drain the inbox and post on the submitting
	// goroutine, locked to its OS thread while it posts, instead of
	// starting an actor goroutine: the WR reaches the QP without a
	// hand-off between threads, which costs a goroutine start on another
	// OS thread. What the
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
	Executor future.Executor
	// Clock, when set, is the clock a waiter's poll window is measured
	// with instead of time.Now: tests drive the window with their own.
	Clock func() time.Time
	// WrapError, when set, wraps the error of every failed operation the
	// actor resolves: op is the operation (a batch's first), batch the
	// number of WRs its future covers when more than one.
	WrapError func(op *Op, batch int, err error) error
	// Observer, when set, sees every operation submitted to the actor as
	// it starts, is posted and ends (Observer).
	Observer Observer
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
	// PollUndriven is Poll for a waiter that yields rather than polls
	// (WaitUntil, when it gets no polling-waiter slot): once a turn, it
	// polls the CQ unless the actor or a polling waiter drives it, and
	// returns 0 when one does.
	PollUndriven() int
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
	fut   *future.State
	// start is when it was submitted, by the actor's clock, when the
	// actor has an Observer (0 otherwise).
	start time.Duration
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
	fut    *future.State
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
	// headWaits: the last drain stopped at a head that waits for credits
	// (send-queue slots or the peer's). What is queued behind it cannot
	// go before it, so a submitter leaves its own queued rather than run
	// a drain that would post nothing (push); the completion or grant
	// that brings the credits runs the drain that posts both.
	headWaits stdatomic.Bool
	qp        verbs.QP
	limits    verbs.SendLimits
	sqDepth   int32 // int32, so that postCost fits beside it (TestActorSize)
	// postCost is what a PostSend takes, in ns, as sampled every
	// postCostEvery calls (learnPostCost); it decides inlineWorthIt.
	postCost stdatomic.Uint32
	exec     future.Executor
	log      *slog.Logger
	// spin is Config.Spin: atomic, as the tests set it on an idle actor.
	spin    atomic.Duration
	scratch Scratch

	inbox *ring.Ring[submission]
	// run says who may post, and where the actor is in its life.
	run *runOwner
	// goRun is a.runAcquired as a func value, made once: go a.goRun()
	// starts a run without the allocation go a.runAcquired() makes for
	// its receiver on every start.
	goRun func()
	room  roomSignal // producers waiting for room in the inbox
	// driving is set while the actor goroutine drives its CQ (Driver),
	// polling it between drains: just before Drive(true), cleared just
	// before Drive(false).
	driving atomic.Bool

	// credits is the number of send-queue slots the actor may fill: the
	// poller adds what it retires.
	credits atomic.Int64
	// broken is the error the QP failed with, once run has lifeBroken
	// (brokenErr).
	broken     atomic.Error
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
	// looked is how many queued submissions, from the head, a rest has
	// seen (restWatching): at least watched. A rest looks only at those
	// queued since, so resting beside a long queue costs no scan of it.
	looked int
	// scratchMask maps a WR's sequence number to its scratch slot: one
	// mapping for the actor's life, whatever table holds the WR.
	scratchMask uint64

	// shadow is written by the actor (growShadow), read by the actor and
	// by completion handling.
	shadow atomic.Pointer[shadowTable]

	// Completion handling only (Complete, FailOutstanding).
	retired []retiredWR // kept for the next call: it grows to the most a call retired
	head    uint64

	stats     opstats.Stats
	lat       sampler                                  // post times of the WRs sampled for latency
	wrapError func(op *Op, batch int, err error) error // Config.WrapError
	clock     func() time.Time                         // Config.Clock
	driver    Driver                                   // set before Start, or nil
	obs       *observer                                // Config.Observer, or nil
	done      chan struct{}
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
		id: cfg.ID, qp: cfg.QP, sqDepth: int32(depth), exec: cfg.Executor, log: cfg.Logger, wrapError: cfg.WrapError, clock: cfg.Clock,
		inline: cfg.InlinePost && !cfg.Park, scratch: cfg.Scratch,
		waitPollMicros: waitPollMicros(cfg.WaitPoll),
		limits:         verbs.SendLimits{Type: cfg.QP.Type(), MaxSendSGE: attr.Cap.MaxSendSGE, MaxInlineData: attr.Cap.MaxInlineData},
		signalEvery:    int32(min(cfg.SignalEvery, depth)),
		done:           make(chan struct{}),
	}
	a.scratchMask = uint64(shadowSize(depth) - 1)
	n := min(shadowStart, shadowSize(depth))
	a.shadow.Store(&shadowTable{entries: make([]entry, n), mask: uint64(n - 1)})
	a.goRun = a.runAcquired
	a.run = newRunOwner(cfg.Park, func() { a.kick(kickWake) })
	a.lat.init(shadowSize(depth))
	if cfg.Observer != nil {
		a.obs = &observer{o: cfg.Observer, start: make([]time.Duration, a.scratchMask+1)}
	}
	if a.signalEvery <= 0 {
		a.signalEvery = int32(max(1, depth/4))
	}
	a.spin.Store(cfg.Spin)
	if cfg.Spin <= 0 {
		a.spin.Store(sched.DefaultSpin)
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	capacity := cfg.RingSize
	if capacity <= 0 {
		capacity = DefaultRingSize
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

// QP returns the QP the actor owns.
func (a *Actor) QP() verbs.QP { return a.qp }

// Stats returns the actor's counters.
func (a *Actor) Stats() *opstats.Stats { return &a.stats }

// Credits returns how many send-queue slots are free now.
func (a *Actor) Credits() int { return int(a.credits.Load()) }

// Outstanding returns how many posted WRs have not completed.
func (a *Actor) Outstanding() int { return int(a.sqDepth) - a.Credits() }

// Idle reports whether no goroutine runs the actor now: its goroutine
// went idle and ended, and nothing has started it again. The next
// submission, grant or report due is then posted by the goroutine that
// brings it (InlinePost), or starts a new run.
func (a *Actor) Idle() bool { return a.run.idle() }

// SetDriver makes the actor poll its completions through d while it is
// awake. Call it before Start.
func (a *Actor) SetDriver(d Driver) { a.driver = d }

// Start runs the actor goroutine, locked to its OS thread while it runs.
// Call it once.
func (a *Actor) Start() {
	if a.run.start() {
		a.handOff()
	}
}
