package main

import (
	"context"
	"errors"
	"flag"
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
	"github.com/verbsrt/verbsrt/runtime"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parse(os.Args[1:], os.Stderr)
	if err == nil {
		var ln net.Listener
		if ln, err = net.Listen("tcp", cfg.listen); err == nil {
			err = serve(ctx, ln, cfg, os.Stderr)
		}
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "metrics:", err)
		os.Exit(1)
	}
}

type config struct {
	listen  string
	conns   int
	workers int
	rate    int // operations per second in all
}

func parse(args []string, out io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("metrics", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:9464", "HTTP address of /metrics")
	fs.IntVar(&cfg.conns, "conns", 2, "RC connections")
	fs.IntVar(&cfg.workers, "workers", 4, "goroutines running the workload")
	fs.IntVar(&cfg.rate, "rate", 2000, "operations per second in all")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 || cfg.conns < 1 || cfg.workers < 1 || cfg.rate < 1 {
		return cfg, errors.New("-conns, -workers and -rate must be positive, and there are no arguments")
	}
	return cfg, nil
}

const blockSize = 4096

// serve runs the workload and serves /metrics on ln until ctx ends.
func serve(ctx context.Context, ln net.Listener, cfg config, log io.Writer) error {
	defer ln.Close()
	rt, err := runtime.New()
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rt.Close(cctx)
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, err := metrics.Register(reg, rt); err != nil {
		return err
	}

	conns, err := connect(ctx, rt, cfg.conns)
	if err != nil {
		return err
	}
	// The "disk": blocks on the server side the workers write and read.
	disk, err := rt.Alloc(cfg.workers * 2 * blockSize)
	if err != nil {
		return err
	}
	counter, err := rt.Alloc(8)
	if err != nil {
		return err
	}
	// Each exposure grants what the workers do and no more: the blocks
	// are read and written, the counter only takes atomics.
	diskExp, err := disk.Expose(runtime.RemoteRead | runtime.RemoteWrite)
	if err != nil {
		return err
	}
	defer diskExp.Close()
	counterExp, err := counter.Expose(runtime.RemoteAtomic)
	if err != nil {
		return err
	}
	defer counterExp.Close()

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(log, "metrics: serving http://%s/metrics (%s, %d connections, %d workers, %d ops/s)\n",
		ln.Addr(), rt.Stats().Device, cfg.conns, cfg.workers, cfg.rate)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, cfg.workers)
	for w := range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := conns[w%len(conns)]
			blocks := diskExp.RemoteRef().Slice(w*2*blockSize, 2*blockSize)
			if err := worker(wctx, rt, c, blocks, counterExp.RemoteRef(), time.Second*time.Duration(cfg.workers)/time.Duration(cfg.rate)); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	select {
	case <-wctx.Done():
	case err = <-served:
		cancel()
	}
	wg.Wait()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	srv.Shutdown(sctx)
	close(errs)
	if werr, ok := <-errs; ok {
		return werr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// conn is one RC connection: the client endpoint the workers use and the
// server endpoint, whose messages a goroutine consumes.
type conn struct{ cli, srv *runtime.Endpoint }

func connect(ctx context.Context, rt *runtime.Runtime, n int) ([]conn, error) {
	var conns []conn
	for range n {
		cli, srv, err := runtime.Pipe(ctx, rt, rt)
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		go func() {
			for {
				m, err := srv.Recv(context.Background())
				if err != nil {
					return // closed with the runtime
				}
				m.Release()
			}
		}()
		conns = append(conns, conn{cli, srv})
	}
	return conns, nil
}

// worker writes a block, every fourth time reads it back, takes a
// sequence number with FETCH_AND_ADD and sends a small notification, one
// step every interval.
func worker(ctx context.Context, rt *runtime.Runtime, c conn, blocks, seq runtime.RemoteRef, interval time.Duration) error {
	buf, err := rt.Alloc(2 * blockSize)
	if err != nil {
		return err
	}
	defer buf.Free()
	tick := time.NewTicker(max(interval, time.Microsecond))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		var f runtime.Future
		switch {
		case i%8 == 3:
			f = c.cli.Read(ctx, buf.Slice(blockSize, blockSize), blocks.At(i%2*blockSize))
		case i%8 == 5:
			f = c.cli.FetchAdd(ctx, seq, 1)
		case i%8 == 7:
			f = c.cli.Send(ctx, buf.Slice(0, 64))
		default:
			f = c.cli.Write(ctx, buf.Slice(0, blockSize), blocks.At(i%2*blockSize))
		}
		if _, err := f.Wait(context.Background()); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				// Stopping: an operation still queued when ctx ended
				// was cancelled with it, which is no failure.
				return nil
			}
			return err
		}
	}
}
