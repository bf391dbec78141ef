package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/verbsrt/verbsrt/metrics"
	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// fixed is a Source with a snapshot made up for the test.
type fixed runtime.Stats

func (f *fixed) Stats() runtime.Stats { return runtime.Stats(*f) }

func snapshot() *fixed {
	var s runtime.Stats
	s.Endpoints = 2
	s.PostCalls = 3
	s.WRsPosted[verbs.OpWrite] = 65
	s.WRsPosted[verbs.OpSendImm] = 2
	s.PostBatches[0] = 2                      // two PostSends of 1 WR
	s.PostBatches[6] = 1                      // one of 65 WRs would be bucket 7; 64 is bucket 6
	s.OpLatency[verbs.OpWrite].Buckets[2] = 1 // 3-4 µs
	s.OpLatency[verbs.OpWrite].Buckets[4] = 1 // 9-16 µs
	s.OpLatency[verbs.OpWrite].Sum = 15 * time.Microsecond
	s.Completions[verbs.WCSuccess] = 10
	s.Completions[verbs.WCRNRRetryExcErr] = 1
	s.PollsEmpty, s.PollsHit, s.Sleeps, s.StaleCompletions = 100, 9, 4, 1
	s.AsyncEvents[verbs.EventQPFatal] = 1
	s.ActorRuns = 7
	s.InlineRuns = 11
	s.WaitsParked = 13
	s.InflightWRs, s.SQCredits, s.RecvCredits, s.RecvPosted, s.FuturesPending = 5, 1017, 126, 128, 3
	f := fixed(s)
	return &f
}

