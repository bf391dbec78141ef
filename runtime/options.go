package runtime

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/verbsrt/verbsrt/internal/rlimit"
	"github.com/verbsrt/verbsrt/internal/sched"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// Option configures a Runtime.
type Option func(*config)

type config struct {
	provider   verbs.Provider
	device     string
	gidIndex   int
	sqDepth    int
	recvDepth  int
	msgSize    int
	memLimit   int
	parkActors bool
	tuning     Tuning
	logger     *slog.Logger
	observer   Observer
}

func defaults() config {
	return config{gidIndex: -1, sqDepth: 256, recvDepth: 64, msgSize: 4096, memLimit: rlimit.DefaultMemoryLimit,
		tuning: DefaultTuning()}
}

// WithProvider selects the verbs provider (default: the process's soft
// fabric of one device, shared by every runtime made without
// WithProvider). Runtimes that should reach each other over the soft
// provider must share one: two soft.Providers are separate fabrics that
// give their devices the same GIDs and their QPs the same numbers, and a
// Dial from one to the other is refused (ErrProtocol) when it would
// connect a QP to itself.
func WithProvider(p verbs.Provider) Option { return func(c *config) { c.provider = p } }

// WithDevice selects the device, port and GID the runtime uses, in any of
// the forms deployments name them:
//
//	mlx5_0          a device of the provider, by name
//	mlx5_0:2        the same, port 2 (by default: any active port)
//	eth1            a network device: the device and port with GIDs of it
//	10.0.0.1        an IP address (fe80::1%eth1 too): the GID of that address
//	10.0.0.0/24     a subnet: a GID in it
//	0000:3b:00.0    a PCI address (the SR-IOV device plugin's PCIDEVICE_*)
//
// By default the runtime takes the first device, in the provider's order,
// with an active port and a GID that fits. The GID is chosen by this rule
// unless WithGIDIndex names one: on an InfiniBand port, index 0 (the port
// GID); on RoCE, a RoCE v2 GID whose netdev is in the process's network
// namespace (a GID of another pod's netdev fails the connection), IPv4
// before IPv6, the one of the address or subnet when one is given. A
// port with only RoCE v1 GIDs is refused, with an error that lists its
// GID table. A provider that does not report GID types (verbs.GIDTabler)
// gets the first IPv4-mapped GID, else index 0.
//
// The environment overrides the options, so an operator can point a
// deployment at its device without a change of code: VERBSRT_DEVICE (the
// same forms), VERBSRT_PORT (1 to 255) and VERBSRT_GID_INDEX (0 to 255),
// read once by New, which refuses a bad value with an error naming the
// variable. Stats, the start-up log line (level Info) and the metric
// verbsrt_device_info say what was chosen.
func WithDevice(s string) Option { return func(c *config) { c.device = s } }

// WithGIDIndex selects the entry of the port's GID table the runtime uses
// (default: the rule of WithDevice). An index asked for is used whatever
// its type, RoCE v1 included; with a netdev, address or subnet in
// WithDevice it must be one of theirs. VERBSRT_GID_INDEX overrides it.
func WithGIDIndex(i int) Option { return func(c *config) { c.gidIndex = i } }

// WithSendQueueDepth sets max_send_wr of each endpoint's QP (default 256):
// the endpoint keeps at most n WRs in flight, even where the provider
// rounds the queue up.
func WithSendQueueDepth(n int) Option { return func(c *config) { c.sqDepth = n } }

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

