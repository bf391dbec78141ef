package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

type config struct {
	size, count, iters int
	sockets            bool // -T s: TCP
	server             bool
	host, bind         string
	port               int
	provider, dev      string
	peerDev            string // the server's device in one process
	msgSize            int    // runtime.WithMessageSize (0: its default)
	stats              bool   // print each end's counters and CPU time on stderr
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("connstream", flag.ExitOnError)
	fs.IntVar(&cfg.size, "S", 1000, "bytes per transfer (rstream -S)")
	fs.IntVar(&cfg.count, "C", 1000, "transfers each way per iteration (rstream -C)")
	fs.IntVar(&cfg.iters, "I", 1000, "iterations (rstream -I)")
	test := fs.String("T", "", "s: TCP sockets instead of rdmanet (rstream -T s)")
	fs.BoolVar(&cfg.server, "server", false, "serve one client on -b:-p")
	fs.StringVar(&cfg.host, "s", "", "the server's address: run as its client (rstream -s)")
	fs.StringVar(&cfg.bind, "b", "", "the address to listen on or dial from (rstream -b)")
	fs.IntVar(&cfg.port, "p", 7471, "the server's port (rstream's default)")
	fs.StringVar(&cfg.provider, "provider", "soft", "soft or ibv")
	fs.StringVar(&cfg.dev, "d", "", "device (ibv; default the first)")
	fs.IntVar(&cfg.msgSize, "msg-size", 0, "the runtime's message size, the largest SEND a conn receives (0: the runtime's default, 4096)")
	fs.BoolVar(&cfg.stats, "stats", false, "print each end's runtime counters and the process's CPU time on stderr at the end")
	fs.StringVar(&cfg.peerDev, "peer-d", "", "the server's device with both ends in this process (default the second)")
	fs.Parse(os.Args[1:])
	cfg.sockets = *test == "s"
	if *test != "" && *test != "s" {
		fmt.Fprintf(os.Stderr, "connstream: -T %q: only s (sockets) is known\n", *test)
		os.Exit(2)
	}
	if cfg.size < 1 || cfg.count < 1 || cfg.iters < 1 {
		fmt.Fprintln(os.Stderr, "connstream: -S, -C and -I must be at least 1")
		os.Exit(2)
	}
	if err := run(context.Background(), os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "connstream:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, cfg config) error {
	addr := net.JoinHostPort(cfg.bind, strconv.Itoa(cfg.port))
	var rtSrv, rtCli *runtime.Runtime
	if !cfg.sockets {
		var err error
		oneProcess := !cfg.server && cfg.host == ""
		if !cfg.server || oneProcess {
			if rtCli, err = newRuntime(cfg, cfg.dev, 0); err != nil {
				return err
			}
			defer rtCli.Close(ctx)
		}
		if cfg.server || oneProcess {
			dev, second := cfg.dev, 0
			if oneProcess {
				dev, second = cfg.peerDev, 1
			}
			if rtSrv, err = newRuntime(cfg, dev, second); err != nil {
				return err
			}
			defer rtSrv.Close(ctx)
		}
	}
	if cfg.stats {
		// Deferred after the runtimes' Close: it runs before them.
		defer printStats(os.Stderr, rtCli, rtSrv)
	}
	switch {
	case cfg.server:
		ln, err := listen(cfg, rtSrv, addr)
		if err != nil {
			return err
		}
		defer ln.Close()
		return serve(cfg, ln)
	case cfg.host != "":
		return client(ctx, out, cfg, rtCli, net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)))
	default:
		ln, err := listen(cfg, rtSrv, net.JoinHostPort(cmp.Or(cfg.bind, "127.0.0.1"), "0"))
		if err != nil {
			return err
		}
		defer ln.Close()
		served := make(chan error, 1)
		go func() { served <- serve(cfg, ln) }()
		if err := client(ctx, out, cfg, rtCli, ln.Addr().String()); err != nil {
			return err
		}
		return <-served
	}
}

