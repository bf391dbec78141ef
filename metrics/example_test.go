package metrics_test

import (
	"context"
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verbsrt/verbsrt/metrics"
	vrt "github.com/verbsrt/verbsrt/runtime"
)

// The collector reads the runtime's own counters at scrape time, on a
// registry the program owns (none is registered at import).
func ExampleRegister() {
	ctx := context.Background()
	rt, err := vrt.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	reg := prometheus.NewRegistry()
	if _, err := metrics.Register(reg, rt); err != nil {
		log.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "verbsrt_endpoints" {
			fmt.Println(f.GetName(), f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output: verbsrt_endpoints 0
}
