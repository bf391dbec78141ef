package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	vrt "github.com/verbsrt/verbsrt/runtime"
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
each and answers "done". Connecting and each set-up step time out after 30 s.`

func parseBench(args []string, stdout, stderr io.Writer) (benchConfig, error) {
	cfg := benchConfig{test: "write", iters: 5000, qps: 1, callers: 1, txDepth: 128,
		progress: time.Second, port: benchPort, set: map[string]bool{}}
	fs := newFlagSet("bench", benchUsage)
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
		if err := parseFlags(fs, args, stdout, stderr); err != nil {
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
			return cfg, usageErrorf("more than one server address: %q and %q (tests are write, read, send and atomic)", host, fs.Arg(0))
		}
		host = fs.Arg(0)
	}
	fs.Visit(func(f *flag.Flag) { cfg.set[cmp.Or(benchFlagNames[f.Name], f.Name)] = true })
	if err := cfg.setAddress(host); err != nil {
		return cfg, usageError{err}
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
	if err := cfg.check(); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
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
