package runtime

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// WithLKey returns l with its local key XORed with x: memory the runtime's
// API cannot name, for tests of what the device does with a bad lkey.
func WithLKey(l Local, x uint32) Local {
	b := &Buffer{a: l.b.a, mem: l.b.mem, addr: l.b.addr, lkey: l.b.lkey ^ x}
	return Local{b: b, off: l.off, n: l.n}
}

// SGE returns l as the device sees it.
func SGE(l Local) verbs.SGE { return l.sge() }

// ArenaRef returns a reference to b under the key of the arena chunk it
// lives in: what a peer would use if the arena's own registration granted
// remote access.
func ArenaRef(b *Buffer) RemoteRef {
	return RemoteRef{Addr: b.addr, RKey: b.ch.mr.RKey(), Len: uint64(len(b.mem))}
}

// InitialWindow is the credits a peer starts with.
const InitialWindow = initialWindow

// RecvBuffer returns the first receive buffers of ep's pool.
func RecvBuffer(ep *Endpoint) *Buffer {
	st := ep.recv.pool.store
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.slabs[0].data
}

// Uses returns the uses of b's memory taken and not given back.
func Uses(b *Buffer) int { return b.hold.Uses() }

// SetNextActorID makes the runtime's next endpoint's actor take ID id+1,
// so tests reach the IDs a long-lived runtime reaches after many
// connections.
func SetNextActorID(rt *Runtime, id uint32) { rt.nextID.Store(id) }

// PeerSilenceBound is how long a peer whose host stopped answering may
// stay unnoticed (TCP keepalive of the handshake's connection).
const PeerSilenceBound = peerSilenceBound

// KillForTest makes ep's end of its connection vanish as the death of its
// process would: no goodbye; its QP stops answering (in ERR, the soft
// provider's responder ignores the peer's requests, as for a destroyed QP:
// they end in RETRY_EXC_ERR); and its kernel closes the handshake's TCP
// connection, with a reset when reset is set (a socket closed with unread
// data), else with a FIN, without the "bye" of an endpoint that ends it.
// ep itself is left for its runtime's Close.
func KillForTest(ep *Endpoint, reset bool) error {
	MuteForTest(ep)
	ep.toError()
	return DropLinkForTest(ep, reset)
}

// MuteForTest is the first moment of ep's process's death: ep no longer
// reacts to anything (its watcher, its failures), while its QP and memory
// regions are left to the test to tear down.
func MuteForTest(ep *Endpoint) { ep.closing.Store(true) }

// DropLinkForTest is the dying process's kernel closing ep's handshake
// TCP connection: a reset when reset is set, else a FIN, and no "bye".
func DropLinkForTest(ep *Endpoint, reset bool) error {
	link, ok := ep.watch.link.(*tcpLink)
	if !ok {
		return fmt.Errorf("endpoint %#x has no TCP link", ep.QPN())
	}
	if reset {
		if err := link.c.(*net.TCPConn).SetLinger(0); err != nil {
			return err
		}
	}
	return link.c.Close()
}

// SetVerdictWaitForTest sets how long ep, once an operation failed with a
// status a dead peer can cause, waits for its link to say whether the
// peer is alive (verdictWait).
func SetVerdictWaitForTest(ep *Endpoint, d time.Duration) {
	ep.watch.vmu.Lock()
	ep.watch.wait = d
	ep.watch.vmu.Unlock()
}

// LinkConnForTest returns the handshake's TCP connection that ep keeps
// open, or nil.
func LinkConnForTest(ep *Endpoint) net.Conn {
	if link, ok := ep.watch.link.(*tcpLink); ok {
		return link.c
	}
	return nil
}

// DeviceContext returns the runtime's device context, for fault injection.
func DeviceContext(rt *Runtime) verbs.Context { return rt.vctx }

// Window returns the window ep grants its peer and the messages its
// application holds.
func Window(ep *Endpoint) (window, held int) {
	st := ep.recv.pool.store
	st.mu.Lock()
	defer st.mu.Unlock()
	return ep.recv.credits.Window(), ep.recv.held
}

// CheckRecvPools returns an error when a receive pool has more credits out
// than receives posted: a SEND could then meet an empty SRQ.
func CheckRecvPools(rt *Runtime) error {
	rt.poolsMu.Lock()
	defer rt.poolsMu.Unlock()
	for i, p := range rt.pools {
		p.store.mu.Lock()
		posted, assigned := p.posted, p.assigned
		p.store.mu.Unlock()
		if assigned > posted {
			return fmt.Errorf("receive pool %d: %d credits out, %d receives posted", i, assigned, posted)
		}
	}
	return nil
}

// PoolEndpoints is the most endpoints one receive pool serves.
const PoolEndpoints = poolEndpoints

// PoolMembers returns how many endpoints each of rt's receive pools
// serves, oldest pool first, and ep's pool's index among them.
func PoolMembers(rt *Runtime, ep *Endpoint) (members []int, of int) {
	rt.poolsMu.Lock()
	defer rt.poolsMu.Unlock()
	of = -1
	for i, p := range rt.pools {
		p.store.mu.Lock()
		members = append(members, p.members)
		p.store.mu.Unlock()
		if ep != nil && ep.recv.pool == p {
			of = i
		}
	}
	return members, of
}

