package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/cqpoller"
	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// Runtime owns a device context, its registered arena, the CQ pollers and
// the worker pool; endpoints come from Listen/Accept and Dial. A Runtime is
// safe for concurrent use.
type Runtime struct {
	cfg      config
	log      *slog.Logger
	prov     verbs.Provider
	ownProv  *soft.Provider
	vctx     verbs.Context
	pd       verbs.PD
	gid      verbs.GID
	gidIndex uint8
	mtu      verbs.MTU
	sel      *selection // the device, port and GID chosen (device.go)
	alloc    allocator
	pool     *callbackRunner
	pollers  []*cqpoller.Poller
	chans    []verbs.CompChannel
	devAttr  verbs.DeviceAttr

	poolsMu     sync.Mutex
	pools       []*recvPool // the shared receive side (recvpool.go), one SRQ each
	recvStore   *recvStore  // their buffers, made with the first pool
	poolsClosed bool

	nextID     atomic.Uint32
	nextPoller atomic.Uint32

	mu        sync.Mutex
	closed    bool
	endpoints map[*Endpoint]struct{}
	// epList holds the endpoints too, in an order checkQPs walks
	// (Endpoint.listIndex is each one's place).
	epList      []*Endpoint
	qpCheckNext int
	qpCheckStop chan struct{}
	qpCheckDone chan struct{}
	byQPN       map[uint32]*Endpoint
	byCQ        map[verbs.CQ]*Endpoint
	listeners   map[*Listener]struct{}
	// eventsErr is set once the device's asynchronous events can no
	// longer be read: no endpoint may start after it (watchEvents).
	eventsErr error

	eventsDone chan struct{}
	counters   counters // for Stats (stats.go)
}

// New opens a device and starts the runtime's pollers. Without
// WithProvider it runs on the process's default soft fabric, which every
// runtime made without WithProvider shares (so that they reach each other
// through Listen and Dial) and which lives while one of them does.
func New(opts ...Option) (*Runtime, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rt := &Runtime{cfg: cfg, log: cfg.logger, endpoints: make(map[*Endpoint]struct{}),
		byQPN: make(map[uint32]*Endpoint), byCQ: make(map[verbs.CQ]*Endpoint),
		listeners: make(map[*Listener]struct{}), eventsDone: make(chan struct{})}
	if rt.log == nil {
		rt.log = slog.New(slog.DiscardHandler)
	}
	if err := rt.open(); err != nil {
		rt.teardown() // what open acquired
		return nil, err
	}
	return rt, nil
}

// open acquires what the runtime runs on: the device context, its
// protection domain, the arena, the worker pool and the pollers.
func (rt *Runtime) open() error {
	cfg := rt.cfg
	if rt.prov = cfg.provider; rt.prov == nil {
		rt.ownProv = acquireDefaultSoft()
		rt.prov = rt.ownProv
	}
	w, err := resolveWant(cfg, os.Getenv)
	if err != nil {
		return err
	}
	sel, err := pickDevice(rt.prov, w, netdevPresent)
	if err != nil {
		return err
	}
	rt.sel, rt.vctx = sel, sel.ctx
	go rt.watchEvents(rt.vctx.AsyncEvents())
	if rt.devAttr, err = rt.vctx.QueryDevice(); err != nil {
		return err
	}
	rt.mtu = min(sel.attr.ActiveMTU, verbs.MTU4096)
	rt.gidIndex, rt.gid = uint8(sel.entry.Index), sel.entry.GID
	if rt.pd, err = rt.vctx.AllocPD(); err != nil {
		return err
	}
	if rt.alloc, err = newAllocator(rt.pd, cfg.memLimit, rt.log); err != nil {
		return err
	}
	if rt.pool, err = newCallbackRunner(cfg.tuning.CallbackWorkers, rt.log); err != nil {
		return err
	}
	policy := cqpoller.Adaptive
	if cfg.tuning.BusyPoll {
		policy = cqpoller.Busy
	}
	for range cfg.tuning.Pollers {
		var ch verbs.CompChannel
		if policy != cqpoller.Busy {
			if ch, err = rt.vctx.CreateCompChannel(); err != nil {
				return err
			}
			rt.chans = append(rt.chans, ch)
		}
		p, err := cqpoller.New(cqpoller.Config{Policy: policy, Channel: ch, Spin: cfg.tuning.Spin, Logger: rt.log})
		if err != nil {
			return err
		}
		p.Start()
		rt.pollers = append(rt.pollers, p)
	}
	rt.qpCheckStop, rt.qpCheckDone = make(chan struct{}), make(chan struct{})
	go rt.checkQPs(rt.qpCheckStop, rt.qpCheckDone)
	rt.log.Info("verbsrt: runtime up", "provider", rt.prov.Name(), "device", sel.dev.Name(),
		"port", sel.port, "gid_index", sel.entry.Index, "gid", gidViewOf(rt.prov).addr(rt.gid), "gid_type", sel.gidType(),
		"netdev", sel.entry.Netdev, "link_layer", sel.attr.LinkLayer.String(), "mtu", rt.mtu.Bytes(), "why", sel.why)
	return nil
}

