package runtime

import (
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/internal/opstats"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// Stats is a snapshot of the counters the runtime keeps anyway, summed
// over its endpoints and pollers: what the metrics package reads at scrape
// time. Counters (the uint64 fields) never go back: an endpoint that
// closes leaves its totals behind. Gauges (the int fields) are of the
// endpoints connected now.
type Stats struct {
	Provider string // the verbs provider's name ("soft", "ibv")
	Device   string // the device the runtime opened
	Port     uint8  // the device's port its endpoints use
	// GID is the GID its endpoints use, the one the handshake tells the
	// peer; zero for one the provider made up (the soft provider's
	// default tables), which names nothing on a network (GIDIndex says
	// which it uses).
	GID verbs.GID
	// The rest of what the runtime chose at start (WithDevice), as its
	// start-up log line says it.
	GIDIndex   int             // the GID's index in the port's table
	GIDType    string          // "RoCE v2", "RoCE v1", "IB"; empty when the provider cannot tell
	Netdev     string          // the network device of the GID; empty when none or unknown
	LinkLayer  verbs.LinkLayer // the port's link layer
	MTU        int             // the path MTU in bytes the runtime's QPs ask for: the port's active MTU, at most 4096
	ArenaBytes int             // registered memory the runtime has mapped for Alloc, receive buffers and scratch

	Endpoints        int    // connected endpoints
	FailedHandshakes uint64 // clients the listeners dropped because their handshake failed (garbage, silence, an out-of-range hello)
	RecvAllHeld      uint64 // Recvs that failed with ErrMessagesHeld: the application held every receive buffer of the endpoint

	// Posting, counted by the actors once per drain.
	PostCalls   uint64               // PostSend calls (doorbells)
	WRsPosted   [opcodeSlots]uint64  // by verbs.Opcode
	PostBatches [batchBuckets]uint64 // PostSend calls by WRs posted: bucket i counts at most 1<<i, the last one more
	// OpLatency is, by verbs.Opcode, a histogram of sampled operation
	// latencies (1 WR in 64): Buckets[i] counts the samples of at most
	// 1<<i µs (not cumulative), the last bucket the slower ones.
	OpLatency [opcodeSlots]struct {
		Buckets [latencyBuckets]uint64
		Sum     time.Duration
	}
	Cancelled   uint64 // operations whose context ended before they were posted, also before they were queued
	ActorRuns   uint64 // actor goroutine starts: each endpoint's first, and each wake-up of an idle actor
	InlineRuns  uint64 // drains a caller ran itself on finding the actor idle (Tuning.NoInlinePost unset)
	WaitsParked uint64 // waits (Future.Wait, Recv) that spun without their result and parked
	CreditOnly  uint64 // the actors' SENDs of receive credits alone (reports, window requests, credits given back); in WRsPosted too

	// Completions, counted by the pollers.
	Completions      [32]uint64 // by verbs.WCStatus, sends and receives
	PollsEmpty       uint64     // pollers' poll rounds that found no completion
	PollsHit         uint64     // poll rounds (pollers' and driving actors') that found some
	Sleeps           uint64     // times a poller slept on its completion channel
	StaleCompletions uint64     // completions whose wr_id matched nothing outstanding

	AsyncEvents [32]uint64 // by verbs.EventType

	InflightWRs    int // WRs posted and not completed
	SQCredits      int // send-queue slots free
	RecvCredits    int // receive credits held: SENDs the peers' receive queues take now
	RecvPosted     int // receives posted in the shared receive queues
	RecvBuffers    int // receive buffers of the shared pools: posted, idle or held by a Message
	RecvPools      int // shared receive queues
	FuturesPending int // futures not yet resolved: queued, waiting for credits, or in flight
}

// The sizes of Stats' arrays: the actor's counters are copied into them.
const (
	opcodeSlots    = opstats.OpcodeSlots
	batchBuckets   = opstats.BatchBuckets
	latencyBuckets = opstats.LatencyBuckets
)

// counters are the runtime's own: events, and the totals of endpoints that
// closed, so that counters never go back.
type counters struct {
	events           [32]atomic.Uint64
	handshakesFailed atomic.Uint64 // by every listener, closed ones too
	recvAllHeld      atomic.Uint64 // Recvs refused with ErrMessagesHeld
	retired          Stats         // counters only; guarded by Runtime.mu
}

// retire folds the final counters of ep, which is closed, into the
// runtime's. The caller holds rt.mu.
func (c *counters) retire(ep *Endpoint) { c.retired.addCounters(ep.actor) }

func (s *Stats) addCounters(a *qpactor.Actor) {
	st := a.Stats()
	s.PostCalls += st.PostCalls.Load()
	s.Cancelled += st.Ops.Cancelled.Load()
	s.ActorRuns += st.Ops.Runs.Load()
	s.InlineRuns += st.Ops.InlineRuns.Load()
	s.WaitsParked += st.Ops.WaitsParked.Load()
	s.CreditOnly += st.Ops.CreditOnly.Load()
	for i := range s.WRsPosted {
		s.WRsPosted[i] += st.Ops.ByOpcode[i].Load()
	}
	for i := range s.PostBatches {
		s.PostBatches[i] += st.Ops.Batches[i].Load()
	}
	for op := range s.OpLatency {
		h, src := &s.OpLatency[op], &st.Ops.Latency[op]
		for i := range h.Buckets {
			h.Buckets[i] += src.Buckets[i].Load()
		}
		h.Sum += time.Duration(src.SumNanos.Load())
	}
}

// Stats returns a snapshot of the runtime's counters. It takes the
// runtime's lock and every receive pool's lock briefly, and allocates
// nothing: call it at scrape time, not per operation.
func (rt *Runtime) Stats() Stats {
	rt.mu.Lock()
	s := rt.counters.retired
	for ep := range rt.endpoints {
		s.Endpoints++
		s.addEndpoint(ep)
	}
	rt.mu.Unlock()
	rt.setDevice(&s)
	s.ArenaBytes = rt.alloc.mapped()
	rt.poolsMu.Lock()
	if rt.recvStore != nil {
		s.RecvPosted, s.RecvBuffers = rt.recvStore.stats(rt.pools)
	}
	s.RecvPools = len(rt.pools)
	rt.poolsMu.Unlock()
	for _, p := range rt.pollers {
		ps := p.Stats()
		s.PollsEmpty += ps.PollsEmpty.Load()
		s.PollsHit += ps.PollsHit.Load()
		s.Sleeps += ps.Sleeps.Load()
		s.StaleCompletions += ps.Stale.Load()
		for i := range s.Completions {
			s.Completions[i] += ps.Completions[i].Load()
		}
	}
	s.FailedHandshakes = rt.counters.handshakesFailed.Load()
	s.RecvAllHeld = rt.counters.recvAllHeld.Load()
	for i := range s.AsyncEvents {
		s.AsyncEvents[i] = rt.counters.events[i].Load()
	}
	return s
}

// addEndpoint adds the counters and gauges of ep's actor.
func (s *Stats) addEndpoint(ep *Endpoint) {
	s.addCounters(ep.actor)
	s.InflightWRs += ep.actor.Outstanding()
	s.SQCredits += ep.actor.Credits()
	s.FuturesPending += ep.actor.Pending()
	s.RecvCredits += int(max(ep.actor.PeerCredits(), 0))
}

// Stats returns the endpoint's own posting counters and gauges: the
// fields of Stats its actor keeps (PostCalls, WRsPosted, PostBatches,
// OpLatency, Cancelled, ActorRuns, InlineRuns, WaitsParked, CreditOnly,
// InflightWRs, SQCredits, RecvCredits, FuturesPending), with Endpoints 1.
// Completions and receive buffers are counted per runtime only.
func (ep *Endpoint) Stats() Stats {
	s := Stats{Endpoints: 1}
	ep.rt.setDevice(&s)
	s.addEndpoint(ep)
	return s
}

// device returns the name of the device the runtime opened.
func (rt *Runtime) device() string { return rt.vctx.Device().Name() }

// setDevice fills in what the runtime chose: provider, device, port, GID.
func (rt *Runtime) setDevice(s *Stats) {
	sel := rt.sel
	s.Provider, s.Device, s.Port, s.GID = rt.prov.Name(), rt.device(), sel.port, gidViewOf(rt.prov).stat(rt.gid)
	s.GIDIndex, s.GIDType, s.Netdev = sel.entry.Index, sel.gidType(), sel.entry.Netdev
	s.LinkLayer, s.MTU = sel.attr.LinkLayer, rt.mtu.Bytes()
}
