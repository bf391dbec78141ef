package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/verbsrt/verbsrt/metrics"
	vrt "github.com/verbsrt/verbsrt/runtime"
)

// smConfig holds the flags of "verbsrt serve-metrics".
type smConfig struct {
	listen   string
	provider providerSpec
	dev      string
	peerDev  string
	qps      int
	callers  int
	rate     int // operations per second in all; 0: as fast as they go
	size     int
}

func parseServeMetrics(args []string, stdout, stderr io.Writer) (smConfig, error) {
	cfg := smConfig{listen: "127.0.0.1:9464", provider: providerSpec{name: "soft"}, qps: 2, callers: 4, rate: 1000, size: 4096}
	fs := newFlagSet("serve-metrics", "usage: verbsrt serve-metrics [-listen ADDR] [flags]\n\n"+
		"Runs a steady mix of WRITE, READ, SEND and FETCH_AND_ADD between two runtimes and serves\n"+
		"their metrics on /metrics until interrupted.")
	fs.StringVar(&cfg.listen, "listen", cfg.listen, "HTTP address to serve /metrics on")
	addProviderFlags(fs, &cfg.provider, "soft")
	fs.StringVar(&cfg.dev, "d", "", "client device (default: the first)")
	fs.StringVar(&cfg.peerDev, "peer-d", "", "server device (default: the second, else the client's)")
	fs.IntVar(&cfg.qps, "q", cfg.qps, "QPs (connections)")
	fs.IntVar(&cfg.callers, "callers", cfg.callers, "goroutines issuing operations")
	fs.IntVar(&cfg.rate, "rate", cfg.rate, "operations per second in all (0: unpaced)")
	fs.IntVar(&cfg.size, "s", cfg.size, "bytes per WRITE, READ and SEND")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return cfg, err
	}
	if err := resolveProvider(fs, &cfg.provider, "soft"); err != nil {
		return cfg, usageError{err}
	}
	switch {
	case fs.NArg() > 0:
		return cfg, usageErrorf("unexpected argument %q", fs.Arg(0))
	case cfg.qps < 1 || cfg.qps > 64 || cfg.callers < 1 || cfg.callers > 4096 || cfg.rate < 0:
		return cfg, usageErrorf("-q 1 to 64, -callers 1 to 4096, -rate at least 0")
	case cfg.size < 8 || cfg.size > 1<<20:
		return cfg, usageErrorf("-s 8 bytes to 1 MiB")
	}
	return cfg, nil
}

func runServeMetrics(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseServeMetrics(args, stdout, stderr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveMetrics(ctx, cfg, ln, stderr)
}

// serveMetrics runs the workload and serves /metrics on ln until ctx ends,
// then stops both and closes the runtimes.
func serveMetrics(ctx context.Context, cfg smConfig, ln net.Listener, log io.Writer) error {
	// The runtime's default spin: paced traffic leaves the pollers idle
	// most of the time, and they should sleep then.
	pair, err := openBenchPair(benchConfig{test: "send", provider: cfg.provider.name,
		rocev2Addr: cfg.provider.addr, rocev2Port: cfg.provider.port, dev: cfg.dev,
		peerDev: cfg.peerDev, qps: cfg.qps, spin: vrt.DefaultTuning().Spin}, cfg.size)
	if err != nil {
		ln.Close()
		return err
	}
	defer pair.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cliRT, srvRT := pair.Runtimes()
	for role, rt := range map[string]*vrt.Runtime{"client": cliRT, "server": srvRT} {
		if _, err := metrics.Register(prometheus.WrapRegistererWith(prometheus.Labels{"role": role}, reg), rt); err != nil {
			ln.Close()
			return err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "verbsrt serve-metrics: see /metrics")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(log, "verbsrt serve-metrics: %s %s -> %s, %d QPs, %d callers, %d ops/s; metrics on http://%s/metrics\n",
		cfg.provider.name, cliRT.Stats().Device, srvRT.Stats().Device, cfg.qps, cfg.callers, cfg.rate, ln.Addr())

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, cfg.callers)
	for c := range cfg.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pair.Steady(wctx, c%cfg.qps, cfg.size, cfg.callers, cfg.rate); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	var err2 error
	select {
	case <-wctx.Done():
	case err2 = <-served:
		cancel()
	}
	wg.Wait()
	close(errs)
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && err2 == nil {
		err2 = err
	}
	if err, ok := <-errs; ok {
		return err
	}
	if errors.Is(err2, http.ErrServerClosed) {
		err2 = nil
	}
	fmt.Fprintln(log, "verbsrt serve-metrics: stopped")
	return err2
}
