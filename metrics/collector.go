package metrics

import (
	"cmp"
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verbsrt/verbsrt/internal/opstats"
	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// Source is what a Collector reads at scrape time; *runtime.Runtime is one.
type Source interface {
	Stats() runtime.Stats
}

// Collector is a prometheus.Collector over a runtime's counters. It is safe
// for concurrent scrapes.
type Collector struct {
	src Source

	wrsPosted, postCalls, postBatch  *prometheus.Desc
	completions, polls, sleeps       *prometheus.Desc
	stale, rnr, asyncEvents, latency *prometheus.Desc
	inflight, sqCredits, recvCredits *prometheus.Desc
	recvPosted, futures, endpoints   *prometheus.Desc
	cancelled, actorRuns             *prometheus.Desc
	inlinePosts, waitsParked         *prometheus.Desc
	deviceInfo                       *prometheus.Desc
	// wrapped: Register supplies the device and port labels, so
	// deviceInfo has the others only.
	wrapped bool
}

// New returns a collector over src. Register it yourself, or use Register.
func New(src Source) *Collector { return newCollector(src, false) }

// deviceInfoHelp is verbsrt_device_info's help text.
const deviceInfoHelp = "What the runtime chose at start: device, port, GID index and type (RoCE v2, RoCE v1, IB, or unknown where the provider cannot tell), the GID's netdev and the port's link layer; always 1."

func newCollector(src Source, wrapped bool) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("verbsrt_"+name, help, labels, nil)
	}
	info := []string{"gid_index", "gid_type", "netdev", "link_layer"}
	if !wrapped {
		info = append([]string{"device", "port"}, info...)
	}
	return &Collector{
		wrapped:     wrapped,
		deviceInfo:  d("device_info", deviceInfoHelp, info...),
		src:         src,
		wrsPosted:   d("wrs_posted_total", "Work requests posted to send queues, by opcode.", "opcode"),
		postCalls:   d("post_calls_total", "PostSend calls (doorbells rung); each posts a chain of WRs."),
		postBatch:   d("post_batch_size", "Work requests posted per PostSend call."),
		completions: d("completions_total", "Work completions polled, send and receive, by status.", "status"),
		polls:       d("cq_polls_total", "CQ poll rounds, by whether they found completions.", "result"),
		sleeps:      d("cq_sleeps_total", "Times a CQ poller slept on its completion channel."),
		stale:       d("stale_completions_total", "Completions whose wr_id matched no outstanding work request (counted, dropped)."),
		rnr:         d("rnr_events_total", "Completions with RNR_RETRY_EXC_ERR: a SEND met an empty receive queue until retries ran out."),
		asyncEvents: d("async_events_total", "Asynchronous events from the device, by type.", "type"),
		latency:     d("op_latency_seconds", "Time from the PostSend that carried a work request to its completion, sampled on 1 WR in 64, by opcode.", "opcode"),
		inflight:    d("inflight_wrs", "Work requests posted and not completed."),
		sqCredits:   d("sq_credits_available", "Free send-queue slots the actors may fill."),
		recvCredits: d("recv_credits", "Receive credits held: SENDs the peers' receive queues take now without RNR."),
		recvPosted:  d("recv_posted", "Receive work requests posted on this side."),
		futures:     d("futures_pending", "Operation futures not yet resolved: queued, waiting for receive credits or in flight."),
		endpoints:   d("endpoints", "Connected endpoints."),
		cancelled:   d("ops_cancelled_total", "Operations whose context ended while they were queued: removed before they reached the device."),
		actorRuns:   d("actor_runs_total", "Starts of the endpoints' actor goroutines: each endpoint's first, and each time work woke an idle actor (a goroutine on a locked OS thread)."),
		inlinePosts: d("inline_posts_total", "Posts a caller made itself on finding its endpoint's actor idle (inline posting), instead of starting the actor."),
		waitsParked: d("waits_parked_total", "Waits (Future.Wait, Recv) that spun without their result and parked: each costs a wake-up by another thread."),
	}
}

