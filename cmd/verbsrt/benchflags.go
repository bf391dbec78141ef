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

	"github.com/verbsrt/verbsrt/internal/direct"
	"github.com/verbsrt/verbsrt/internal/rtbench"
	vrt "github.com/verbsrt/verbsrt/runtime"
)

// benchConfig holds the flags of "verbsrt bench", named as perftest's.
type benchConfig struct {
	test     string // write, read, send or atomic
	lat      bool   // latency test (ib_*_lat) instead of bandwidth (ib_*_bw)
	pingpong bool   // with lat: half a SEND/Recv round trip, as ib_send_lat
	provider string
	// -rocev2-addr and -rocev2-port: where the rocev2 provider's devices
	// bind (providerSpec).
	rocev2Addr string
	rocev2Port int
	dev        string // client device ("": the provider's first)
	peerDev    string // server device ("": the second device, else dev)
	size       int
	all        bool // -a: every size from 2 bytes to 8 MiB
	iters      int
	duration   time.Duration
	qps        int
	callers    int
	txDepth    int // operations each caller keeps in flight (bandwidth)
	rxDepth    int // each endpoint's largest receive window (WithRecvDepth); 0: by message size
	// perftest's -c, -i and -x: the runtime takes RC QPs on port 1
	// and a GID index (< 0: its own choice).
	connection       string
	ibPort, gidIndex int
	gbits            bool // --report_gbits: bandwidth in Gb/s
	json             bool
	progress         time.Duration // 0: no progress lines
	spin             time.Duration // actors' and pollers' spin (0: the runtime's default)
	// The runtime's tuning that posts and completes on the caller's
	// goroutine (Tuning.NoInlinePost, Tuning.WaitPoll), for side-by-side
	// measurements.
	inlinePost bool
	waitPoll   time.Duration
	stats      bool // print each runtime's counters on stderr at the end
	// Where this process's run goes: not perftest's, the runtime's own.
	cpuProfile, trace string

	// -direct (internal/direct): the Go floor, one goroutine posting and
	// polling each end's QP, over perftest's own protocol; cqMod is
	// perftest's --cq-mod, postList its --post_list (0: as many as the
	// window has room for). peerPattern: the peer's buffers hold this
	// end's pattern, so its bytes are checked as a verbsrt peer's are.
	// Without -direct, postList is how many operations each of the
	// runtime's callers gives one Endpoint.Post (0: one call each).
	direct      bool
	cqMod       int
	postList    int
	peerPattern bool

	// Two processes (internal/rtbench): a client has host, a server has
	// server set; the one-process bench has neither.
	host    string
	server  bool
	port    int             // control port, perftest's 18515 by default
	timeout time.Duration   // bound on connecting and on each step of the set-up (0: 30 s)
	set     map[string]bool // the flags given on the command line, by short name ("test": a test name)
}

// benchTestNames are the tests, in the order the usage lists them; the
// first is the default.
var benchTestNames = []string{"write", "read", "send", "atomic"}

// benchTests gives each test's name in perftest's header.
var benchTests = map[string]string{"write": "RDMA_Write", "read": "RDMA_Read", "send": "Send", "atomic": "Atomic FETCH_AND_ADD"}

// The defaults of the flags whose default depends on others, and the
// bounds of the sizes: used by the code and spelled in the help from here.
const (
	benchSizeBW      = 65536   // -s of a bandwidth test
	benchSizeLat     = 2       // -s of a latency test
	benchSizeAtomic  = 8       // -s of atomic, the only size an atomic moves
	benchMaxSize     = 8 << 20 // the largest -s, and where -a stops
	benchMaxSendSize = 1 << 20 // the same for send: one message in one receive buffer
	benchSpin        = 200 * time.Microsecond
	benchConnection  = "RC" // -c: the runtime connects RC QPs only
)

// benchFlagNames gives the short name of the flags that have a long one,
// for benchConfig.set.
var benchFlagNames = map[string]string{"size": "s", "iters": "n", "qp": "q", "tx-depth": "t", "ib-dev": "d",
	"port": "p", "all": "a", "duration": "D", "rx-depth": "r", "connection": "c", "ib-port": "i", "gid-index": "x",
	"cq-mod": "Q", "post_list": "l"}