// StuckSendsForTest says, for a test's failure message, where ep's actor
// stands while it still counts WRs outstanding, and whether a poll of its
// CQ made now (as its poller would) retires them: if it does, a completion
// sat in the CQ with nobody woken to handle it; if not, it never came, or
// a send-queue credit was lost.
func StuckSendsForTest(ep *Endpoint) string {
	a := ep.actor
	before := fmt.Sprintf("%d outstanding, %d send-queue credits, %d peer credits, %d futures pending, %d actor runs",
		a.Outstanding(), a.Credits(), a.PeerCredits(), a.Pending(), a.Stats().Ops.Runs.Load())
	ps := ep.poller.Stats()
	poller := fmt.Sprintf("poller: %d events, %d armings, %d sleeps", ps.Events.Load(), ps.Armed.Load(), ps.Sleeps.Load())
	ep.poller.Drain(ep.target)
	return fmt.Sprintf("%s; %s; after a poll of the CQ: %d outstanding", before, poller, a.Outstanding())
}

// RecvStateForTest says, for a test's failure message, where ep's receive
// window and its pool stand (the credits the window counts, owes, holds
// and has not reported) and what its actor may still send.
func RecvStateForTest(ep *Endpoint) string {
	r := &ep.recv
	st := r.pool.store
	st.mu.Lock()
	defer st.mu.Unlock()
	return fmt.Sprintf("window %d (want %d), %d assigned, %d owed, %d held, %d unreported, waiting %v, due %v; pool: %d posted, %d assigned, %d idle buffers, %d endpoints waiting; its actor: %d peer credits, %d pending",
		r.credits.Window(), r.credits.Wanted(), r.credits.Backed(), r.credits.Owed(), r.held, r.credits.Unreported(), r.waiting, r.credits.Due(),
		r.pool.posted, r.pool.assigned, len(st.idle), len(st.waiting), ep.actor.PeerCredits(), ep.actor.Pending())
}

// Actor returns the endpoint's actor.
func (ep *Endpoint) Actor() *qpactor.Actor { return ep.actor }

// QP returns the endpoint's QP.
func (ep *Endpoint) QP() verbs.QP { return ep.qp }

// CQ returns the endpoint's CQ.
func (ep *Endpoint) CQ() verbs.CQ { return ep.cq }

// ArenaSize returns the registered memory the runtime has mapped.
func (rt *Runtime) ArenaSize() int { return rt.alloc.mapped() }

// Provider returns the runtime's provider.
func (rt *Runtime) Provider() verbs.Provider { return rt.prov }

// WithRNRRetry sets the QPs' rnr_retry (7, the default, retries forever):
// tests set 0 to show that the credit protocol never lets a SEND meet an
// empty receive queue.
func WithRNRRetry(n uint8) Option { return func(c *config) { c.tuning.RNRRetry = int(n) } }

// WithParkedActors makes an idle endpoint's actor park its goroutine,
// locked to its OS thread, instead of ending it.
func WithParkedActors() Option { return func(c *config) { c.parkActors = true } }

// QPN returns the endpoint's QP number.
func (ep *Endpoint) QPN() uint32 { return ep.qp.QPN() }

// FailedHandshakes returns how many connections l dropped because their
// handshake failed.
func (l *Listener) FailedHandshakes() uint64 { return l.failed.Load() }

// HoldCompletions keeps ep's completions unhandled, its CQ's handler lock
// held on its poller's goroutine, until the returned func is called.
func HoldCompletions(ep *Endpoint) (release func()) {
	return holdWith(func(fn func()) { ep.poller.DoTarget(ep.target, fn) })
}

// HoldPoller keeps ep's poller goroutine busy, with nothing held that
// another goroutine needs to handle ep's completions, until the returned
// func is called.
func HoldPoller(ep *Endpoint) (release func()) { return holdWith(ep.poller.Do) }

// holdWith has do run a function that blocks until release is called,
// and returns once it runs.
func holdWith(do func(fn func())) (release func()) {
	held, done := make(chan struct{}), make(chan struct{})
	go do(func() {
		close(held)
		<-done
	})
	<-held
	return sync.OnceFunc(func() { close(done) })
}

// CheckQPsNow runs the background check of the QPs' states over every
// endpoint of rt at once, as its ticks do over a period.
func CheckQPsNow(rt *Runtime) {
	rt.mu.Lock()
	n := len(rt.epList)
	rt.mu.Unlock()
	var failed []*Endpoint
	for range n {
		failed = rt.checkSomeQPs(failed)
	}
	for _, ep := range failed {
		ep.failUnexplained(errUnexplainedERR)
	}
}

// HandleEvent handles ev as the runtime's event goroutine does when the
// device raises it.
func HandleEvent(rt *Runtime, ev verbs.AsyncEvent) { rt.handleEvent(ev) }

// SetGoodbyeWaitForTest sets how long Close waits for the goodbye's
// acknowledgement, until the returned func restores it.
func SetGoodbyeWaitForTest(d time.Duration) (restore func()) {
	old := goodbyeWait
	goodbyeWait = d
	return func() { goodbyeWait = old }
}

// HelloLineForTest returns the line of a valid hello from rt, as an
// endpoint of QP number qpn would send it.
func HelloLineForTest(rt *Runtime, qpn uint32) []byte {
	h := rt.hello()
	h.QPN, h.GID = qpn, netip.AddrFrom16(rt.gid).String()
	return marshalLine(h)
}

// SetLeaseTimer makes rt's exposures arm the ends of their leases with
// after instead of time.AfterFunc: tests end leases when they say.
func SetLeaseTimer(rt *Runtime, after func(d time.Duration, f func()) (stop func() bool)) {
	rt.alloc.leaseTimer = after
}
