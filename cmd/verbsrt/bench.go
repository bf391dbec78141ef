package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"

	"github.com/verbsrt/verbsrt/internal/benchkit"
)

// runBench is "verbsrt bench": perftest's tests over the runtime, both
// ends in this process, or the server or the client of a run across two.
func runBench(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseBench(args, stdout, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	profiles, err := benchkit.StartProfiles(cfg.cpuProfile, cfg.trace)
	if err != nil {
		return err
	}
	defer profiles.Stop()
	switch {
	case cfg.direct && cfg.host != "":
		if err := checkNetProvider(cfg, nil); err != nil {
			return err
		}
		return benchDirectNet(ctx, stdout, stderr, cfg, net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)), nil)
	case cfg.direct && !cfg.server:
		return benchDirect(ctx, stdout, stderr, cfg)
	case cfg.host != "":
		return benchClient(ctx, stdout, stderr, cfg, net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)), nil)
	case cfg.server:
		if err := checkNetProvider(cfg, nil); err != nil {
			return err
		}
		ln, err := listenControl(cfg.port)
		if err != nil {
			return err
		}
		defer ln.Close()
		if cfg.direct {
			fmt.Fprintf(stderr, "verbsrt bench: waiting for a client on %s\n", ln.Addr())
			return benchDirectNet(ctx, stdout, stderr, cfg, "", ln)
		}
		return benchServe(ctx, stdout, stderr, cfg, ln, nil)
	}
	return bench(ctx, stdout, stderr, cfg)
}

// benchSizes returns the sizes cfg runs: -s, or every size with -a.
func benchSizes(cfg benchConfig) []int {
	if !cfg.all || cfg.test == "atomic" {
		return []int{cfg.size}
	}
	var sizes []int
	for s := 2; s <= benchMaxSize && (cfg.test != "send" || s <= benchMaxSendSize); s *= 2 {
		sizes = append(sizes, s)
	}
	return sizes
}

// bench runs cfg's test at each size with both ends in this process and
// writes the report to w, progress to progress.
func bench(ctx context.Context, w, progress io.Writer, cfg benchConfig) error {
	pair, err := openBenchPair(cfg, slices.Max(benchSizes(cfg)))
	if err != nil {
		return err
	}
	defer pair.close()
	return pair.runSizes(ctx, w, progress, cfg, nil)
}

// runSizes runs cfg's test at each size from p's client side, prints the
// report and hands each result to report, if not nil.
func (p *benchPair) runSizes(ctx context.Context, w, progress io.Writer, cfg benchConfig, report func(benchResult) error) error {
	if !cfg.json {
		printBenchHeader(w, cfg, p)
	}
	for _, size := range benchSizes(cfg) {
		if ctx.Err() != nil {
			break
		}
		r, err := p.run(ctx, cfg, size, progress)
		if err != nil {
			return err
		}
		printBenchResult(w, cfg, r)
		if report != nil {
			if err := report(r); err != nil {
				return err
			}
		}
	}
	if !cfg.json {
		fmt.Fprintln(w, benchRule)
	}
	return nil
}

// listenControl listens for a client's control connection as perftest's
// server does: on every address, at the given port.
func listenControl(port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("couldn't listen on port %d: %w", port, err)
	}
	return ln, nil
}
