// Package metrics exposes a verbsrt runtime to Prometheus.
//
// A Collector reads the counters the runtime keeps anyway (runtime.Stats)
// when it is scraped, and turns them into constant metrics: nothing is
// counted twice, and an idle scrape costs the runtime one lock round.
// Nothing is registered at import time; the caller passes the Registerer:
//
//	reg := prometheus.NewRegistry()
//	if _, err := metrics.Register(reg, rt); err != nil { ... }
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Register adds the runtime's device and port as constant labels (through
// prometheus.WrapRegistererWith), so several runtimes of one process can
// share a registry. There are no per-QP labels: the values are summed over
// the runtime's endpoints, and counters of endpoints that closed stay in
// the totals.
//
// Metrics (all prefixed verbsrt_):
//
//	wrs_posted_total{opcode}        counter    WRs posted, by opcode (RDMA_WRITE, SEND_WITH_IMM, ...)
//	post_calls_total                counter    PostSend calls: doorbells rung
//	post_batch_size                 histogram  WRs per PostSend call
//	completions_total{status}       counter    completions polled, by status (SUCCESS, WR_FLUSH_ERR, ...)
//	cq_polls_total{result}          counter    poll rounds that found completions (hit) or none (empty)
//	cq_sleeps_total                 counter    times a poller slept on its completion channel
//	stale_completions_total         counter    completions whose wr_id matched nothing outstanding
//	rnr_events_total                counter    completions with RNR_RETRY_EXC_ERR
//	async_events_total{type}        counter    asynchronous events, by type (CQ_ERR, QP_FATAL, ...)
//	op_latency_seconds{opcode}      histogram  PostSend to completion of 1 WR in 64, by opcode
//	inflight_wrs                    gauge      WRs posted and not completed
//	sq_credits_available            gauge      free send-queue slots
//	recv_credits                    gauge      receive credits held: SENDs the peers' receive queues take now
//	recv_posted                     gauge      receives posted on this side
//	futures_pending                 gauge      futures not yet resolved
//	endpoints                       gauge      connected endpoints
//	ops_cancelled_total             counter    operations whose context ended while they were queued
//	actor_runs_total                counter    actor goroutine starts: each endpoint's first, and each wake-up of an idle actor
//	inline_posts_total              counter    posts a caller made itself on finding the actor idle (inline posting)
//	waits_parked_total              counter    waits (Future.Wait, Recv) that spun without their result and parked
//	device_info{device,port,gid_index,gid_type,netdev,link_layer}
//	                                gauge      1, labelled with what the runtime chose at start (runtime.WithDevice)
//
// op_latency_seconds is sampled: the actor stamps the WR whose sequence
// number is a multiple of 64 when it posts it, the poller reads the clock
// again when it retires it. The time a caller's operation waited in the
// actor's inbox is not in it.
package metrics