func TestCollectorValues(t *testing.T) {
	c := metrics.New(snapshot())
	const want = `
# HELP verbsrt_wrs_posted_total Work requests posted to send queues, by opcode.
# TYPE verbsrt_wrs_posted_total counter
verbsrt_wrs_posted_total{opcode="ATOMIC_CMP_AND_SWP"} 0
verbsrt_wrs_posted_total{opcode="ATOMIC_FETCH_AND_ADD"} 0
verbsrt_wrs_posted_total{opcode="BIND_MW"} 0
verbsrt_wrs_posted_total{opcode="LOCAL_INV"} 0
verbsrt_wrs_posted_total{opcode="RDMA_READ"} 0
verbsrt_wrs_posted_total{opcode="RDMA_WRITE"} 65
verbsrt_wrs_posted_total{opcode="RDMA_WRITE_WITH_IMM"} 0
verbsrt_wrs_posted_total{opcode="SEND"} 0
verbsrt_wrs_posted_total{opcode="SEND_WITH_IMM"} 2
verbsrt_wrs_posted_total{opcode="SEND_WITH_INV"} 0
verbsrt_wrs_posted_total{opcode="TSO"} 0
# HELP verbsrt_post_calls_total PostSend calls (doorbells rung); each posts a chain of WRs.
# TYPE verbsrt_post_calls_total counter
verbsrt_post_calls_total 3
# HELP verbsrt_post_batch_size Work requests posted per PostSend call.
# TYPE verbsrt_post_batch_size histogram
verbsrt_post_batch_size_bucket{le="1"} 2
verbsrt_post_batch_size_bucket{le="2"} 2
verbsrt_post_batch_size_bucket{le="4"} 2
verbsrt_post_batch_size_bucket{le="8"} 2
verbsrt_post_batch_size_bucket{le="16"} 2
verbsrt_post_batch_size_bucket{le="32"} 2
verbsrt_post_batch_size_bucket{le="64"} 3
verbsrt_post_batch_size_bucket{le="128"} 3
verbsrt_post_batch_size_bucket{le="256"} 3
verbsrt_post_batch_size_bucket{le="512"} 3
verbsrt_post_batch_size_bucket{le="1024"} 3
verbsrt_post_batch_size_bucket{le="+Inf"} 3
verbsrt_post_batch_size_sum 67
verbsrt_post_batch_size_count 3
# HELP verbsrt_cq_polls_total CQ poll rounds, by whether they found completions.
# TYPE verbsrt_cq_polls_total counter
verbsrt_cq_polls_total{result="empty"} 100
verbsrt_cq_polls_total{result="hit"} 9
# HELP verbsrt_cq_sleeps_total Times a CQ poller slept on its completion channel.
# TYPE verbsrt_cq_sleeps_total counter
verbsrt_cq_sleeps_total 4
# HELP verbsrt_stale_completions_total Completions whose wr_id matched no outstanding work request (counted, dropped).
# TYPE verbsrt_stale_completions_total counter
verbsrt_stale_completions_total 1
# HELP verbsrt_rnr_events_total Completions with RNR_RETRY_EXC_ERR: a SEND met an empty receive queue until retries ran out.
# TYPE verbsrt_rnr_events_total counter
verbsrt_rnr_events_total 1
# HELP verbsrt_op_latency_seconds Time from the PostSend that carried a work request to its completion, sampled on 1 WR in 64, by opcode.
# TYPE verbsrt_op_latency_seconds histogram
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="1e-06"} 0
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="2e-06"} 0
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="4e-06"} 1
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="8e-06"} 1
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="1.6e-05"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="3.2e-05"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="6.4e-05"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.000128"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.000256"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.000512"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.001024"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.002048"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.004096"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.008192"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.016384"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.032768"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.065536"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.131072"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.262144"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="0.524288"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="1.048576"} 2
verbsrt_op_latency_seconds_bucket{opcode="RDMA_WRITE",le="+Inf"} 2
verbsrt_op_latency_seconds_sum{opcode="RDMA_WRITE"} 1.5e-05
verbsrt_op_latency_seconds_count{opcode="RDMA_WRITE"} 2
# HELP verbsrt_actor_runs_total Starts of the endpoints' actor goroutines: each endpoint's first, and each time work woke an idle actor (a goroutine on a locked OS thread).
# TYPE verbsrt_actor_runs_total counter
verbsrt_actor_runs_total 7
# HELP verbsrt_inline_posts_total Posts a caller made itself on finding its endpoint's actor idle (inline posting), instead of starting the actor.
# TYPE verbsrt_inline_posts_total counter
verbsrt_inline_posts_total 11
# HELP verbsrt_waits_parked_total Waits (Future.Wait, Recv) that spun without their result and parked: each costs a wake-up by another thread.
# TYPE verbsrt_waits_parked_total counter
verbsrt_waits_parked_total 13
# HELP verbsrt_inflight_wrs Work requests posted and not completed.
# TYPE verbsrt_inflight_wrs gauge
verbsrt_inflight_wrs 5
# HELP verbsrt_sq_credits_available Free send-queue slots the actors may fill.
# TYPE verbsrt_sq_credits_available gauge
verbsrt_sq_credits_available 1017
# HELP verbsrt_recv_credits Receive credits held: SENDs the peers' receive queues take now without RNR.
# TYPE verbsrt_recv_credits gauge
verbsrt_recv_credits 126
# HELP verbsrt_recv_posted Receive work requests posted on this side.
# TYPE verbsrt_recv_posted gauge
verbsrt_recv_posted 128
# HELP verbsrt_futures_pending Operation futures not yet resolved: queued, waiting for receive credits or in flight.
# TYPE verbsrt_futures_pending gauge
verbsrt_futures_pending 3
# HELP verbsrt_endpoints Connected endpoints.
# TYPE verbsrt_endpoints gauge
verbsrt_endpoints 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"verbsrt_wrs_posted_total", "verbsrt_post_calls_total", "verbsrt_post_batch_size",
		"verbsrt_cq_polls_total", "verbsrt_cq_sleeps_total", "verbsrt_stale_completions_total",
		"verbsrt_rnr_events_total", "verbsrt_op_latency_seconds", "verbsrt_inflight_wrs",
		"verbsrt_sq_credits_available", "verbsrt_recv_credits", "verbsrt_recv_posted",
		"verbsrt_futures_pending", "verbsrt_endpoints", "verbsrt_actor_runs_total",
		"verbsrt_inline_posts_total", "verbsrt_waits_parked_total"); err != nil {
		t.Error(err)
	}
	// Every status and event type has a series, zero or not.
	if n := testutil.CollectAndCount(c, "verbsrt_completions_total"); n != 24 {
		t.Errorf("%d completion series, want 24 (every ibv_wc_status)", n)
	}
	if n := testutil.CollectAndCount(c, "verbsrt_async_events_total"); n != 19 {
		t.Errorf("%d async event series, want 19 (every ibv_event_type)", n)
	}
	const sel = `
# HELP verbsrt_async_events_total Asynchronous events from the device, by type.
# TYPE verbsrt_async_events_total counter
verbsrt_async_events_total{type="CQ_ERR"} 0
verbsrt_async_events_total{type="QP_FATAL"} 1
`
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "verbsrt_async_events_total" {
			continue
		}
		got := map[string]float64{}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
		if got["QP_FATAL"] != 1 || got["CQ_ERR"] != 0 || got["GID_CHANGE"] != 0 {
			t.Errorf("async events: %v, want%s", got, sel)
		}
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestRegisterRuntime registers a live runtime's collector on a pedantic
// registry, which checks every metric against its descriptor, and finds
// the writes it made under the runtime's device and port labels.
func TestRegisterRuntime(t *testing.T) {
	rt, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	reg := prometheus.NewPedanticRegistry()
	if _, err := metrics.Register(reg, rt); err != nil {
		t.Fatal(err)
	}
	// A second runtime on the same registry needs other labels: the same
	// ones collide.
	if _, err := metrics.Register(reg, rt); err == nil {
		t.Error("registering the same runtime twice succeeded")
	}
	writes(t, rt, 10)
	const want = `
# HELP verbsrt_wrs_posted_total Work requests posted to send queues, by opcode.
# TYPE verbsrt_wrs_posted_total counter
verbsrt_wrs_posted_total{device="soft0",opcode="ATOMIC_CMP_AND_SWP",port="1"} 0
verbsrt_wrs_posted_total{device="soft0",opcode="ATOMIC_FETCH_AND_ADD",port="1"} 0
verbsrt_wrs_posted_total{device="soft0",opcode="BIND_MW",port="1"} 0
verbsrt_wrs_posted_total{device="soft0",opcode="LOCAL_INV",port="1"} 0
verbsrt_wrs_posted_total{device="soft0",opcode="RDMA_READ",port="1"} 0
verbsrt_wrs_posted_total{device="soft0",opcode="RDMA_WRITE",port="1"} 10
verbsrt_wrs_posted_total{device="soft0",opcode="RDMA_WRITE_WITH_IMM",port="1"} 0
verbsrt_wrs_posted_total{device="soft0",opcode="SEND",port="1"} 0
verbsrt_wrs_posted_total{device="soft0",opcode="SEND_WITH_IMM",port="1"} 0
verbsrt_wrs_posted_total{device="soft0",opcode="SEND_WITH_INV",port="1"} 0
verbsrt_wrs_posted_total{device="soft0",opcode="TSO",port="1"} 0
# HELP verbsrt_post_calls_total PostSend calls (doorbells rung); each posts a chain of WRs.
# TYPE verbsrt_post_calls_total counter
verbsrt_post_calls_total{device="soft0",port="1"} 10
# HELP verbsrt_endpoints Connected endpoints.
# TYPE verbsrt_endpoints gauge
verbsrt_endpoints{device="soft0",port="1"} 2
# HELP verbsrt_inflight_wrs Work requests posted and not completed.
# TYPE verbsrt_inflight_wrs gauge
verbsrt_inflight_wrs{device="soft0",port="1"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "verbsrt_wrs_posted_total",
		"verbsrt_post_calls_total", "verbsrt_endpoints", "verbsrt_inflight_wrs"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n < 60 {
		t.Errorf("gathered %d series: %v", n, err)
	}
}

// writes connects two endpoints of rt and runs n 64-byte WRITEs, one at a
// time.
func writes(t *testing.T, rt *runtime.Runtime, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Both ends are connected before the writes: an Accept still in its
	// handshake would give its endpoint up, and that endpoint's goodbye
	// SEND would count among the writes'.
	ep, _, err := runtime.Pipe(ctx, rt, rt)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := rt.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := buf.Expose(runtime.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	for i := range n {
		if _, err := ep.Write(ctx, buf.Slice(0, 64), exp.RemoteRef().Slice(64*(i%32+1), 64)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeviceInfo checks verbsrt_device_info: 1, labelled with the device,
// port and GID the runtime chose, from a collector of New (labels of its
// own) and one of Register (device and port from the wrapper).
func TestDeviceInfo(t *testing.T) {
	s := snapshot()
	s.Device, s.Port, s.GIDIndex, s.GIDType, s.Netdev, s.LinkLayer = "mlx5_0", 2, 3, "RoCE v2", "eth1", verbs.LinkLayerEthernet
	const want = `
# HELP verbsrt_device_info What the runtime chose at start: device, port, GID index and type (RoCE v2, RoCE v1, IB, or unknown where the provider cannot tell), the GID's netdev and the port's link layer; always 1.
# TYPE verbsrt_device_info gauge
verbsrt_device_info{device="mlx5_0",gid_index="3",gid_type="RoCE v2",link_layer="Ethernet",netdev="eth1",port="2"} 1
`
	if err := testutil.CollectAndCompare(metrics.New(s), strings.NewReader(want), "verbsrt_device_info"); err != nil {
		t.Error(err)
	}
	s.GIDType = ""
	if err := testutil.CollectAndCompare(metrics.New(s), strings.NewReader(strings.Replace(want, `gid_type="RoCE v2"`, `gid_type="unknown"`, 1)),
		"verbsrt_device_info"); err != nil {
		t.Error(err)
	}

	rt, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	reg := prometheus.NewPedanticRegistry()
	if _, err := metrics.Register(reg, rt); err != nil {
		t.Fatal(err)
	}
	const live = `
# HELP verbsrt_device_info What the runtime chose at start: device, port, GID index and type (RoCE v2, RoCE v1, IB, or unknown where the provider cannot tell), the GID's netdev and the port's link layer; always 1.
# TYPE verbsrt_device_info gauge
verbsrt_device_info{device="soft0",gid_index="1",gid_type="RoCE v2",link_layer="Ethernet",netdev="",port="1"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(live), "verbsrt_device_info"); err != nil {
		t.Error(err)
	}
}