// slogAnts adapts slog to ants' logger.
type slogAnts struct{ l *slog.Logger }

func (s slogAnts) Printf(format string, args ...any) { s.l.Debug(fmt.Sprintf(format, args...)) }

// Alloc returns n bytes of zeroed, registered memory from the runtime's
// arena, which grows on demand up to WithMemoryLimit. No peer can reach it
// until it is exposed (Buffer.Expose).
//
// The arena takes more than n bytes, and counts them against the limit:
// while that power of two is smaller than the arena's chunk (4 MiB, or
// the limit when smaller), n rounded up to a power of two, at least 64
// bytes (Alloc(3000) takes 4 KiB); beyond, a mapping of its own of n
// rounded up to a whole page (Alloc(600 MiB) takes 600 MiB). What is
// freed stays mapped and counted, for later Allocs (and the runtime's
// own buffers). The runtime's endpoints take their
// receive buffers and scratch from the same arena, so Buffers the
// application holds near the limit make Dial and Accept fail with
// ErrNoMemory, saying how much is mapped and by what.
func (rt *Runtime) Alloc(n int) (*Buffer, error) {
	if rt.isClosed() {
		return nil, ErrClosed
	}
	return rt.alloc.alloc(n, true)
}

// allocOwn is Alloc for the runtime's own memory (receive buffers,
// scratch), which is not counted as the application's.
func (rt *Runtime) allocOwn(n int) (*Buffer, error) {
	if rt.isClosed() {
		return nil, ErrClosed
	}
	return rt.alloc.alloc(n, false)
}

// Register registers memory of the application's own for the runtime's
// operations: memory outside the Go heap, such as an mmap'd file, huge
// pages or C memory (Go's collector may reuse heap memory while the device
// writes into it, so it is refused, with verbs.ErrGoMemory). The memory
// stays the application's: Free deregisters it, once no operation uses
// it, and leaves it mapped. It must stay valid until then.
func (rt *Runtime) Register(mem []byte) (*Buffer, error) {
	if rt.isClosed() {
		return nil, ErrClosed
	}
	return rt.alloc.register(mem)
}

func (rt *Runtime) isClosed() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.closed
}

// watchEvents turns asynchronous events into failed futures: nothing waits
// for a completion that cannot come. The same holds when the events end
// before the device is closed (eventsLost).
func (rt *Runtime) watchEvents(events <-chan verbs.AsyncEvent) {
	defer close(rt.eventsDone)
	defer func() {
		if err := rt.vctx.AsyncErr(); err != nil {
			rt.eventsLost(err)
		}
	}()
	for ev := range events {
		rt.handleEvent(ev)
	}
}

