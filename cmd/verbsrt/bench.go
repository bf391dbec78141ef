package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/internal/sched"
	vrt "github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// benchConfig holds the flags of "verbsrt bench", named as perftest's.
type benchConfig struct {
	test     string // write, read, send or atomic
	lat      bool   // latency test (ib_*_lat) instead of bandwidth (ib_*_bw)
	pingpong bool   // with lat: half a SEND/Recv round trip, as ib_send_lat
	provider string
	dev      string // client device ("": the provider's first)
	peerDev  string // server device ("": the second device, else dev)
	size     int
	all      bool // -a: every size from 2 bytes to 8 MiB
	iters    int
	duration time.Duration
	qps      int
	callers  int
	txDepth  int // operations each caller keeps in flight (bandwidth)
	rxDepth  int // each endpoint's largest receive window (WithRecvDepth); 0: by message size
	json     bool
	progress time.Duration // 0: no progress lines
	spin     time.Duration // actors' and pollers' spin (0: 200 µs, as bench/)
	// The runtime's options that post and complete on the caller's
	// goroutine (WithInlinePost, WithWaitPoll), for issue 13's
	// side-by-side measurements.
	inlinePost bool
	waitPoll   time.Duration
	stats      bool // print each runtime's counters on stderr at the end
	// Where this process's run goes: not perftest's, the runtime's own.
	cpuProfile, trace string

	// Two processes (benchnet.go): a client has host, a server has
	// server set; the one-process bench has neither.
	host    string
	server  bool
	port    int             // control port, perftest's 18515 by default
	timeout time.Duration   // bound on connecting and on each step of the set-up (0: 30 s)
	set     map[string]bool // the flags given on the command line, by short name ("test": a test name)
}

// benchResult is one line of the report; --json prints it as is.
type benchResult struct {
	Test       string  `json:"test"`
	Mode       string  `json:"mode"` // "bw", "lat" or "pingpong"
	Provider   string  `json:"provider"`
	Device     string  `json:"device"`
	PeerDevice string  `json:"peer_device"`
	QPs        int     `json:"qps"`
	Callers    int     `json:"callers"`
	TxDepth    int     `json:"tx_depth"`
	Bytes      int     `json:"bytes"`
	Iterations uint64  `json:"iterations"`
	Seconds    float64 `json:"seconds"`

	// Bandwidth: MB is 2^20 bytes, as perftest's MB/sec.
	BWPeakMBps  float64 `json:"bw_peak_mb_s,omitempty"`
	BWAvgMBps   float64 `json:"bw_avg_mb_s,omitempty"`
	MsgRateMpps float64 `json:"msg_rate_mpps,omitempty"`

	// Latency, µs: submit to completion of one operation at a time.
	TMin     float64 `json:"t_min_us,omitempty"`
	TMax     float64 `json:"t_max_us,omitempty"`
	TTypical float64 `json:"t_typical_us,omitempty"`
	TAvg     float64 `json:"t_avg_us,omitempty"`
	TStdev   float64 `json:"t_stdev_us,omitempty"`
	T99      float64 `json:"t_99_us,omitempty"`
	T999     float64 `json:"t_99_9_us,omitempty"`
}

var benchTests = map[string]string{"write": "RDMA_Write", "read": "RDMA_Read", "send": "Send", "atomic": "Atomic FETCH_AND_ADD"}

// benchFlagNames gives the short name of the flags that have a long one,
// for benchConfig.set.
var benchFlagNames = map[string]string{"size": "s", "iters": "n", "qp": "q", "tx-depth": "t", "ib-dev": "d", "port": "p"}

const benchUsage = `usage: verbsrt bench [write|read|send|atomic] [flags]          both ends in this process
       verbsrt bench [write|read|send|atomic] [flags] -server  server: wait for a client on -p
       verbsrt bench [write|read|send|atomic] [flags] HOST     client: run against the server at HOST
perftest's ib_{write,read,send,atomic}_{bw,lat} over the verbsrt runtime.

Without HOST and without -server, the client and the server are two runtimes
in this process (on the soft provider by default). With -server, or -p without
HOST, it is perftest's server: it waits on TCP port -p (default 18515) for one
client, takes the test and its parameters from the client (a flag given to
the server must match the client's, else the run is refused), prints the
header and the client's results, and exits. With HOST (or HOST:PORT) it is
the client: it connects to the server, runs the test and reports it. Both
ends default to -provider ibv and their first device; the soft provider
connects only runtimes in the same process, so it cannot serve a client in
another one.

Control protocol (version 1): one JSON object per line on the TCP
connection, each with "version" and "type". The client sends "config" (the
test, -lat, -s, -a, -n, -D, -q, -c, -t, its provider and device); the server
answers "reject" with an "error", or "accept" with "listen" (the runtime
listener it opened for the QPs, on an ephemeral port; the client dials that
port on the host it reached), "device" and "remote" (addr, rkey, len of the server's
registered buffer, for write, read and atomic). The client dials -q runtime
connections there; the server answers "ready" once it has accepted them
all (for send it then keeps receiving). The client sends one "result" per
size and then "done" (with "error" if the run failed); the server prints
each and answers "done". Connecting and each set-up step time out after 30 s.

Flags:
`

func parseBench(args []string, stderr io.Writer) (benchConfig, error) {
	cfg := benchConfig{test: "write", iters: 5000, qps: 1, callers: 1, txDepth: 128,
		progress: time.Second, port: benchPort, set: map[string]bool{}}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	fs.BoolVar(&cfg.lat, "lat", false, "latency test (t_min, t_typical, t_99...) instead of bandwidth")
	fs.BoolVar(&cfg.pingpong, "pingpong", false, "with send -lat: a ping-pong as ib_send_lat's (the client Sends and Recvs the server's reply), reporting half of each round trip; without, the time from submitting one operation to its completion")
	fs.StringVar(&cfg.provider, "provider", "", "verbs provider: soft or ibv (default: soft in one process, ibv with -server or HOST)")
	fs.StringVar(&cfg.dev, "d", "", "client device, or this end's device with -server or HOST (default: the first)")
	fs.StringVar(&cfg.dev, "ib-dev", "", "same as -d")
	fs.StringVar(&cfg.peerDev, "peer-d", "", "server device in one process (default: the second, else the client's)")
	fs.IntVar(&cfg.size, "s", 0, "message size in bytes (default: 65536 bandwidth, 2 latency; 8 for atomic)")
	fs.IntVar(&cfg.size, "size", 0, "same as -s")
	fs.BoolVar(&cfg.all, "a", false, "run sizes from 2 bytes to 8 MiB (1 MiB for send), doubling")
	fs.IntVar(&cfg.iters, "n", cfg.iters, "iterations")
	fs.IntVar(&cfg.iters, "iters", cfg.iters, "same as -n")
	fs.DurationVar(&cfg.duration, "D", 0, "run for this long instead of -n iterations (e.g. 5s; a bare number is seconds)")
	fs.IntVar(&cfg.qps, "q", cfg.qps, "QPs (connections)")
	fs.IntVar(&cfg.qps, "qp", cfg.qps, "same as -q")
	fs.IntVar(&cfg.callers, "c", cfg.callers, "goroutines issuing operations, spread over the QPs")
	fs.IntVar(&cfg.txDepth, "t", cfg.txDepth, "operations each caller keeps in flight (bandwidth)")
	fs.IntVar(&cfg.txDepth, "tx-depth", cfg.txDepth, "same as -t")
	fs.IntVar(&cfg.rxDepth, "r", 0, "each endpoint's largest window of receive credits, the runtime's WithRecvDepth (default: 64, fewer for messages over 256 KiB)")
	fs.IntVar(&cfg.rxDepth, "rx-depth", 0, "same as -r")
	fs.BoolVar(&cfg.json, "json", false, "print results as JSON lines")
	fs.DurationVar(&cfg.progress, "progress", cfg.progress, "progress line interval on stderr (0: none)")
	fs.DurationVar(&cfg.spin, "spin", 0, "how long actors and pollers spin before they sleep (the runtime's WithSpin; default 200µs)")
	fs.BoolVar(&cfg.inlinePost, "inline-post", true, "post an operation that finds its actor idle on the caller's goroutine (the runtime's WithInlinePost)")
	fs.DurationVar(&cfg.waitPoll, "wait-poll", vrt.DefaultWaitPoll, "a waiter polls its CQ for at least this long before it parks, longer when its endpoint's waits are (the runtime's WithWaitPoll; 0: off)")
	fs.BoolVar(&cfg.stats, "stats", false, "print each runtime's counters on stderr at the end (actor runs, inline posts, parked waits, poller sleeps)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write this process's CPU profile to the file")
	fs.StringVar(&cfg.trace, "trace", "", "write this process's execution trace to the file (go tool trace)")
	fs.BoolVar(&cfg.server, "server", false, "be the server: wait for one client on -p (no HOST)")
	fs.IntVar(&cfg.port, "p", cfg.port, "TCP port of the control connection (server and client); -p without HOST means -server")
	fs.IntVar(&cfg.port, "port", cfg.port, "same as -p")
	// perftest takes -D in seconds: accept a bare number too.
	for i, a := range args {
		if (a == "-D" || a == "--D") && i+1 < len(args) && !strings.ContainsAny(args[i+1], "hmsuµn") {
			args = slices.Clone(args)
			args[i+1] += "s"
		}
	}
	var host string
	for {
		if err := fs.Parse(args); err != nil {
			return cfg, err
		}
		if fs.NArg() == 0 {
			break
		}
		args = fs.Args()[1:]
		if _, ok := benchTests[fs.Arg(0)]; ok {
			cfg.test, cfg.set["test"] = fs.Arg(0), true
			continue
		}
		if host != "" {
			return cfg, fmt.Errorf("more than one server address: %q and %q (tests are write, read, send and atomic)", host, fs.Arg(0))
		}
		host = fs.Arg(0)
	}
	fs.Visit(func(f *flag.Flag) { cfg.set[cmp.Or(benchFlagNames[f.Name], f.Name)] = true })
	if err := cfg.setAddress(host); err != nil {
		return cfg, err
	}
	if cfg.size == 0 {
		switch {
		case cfg.test == "atomic":
			cfg.size = 8
		case cfg.lat:
			cfg.size = 2
		default:
			cfg.size = 65536
		}
	}
	if cfg.lat {
		cfg.txDepth = 1
	}
	return cfg, cfg.check()
}

// setAddress sets the mode from the address argument (host, [host] or
// host:port) and the flags: a client with an address, a server with
// -server or -p alone, else both ends in this process.
func (cfg *benchConfig) setAddress(host string) error {
	if h, port, err := net.SplitHostPort(host); err == nil {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("%q: a TCP port is 1 to 65535", host)
		}
		if cfg.set["p"] && p != cfg.port {
			return fmt.Errorf("%q and -p %d: two ports", host, cfg.port)
		}
		host, cfg.port = h, p
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch {
	case cfg.port < 1 || cfg.port > 65535:
		return fmt.Errorf("-p %d: a TCP port is 1 to 65535", cfg.port)
	case host != "" && cfg.server:
		return fmt.Errorf("-server takes no address (got %q): the server listens on every address", host)
	case host == "" && cfg.set["p"]:
		cfg.server = true
	}
	cfg.host = host
	if cfg.host == "" && !cfg.server {
		cfg.provider = cmp.Or(cfg.provider, "soft")
		return nil
	}
	if cfg.peerDev != "" {
		return errors.New("--peer-d is for both ends in one process: give each end its device with -d")
	}
	cfg.provider = cmp.Or(cfg.provider, "ibv")
	return nil
}

// check says what is wrong with cfg's test parameters, if anything: on the
// command line, and at a server that adopts a client's.
func (cfg *benchConfig) check() error {
	switch {
	case benchTests[cfg.test] == "":
		return fmt.Errorf("unknown test %q (write, read, send or atomic)", cfg.test)
	case cfg.test == "atomic" && cfg.size != 8:
		return errors.New("-s: atomics move 8 bytes")
	case cfg.size < 1 || cfg.size > 8<<20 || (cfg.test == "send" && cfg.size > 1<<20):
		return fmt.Errorf("-s %d: 1 byte to 8 MiB (1 MiB for send)", cfg.size)
	case cfg.iters < 1 || cfg.qps < 1 || cfg.qps > 64 || cfg.callers < 1 || cfg.callers > 4096:
		return errors.New("-n at least 1, -q 1 to 64, -c 1 to 4096")
	case cfg.txDepth < 1 || cfg.txDepth > 4096 || (cfg.lat && cfg.txDepth != 1):
		return errors.New("-t 1 to 4096 (1 with -lat)")
	case cfg.rxDepth < 0 || cfg.rxDepth > 4096:
		return fmt.Errorf("-r %d: 1 to 4096 receive credits (0: the default)", cfg.rxDepth)
	case cfg.pingpong && (!cfg.lat || cfg.test != "send"):
		return errors.New("-pingpong: with send -lat only")
	case cfg.duration < 0:
		return errors.New("-D: not a negative time")
	case cfg.provider != "soft" && cfg.provider != "ibv":
		return fmt.Errorf("unknown provider %q (soft or ibv)", cfg.provider)
	}
	return nil
}

