package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/verbsrt/verbsrt/internal/rcpingpong"
	"github.com/verbsrt/verbsrt/verbs"
)

// engine returns the options of one end as the ping-pong runs them.
func (cfg ppConfig) engine() rcpingpong.Config {
	return rcpingpong.Config{Dev: cfg.dev, IBPort: cfg.ibPort, Size: cfg.size, MTU: cfg.mtu, RxDepth: cfg.rxDepth, Iters: cfg.iters,
		SL: cfg.sl, Events: cfg.events, GIDIndex: cfg.gidx, Port: cfg.port, Validate: cfg.validate, Host: cfg.host}
}

// pingpong runs one end of ibv_rc_pingpong on p: the client when cfg.host
// is set, the server otherwise, taking one connection from ln.
func pingpong(ctx context.Context, w io.Writer, p verbs.Provider, cfg ppConfig, ln net.Listener) error {
	return rcpingpong.Run(ctx, w, p, cfg.engine(), ln)
}

// pingpongSelfTest runs a server on the soft provider's second device and
// a client on its first, in this process, and prints each end's output.
func pingpongSelfTest(ctx context.Context, w io.Writer, cfg ppConfig) error {
	return rcpingpong.SelfTest(ctx, w, cfg.engine())
}

// ppConfig holds ibv_rc_pingpong's options.
type ppConfig struct {
	provider string
	spec     providerSpec // -provider, -rocev2-addr and -rocev2-port
	dev      string       // "": the first device
	ibPort   int
	size     int
	mtu      int
	rxDepth  int
	iters    int
	sl       int
	events   bool
	gidx     int // < 0: no GID (InfiniBand without a GRH)
	port     int // TCP port of the exchange
	validate bool
	host     string // "": server
}

// runPingpong is "verbsrt pingpong": rdma-core's ibv_rc_pingpong on the
// ibv provider, flags, protocol and output included, so that either end can
// be the C program: without a host it serves one client on TCP port -p,
// with one it connects there; the two swap LID, QPN, PSN and GID in
// ibv_rc_pingpong's text format, then bounce -n SENDs of -s bytes over RC
// QPs and print the throughput and latency lines. With -provider rocev2
// each end is a process of its own as with ibv, its peer another verbsrt
// pingpong -provider rocev2 (the LID they swap is the UDP port of its
// RoCE v2 socket). With -provider soft it runs both ends in this process.
func runPingpong(args []string, stdout, stderr io.Writer) error {
	cfg, err := parsePingpong(args, stdout, stderr)
	if err != nil {
		return err
	}
	if cfg.provider == "soft" {
		if cfg.host != "" {
			return usageErrorf("the soft provider has no peer outside this process: omit the host for a self-test, " +
				"or run both ends with -provider rocev2 (RoCE v2 over UDP: no NIC, no root) or -provider ibv")
		}
		return pingpongSelfTest(context.Background(), stdout, cfg)
	}
	p, closeProv, err := openProvider(cfg.spec, 1)
	if err != nil {
		return err
	}
	defer closeProv()
	var ln net.Listener
	if cfg.host == "" {
		// Like the C server: any address, the given port, one connection.
		if ln, err = net.Listen("tcp", ":"+strconv.Itoa(cfg.port)); err != nil {
			return fmt.Errorf("couldn't listen to port %d: %w", cfg.port, err)
		}
		defer ln.Close()
		if cfg.port == 0 {
			fmt.Fprintf(stderr, "verbsrt pingpong: waiting for a client on %s\n", ln.Addr())
		}
	}
	ctx, interrupted := rcpingpong.OnInterrupt(stderr, p)
	err = pingpong(ctx, stdout, p, cfg, ln)
	interrupted()
	return withProviderHint(cfg.provider, err)
}

