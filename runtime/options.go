package runtime

import (
	"log/slog"
	"time"

	"github.com/verbsrt/verbsrt/cqpoller"
	"github.com/verbsrt/verbsrt/verbs"
)

// Option configures a Runtime.
type Option func(*config)

type config struct {
	provider    verbs.Provider
	device      string
	gidIndex    int
	pollers     int
	policy      cqpoller.Policy
	spin        time.Duration
	cqSize      int
	sqDepth     int
	signalEvery int
	ringSize    int
	poolSize    int
	recvDepth   int
	msgSize     int
	memLimit    int
	rnrRetry    uint8
	parkActors  bool
	inlinePost  bool
	waitPoll    time.Duration
	logger      *slog.Logger
}

func defaults() config {
	return config{gidIndex: -1, pollers: 1, sqDepth: 256, ringSize: 1024, poolSize: 256,
		recvDepth: 64, msgSize: 4096, memLimit: 1 << 30, rnrRetry: 7,
		inlinePost: true, waitPoll: DefaultWaitPoll}
}

// WithProvider selects the verbs provider (default: the process's soft
// fabric of one device, shared by every runtime made without
// WithProvider). Runtimes that should reach each other over the soft
// provider must share one: two soft.Providers are separate fabrics that
// give their devices the same GIDs and their QPs the same numbers, and a
// Dial from one to the other is refused (ErrProtocol) when it would
// connect a QP to itself.
func WithProvider(p verbs.Provider) Option { return func(c *config) { c.provider = p } }

// WithDevice selects the device by name (default: the provider's first).
func WithDevice(name string) Option { return func(c *config) { c.device = name } }

// WithGIDIndex selects the GID table entry of port 1 (default: the first
// IPv4-mapped GID, else index 0).
func WithGIDIndex(i int) Option { return func(c *config) { c.gidIndex = i } }

// WithPollers sets how many CQ poller goroutines the runtime runs (default
// 1). Each is locked to an OS thread and, under load, spins: on a machine
// with few cores keep it small.
func WithPollers(n int) Option { return func(c *config) { c.pollers = n } }

// WithIdlePolicy sets what pollers do when idle (default Adaptive: spin,
// yield, then sleep on the completion channel; idle costs no CPU).
func WithIdlePolicy(p cqpoller.Policy) Option { return func(c *config) { c.policy = p } }

// WithSpin sets how long actors and pollers spin before they yield and
// park (default 50 µs).
func WithSpin(d time.Duration) Option { return func(c *config) { c.spin = d } }

// WithCQSize sets the entries of each endpoint's CQ (default: enough for a
// full send and receive queue, which is what guarantees no overrun).
func WithCQSize(n int) Option { return func(c *config) { c.cqSize = n } }

// WithSendQueueDepth sets max_send_wr of each endpoint's QP (default 256):
// the endpoint keeps at most n WRs in flight, even where the provider
// rounds the queue up.
func WithSendQueueDepth(n int) Option { return func(c *config) { c.sqDepth = n } }

// WithSignalEvery makes every k-th WR signaled (default: a quarter of the
// send queue). The last WR of each drain is always signaled.
func WithSignalEvery(k int) Option { return func(c *config) { c.signalEvery = k } }

// WithRingSize sets each actor's inbox capacity in submissions (default 1024).
func WithRingSize(n int) Option { return func(c *config) { c.ringSize = n } }

// WithPoolSize sets the size of the worker pool that runs Then callbacks
// (default 256). When every worker is busy, further callbacks wait in a
// queue that one more goroutine runs in order: callbacks never start more
// than n+1 goroutines, and never stall the pollers that resolve futures.
// A callback must not wait for another future's Then callback.
func WithPoolSize(n int) Option { return func(c *config) { c.poolSize = n } }

// WithRecvDepth sets the largest window of receive credits an endpoint
// grants its peer (default 64, at least 4). Receives come from the
// runtime's shared pool: a peer starts with 3 credits, and the window grows
// toward this while the peer's sends wait for credits (package doc,
// "Backpressure"). A batch may carry at most n-1 SENDs and WRITE_WITH_IMMs.
func WithRecvDepth(n int) Option { return func(c *config) { c.recvDepth = n } }

// WithMessageSize sets the largest message Send may carry (default 4096).
func WithMessageSize(n int) Option { return func(c *config) { c.msgSize = n } }

// WithMemoryLimit bounds the registered memory the runtime maps for Alloc,
// the shared receive pool (WithMessageSize per buffer: 3 per idle
// connection, more for busy ones) and the actors' scratch (default 1 GiB). The
// arena grows on demand, 4 MiB at a time, up to the limit; memory of the
// application's own (Register) does not count. On Linux, registered memory
// is locked: RLIMIT_MEMLOCK must allow what the runtime maps.
func WithMemoryLimit(n int) Option { return func(c *config) { c.memLimit = n } }

// WithRNRRetry sets the QPs' rnr_retry (default 7, retry forever). Sends
// are credit-based and never meet an empty receive queue, so 0 works too.
func WithRNRRetry(n uint8) Option { return func(c *config) { c.rnrRetry = n } }

// WithParkedActors makes an idle endpoint's actor park its goroutine,
// locked to its OS thread, instead of ending it (the default, in which an
// idle endpoint holds no thread and no goroutine, and the next operation
// starts its actor again). For comparison (bench/README.md); it costs an
// OS thread per endpoint.
func WithParkedActors() Option { return func(c *config) { c.parkActors = true } }

// WithInlinePost sets whether an operation that finds its endpoint's actor
// idle posts on the caller's goroutine (locked to its OS thread while it
// posts, as the actor would be) instead of starting the actor on another
// thread: what a lone request/response caller waits for on every call,
// 100-150 µs in a TCG guest, and what a caller with a few operations in
// flight loses when the actor it started takes its P (bench/README.md).
// On by default. Operations that find the actor running, or that must
// wait for credits, go through it either way; so do those submitted with
// others in flight where a post is costly (a system call, as on rxe),
// which the actor chains into one post.
func WithInlinePost(on bool) Option { return func(c *config) { c.inlinePost = on } }

// DefaultWaitPoll is how long a waiter polls its endpoint's CQ before it
// parks unless WithWaitPoll says otherwise: on soft a SEND/Recv round
// trip takes 2-3 µs with it and 170-250 µs without. A waiter polls longer
// where a park is expected to cost more, up to 10 ms: three goroutine
// wake-ups, as the process measures them (qpactor.WakeUpCost). That is
// some µs on hardware, where it changes nothing, and milliseconds in a TCG
// guest over rxe, where a ping-pong then parks now and then instead of on
// most waits (bench/README.md). It does not poll longer because its waits
// are long: a waiter spinning through long waits takes the CPU from the
// work it waits for, where the machine has no core to spare.
const DefaultWaitPoll = 200 * time.Microsecond

// WithWaitPoll sets how long a goroutine blocked in Future.Wait or Recv
// polls its endpoint's CQ itself before it parks, at the least (default
// DefaultWaitPoll, which says when a waiter polls longer), so that the
// completion it waits for is handled on its own thread, not by a poller
// woken for it that then wakes the waiter. A waiter polls with yields
// between polls, and at most a few poll at once in a process; the rest,
// and every waiter with d 0 or less, yield a few dozen times and park. d
// is rounded up to whole µs.
func WithWaitPoll(d time.Duration) Option { return func(c *config) { c.waitPoll = d } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }
