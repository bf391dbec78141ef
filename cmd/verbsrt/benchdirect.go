package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/verbsrt/verbsrt/internal/direct"
	"github.com/verbsrt/verbsrt/internal/provider"
)

// floor returns the settings of one end of cfg's -direct run.
func (cfg benchConfig) floor() direct.Config {
	return direct.Config{Test: cfg.test, Lat: cfg.lat, PingPong: cfg.pingpong, Provider: cfg.provider, Size: cfg.size,
		Iters: cfg.iters, TxDepth: cfg.txDepth, RxDepth: cfg.rxDepth, CQMod: cfg.cqMod, PostList: cfg.postList,
		PeerPattern: cfg.peerPattern, IBPort: cfg.ibPort, GIDIndex: cfg.gidIndex}
}

// printDirectHeader prints the report's header for a -direct run.
func printDirectHeader(w io.Writer, cfg benchConfig, dev, peerDev string) {
	mode := "BW"
	if cfg.lat {
		mode = "Latency"
	}
	fmt.Fprintln(w, benchRule)
	fmt.Fprintf(w, "                    %s %s Test\n", benchTests[cfg.test], mode)
	fmt.Fprintf(w, " Provider        : %-8s\tDevice         : %s -> %s\n", cfg.provider, dev, peerDev)
	fmt.Fprintf(w, " Number of qps   : 1       \tConnection type: RC\n")
	if cfg.lat {
		fmt.Fprintf(w, " Runtime         : none    \tTX depth       : %d\n", cfg.txDepth)
		fmt.Fprintln(w, " -direct: one goroutine posts one WR at a time and polls its CQ, the Go floor")
		printLatencyLegend(w, cfg)
	} else {
		fmt.Fprintf(w, " TX depth        : %-8d\tCQ moderation  : %d\n", cfg.txDepth, max(1, min(cfg.cqMod, cfg.txDepth)))
		pl := "the window's room"
		if cfg.postList > 0 {
			pl = strconv.Itoa(cfg.postList)
		}
		fmt.Fprintf(w, " Runtime         : none    \tPost list      : %s\n", pl)
		fmt.Fprintln(w, " -direct: one goroutine posts and polls its QP, the Go floor")
	}
	fmt.Fprintln(w, benchRule)
	printColumns(w, cfg)
}

// benchDirect runs a -direct test with both ends in this process, on two
// devices of the provider, over perftest's protocol on the loopback, and
// prints the client's result; each end's address lines and checks go to
// progress.
func benchDirect(ctx context.Context, w, progress io.Writer, cfg benchConfig) error {
	p, closeProv, err := openProvider(cfg.providerSpec(), 2)
	if err != nil {
		return err
	}
	defer closeProv()
	devs, err := p.Devices()
	if err != nil {
		return withProviderHint(cfg.provider, err)
	}
	cliDev, srvDev := cfg.dev, cfg.peerDev
	if cliDev == "" && len(devs) > 0 {
		cliDev = devs[0].Name()
	}
	if srvDev == "" {
		srvDev = cliDev
		if len(devs) > 1 {
			srvDev = devs[1].Name()
		}
	}
	var cliOut, srvOut bytes.Buffer
	r, cliErr, sErr := direct.RunPair(ctx, p, cfg.floor(), cliDev, srvDev, &cliOut, &srvOut)
	fmt.Fprintf(progress, "client (%s):\n%sserver (%s):\n%s", cliDev, cliOut.Bytes(), srvDev, srvOut.Bytes())
	if err := errors.Join(withProviderHint(cfg.provider, cliErr), sErrWrap(sErr)); err != nil {
		return err
	}
	r.PeerDevice = srvDev
	if !cfg.json {
		printDirectHeader(w, cfg, cliDev, srvDev)
	}
	printBenchResult(w, cfg, r)
	if !cfg.json {
		fmt.Fprintln(w, benchRule)
	}
	return nil
}

func sErrWrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("server: %w", err)
}

// benchDirectNet runs one end of a -direct test against a peer in another
// process, which may be perftest's: the client connects to addr, the
// server takes one connection from ln. It prints the address lines, the
// checks and the result (a server of write, read or atomic prints the
// client's, as perftest's server does; of a latency test, only its size
// and count: the samples stay with the client).
func benchDirectNet(ctx context.Context, w, progress io.Writer, cfg benchConfig, addr string, ln net.Listener) error {
	p, closeProv, err := openProvider(cfg.providerSpec(), 1)
	if err != nil {
		return err
	}
	defer closeProv()
	var c net.Conn
	if ln != nil {
		stop := context.AfterFunc(ctx, func() { ln.Close() }) // an interrupt ends the wait
		c, err = ln.Accept()
		stop()
		if err != nil {
			return fmt.Errorf("accept() failed: %w", err)
		}
		ln.Close() // one client, as perftest's server
	} else {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, cfg.timeoutOrDefault())
		c, err = d.DialContext(dctx, "tcp", addr)
		cancel()
		if err != nil {
			return fmt.Errorf("couldn't connect to %s: %w", addr, err)
		}
	}
	defer c.Close()
	if err := provider.CheckRocev2Reach(cfg.providerSpec().provider(), c.RemoteAddr()); err != nil {
		return err
	}
	var header func(string)
	if !cfg.json {
		header = func(dev string) { printDirectHeader(w, cfg, dev, c.RemoteAddr().String()) }
	}
	info := w // the address lines and checks: with the table, or apart from the JSON
	if cfg.json {
		info = progress
	}
	r, err := direct.RunEnd(ctx, p, cfg.floor(), cfg.dev, ln == nil, c, info, header)
	if err != nil {
		return withProviderHint(cfg.provider, err)
	}
	if cfg.lat && ln != nil && !cfg.json {
		// perftest's reports carry rates only: the samples stay with
		// the client.
		fmt.Fprintf(w, " %d operations of %d bytes; the client measured their latency\n", r.Iterations, r.Bytes)
	} else {
		printBenchResult(w, cfg, r)
	}
	if !cfg.json {
		fmt.Fprintln(w, benchRule)
	}
	return nil
}

// timeoutOrDefault is how long a client tries to connect.
func (cfg benchConfig) timeoutOrDefault() time.Duration {
	if cfg.timeout > 0 {
		return cfg.timeout
	}
	return benchTimeout
}
