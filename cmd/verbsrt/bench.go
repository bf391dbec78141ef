package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/internal/rtbench"
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
		if err := rtbench.CheckNetProvider(cfg.provider, nil); err != nil {
			return err
		}
		return benchDirectNet(ctx, stdout, stderr, cfg, net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)), nil)
	case cfg.direct && !cfg.server:
		return benchDirect(ctx, stdout, stderr, cfg)
	case cfg.host != "":
		return benchClient(ctx, stdout, stderr, cfg, net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)), nil)
	case cfg.server:
		if err := rtbench.CheckNetProvider(cfg.provider, nil); err != nil {
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
	return rtbench.Run(ctx, cfg.engine(), &benchPrinter{w, cfg}, progress)
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