func runBench(args []string) error {
	cfg, err := parseBench(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
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
	case cfg.host != "":
		return benchClient(ctx, os.Stdout, os.Stderr, cfg, net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)), nil)
	case cfg.server:
		if err := checkNetProvider(cfg, nil); err != nil {
			return err
		}
		// As perftest's server: every address, the given port, one client.
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(cfg.port))
		if err != nil {
			return fmt.Errorf("couldn't listen on port %d: %w", cfg.port, err)
		}
		defer ln.Close()
		return benchServe(ctx, os.Stdout, os.Stderr, cfg, ln, nil)
	}
	return bench(ctx, os.Stdout, os.Stderr, cfg)
}

// benchSizes returns the sizes cfg runs: -s, or every size with -a.
func benchSizes(cfg benchConfig) []int {
	if !cfg.all || cfg.test == "atomic" {
		return []int{cfg.size}
	}
	var sizes []int
	for s := 2; s <= 8<<20 && (cfg.test != "send" || s <= 1<<20); s *= 2 {
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

const benchRule = "---------------------------------------------------------------------------------------"

func printBenchHeader(w io.Writer, cfg benchConfig, p *benchPair) {
	mode := "BW"
	if cfg.lat {
		mode = "Latency"
	}
	fmt.Fprintln(w, benchRule)
	fmt.Fprintf(w, "                    %s %s Test\n", benchTests[cfg.test], mode)
	fmt.Fprintf(w, " Provider        : %-8s\tDevice         : %s -> %s\n", cfg.provider, p.cliDev, p.srvDev)
	fmt.Fprintf(w, " Number of qps   : %-8d\tCallers        : %d\n", cfg.qps, cfg.callers)
	fmt.Fprintf(w, " Connection type : RC      \tTX depth       : %d per caller\n", cfg.txDepth)
	fmt.Fprintf(w, " Runtime         : verbsrt \tSQ depth       : %d\n", benchSQDepth)
	switch {
	case cfg.pingpong:
		fmt.Fprintln(w, " t is half of a ping-pong: a Send and the peer's reply Recv'd, as ib_send_lat's")
	case cfg.lat:
		fmt.Fprintln(w, " t is one operation from submit to completion: a full round trip")
		fmt.Fprintln(w, " (ib_write_lat and ib_send_lat report half of a ping-pong: -pingpong)")
	}
	fmt.Fprintln(w, benchRule)
	if cfg.lat {
		fmt.Fprintln(w, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
	} else {
		fmt.Fprintln(w, " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]")
	}
}

// printBenchResult prints r as a line of the table, or with --json as a
// JSON object.
func printBenchResult(w io.Writer, cfg benchConfig, r benchResult) {
	if cfg.json {
		json.NewEncoder(w).Encode(r)
		return
	}
	printBenchLine(w, cfg, r)
}

// printBenchLine prints r in perftest's format strings.
func printBenchLine(w io.Writer, cfg benchConfig, r benchResult) {
	if cfg.lat {
		fmt.Fprintf(w, " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
			r.Bytes, r.Iterations, r.TMin, r.TMax, r.TTypical, r.TAvg, r.TStdev, r.T99, r.T999)
		return
	}
	fmt.Fprintf(w, " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n",
		r.Bytes, r.Iterations, r.BWPeakMBps, r.BWAvgMBps, r.MsgRateMpps)
}

// benchSQDepth is max_send_wr of the bench's QPs.
const benchSQDepth = 512

// benchPair is the two ends of a bench, client and server, and qps
// connections between them, with the memory the operations use. In one
// process both ends are here; a client (benchnet.go) has only its own end
// and the server's remote and device name, a server only its own end.
type benchPair struct {
	prov           verbs.Provider
	closeProv      func()
	cliRT, srvRT   *vrt.Runtime
	cli, srv       []*vrt.Endpoint
	src, dst       *vrt.Buffer   // client's local memory, server's target
	remote         vrt.RemoteRef // dst, as the client's operations name it
	cliDev, srvDev string
	recvDone       sync.WaitGroup
	recvCancel     context.CancelFunc
	statsTo        io.Writer // -stats: where close prints the runtimes' counters
}

// newBenchPair returns a pair with no runtime yet on prov, or on a new
// provider of cfg.provider (with devices devices if soft) when prov is nil.
func newBenchPair(cfg benchConfig, prov verbs.Provider, devices int) (*benchPair, []verbs.Device, error) {
	p := &benchPair{prov: prov, closeProv: func() {}}
	if cfg.stats {
		p.statsTo = os.Stderr
	}
	switch {
	case prov != nil:
	case cfg.provider == "soft":
		sp := soft.New(soft.Config{Devices: devices})
		p.prov, p.closeProv = sp, func() { sp.Close() }
	default:
		p.prov = ibv.New()
	}
	devs, err := p.prov.Devices()
	if err == nil && len(devs) == 0 {
		err = fmt.Errorf("no devices on provider %s: %w", cfg.provider, verbs.ErrNotFound)
	}
	if err != nil {
		p.close()
		return nil, nil, err
	}
	return p, devs, nil
}

// openRuntime opens a runtime on dev for cfg's test at sizes up to maxSize.
func (p *benchPair) openRuntime(cfg benchConfig, dev string, maxSize int) (*vrt.Runtime, error) {
	msg := 4096 // receive buffers: as large as a message only for send
	if cfg.test == "send" {
		msg = max(msg, maxSize)
	}
	recvDepth := max(4, min(64, (16<<20)/msg))
	if cfg.rxDepth > 0 {
		recvDepth = cfg.rxDepth
	}
	arena := 2*maxSize + 2*cfg.qps*(2*recvDepth*msg+qpScratch) + 8<<20
	opts := []vrt.Option{vrt.WithProvider(p.prov), vrt.WithDevice(dev), vrt.WithPollers(1),
		vrt.WithSendQueueDepth(benchSQDepth), vrt.WithSpin(cmp.Or(cfg.spin, 200*time.Microsecond)),
		vrt.WithMessageSize(msg), vrt.WithRecvDepth(recvDepth), vrt.WithMemoryLimit(arena),
		vrt.WithWaitPoll(cfg.waitPoll), vrt.WithInlinePost(cfg.inlinePost)}
	return vrt.New(opts...)
}

// openEnd opens a runtime on dev and the buffer the operations use there.
// It returns the runtime even with an error, for close.
func (p *benchPair) openEnd(cfg benchConfig, dev string, maxSize int) (*vrt.Runtime, *vrt.Buffer, error) {
	rt, err := p.openRuntime(cfg, dev, maxSize)
	if err != nil {
		return nil, nil, err
	}
	buf, err := rt.Alloc(max(maxSize, 64))
	return rt, buf, err
}

// exposeTarget grants the client what the benchmarks do to the server's
// buffer: READ, WRITE and atomics (revoked when the buffer is freed).
func exposeTarget(dst *vrt.Buffer) (vrt.RemoteRef, error) {
	exp, err := dst.Expose(vrt.RemoteRead | vrt.RemoteWrite | vrt.RemoteAtomic)
	if err != nil {
		return vrt.RemoteRef{}, err
	}
	return exp.RemoteRef(), nil
}

func openBenchPair(cfg benchConfig, maxSize int) (p *benchPair, err error) {
	p, devs, err := newBenchPair(cfg, nil, 2)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	cliDev, srvDev := cfg.dev, cfg.peerDev
	if cliDev == "" {
		cliDev = devs[0].Name()
	}
	if srvDev == "" {
		srvDev = cliDev
		for _, d := range devs {
			if d.Name() != cliDev {
				srvDev = d.Name()
				break
			}
		}
	}
	if p.cliRT, p.src, err = p.openEnd(cfg, cliDev, maxSize); err != nil {
		return nil, err
	}
	if p.srvRT, p.dst, err = p.openEnd(cfg, srvDev, maxSize); err != nil {
		return nil, err
	}
	if p.remote, err = exposeTarget(p.dst); err != nil {
		return nil, err
	}
	p.cliDev, p.srvDev = p.cliRT.Device(), p.srvRT.Device()
	ln, err := p.srvRT.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() { accepted <- p.accept(ctx, ln, cfg.qps) }()
	if err = p.dial(ctx, ln.Addr().String(), cfg.qps); err != nil {
		cancel() // the accepts wait no longer
	}
	if aerr := <-accepted; err == nil {
		err = aerr
	}
	if err != nil {
		return nil, err
	}
	p.serveRecv(cfg.pingpong)
	return p, nil
}

// accept accepts n connections on ln as the server's endpoints.
func (p *benchPair) accept(ctx context.Context, ln *vrt.Listener, n int) error {
	for range n {
		ep, err := ln.Accept(ctx)
		if err != nil {
			return fmt.Errorf("accepting the client's connections: %w", err)
		}
		p.srv = append(p.srv, ep)
	}
	return nil
}

// dial makes n connections to the server's runtime listener at addr as the
// client's endpoints.
func (p *benchPair) dial(ctx context.Context, addr string, n int) error {
	for range n {
		ep, err := p.cliRT.Dial(ctx, addr)
		if err != nil {
			return fmt.Errorf("connecting to the server's runtime at %s: %w", addr, err)
		}
		p.cli = append(p.cli, ep)
	}
	return nil
}

// serveRecv is the server side of a send test: take every message and
// give its buffer back at once, as ib_send_bw's server re-posts its
// receives, until close.
func (p *benchPair) serveRecv(pingpong bool) {
	rctx, rcancel := context.WithCancel(context.Background())
	p.recvCancel = rcancel
	for _, ep := range p.srv {
		p.recvDone.Add(1)
		go func() {
			defer p.recvDone.Done()
			for {
				m, err := ep.Recv(rctx)
				if err != nil {
					return
				}
				n := m.Len()
				m.Release()
				if !pingpong {
					continue
				}
				// The reply, of the same size, from the server's memory.
				if _, err := ep.Send(rctx, p.dst.Slice(0, n)).Wait(rctx); err != nil {
					return
				}
			}
		}()
	}
}

// pingPong returns one iteration of -pingpong on QP q: a SEND of size
// bytes, and the server's reply received.
func (p *benchPair) pingPong(ctx context.Context, q, size int) func() error {
	ep, local := p.cli[q], p.src.Slice(0, size)
	return func() error {
		if _, err := ep.Send(ctx, local).Wait(ctx); err != nil {
			return err
		}
		m, err := ep.Recv(ctx)
		if err != nil {
			return fmt.Errorf("the reply: %w", err)
		}
		m.Release()
		return nil
	}
}

// qpScratch is what an endpoint takes from the arena besides its receive
// buffers (atomic results), rounded up.
const qpScratch = 64 << 10

func (p *benchPair) close() {
	if p.recvCancel != nil {
		p.recvCancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, rt := range []*vrt.Runtime{p.cliRT, p.srvRT} {
		if rt != nil && p.statsTo != nil {
			s := rt.Stats()
			wakeUp, measured := sched.WakeUpCost()
			fmt.Fprintf(p.statsTo, "verbsrt bench: runtime on %s: %d actor runs, %d inline posts, %d PostSend calls, %d credit-only SENDs, %d waits parked, %d poller sleeps, %d polls hit, %d empty; a parked waiter's wake-up %v (the process's median of %d)\n",
				rt.Device(), s.ActorRuns, s.InlineRuns, s.PostCalls, s.CreditOnly, s.WaitsParked, s.Sleeps, s.PollsHit, s.PollsEmpty, wakeUp.Round(time.Microsecond), measured)
		}
		if rt != nil {
			rt.Close(ctx)
		}
	}
	p.recvDone.Wait()
	p.closeProv()
}

// counter is a caller's count of completed operations, on a cache line of
// its own: each caller stores to its line only.
type counter struct {
	n atomic.Uint64
	_ [56]byte
}

// run runs one size: callers spread over the QPs, each keeping txDepth
// operations in flight, for cfg.iters operations in all or cfg.duration.
func (p *benchPair) run(ctx context.Context, cfg benchConfig, size int, progress io.Writer) (benchResult, error) {
	r := benchResult{Test: cfg.test, Mode: "bw", Provider: cfg.provider, Device: p.cliDev,
		PeerDevice: p.srvDev, QPs: cfg.qps, Callers: cfg.callers, TxDepth: cfg.txDepth, Bytes: size}
	if cfg.lat {
		r.Mode = "lat"
		if cfg.pingpong {
			r.Mode = "pingpong"
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.duration > 0 {
		var c context.CancelFunc
		ctx, c = context.WithTimeout(ctx, cfg.duration)
		defer c()
	}
	counts := make([]counter, cfg.callers)
	lats := make([][]time.Duration, cfg.callers)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	start := time.Now()
	for c := range cfg.callers {
		n := uint64(math.MaxUint64)
		if cfg.duration == 0 {
			n = uint64(cfg.iters / cfg.callers)
			if c < cfg.iters%cfg.callers {
				n++
			}
		}
		if cfg.lat && cfg.duration == 0 {
			lats[c] = make([]time.Duration, 0, n)
		}
		op := p.op(cfg.test, c%cfg.qps, size)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			switch {
			case cfg.pingpong:
				// Half of each round trip, as ib_send_lat reports.
				lats[c], err = runLatency(ctx, p.pingPong(ctx, c%cfg.qps, size), 2, n, &counts[c], lats[c])
			case cfg.lat:
				once := func() error { _, err := op().Wait(context.Background()); return err }
				lats[c], err = runLatency(ctx, once, 1, n, &counts[c], lats[c])
			default:
				err = runWindow(ctx, op, n, cfg.txDepth, &counts[c])
			}
			if err != nil {
				errOnce.Do(func() { firstErr = err; cancel() })
			}
		}()
	}
	done := make(chan struct{})
	var hist []point
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		hist = sample(done, counts, start, cfg, size, progress)
	}()
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	sampler.Wait()
	if firstErr != nil {
		return r, firstErr
	}
	for i := range counts {
		r.Iterations += counts[i].n.Load()
	}
	r.Seconds = elapsed.Seconds()
	rate := float64(r.Iterations) / r.Seconds
	if cfg.lat {
		var all []time.Duration
		for _, l := range lats {
			all = append(all, l...)
		}
		latencyStats(&r, all)
		return r, nil
	}
	r.BWAvgMBps = rate * float64(size) / (1 << 20)
	r.MsgRateMpps = rate / 1e6
	hist = append(hist, point{start.Add(elapsed), r.Iterations})
	// Completions come in bursts (one signaled WR retires many), so a
	// window must hold several windows' worth of operations in flight.
	peak := peakRate(hist, 100*time.Millisecond, min(uint64(8*cfg.callers*cfg.txDepth), r.Iterations/2))
	r.BWPeakMBps = max(peak, rate) * float64(size) / (1 << 20)
	return r, nil
}

// point is the count of completed operations at a time.
type point struct {
	t time.Time
	n uint64
}

// sample reads the callers' counts every 20 ms until done closes, prints
// a progress line every cfg.progress and returns what it read.
func sample(done <-chan struct{}, counts []counter, start time.Time, cfg benchConfig, size int, progress io.Writer) []point {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	hist := []point{{start, 0}}
	lastPrint := start
	for {
		select {
		case <-done:
			return hist
		case now := <-tick.C:
			var n uint64
			for i := range counts {
				n += counts[i].n.Load()
			}
			hist = append(hist, point{now, n})
			if cfg.progress > 0 && progress != nil && now.Sub(lastPrint) >= cfg.progress {
				lastPrint = now
				el := now.Sub(start).Seconds()
				fmt.Fprintf(progress, "verbsrt bench: %s %d B: %.1f s, %d ops, %.3f Mops/s, %.2f MB/s\n",
					cfg.test, size, el, n, float64(n)/el/1e6, float64(n)*float64(size)/el/(1<<20))
			}
		}
	}
}

// peakRate returns the best rate, in operations per second, over the
// windows of hist that last at least minDur and hold at least minOps
// operations: perftest's peak, made robust to completions that arrive in
// bursts. It returns 0 when no window qualifies.
func peakRate(hist []point, minDur time.Duration, minOps uint64) float64 {
	var peak float64
	i := 0
	for j := range hist {
		// The latest start that still makes a window qualify.
		for i+1 < j && hist[j].t.Sub(hist[i+1].t) >= minDur && hist[j].n-hist[i+1].n >= minOps {
			i++
		}
		if d := hist[j].t.Sub(hist[i].t); i < j && d >= minDur && hist[j].n-hist[i].n >= minOps {
			peak = max(peak, float64(hist[j].n-hist[i].n)/d.Seconds())
		}
	}
	return peak
}

// op returns the operation a caller on QP q issues.
func (p *benchPair) op(test string, q, size int) func() vrt.Future {
	ep := p.cli[q]
	local := p.src.Slice(0, size)
	remote := p.remote
	switch test {
	case "read":
		return func() vrt.Future { return ep.Read(context.Background(), local, remote) }
	case "send":
		return func() vrt.Future { return ep.Send(context.Background(), local) }
	case "atomic":
		return func() vrt.Future { return ep.FetchAdd(context.Background(), remote, 1) }
	}
	return func() vrt.Future { return ep.Write(context.Background(), local, remote) }
}

// runWindow issues n operations, keeping depth in flight, and counts each
// one that completes. Once ctx ends it issues no more and waits for those
// in flight: every future resolves (the runtime sees to it), and the next
// size starts on an idle QP.
func runWindow(ctx context.Context, op func() vrt.Future, n uint64, depth int, done *counter) error {
	win := make([]vrt.Future, depth)
	var issued, completed uint64
	for ; issued < n && int(issued) < depth; issued++ {
		win[issued] = op()
	}
	for k := 0; completed < issued; k = (k + 1) % depth {
		if _, err := win[k].Wait(context.Background()); err != nil {
			for j := range win { // the rest resolve on their own
				win[j].Release()
			}
			return err
		}
		completed++
		done.n.Store(completed)
		if issued < n && ctx.Err() == nil {
			win[k] = op()
			issued++
		}
	}
	return nil
}

// runLatency runs once n times, one at a time, and records how long each
// took, divided by div: 1 for an operation from submit to completion, 2
// for half a ping-pong.
func runLatency(ctx context.Context, once func() error, div time.Duration, n uint64, done *counter, lats []time.Duration) ([]time.Duration, error) {
	for i := uint64(0); i < n && ctx.Err() == nil; i++ {
		t0 := time.Now()
		if err := once(); err != nil {
			return lats, err
		}
		lats = append(lats, time.Since(t0)/div)
		done.n.Store(i + 1)
	}
	return lats, nil
}

// latencyStats fills r's latency fields from the samples, as perftest
// does: t_typical is the median, the percentiles are of the sorted
// samples.
func latencyStats(r *benchResult, lats []time.Duration) {
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	var sum, sq float64
	for _, d := range lats {
		sum += us(d)
	}
	avg := sum / float64(len(lats))
	for _, d := range lats {
		sq += (us(d) - avg) * (us(d) - avg)
	}
	pct := func(p float64) float64 {
		return us(lats[min(len(lats)-1, int(math.Ceil(p*float64(len(lats))))-1)])
	}
	r.TMin, r.TMax, r.TTypical = us(lats[0]), us(lats[len(lats)-1]), us(lats[len(lats)/2])
	r.TAvg, r.TStdev = avg, math.Sqrt(sq/float64(len(lats)))
	r.T99, r.T999 = pct(0.99), pct(0.999)
}