// sizeString spells n bytes in the largest binary unit that divides it.
func sizeString(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// benchUsage is the help's text before the flags.
func benchUsage() string {
	return fmt.Sprintf(`usage: verbsrt bench [TEST] [flags]                 both ends in this process
       verbsrt bench [TEST] [flags] -server         server: wait for a client on -p
       verbsrt bench TEST [flags] HOST[:PORT]       client: run TEST against the server at HOST

perftest's ib_{write,read,send,atomic}_{bw,lat} over the verbsrt runtime.
TEST is one of %s (default %s). The server's address, HOST,
comes after the test; any other argument is refused.

Without HOST and without -server, the client and the server are two runtimes
in this process (on the soft provider by default). With -server, or -p without
HOST, it is perftest's server: it waits on TCP port -p (default %d) for one
client, takes the test and its parameters from the client (a flag given to
the server must match the client's, else the run is refused), prints the
header and the client's results, and exits. With HOST (or HOST:PORT) it is
the client: it connects to the server, runs the test and reports it. Both
ends default to -provider ibv and their first device; the soft provider
connects only runtimes in the same process, so it cannot serve a client in
another one; -provider rocev2 at both ends connects two processes of one
host, or two hosts, without a NIC or root (RoCE v2 over UDP, on -rocev2-addr).

Control protocol (version %d): one JSON object per line on the TCP
connection, each with "version" and "type". The client sends "config" (the
test, -lat, -pingpong, -s, -a, -n, -D, -q, -callers, -t, its provider and
device); the server answers "reject" with an "error", or "accept" with
"listen" (the runtime listener it opened for the QPs, on an ephemeral port;
the client dials that port on the host it reached), "device" and "remote"
(addr, rkey, len of the server's registered buffer, for write, read and
atomic). The client dials -q runtime connections there; the server answers
"ready" once it has accepted them all (for send it then keeps receiving).
The client sends one "result" per size and then "done" (with "error" if the
run failed); the server prints each and answers "done". Connecting and each
set-up step time out after %v.

With -direct there is no runtime: each end is one goroutine that posts
chains of WRs on its QP and polls its CQ itself, the Go floor for message
rate (one QP, -n iterations). Its two ends speak perftest's own protocol
(perftest 6.06: versions, sys data, MTU and the keys of each QP as text,
the reports, "done"), so the peer of -server or HOST may be ib_write_bw,
ib_read_bw, ib_send_bw or ib_atomic_bw, at either end. With -lat it is the
floor of the runtime's latency test, the same exchange between two -direct
ends: one signalled WR at a time, polled until it completed, or with send
-pingpong a Send answered by the server's.`,
		strings.Join(benchTestNames, ", "), benchTestNames[0], benchPort, benchProtoVersion, benchTimeout)
}

func parseBench(args []string, stdout, stderr io.Writer) (benchConfig, error) {
	cfg := benchConfig{test: benchTestNames[0], connection: benchConnection, ibPort: 1, gidIndex: -1,
		iters: 5000, qps: 1, callers: 1, txDepth: 128, progress: time.Second, spin: benchSpin,
		inlinePost: true, waitPoll: vrt.DefaultTuning().WaitPoll, port: benchPort, set: map[string]bool{}, cqMod: direct.DefaultCQMod}
	fs := newFlagSet("bench", benchUsage())
	// alias gives flag short the long name too; both share one value
	// and so one default.
	alias := func(short, long string) { fs.Var(fs.Lookup(short).Value, long, "same as -"+short) }
	fs.BoolVar(&cfg.lat, "lat", cfg.lat, "latency test (t_min, t_typical, t_99...) instead of bandwidth")
	fs.BoolVar(&cfg.pingpong, "pingpong", cfg.pingpong, "with send -lat: a ping-pong as ib_send_lat's (the client Sends and Recvs the server's reply), reporting half of each round trip; without, the time from submitting one operation to its completion")
	var spec providerSpec
	addProviderFlags(fs, &spec, "soft in one process, ibv with -server or HOST")
	fs.StringVar(&cfg.dev, "d", cfg.dev, "client device, or this end's device with -server or HOST (default: the first)")
	alias("d", "ib-dev")
	fs.StringVar(&cfg.peerDev, "peer-d", cfg.peerDev, "server device in one process (default: the second, else the client's)")
	fs.IntVar(&cfg.ibPort, "i", cfg.ibPort, "the device's port (the runtime uses port 1)")
	alias("i", "ib-port")
	fs.IntVar(&cfg.gidIndex, "x", cfg.gidIndex, "GID index of the port, the runtime's WithGIDIndex (-1: the first IPv4-mapped GID, else 0)")
	alias("x", "gid-index")
	fs.StringVar(&cfg.connection, "c", cfg.connection, "connection type (the runtime connects RC QPs only)")
	alias("c", "connection")
	fs.IntVar(&cfg.size, "s", cfg.size, fmt.Sprintf("message size in bytes, 1 to %s (%s for send) (default: %d bandwidth, %d latency; %d for atomic)",
		sizeString(benchMaxSize), sizeString(benchMaxSendSize), benchSizeBW, benchSizeLat, benchSizeAtomic))
	alias("s", "size")
	fs.BoolVar(&cfg.all, "a", cfg.all, fmt.Sprintf("run sizes from 2 bytes to %s (%s for send), doubling", sizeString(benchMaxSize), sizeString(benchMaxSendSize)))
	alias("a", "all")
	fs.IntVar(&cfg.iters, "n", cfg.iters, "iterations")
	alias("n", "iters")
	fs.DurationVar(&cfg.duration, "D", cfg.duration, "run for this long instead of -n iterations (e.g. 5s; a bare number is seconds)")
	alias("D", "duration")
	fs.IntVar(&cfg.qps, "q", cfg.qps, "QPs (connections)")
	alias("q", "qp")
	fs.IntVar(&cfg.callers, "callers", cfg.callers, "goroutines issuing operations, spread over the QPs")
	fs.IntVar(&cfg.txDepth, "t", cfg.txDepth, "operations each caller keeps in flight (bandwidth; 1 with -lat)")
	alias("t", "tx-depth")
	fs.IntVar(&cfg.rxDepth, "r", cfg.rxDepth, fmt.Sprintf("each endpoint's largest window of receive credits, the runtime's WithRecvDepth (0: %d, fewer for messages over %s)",
		rtbench.RecvDepth, sizeString(rtbench.RecvBytes/rtbench.RecvDepth)))
	alias("r", "rx-depth")
	fs.BoolVar(&cfg.json, "json", cfg.json, "print results as JSON lines")
	fs.BoolVar(&cfg.gbits, "report_gbits", cfg.gbits, "report bandwidth in Gb/s (10^9 bits) instead of MB/s (2^20 bytes), as perftest's")
	fs.BoolVar(new(bool), "F", false, "accepted for perftest's command lines: verbsrt never warns about the CPU frequency")
	fs.DurationVar(&cfg.progress, "progress", cfg.progress, "progress line interval on stderr (0: none)")
	fs.DurationVar(&cfg.spin, "spin", cfg.spin, "how long actors and pollers spin before they yield and park: the runtime's Tuning.Spin (0: the runtime's default)")
	fs.BoolVar(&cfg.inlinePost, "inline-post", cfg.inlinePost, "an operation that finds its endpoint's actor idle posts on the caller's goroutine: the runtime's Tuning.NoInlinePost, negated")
	fs.DurationVar(&cfg.waitPoll, "wait-poll", cfg.waitPoll, "how long, at the least, a goroutine blocked in Wait or Recv polls its endpoint's CQ before it parks; it polls longer where a park costs more: the runtime's Tuning.WaitPoll (0: Tuning.NoWaitPoll, it yields a few dozen times and parks)")
	fs.BoolVar(&cfg.stats, "stats", cfg.stats, "print each runtime's counters on stderr at the end (actor runs, inline posts, parked waits, poller sleeps)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", cfg.cpuProfile, "write this process's CPU profile to the file")
	fs.StringVar(&cfg.trace, "trace", cfg.trace, "write this process's execution trace to the file (go tool trace)")
	fs.BoolVar(&cfg.direct, "direct", cfg.direct, "the Go floor: no runtime; one goroutine per end posts chains of WRs and polls its CQ itself, "+
		"and the two ends meet over perftest's own protocol, so the peer of -server or HOST may be ib_write_bw, ib_read_bw, ib_send_bw or ib_atomic_bw "+
		"(one QP; with -lat one WR at a time, the floor of the runtime's -lat)")
	fs.IntVar(&cfg.cqMod, "Q", cfg.cqMod, "with -direct: signal every Q'th WR (and the last), perftest's --cq-mod")
	alias("Q", "cq-mod")
	fs.IntVar(&cfg.postList, "l", cfg.postList, "perftest's --post_list: with -direct, post WRs in chains of at most l (0: as many as the window has room for); "+
		"without, each caller gives the runtime l operations at a time, as one Endpoint.Post with one future (0: one Write, Read, Send or FetchAdd each; bandwidth only)")
	alias("l", "post_list")
	fs.BoolVar(&cfg.peerPattern, "peer-pattern", cfg.peerPattern, "with -direct: the peer's buffers hold verbsrt's pattern, as a perftest program's do under verbs/ibv/rxevm's ptcheck.so; "+
		"check the bytes it sends, WRITEs or lets this end READ as a verbsrt peer's")
	fs.BoolVar(&cfg.server, "server", cfg.server, "be the server: wait for one client on -p (no HOST)")
	fs.IntVar(&cfg.port, "p", cfg.port, "TCP port of the control connection (server and client); -p without HOST means -server; a server's -p 0 takes a free port and says which on stderr")
	alias("p", "port")
	// perftest takes -D in seconds: accept a bare number too.
	for i, a := range args {
		switch a {
		case "-D", "--D", "-duration", "--duration":
			if i+1 < len(args) && !strings.ContainsAny(args[i+1], "hmsuµn") {
				args = slices.Clone(args)
				args[i+1] += "s"
			}
		}
	}
	// Flags may come before, between and after the arguments, as
	// perftest's getopt allows: the test, then the server's address.
	var pos []string
	for {
		if err := parseFlags(fs, args, stdout, stderr); err != nil {
			return cfg, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	fs.Visit(func(f *flag.Flag) { cfg.set[cmp.Or(benchFlagNames[f.Name], f.Name)] = true })
	var host string
	switch {
	case len(pos) > 2:
		return cfg, usageErrorf("%q: a test and a server's address at most", pos)
	case len(pos) > 0 && benchTests[pos[0]] == "":
		return cfg, usageErrorf("unknown test %q: the tests are %s (a server's address comes after the test: verbsrt bench %s %[1]s)",
			pos[0], strings.Join(benchTestNames, ", "), benchTestNames[0])
	case len(pos) > 1 && benchTests[pos[1]] != "":
		return cfg, usageErrorf("two tests, %s and %s: one at a time", pos[0], pos[1])
	case len(pos) > 1:
		host = pos[1]
		fallthrough
	case len(pos) > 0:
		cfg.test, cfg.set["test"] = pos[0], true
	}
	if err := cfg.setAddress(host); err != nil {
		return cfg, usageError{err}
	}
	def := "ibv"
	if cfg.host == "" && !cfg.server {
		def = "soft"
	}
	if err := resolveProvider(fs, &spec, def); err != nil {
		return cfg, usageError{err}
	}
	cfg.provider, cfg.rocev2Addr, cfg.rocev2Port = spec.name, spec.addr, spec.port
	if !cfg.set["s"] {
		switch {
		case cfg.test == "atomic":
			cfg.size = benchSizeAtomic
		case cfg.lat:
			cfg.size = benchSizeLat
		default:
			cfg.size = benchSizeBW
		}
	}
	if cfg.lat {
		cfg.txDepth = 1 // one operation at a time, as perftest's latency tests
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
	case host != "" && cfg.server:
		return fmt.Errorf("-server takes no address (got %q): the server listens on every address", host)
	case host == "" && cfg.set["p"]:
		cfg.server = true
	}
	cfg.host = host
	switch {
	case cfg.port < 0 || cfg.port > 65535 || (cfg.port == 0 && !cfg.server):
		return fmt.Errorf("-p %d: a TCP port is 1 to 65535 (a server's may be 0: a free one)", cfg.port)
	case cfg.host == "" && !cfg.server:
		return nil
	case cfg.peerDev != "":
		return errors.New("--peer-d is for both ends in one process: give each end its device with -d")
	}
	return nil
}

// check says what is wrong with cfg's test parameters, if anything: on the
// command line, and at a server that adopts a client's.
func (cfg *benchConfig) check() error {
	maxSize := benchMaxSize
	if cfg.test == "send" {
		maxSize = benchMaxSendSize
	}
	switch {
	case benchTests[cfg.test] == "":
		return fmt.Errorf("unknown test %q: the tests are %s", cfg.test, strings.Join(benchTestNames, ", "))
	case cfg.test == "atomic" && cfg.size != benchSizeAtomic:
		return fmt.Errorf("-s %d: atomics move %d bytes", cfg.size, benchSizeAtomic)
	case cfg.size < 1 || cfg.size > maxSize:
		return fmt.Errorf("-s %d: 1 byte to %s for %s", cfg.size, sizeString(maxSize), cfg.test)
	case cfg.iters < 1 || cfg.qps < 1 || cfg.qps > 64 || cfg.callers < 1 || cfg.callers > 4096:
		return errors.New("-n at least 1, -q 1 to 64, -callers 1 to 4096")
	case cfg.txDepth < 1 || cfg.txDepth > 4096 || (cfg.lat && cfg.txDepth != 1):
		return errors.New("-t 1 to 4096 (1 with -lat)")
	case cfg.rxDepth < 0 || cfg.rxDepth > 4096:
		return fmt.Errorf("-r %d: 1 to 4096 receive credits (0: the default)", cfg.rxDepth)
	case !cfg.direct && cfg.postList != 0 && cfg.lat:
		return errors.New("-l: bandwidth only (-lat issues one operation at a time)")
	case !cfg.direct && (cfg.postList < 0 || cfg.postList > cfg.txDepth):
		return fmt.Errorf("-l %d: 0 to -t, %d (0: one operation a call)", cfg.postList, cfg.txDepth)
	case cfg.pingpong && (!cfg.lat || cfg.test != "send"):
		return errors.New("-pingpong: with send -lat only")
	case cfg.duration < 0:
		return errors.New("-D: not a negative time")
	case cfg.spin < 0:
		return fmt.Errorf("-spin %v: not a negative time", cfg.spin)
	case !slices.Contains(providerNames, cfg.provider):
		return fmt.Errorf("unknown provider %q (the providers are %s)", cfg.provider, strings.Join(providerNames, ", "))
	case !strings.EqualFold(cfg.connection, benchConnection):
		return fmt.Errorf("-c %s: the runtime connects %s QPs only", cfg.connection, benchConnection)
	case cfg.ibPort != 1:
		return fmt.Errorf("-i %d: the runtime uses port 1 of its device", cfg.ibPort)
	case cfg.gidIndex < -1 || cfg.gidIndex > 255:
		return fmt.Errorf("-x %d: a GID index is 0 to 255 (-1: the runtime's choice)", cfg.gidIndex)
	}
	return cfg.checkDirect()
}

// checkDirect says what -direct cannot run: it is perftest's bandwidth
// test, or the runtime's latency test, on one QP, one size, by
// iterations.
func (cfg *benchConfig) checkDirect() error {
	switch {
	case !cfg.direct:
		if cfg.set["Q"] || cfg.set["peer-pattern"] {
			return errors.New("-Q and -peer-pattern are for -direct")
		}
		return nil
	case cfg.lat && (cfg.set["Q"] || cfg.set["l"]):
		return errors.New("-direct -lat posts one WR at a time, each signalled (no -Q, no -l)")
	case cfg.all || cfg.duration != 0:
		return errors.New("-direct: one size by iterations (no -a, no -D)")
	case cfg.qps != 1 || cfg.callers != 1:
		return errors.New("-direct: one QP, one goroutine an end (no -q, no -callers)")
	case cfg.cqMod < 1 || cfg.cqMod > 4096:
		return fmt.Errorf("-Q %d: 1 to 4096", cfg.cqMod)
	case cfg.postList < 0 || cfg.postList > 4096:
		return fmt.Errorf("-l %d: 0 to 4096 (0: as many as the window has room for)", cfg.postList)
	}
	return nil
}