// handleEvent fails what an asynchronous event ends.
func (rt *Runtime) handleEvent(ev verbs.AsyncEvent) {
	rt.log.Warn("verbsrt: asynchronous event", "event", ev.Type.String())
	rt.counters.events[ev.Type&31].Inc()
	var targets []*Endpoint
	rt.mu.Lock()
	switch ev.Type {
	case verbs.EventQPFatal, verbs.EventQPReqErr, verbs.EventQPAccessErr, verbs.EventQPLastWQEReached:
		if ev.QP != nil {
			if ep := rt.byQPN[ev.QP.QPN()]; ep != nil {
				targets = append(targets, ep)
			}
		}
	case verbs.EventCQErr:
		if ep := rt.byCQ[ev.CQ]; ep != nil {
			targets = append(targets, ep)
		}
	case verbs.EventDeviceFatal:
		for ep := range rt.endpoints {
			targets = append(targets, ep)
		}
	}
	rt.mu.Unlock()
	// A CQ overrun loses completions and a dead device sends none;
	// a QP's error flushes what it holds.
	lost := ev.Type == verbs.EventCQErr || ev.Type == verbs.EventDeviceFatal
	for _, ep := range targets {
		if ev.Type == verbs.EventQPLastWQEReached {
			// An SRQ's QP went to ERR: its receives are not flushed, so
			// this event is all that says so when nothing is in flight.
			// At Close it is the endpoint's own doing; and a completion
			// that failed the QP and waits in its CQ says why
			// (failUnexplained). One left to its CQ's handler that does
			// not explain it is failed by the QP check.
			ep.failUnexplained(fmt.Errorf("%w: the QP went to the error state (%s)", ErrConnFailed, ev.Type))
			continue
		}
		if ev.Type == verbs.EventQPAccessErr || ev.Type == verbs.EventQPReqErr {
			// The device refused a request of the peer as responder: the
			// peer's operation failed with it, and the peer may name the
			// key it used.
			ep.failHearingPeer(&AsyncError{Event: ev.Type, QPN: ep.qp.QPN()})
			continue
		}
		ep.fail(&AsyncError{Event: ev.Type, QPN: ep.qp.QPN()}, lost)
	}
}

// eventsLost handles the end of the device's asynchronous events before
// Close (the device removed, most likely): from now on nothing would tell
// the runtime of a CQ overrun, a QP's fatal error or the device's death,
// and futures would wait for completions that never come. So it fails
// every endpoint, as a fatal device error does, and no endpoint starts
// after it; each error matches verbs.ErrEventsLost.
func (rt *Runtime) eventsLost(err error) {
	rt.log.Error("verbsrt: the device's asynchronous events can no longer be read; every endpoint fails", "err", err)
	rt.mu.Lock()
	rt.eventsErr = err
	eps := make([]*Endpoint, 0, len(rt.endpoints))
	for ep := range rt.endpoints {
		eps = append(eps, ep)
	}
	rt.mu.Unlock()
	for _, ep := range eps {
		ep.fail(fmt.Errorf("verbsrt: QP %#x: %w", ep.qp.QPN(), err), true)
	}
}

// Close closes every listener and endpoint (each drains its queued work
// while ctx allows, then fails what is left), stops the pollers and the
// worker pool and closes the device. Every future still pending resolves.
func (rt *Runtime) Close(ctx context.Context) error {
	if ctx == nil {
		return future.ErrNilContext
	}
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return nil
	}
	rt.closed = true
	var eps []*Endpoint
	for ep := range rt.endpoints {
		eps = append(eps, ep)
	}
	var lns []*Listener
	for ln := range rt.listeners {
		lns = append(lns, ln)
	}
	rt.mu.Unlock()
	var errs []error
	for _, ln := range lns {
		errs = append(errs, ln.Close())
	}
	// Endpoints close together: both ends of a connection reach ERR at
	// about the same time, so neither retries against a vanished peer.
	epErrs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			epErrs[i] = ep.Close(ctx)
		}()
	}
	wg.Wait()
	rt.teardown()
	return errors.Join(append(errs, epErrs...)...)
}

