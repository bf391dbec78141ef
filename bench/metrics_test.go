package bench

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/verbsrt/verbsrt/metrics"
)

// scrapeEvery is how often the scraped variant of BenchmarkMetricsCost
// scrapes: ten times more often than a usual Prometheus job.
const scrapeEvery = 100 * time.Millisecond

// BenchmarkMetricsCost runs BenchmarkWrite's runtime variant twice per
// caller count, side by side: plain, and with the metrics collector
// registered and scraped (the whole HTTP handler: gather and encode) every
// 100 ms by a goroutine of its own. The runtime keeps its counters in both;
// the difference is what exporting them costs.
func BenchmarkMetricsCost(b *testing.B) {
	for _, n := range callerCounts {
		for _, scraped := range []bool{false, true} {
			name := "plain"
			if scraped {
				name = "scraped"
			}
			b.Run(fmt.Sprintf("callers=%d/%s", n, name), func(b *testing.B) {
				v := newViaRuntime(b, n, runtimeOpts()...)
				stop := func() int { return 0 }
				if scraped {
					stop = scrapeLoop(b, v)
				}
				b.ReportAllocs()
				before := v.stats()
				err := drive(b, n, b.N, v.write)
				scrapes := stop()
				if err != nil {
					b.Fatal(err)
				}
				report(b, v.stats().sub(before))
				if scraped {
					b.ReportMetric(float64(scrapes), "scrapes")
				}
			})
		}
	}
}

// scrapeLoop registers v's runtime on a registry of its own and serves a
// scrape every scrapeEvery until stop is called, which returns how many.
func scrapeLoop(tb testing.TB, v *viaRuntime) (stop func() int) {
	reg := prometheus.NewRegistry()
	if _, err := metrics.Register(reg, v.rt); err != nil {
		tb.Fatal(err)
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	quit, done := make(chan struct{}), make(chan struct{})
	scrapes := 0
	go func() {
		defer close(done)
		t := time.NewTicker(scrapeEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
				if w.Code != 200 || w.Body.Len() == 0 {
					tb.Errorf("scrape: %d, %d bytes", w.Code, w.Body.Len())
				}
				scrapes++
			}
		}
	}()
	return func() int { close(quit); <-done; return scrapes }
}

// TestMetricsScrape: a scrape of the runtime benchmarks' fixture finds
// the writes it made.
func TestMetricsScrape(t *testing.T) {
	v := newViaRuntime(t, 4, runtimeOpts()...)
	if err := drive(t, 4, 300, v.write); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if _, err := metrics.Register(reg, v.rt); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "verbsrt_wrs_posted_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "opcode" && l.GetValue() == "RDMA_WRITE" && m.GetCounter().GetValue() >= 300 {
					return
				}
			}
		}
	}
	t.Error("no 300 RDMA WRITEs in the scrape")
}

// BenchmarkScrape is the cost of one scrape of a runtime with one
// connection (gather and encode the text format): over scrapeEvery, it is
// the share of one core that scraping takes.
func BenchmarkScrape(b *testing.B) {
	v := newViaRuntime(b, 1, runtimeOpts()...)
	if err := drive(b, 1, 1000, v.write); err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if _, err := metrics.Register(reg, v.rt); err != nil {
		b.Fatal(err)
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	b.ReportAllocs()
	b.ResetTimer()
	b.StartTimer() // drive stopped it
	for range b.N {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(scrapeEvery)*100, "%core@100ms")
}