// Register registers a collector over rt on reg, with the constant labels
// device and port, and returns it. Its verbsrt_device_info takes those
// two from them; a collector of New has them as labels of its own.
func Register(reg prometheus.Registerer, rt *runtime.Runtime) (*Collector, error) {
	c := newCollector(rt, true)
	st := rt.Stats()
	labels := prometheus.Labels{"device": st.Device, "port": strconv.Itoa(int(st.Port))}
	if err := prometheus.WrapRegistererWith(labels, reg).Register(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Describe sends the descriptors of every metric the collector makes.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.wrsPosted, c.postCalls, c.postBatch, c.completions, c.polls,
		c.sleeps, c.stale, c.rnr, c.asyncEvents, c.latency, c.inflight, c.sqCredits, c.recvCredits,
		c.recvPosted, c.futures, c.endpoints, c.cancelled, c.actorRuns, c.inlinePosts, c.waitsParked,
		c.deviceInfo} {
		ch <- d
	}
}

// numWCStatus and numEvents are the statuses and event types libibverbs
// defines; each gets a series, zero or not, so that rates start at the
// first scrape.
const (
	numWCStatus = int(verbs.WCTMRndvIncomplete) + 1
	numEvents   = int(verbs.EventGIDChange) + 1
)

// Collect reads one snapshot of the runtime's counters and sends them.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	var wrs uint64
	for _, op := range verbs.Opcodes {
		counter(c.wrsPosted, s.WRsPosted[op], op.String())
		wrs += s.WRsPosted[op]
	}
	counter(c.postCalls, s.PostCalls)
	counter(c.cancelled, s.Cancelled)
	counter(c.actorRuns, s.ActorRuns)
	counter(c.inlinePosts, s.InlineRuns)
	counter(c.waitsParked, s.WaitsParked)
	ch <- constHistogram(c.postBatch, s.PostBatches[:], batchBounds, float64(wrs))
	for st := range numWCStatus {
		counter(c.completions, s.Completions[st], verbs.WCStatus(st).Name())
	}
	counter(c.polls, s.PollsEmpty, "empty")
	counter(c.polls, s.PollsHit, "hit")
	counter(c.sleeps, s.Sleeps)
	counter(c.stale, s.StaleCompletions)
	counter(c.rnr, s.Completions[verbs.WCRNRRetryExcErr])
	for ev := range numEvents {
		counter(c.asyncEvents, s.AsyncEvents[ev], eventNames[ev])
	}
	for _, op := range verbs.Opcodes {
		h := &s.OpLatency[op]
		if h.Sum == 0 && sum(h.Buckets[:]) == 0 {
			continue // histograms cost a series per bucket: only opcodes in use
		}
		ch <- constHistogram(c.latency, h.Buckets[:], latencyBounds, h.Sum.Seconds(), op.String())
	}
	gauge(c.inflight, s.InflightWRs)
	gauge(c.sqCredits, s.SQCredits)
	gauge(c.recvCredits, s.RecvCredits)
	gauge(c.recvPosted, s.RecvPosted)
	gauge(c.futures, s.FuturesPending)
	gauge(c.endpoints, s.Endpoints)
	info := []string{strconv.Itoa(s.GIDIndex), cmp.Or(s.GIDType, "unknown"), s.Netdev, s.LinkLayer.String()}
	if !c.wrapped {
		info = append([]string{s.Device, strconv.Itoa(int(s.Port))}, info...)
	}
	ch <- prometheus.MustNewConstMetric(c.deviceInfo, prometheus.GaugeValue, 1, info...)
}

// constHistogram turns non-cumulative counts (the last one above every
// bound) into a constant histogram.
func constHistogram(d *prometheus.Desc, counts []uint64, bounds []float64, total float64, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		cum += counts[i]
		buckets[b] = cum
	}
	return prometheus.MustNewConstHistogram(d, sum(counts), total, buckets, labels...)
}

func sum(v []uint64) uint64 {
	var n uint64
	for _, x := range v {
		n += x
	}
	return n
}

// batchBounds are the upper bounds of the batch-size buckets: 1, 2, 4, ...
// 1024 WRs; latencyBounds those of the latency buckets: 1 µs, 2 µs, ...
// about 1 s.
var batchBounds, latencyBounds = bounds(opstats.BatchBuckets-1, 1), bounds(opstats.LatencyBuckets-1, 1e-6)

func bounds(n int, first float64) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = first * math.Exp2(float64(i))
	}
	return b
}

// eventNames are enum ibv_event_type's names without the IBV_EVENT_ prefix.
var eventNames = [numEvents]string{"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST",
	"SQ_DRAINED", "PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR",
	"LID_CHANGE", "PKEY_CHANGE", "SM_CHANGE", "SRQ_ERR", "SRQ_LIMIT_REACHED",
	"QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE"}