// teardown releases what New acquired, in reverse.
func (rt *Runtime) teardown() {
	if rt.qpCheckStop != nil {
		close(rt.qpCheckStop)
		<-rt.qpCheckDone
	}
	for _, p := range rt.pollers {
		p.Close()
	}
	rt.poolsMu.Lock()
	pools, store := rt.pools, rt.recvStore
	rt.pools, rt.poolsClosed = nil, true
	rt.poolsMu.Unlock()
	if store != nil {
		store.close(pools)
	}
	if rt.pool != nil {
		// Waits for queued and running callbacks and ants' own purge and
		// ticker goroutines; a callback stuck past the bound is logged, not
		// waited for.
		rt.pool.close(5 * time.Second)
	}
	if rt.vctx != nil {
		rt.vctx.Close() // destroys the MRs, channels and PD; ends the event watcher
		<-rt.eventsDone
	}
	// The arena's memory stays mapped while a Buffer or Message reaches it
	// (arena.go); the device no longer does.
	rt.alloc.close()
	if rt.ownProv != nil {
		releaseDefaultSoft()
		rt.ownProv = nil
	}
}

func (rt *Runtime) register(ep *Endpoint) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return ErrClosed
	}
	if rt.eventsErr != nil {
		return fmt.Errorf("verbsrt: no endpoint can start: %w", rt.eventsErr)
	}
	rt.endpoints[ep] = struct{}{}
	ep.listIndex = len(rt.epList)
	rt.epList = append(rt.epList, ep)
	rt.byQPN[ep.qp.QPN()] = ep
	rt.byCQ[ep.cq] = ep
	return nil
}

func (rt *Runtime) unregister(ep *Endpoint) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, ok := rt.endpoints[ep]; ok {
		rt.counters.retire(ep)
		last := rt.epList[len(rt.epList)-1]
		rt.epList[ep.listIndex], last.listIndex = last, ep.listIndex
		rt.epList[len(rt.epList)-1] = nil
		rt.epList = rt.epList[:len(rt.epList)-1]
	}
	delete(rt.endpoints, ep)
	delete(rt.byQPN, ep.qp.QPN())
	delete(rt.byCQ, ep.cq)
}

// joinRecvPool gives r its initial window in a receive pool with room for
// it, opening another pool when every one is full.
func (rt *Runtime) joinRecvPool(r *recvSide) (*recvPool, error) {
	rt.poolsMu.Lock()
	defer rt.poolsMu.Unlock()
	if rt.poolsClosed {
		return nil, ErrClosed
	}
	r.maxWindow = rt.cfg.recvDepth
	r.msgs = make(chan *msgSlot, 2*r.maxWindow)
	// The newest pool first: the older ones filled before it was opened.
	for i := len(rt.pools) - 1; i >= 0; i-- {
		p := rt.pools[i]
		r.pool = p
		if err := p.join(r); err == nil {
			return p, nil
		} else if !errors.Is(err, errPoolFull) {
			r.pool = nil
			return nil, err
		}
	}
	if rt.recvStore == nil {
		rt.recvStore = rt.newRecvStore()
	}
	p, err := rt.recvStore.newPool()
	if err != nil {
		r.pool = nil
		return nil, err
	}
	r.pool = p
	if err := p.join(r); err != nil {
		r.pool = nil
		// Receives the pool posted before it failed (short of memory) are
		// the store's buffers in its SRQ: kept, unassigned, for the next
		// endpoint to join it, as in an older pool. An SRQ that took
		// none is destroyed.
		if p.postedNone() {
			p.srq.Close()
		} else {
			rt.pools = append(rt.pools, p)
		}
		return nil, err
	}
	rt.pools = append(rt.pools, p)
	return p, nil
}