// Tuning holds how a runtime's goroutines spin, poll and hand work over:
// the knobs that trade CPU for latency. The defaults (DefaultTuning) suit
// most programs; measure before changing them (bench/README.md says how).
// For WithTuning, a field left zero keeps its earlier value.
type Tuning struct {
	// Pollers is how many CQ poller goroutines the runtime runs (default
	// 1, at most 64). Each is locked to an OS thread and, under load,
	// spins: on a machine with few cores keep it small.
	Pollers int
	// BusyPoll makes the pollers poll without ever sleeping on the
	// completion channel: lowest latency for a runtime that is never idle,
	// a core's worth of CPU for one that is. By default a poller spins,
	// yields, then sleeps, and an idle runtime costs no CPU.
	BusyPoll bool
	// Spin is how long actors and pollers spin before they yield and park
	// (default 50 µs, at most 1 s).
	Spin time.Duration
	// WaitPoll is how long, at the least, a goroutine blocked in
	// Future.Wait or Recv polls its endpoint's CQ itself before it parks
	// (default 200 µs, at most 1 s), so that the completion it waits for
	// is handled on its own thread, not by a poller woken for it that then
	// wakes the waiter. A waiter polls longer where a park is expected to
	// cost more, up to 10 ms (the three goroutine wake-ups a park takes,
	// as the process measures them: the netpoller's by a probe while the
	// process is quiet), never because its waits are long: a waiter spinning
	// through long waits takes the CPU from the work it waits for. At most
	// a few goroutines of a process poll at once; the rest yield a few
	// dozen times and park, looking at their endpoint's CQ once a turn
	// while nobody else polls it; and none polls while its endpoint's
	// actor goroutine is up, polling the CQ between its posts: a waiter
	// then only watches for its result.
	WaitPoll time.Duration
	// NoWaitPoll turns waiter polling off: every waiter yields a few dozen
	// times and parks, and pollers and actors handle every completion.
	NoWaitPoll bool
	// NoInlinePost makes every operation go through its endpoint's actor
	// goroutine. By default an operation that finds the actor idle posts
	// on the caller's goroutine (locked to its OS thread while it posts, as
	// the actor would be) instead of starting the actor on another thread:
	// what a lone request/response caller waits for on every call.
	// Operations that find the actor running, that must wait for credits,
	// or that are submitted with others in flight where a post is costly
	// (a system call, as on rxe) go through the actor either way, which
	// chains them into one post.
	NoInlinePost bool
	// SignalEvery makes every k-th WR signaled (default: a quarter of the
	// send queue). The last WR of each drain is always signaled.
	SignalEvery int
	// RingSize is each endpoint's inbox capacity in submissions (default
	// 1024, at most 1<<30); the inbox grows toward it as it fills.
	RingSize int
	// CQSize is the entries of each endpoint's CQ (default: enough for a
	// full send and receive queue, which is what guarantees no overrun).
	CQSize int
	// AckTimeout is how long a QP waits for the peer to acknowledge what
	// it sent before it sends it again (the local ACK timeout, rounded up
	// to InfiniBand's 4.096 µs x 2^n; default about 268 ms), and
	// RetryCount how many such resends in a row may go unanswered before
	// the endpoint fails with RETRY_EXC_ERR (1 to 7, default 7). Their
	// product is how long a silent peer or path is borne. A packet lost
	// at the end of a burst, which nothing after it reveals, costs one
	// AckTimeout to recover; a shorter timeout recovers sooner and a
	// longer one survives a peer on a machine too busy to answer in time
	// (or a flood of datagrams at its socket, on RoCE v2 from user space).
	AckTimeout time.Duration
	RetryCount int
	// RNRRetry is how many times a QP sends a message again that found no
	// receive posted at the peer (1 to 6; 7, the default, for ever). The
	// runtime's receive credits keep a verbsrt peer from running out of
	// receives, so it matters only toward peers that do not grant them.
	RNRRetry int
	// CallbackWorkers is the size of the worker pool that runs Then
	// callbacks (default 256, at most 1<<20). When every worker is busy,
	// further callbacks wait in a queue that one more goroutine runs in
	// order: callbacks never start more than CallbackWorkers+1 goroutines,
	// and never stall the pollers that resolve futures.
	CallbackWorkers int
}

// defaultAckTimeoutCode is the local ACK timeout of the runtime's QPs
// unless Tuning says otherwise: 4.096 µs x 2^16, about 268 ms, which with
// 7 retries bears about 1.9 s of silence.
const defaultAckTimeoutCode = 16

// waitPoll is how long t has waiters poll: 0 for none.
func waitPoll(t Tuning) time.Duration {
	if t.NoWaitPoll {
		return 0
	}
	return t.WaitPoll
}

