// Metrics is an HTTP service that exposes a live verbsrt runtime to
// Prometheus: a storage-style workload runs over RC connections on the
// soft provider (4 KiB block WRITEs read back now and then, a FETCH_AND_ADD
// sequence counter, small SEND notifications) while /metrics serves the
// runtime's counters through the metrics package.
//
// The "server" side of the workload exposes two buffers, each with only
// the rights the workers use: the blocks RemoteRead|RemoteWrite, the
// sequence counter RemoteAtomic alone. The workers share one process with
// it, so the references reach them as values: each worker gets a
// RemoteRef.Slice of the blocks' exposure, its own two blocks, and the
// counter's RemoteRef. The exposures are closed when the program stops.
//
//	$ go run ./examples/metrics -listen 127.0.0.1:9464
//	metrics: serving http://127.0.0.1:9464/metrics (soft0, 2 connections, 4 workers, 2000 ops/s)
//
// Point Prometheus at it (scrape_configs: targets ['127.0.0.1:9464']) and
// import dashboard.json into Grafana: it charts WRs posted by opcode,
// doorbells and batch sizes, p50/p99 operation latency, completions by
// status, CQ poll hit ratio and sleeps, in-flight WRs and credits, RNR,
// stale completions, asynchronous events and pending futures.
//
// The registry is the program's own (prometheus.NewRegistry), never the
// global one: the runtime's collector is registered in main, with the
// device and port as labels, next to Go's and the process's collectors.
package main
