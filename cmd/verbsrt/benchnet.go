package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/internal/rtbench"
	"github.com/verbsrt/verbsrt/verbs"
)

// The bench across two processes, as perftest runs it, speaks
// rtbench's control protocol.
const (
	benchPort         = rtbench.Port         // perftest's default TCP port
	benchProtoVersion = rtbench.ProtoVersion // the control protocol's version
	benchTimeout      = rtbench.DefaultTimeout
)

// benchMsg is one line of the control protocol.
type benchMsg = rtbench.Msg

// engine returns cfg as the runtime's bench runs it.
func (cfg benchConfig) engine() rtbench.Config {
	gid := -1
	if cfg.set["x"] {
		gid = cfg.gidIndex
	}
	e := rtbench.Config{Test: cfg.test, Lat: cfg.lat, PingPong: cfg.pingpong, Provider: cfg.providerSpec().provider(),
		Dev: cfg.dev, PeerDev: cfg.peerDev, Size: cfg.size, All: cfg.all, Sizes: benchSizes(cfg), Iters: cfg.iters,
		Duration: cfg.duration, QPs: cfg.qps, Callers: cfg.callers, TxDepth: cfg.txDepth, RxDepth: cfg.rxDepth,
		PostList: cfg.postList, GIDIndex: gid, Progress: cfg.progress, Spin: cfg.spin, WaitPoll: cfg.waitPoll,
		InlinePost: cfg.inlinePost, Timeout: cfg.timeout}
	if cfg.stats {
		e.Stats = os.Stderr
	}
	return e
}

// providerSpec returns the provider flags of cfg.
func (cfg benchConfig) providerSpec() providerSpec {
	return providerSpec{name: cfg.provider, addr: cfg.rocev2Addr, port: cfg.rocev2Port}
}

// wire returns cfg as the client sends it, from device dev.
func (cfg benchConfig) wire(dev string) rtbench.Wire { return cfg.engine().Wire(dev) }

// benchPrinter prints a run of cfg to w: perftest's table, or with --json
// a JSON object a result.
type benchPrinter struct {
	w   io.Writer
	cfg benchConfig
}

func (p *benchPrinter) Header(cliDev, srvDev string) {
	if !p.cfg.json {
		printBenchHeader(p.w, p.cfg, cliDev, srvDev)
	}
}

func (p *benchPrinter) Result(r benchkit.Result) { printBenchResult(p.w, p.cfg, r) }

func (p *benchPrinter) End() {
	if !p.cfg.json {
		fmt.Fprintln(p.w, benchRule)
	}
}

// openBenchPair opens both ends of a bench in this process, on a new
// provider of cfg.provider, and connects cfg.qps endpoints between them.
func openBenchPair(cfg benchConfig, maxSize int) (*rtbench.Pair, error) {
	return rtbench.OpenPair(cfg.engine(), maxSize)
}

// benchServe is the server: it takes one client from ln (and closes ln),
// adopts its parameters, accepts its runtime connections and prints the
// header and each result the client reports to w, as perftest's server
// does. prov is the provider when the client is in this process (tests),
// else nil.
func benchServe(ctx context.Context, w, progress io.Writer, cfg benchConfig, ln net.Listener, prov verbs.Provider) error {
	if progress == nil {
		progress = io.Discard
	}
	adopt := func(c *rtbench.Wire) (rtbench.Config, rtbench.Reporter, error) {
		run, err := adoptBenchConfig(cfg, c)
		return run.engine(), &benchPrinter{w, run}, err
	}
	return rtbench.Serve(ctx, progress, cfg.engine(), ln, prov, adopt)
}

// benchClient is the client: it connects to the server at addr
// (host:port), sends cfg, connects -q QPs to the server's runtime and runs
// the test, printing each result to w and reporting it to the server.
// prov is the provider when the server is in this process (tests), else
// nil.
func benchClient(ctx context.Context, w, progress io.Writer, cfg benchConfig, addr string, prov verbs.Provider) error {
	return rtbench.Client(ctx, progress, cfg.engine(), addr, prov, &benchPrinter{w, cfg})
}

// adoptBenchConfig returns the server's configuration srv with the
// client's test parameters c, or an error naming each flag given to the
// server whose value differs from the client's.
func adoptBenchConfig(srv benchConfig, c *rtbench.Wire) (benchConfig, error) {
	if c == nil {
		return srv, errors.New("protocol error: a config message without a config")
	}
	run := srv
	run.test, run.lat, run.pingpong, run.size, run.all, run.iters = c.Test, c.Lat, c.PingPong, c.Size, c.All, c.Iters
	run.duration, run.qps, run.callers, run.txDepth = time.Duration(c.DurationNS), c.QPs, c.Callers, c.TxDepth
	var diffs []string
	if c.Provider != srv.provider {
		diffs = append(diffs, fmt.Sprintf("-provider: client %s, server %s", c.Provider, srv.provider))
	}
	for _, f := range []struct {
		name           string
		client, server any
	}{
		{"test", run.test, srv.test}, {"-lat", run.lat, srv.lat}, {"-pingpong", run.pingpong, srv.pingpong}, {"-s", run.size, srv.size}, {"-a", run.all, srv.all},
		{"-n", run.iters, srv.iters}, {"-D", run.duration, srv.duration}, {"-q", run.qps, srv.qps},
		{"-callers", run.callers, srv.callers}, {"-t", run.txDepth, srv.txDepth},
	} {
		if srv.set[strings.TrimPrefix(f.name, "-")] && f.client != f.server {
			diffs = append(diffs, fmt.Sprintf("%s: client %v, server %v", f.name, f.client, f.server))
		}
	}
	if len(diffs) > 0 {
		return run, fmt.Errorf("the client's parameters differ from the server's flags: %s", strings.Join(diffs, "; "))
	}
	if err := run.check(); err != nil {
		return run, fmt.Errorf("the client's parameters: %w", err)
	}
	return run, nil
}
