package runtime_test

import (
	"context"
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"

	vrt "github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// latencyObserver feeds the latency of every operation that completed
// to a Prometheus histogram by opcode. Its histograms are looked up once,
// at start: ObserveOp runs on the data path and must not allocate.
type latencyObserver struct {
	byOpcode map[verbs.Opcode]prometheus.Observer
}

func newLatencyObserver(reg prometheus.Registerer, ops ...verbs.Opcode) *latencyObserver {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "app_rdma_op_seconds",
		Help:    "Latency of RDMA operations, from the call to their completion.",
		Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10),
	}, []string{"op"})
	reg.MustRegister(vec)
	o := &latencyObserver{byOpcode: map[verbs.Opcode]prometheus.Observer{}}
	for _, op := range ops {
		o.byOpcode[op] = vec.WithLabelValues(op.String())
	}
	return o
}

func (o *latencyObserver) ObserveOp(e vrt.OpEvent) {
	if e.Phase != vrt.OpCompleted || e.Err != nil {
		return // failures could go to a counter by e.Status
	}
	if h := o.byOpcode[e.Opcode]; h != nil {
		h.Observe(e.Latency.Seconds())
	}
}

// An Observer sees every operation start, reach the device and complete;
// here it feeds a latency histogram that a /metrics handler would serve.
func ExampleWithObserver() {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	obs := newLatencyObserver(reg, verbs.OpWrite, verbs.OpRead)
	rt, err := vrt.New(vrt.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	cli, _ := examplePair(ctx, rt)

	local, _ := rt.Alloc(4096)
	remote, _ := rt.Alloc(4096) // on a real peer: memory it exposed
	exp, _ := remote.Expose(vrt.RemoteRead | vrt.RemoteWrite)
	defer exp.Close()
	for range 10 {
		if _, err := cli.Write(ctx, local.Local(), exp.RemoteRef()).Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := cli.Read(ctx, local.Local(), exp.RemoteRef()).Wait(ctx); err != nil {
		log.Fatal(err)
	}

	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			fmt.Printf("%s{op=%q}: %d operations\n", mf.GetName(), m.GetLabel()[0].GetValue(), m.GetHistogram().GetSampleCount())
		}
	}
	// Output:
	// app_rdma_op_seconds{op="RDMA_READ"}: 1 operations
	// app_rdma_op_seconds{op="RDMA_WRITE"}: 10 operations
}