// newRuntime opens the runtime of one end: on device dev, or when dev is
// "" on the nth device (the first for a client, the second, if any, for a
// server in the same process).
func newRuntime(cfg config, dev string, nth int) (*runtime.Runtime, error) {
	var opts []runtime.Option
	if cfg.msgSize > 0 {
		opts = append(opts, runtime.WithMessageSize(cfg.msgSize))
	}
	return benchkit.OpenRuntime(cfg.provider, dev, nth, opts...)
}

func listen(cfg config, rt *runtime.Runtime, addr string) (net.Listener, error) {
	if cfg.sockets {
		return net.Listen("tcp", addr)
	}
	return rdmanet.Listen(rt, addr)
}

func dial(ctx context.Context, cfg config, rt *runtime.Runtime, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if cfg.sockets {
		d := net.Dialer{}
		if cfg.bind != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(cfg.bind)}
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true) // rstream -T s sets TCP_NODELAY too
		}
		return c, err
	}
	return rdmanet.Dial(ctx, rt, addr)
}

// serve answers one client: each iteration, it reads count transfers and
// writes them back.
func serve(cfg config, ln net.Listener) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	buf := make([]byte, cfg.size)
	for range cfg.iters {
		for range cfg.count {
			if _, err := io.ReadFull(c, buf); err != nil {
				return fmt.Errorf("server read: %w", err)
			}
		}
		for range cfg.count {
			if _, err := c.Write(buf); err != nil {
				return fmt.Errorf("server write: %w", err)
			}
		}
	}
	// The client closes first; wait for it, so that its last reads are
	// not cut short (whatever ends this Read, the test is done).
	c.Read(buf[:1])
	return nil
}

// client runs the test and prints rstream's line.
func client(ctx context.Context, out io.Writer, cfg config, rt *runtime.Runtime, addr string) error {
	c, err := dial(ctx, cfg, rt, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, cfg.size)
	start := time.Now()
	for range cfg.iters {
		for range cfg.count {
			if _, err := c.Write(buf); err != nil {
				return fmt.Errorf("client write: %w", err)
			}
		}
		for range cfg.count {
			if _, err := io.ReadFull(c, buf); err != nil {
				return fmt.Errorf("client read: %w", err)
			}
		}
	}
	elapsed := time.Since(start)
	name := "rdmanet"
	if cfg.sockets {
		name = "tcp"
	}
	report(out, name, cfg, elapsed)
	return nil
}

// report prints rstream's header and line: name, bytes per transfer,
// transfers, iterations, bytes moved (both ways), seconds, Gb/s and µs per
// transfer.
func report(out io.Writer, name string, cfg config, elapsed time.Duration) {
	usec := float64(elapsed.Nanoseconds()) / 1e3
	bytes := int64(cfg.iters) * int64(cfg.count) * int64(cfg.size) * 2
	fmt.Fprintf(out, "%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n", "name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")
	fmt.Fprintf(out, "%-10s%-8d%-8d%-8d%-8d%8.2fs%10.2f%11.2f\n", name, cfg.size, cfg.count, cfg.iters, bytes,
		usec/1e6, float64(bytes*8)/(1000*usec), usec/float64(cfg.iters)/float64(cfg.count*2))
}

// printStats prints what each runtime counted (nil ones are skipped) and
// the CPU time the process used: a stream bound by the device leaves its
// CPUs idle, one bound by its own work does not.
func printStats(w io.Writer, rts ...*runtime.Runtime) {
	for _, rt := range rts {
		if rt == nil {
			continue
		}
		s := rt.Stats()
		var wrs uint64
		for _, n := range s.WRsPosted {
			wrs += n
		}
		fmt.Fprintf(w, "connstream: runtime on %s: %d PostSend calls for %d WRs (%d credit-only), %d actor runs, %d inline posts, %d waits parked, %d poller sleeps, %d polls hit, %d empty\n",
			s.Device, s.PostCalls, wrs, s.CreditOnly, s.ActorRuns, s.InlineRuns, s.WaitsParked, s.Sleeps, s.PollsHit, s.PollsEmpty)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		fmt.Fprintf(w, "connstream: CPU time %v user, %v system; %d voluntary and %d involuntary context switches\n",
			time.Duration(ru.Utime.Nano()).Round(time.Millisecond), time.Duration(ru.Stime.Nano()).Round(time.Millisecond), ru.Nvcsw, ru.Nivcsw)
	}
}