// parsePingpong parses ibv_rc_pingpong's flags (short and long names) and
// its one optional argument, the server's host, which may come before or
// among the flags as getopt allows.
func parsePingpong(args []string, stdout, stderr io.Writer) (ppConfig, error) {
	cfg := ppConfig{provider: "ibv", ibPort: 1, size: 4096, mtu: 1024, rxDepth: 500, iters: 1000,
		gidx: -1, port: 18515}
	fs := newFlagSet("pingpong", "usage: verbsrt pingpong [flags]        start a server and wait for connection\n"+
		"       verbsrt pingpong [flags] HOST   connect to server at HOST\n\n"+
		"rdma-core's ibv_rc_pingpong, flags, protocol and output included: either end may be the C program. "+
		"SIGINT or SIGTERM ends it with how far it got and, with -provider rocev2, its packet counts.")
	cfg.spec.name = cfg.provider
	addProviderFlags(fs, &cfg.spec, "ibv; soft runs a self-test of both ends in this process")
	for _, f := range []struct {
		p           *int
		short, long string
		usage       string
	}{
		{&cfg.port, "p", "port", "listen on/connect to TCP port (a server's 0: a free one, said on stderr)"},
		{&cfg.ibPort, "i", "ib-port", "use this port of the device"},
		{&cfg.size, "s", "size", "size of message to exchange"},
		{&cfg.mtu, "m", "mtu", "path MTU"},
		{&cfg.rxDepth, "r", "rx-depth", "number of receives to post at a time"},
		{&cfg.iters, "n", "iters", "number of exchanges"},
		{&cfg.sl, "l", "sl", "service level value"},
		{&cfg.gidx, "g", "gid-idx", "local port GID index (-1: none, InfiniBand without GRH)"},
	} {
		fs.IntVar(f.p, f.short, *f.p, f.usage)
		fs.IntVar(f.p, f.long, *f.p, "same as -"+f.short)
	}
	fs.StringVar(&cfg.dev, "d", "", "use this device (default: the first found)")
	fs.StringVar(&cfg.dev, "ib-dev", "", "same as -d")
	fs.BoolVar(&cfg.events, "e", false, "sleep on CQ events (default: poll)")
	fs.BoolVar(&cfg.events, "events", false, "same as -e")
	fs.BoolVar(&cfg.validate, "c", false, "validate the received buffer")
	fs.BoolVar(&cfg.validate, "chk", false, "same as -c")
	for {
		if err := parseFlags(fs, args, stdout, stderr); err != nil {
			return cfg, err
		}
		if fs.NArg() == 0 {
			break
		}
		if cfg.host != "" {
			return cfg, usageErrorf("more than one host: %q and %q", cfg.host, fs.Arg(0))
		}
		cfg.host, args = fs.Arg(0), fs.Args()[1:]
	}
	if err := resolveProvider(fs, &cfg.spec, "ibv"); err != nil {
		return cfg, usageError{err}
	}
	cfg.provider = cfg.spec.name
	if cfg.provider == "rocev2" && cfg.gidx < 0 {
		cfg.gidx = 0 // its one GID, the bound address: RoCE v2 routes by it
	}
	switch {
	case verbs.MTUFromBytes(cfg.mtu) == 0:
		return cfg, usageErrorf("-m %d: the path MTU is 256, 512, 1024, 2048 or 4096", cfg.mtu)
	case cfg.port < 0 || cfg.port > 65535 || (cfg.port == 0 && cfg.host != ""):
		return cfg, usageErrorf("-p %d: not a TCP port", cfg.port)
	case cfg.ibPort < 1 || cfg.ibPort > 255:
		return cfg, usageErrorf("-i %d: ports are numbered from 1", cfg.ibPort)
	case cfg.size < 1 || cfg.size > 1<<30:
		return cfg, usageErrorf("-s %d: the size is 1 to 1 GiB", cfg.size)
	case cfg.rxDepth < 2 || cfg.iters < 1:
		return cfg, usageErrorf("-r %d, -n %d: at least 2 receives and 1 iteration", cfg.rxDepth, cfg.iters)
	case cfg.gidx > 255 || cfg.sl < 0 || cfg.sl > 15:
		return cfg, usageErrorf("-g %d, -l %d out of range", cfg.gidx, cfg.sl)
	}
	return cfg, nil
}