// DefaultTuning returns the tuning a runtime has without WithTuning.
func DefaultTuning() Tuning {
	return Tuning{Pollers: 1, Spin: sched.DefaultSpin, WaitPoll: 200 * time.Microsecond,
		RingSize: qpactor.DefaultRingSize, CallbackWorkers: 256, AckTimeout: verbs.AckTimeoutDuration(defaultAckTimeoutCode),
		RetryCount: 7, RNRRetry: 7}
}

// WithTuning sets the fields of t that are not zero (true, for the flags);
// the others keep their earlier value, so several WithTuning options
// compose.
func WithTuning(t Tuning) Option {
	return func(c *config) {
		d := &c.tuning
		set := func(dst *int, v int) {
			if v != 0 {
				*dst = v
			}
		}
		setD := func(dst *time.Duration, v time.Duration) {
			if v != 0 {
				*dst = v
			}
		}
		set(&d.Pollers, t.Pollers)
		set(&d.SignalEvery, t.SignalEvery)
		set(&d.RingSize, t.RingSize)
		set(&d.CQSize, t.CQSize)
		set(&d.CallbackWorkers, t.CallbackWorkers)
		set(&d.RetryCount, t.RetryCount)
		set(&d.RNRRetry, t.RNRRetry)
		setD(&d.AckTimeout, t.AckTimeout)
		setD(&d.Spin, t.Spin)
		setD(&d.WaitPoll, t.WaitPoll)
		d.BusyPoll = d.BusyPoll || t.BusyPoll
		d.NoWaitPoll = d.NoWaitPoll || t.NoWaitPoll
		d.NoInlinePost = d.NoInlinePost || t.NoInlinePost
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Bounds of the options: beyond them a value is a mistake (a unit
// confused, a sign lost) that would surface later as a panic, an
// out-of-memory crash or thread exhaustion; New refuses it instead.
const (
	maxQueueDepth = 1 << 16
	maxMessage    = 1 << 30
	maxMemory     = 1 << 40
	maxPollers    = 64
	maxSpin       = time.Second
	maxRing       = 1 << 30
	maxCQSize     = 1 << 22
	maxWorkers    = 1 << 20
)

// validate reports the first option whose value New cannot honour,
// naming it.
func (c *config) validate() error {
	t := c.tuning
	for _, r := range []struct {
		name      string
		v, lo, hi int64
	}{
		{"WithGIDIndex", int64(c.gidIndex), -1, 255},
		{"WithSendQueueDepth", int64(c.sqDepth), 1, maxQueueDepth},
		{"WithRecvDepth", int64(c.recvDepth), 4, maxQueueDepth},
		{"WithMessageSize", int64(c.msgSize), 1, maxMessage},
		{"WithMemoryLimit", int64(c.memLimit), 1, maxMemory},
		{"Tuning.Pollers", int64(t.Pollers), 1, maxPollers},
		{"Tuning.Spin", int64(t.Spin), 0, int64(maxSpin)},
		{"Tuning.WaitPoll", int64(t.WaitPoll), 0, int64(maxSpin)},
		{"Tuning.SignalEvery", int64(t.SignalEvery), 0, int64(c.sqDepth)},
		{"Tuning.RingSize", int64(t.RingSize), 1, maxRing},
		{"Tuning.CQSize", int64(t.CQSize), 0, maxCQSize},
		{"Tuning.CallbackWorkers", int64(t.CallbackWorkers), 1, maxWorkers},
		{"Tuning.AckTimeout", int64(t.AckTimeout), 1, int64(verbs.AckTimeoutDuration(31))},
		{"Tuning.RetryCount", int64(t.RetryCount), 1, 7},
		{"Tuning.RNRRetry", int64(t.RNRRetry), 0, 7}, // 0 only from the tests (export_test.go)
	} {
		if r.v < r.lo || r.v > r.hi {
			return fmt.Errorf("verbsrt: %s(%d): outside [%d, %d]: %w", r.name, r.v, r.lo, r.hi, verbs.ErrInvalidArgument)
		}
	}
	return nil
}
