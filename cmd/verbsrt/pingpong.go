package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/verbsrt/verbsrt/internal/provider"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

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

// The wr_ids ibv_rc_pingpong uses; pending is a set of them.
const (
	ppRecvWRID = 1
	ppSendWRID = 2
)

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
	return withProviderHint(cfg.provider, pingpong(context.Background(), stdout, p, cfg, ln))
}

// parsePingpong parses ibv_rc_pingpong's flags (short and long names) and
// its one optional argument, the server's host, which may come before or
// among the flags as getopt allows.
func parsePingpong(args []string, stdout, stderr io.Writer) (ppConfig, error) {
	cfg := ppConfig{provider: "ibv", ibPort: 1, size: 4096, mtu: 1024, rxDepth: 500, iters: 1000,
		gidx: -1, port: 18515}
	fs := newFlagSet("pingpong", "usage: verbsrt pingpong [flags]        start a server and wait for connection\n"+
		"       verbsrt pingpong [flags] HOST   connect to server at HOST\n\n"+
		"rdma-core's ibv_rc_pingpong, flags, protocol and output included: either end may be the C program.")
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

// ppEnd is the state of one end of a ping-pong: what pp_init_ctx sets up.
type ppEnd struct {
	cfg    ppConfig
	ctx    verbs.Context
	ch     verbs.CompChannel // with -e
	cq     verbs.CQ
	qp     verbs.QP
	arena  *verbs.Arena
	mr     verbs.MR
	buf    []byte
	send   []verbs.SendWR // one WR, reused
	recvs  []verbs.RecvWR // rx_depth identical WRs
	routs  int            // receives posted
	events int            // CQ events to acknowledge
}

func (e *ppEnd) close() {
	if e.ctx != nil {
		e.ctx.Close() // and the QP, CQ, MR, channel and PD with it
	}
	if e.arena != nil {
		e.arena.Close()
	}
}

// pingpong runs one end of ibv_rc_pingpong's protocol on p: the client when
// cfg.host is set, the server otherwise, taking one connection from ln.
// It prints what ibv_rc_pingpong prints.
func pingpong(ctx context.Context, w io.Writer, p verbs.Provider, cfg ppConfig, ln net.Listener) error {
	e := &ppEnd{cfg: cfg}
	defer e.close()
	if err := e.init(p); err != nil {
		return err
	}
	// The first rx_depth receives before anything can arrive.
	if n, err := e.qp.PostRecv(e.recvs); n < len(e.recvs) {
		return fmt.Errorf("couldn't post receive (%d): %w", n, err)
	}
	e.routs = len(e.recvs)
	if cfg.events {
		if err := e.cq.ReqNotify(false); err != nil {
			return fmt.Errorf("couldn't request CQ notification: %w", err)
		}
	}
	port, err := e.ctx.QueryPort(uint8(cfg.ibPort))
	if err != nil {
		return fmt.Errorf("couldn't get port info: %w", err)
	}
	my := verbs.PeerInfo{LID: port.LID, QPN: e.qp.QPN(), PSN: verbs.RandomPSN()}
	if port.LinkLayer != verbs.LinkLayerEthernet && my.LID == 0 {
		return errors.New("couldn't get local LID")
	}
	if cfg.gidx >= 0 {
		if my.GID, err = e.ctx.QueryGID(uint8(cfg.ibPort), cfg.gidx); err != nil {
			return fmt.Errorf("can't read sgid of index %d: %w", cfg.gidx, err)
		}
	}
	printDest(w, "local address: ", my)

	var rem verbs.PeerInfo
	if cfg.host != "" {
		c, err := net.Dial("tcp", net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)))
		if err != nil {
			return fmt.Errorf("couldn't connect to %s:%d: %w", cfg.host, cfg.port, err)
		}
		rem, err = ibv.ClientExchangeDest(ctx, c, my)
		c.Close()
		if err != nil {
			return err
		}
	} else {
		c, err := ln.Accept()
		ln.Close() // one connection, as the C server
		if err != nil {
			return fmt.Errorf("accept() failed: %w", err)
		}
		rem, err = ibv.ServerExchangeDest(ctx, c, my, func(d verbs.PeerInfo) error {
			return e.connect(my.PSN, d)
		})
		c.Close()
		if err != nil {
			return err
		}
	}
	printDest(w, "remote address:", rem)
	if cfg.host != "" {
		if err := e.connect(my.PSN, rem); err != nil {
			return err
		}
	}
	return e.run(ctx, w)
}

func printDest(w io.Writer, what string, d verbs.PeerInfo) {
	fmt.Fprintf(w, "  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", what, d.LID, d.QPN, d.PSN, d.GID)
}

// init opens the device and makes what pp_init_ctx makes: a buffer of size
// bytes filled with 0x7b, a CQ of rx_depth+1 (on a completion channel with
// -e), an RC QP with one send and rx_depth receive WRs in INIT, its send
// inline when the QP takes that much.
func (e *ppEnd) init(p verbs.Provider) error {
	cfg := e.cfg
	dev, err := provider.FindDevice(p, cfg.dev)
	if err != nil {
		return err
	}
	if e.ctx, err = dev.Open(); err != nil {
		return fmt.Errorf("couldn't get context for %s: %w", dev.Name(), err)
	}
	if cfg.events {
		if e.ch, err = e.ctx.CreateCompChannel(); err != nil {
			return fmt.Errorf("couldn't create completion channel: %w", err)
		}
	}
	pd, err := e.ctx.AllocPD()
	if err != nil {
		return fmt.Errorf("couldn't allocate PD: %w", err)
	}
	if e.arena, err = verbs.NewArena(cfg.size); err != nil {
		return fmt.Errorf("couldn't allocate work buf: %w", err)
	}
	e.buf = e.arena.Bytes()[:cfg.size]
	for i := range e.buf {
		e.buf[i] = 0x7b
	}
	if e.mr, err = pd.RegMR(e.buf, verbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("couldn't register MR: %w", err)
	}
	if e.cq, err = e.ctx.CreateCQ(verbs.CQSpec{CQE: cfg.rxDepth + 1, Channel: e.ch}); err != nil {
		return fmt.Errorf("couldn't create CQ: %w", err)
	}
	if e.qp, err = pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
		Caps: verbs.QPCaps{MaxSendWR: 1, MaxRecvWR: cfg.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return fmt.Errorf("couldn't create QP: %w", err)
	}
	attr, err := e.qp.Query()
	if err != nil {
		return fmt.Errorf("couldn't query QP: %w", err)
	}
	sgl := []verbs.SGE{{Addr: e.mr.Addr(), Length: uint32(cfg.size), LKey: e.mr.LKey()}}
	flags := verbs.SendSignaled
	if attr.Cap.MaxInlineData >= cfg.size {
		flags |= verbs.SendInline
	}
	e.send = []verbs.SendWR{{ID: ppSendWRID, SGL: sgl, Opcode: verbs.OpSend, Flags: flags}}
	e.recvs = make([]verbs.RecvWR, cfg.rxDepth)
	for i := range e.recvs {
		e.recvs[i] = verbs.RecvWR{ID: ppRecvWRID, SGL: sgl}
	}
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: uint8(cfg.ibPort)},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return fmt.Errorf("failed to modify QP to INIT: %w", err)
	}
	return nil
}

// connect is pp_connect_ctx: RTR towards dest, then RTS with our PSN, with
// ibv_rc_pingpong's attributes (a GRH with hop limit 1 only when the
// peer's GID has an interface ID, one outstanding READ each way).
func (e *ppEnd) connect(myPSN uint32, dest verbs.PeerInfo) error {
	cfg := e.cfg
	rtr := verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: verbs.MTUFromBytes(cfg.mtu), DestQPN: dest.QPN,
		RQPSN: dest.PSN, MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AH: verbs.AHAttr{DLID: dest.LID, SL: uint8(cfg.sl), PortNum: uint8(cfg.ibPort)}}
	if !bytes.Equal(dest.GID[8:], make([]byte, 8)) {
		rtr.AH.IsGlobal = true
		rtr.AH.GRH = verbs.GlobalRoute{DGID: dest.GID, HopLimit: 1, SGIDIndex: uint8(cfg.gidx)}
	}
	if err := e.qp.Modify(&rtr, verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
		verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		return fmt.Errorf("failed to modify QP to RTR: %w", err)
	}
	rts := verbs.QPAttr{State: verbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: myPSN, MaxRdAtomic: 1}
	if err := e.qp.Modify(&rts, verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
		verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("failed to modify QP to RTS: %w", err)
	}
	return nil
}

// run is the ping-pong loop of ibv_rc_pingpong's main: the client sends
// first; each end sends again once its last send and a receive completed,
// until iters of each; receives are re-posted in one batch when one is left.
func (e *ppEnd) run(ctx context.Context, w io.Writer) error {
	cfg := e.cfg
	pending := ppRecvWRID
	if cfg.host != "" {
		if cfg.validate {
			for i := 0; i < cfg.size; i += os.Getpagesize() {
				e.buf[i] = 0 // i / page_size % sizeof(char), as the C code has it
			}
		}
		if err := e.postSend(); err != nil {
			return err
		}
		pending |= ppSendWRID
	}
	var wcs [2]verbs.WC
	rcnt, scnt := 0, 0
	start := time.Now()
	for rcnt < cfg.iters || scnt < cfg.iters {
		if cfg.events {
			cq, err := e.ch.GetCQEvent(ctx)
			if err != nil {
				return fmt.Errorf("failed to get cq_event: %w", err)
			}
			e.events++
			if cq != e.cq {
				return errors.New("CQ event for unknown CQ")
			}
			if err := e.cq.ReqNotify(false); err != nil {
				return fmt.Errorf("couldn't request CQ notification: %w", err)
			}
		}
		var n int
		for empty := 1; ; empty++ {
			var err error
			if n, err = e.cq.Poll(wcs[:]); err != nil {
				return fmt.Errorf("poll CQ failed: %w", err)
			}
			if cfg.events || n > 0 {
				break
			}
			// Busy polling, as the C program does, but letting other
			// goroutines run (a soft provider's engine needs a P) and
			// giving up when ctx ends.
			runtime.Gosched()
			if empty%1024 == 0 && ctx.Err() != nil {
				return fmt.Errorf("poll CQ: %w", ctx.Err())
			}
		}
		for i := range wcs[:n] {
			wc := &wcs[i]
			if wc.Status != verbs.WCSuccess {
				return fmt.Errorf("failed status %s (%d) for wr_id %d", wc.Status, wc.Status, wc.WRID)
			}
			switch wc.WRID {
			case ppSendWRID:
				scnt++
			case ppRecvWRID:
				if e.routs--; e.routs <= 1 {
					n, err := e.qp.PostRecv(e.recvs[:cfg.rxDepth-e.routs])
					if e.routs += n; e.routs < cfg.rxDepth {
						return fmt.Errorf("couldn't post receive (%d): %w", e.routs, err)
					}
				}
				rcnt++
			default:
				return fmt.Errorf("completion for unknown wr_id %d", wc.WRID)
			}
			pending &^= int(wc.WRID)
			if scnt < cfg.iters && pending == 0 {
				if err := e.postSend(); err != nil {
					return err
				}
				pending = ppRecvWRID | ppSendWRID
			}
		}
	}
	usec := float64(time.Since(start).Microseconds())
	total := int64(cfg.size) * int64(cfg.iters) * 2
	fmt.Fprintf(w, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", total, usec/1e6, float64(total)*8/usec)
	fmt.Fprintf(w, "%d iters in %.2f seconds = %.2f usec/iter\n", cfg.iters, usec/1e6, usec/float64(cfg.iters))
	if cfg.host == "" && cfg.validate {
		for i := 0; i < cfg.size; i += os.Getpagesize() {
			if e.buf[i] != 0 {
				fmt.Fprintf(w, "invalid data in page %d\n", i/os.Getpagesize())
			}
		}
	}
	if e.events > 0 {
		e.cq.AckEvents(e.events)
	}
	return nil
}

func (e *ppEnd) postSend() error {
	if _, err := e.qp.PostSend(e.send); err != nil {
		return fmt.Errorf("couldn't post send: %w", err)
	}
	return nil
}

// pingpongSelfTest runs a server on the provider's second device and a
// client on its first, in this process, over TCP on the loopback (the
// soft provider reaches no other process), and prints each end's output.
// Without -g it uses GID index 1, which every soft device has.
func pingpongSelfTest(ctx context.Context, w io.Writer, cfg ppConfig) error {
	p := soft.New(soft.Config{Devices: 2})
	defer p.Close()
	devs, err := p.Devices()
	if err != nil {
		return err
	}
	if cfg.gidx < 0 {
		cfg.gidx = 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	srvCfg, cliCfg := cfg, cfg
	srvCfg.dev, cliCfg.dev = devs[1].Name(), devs[0].Name()
	cliCfg.host, cliCfg.port = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	var srvOut, cliOut bytes.Buffer
	srvErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { srvErr <- pingpong(ctx, &srvOut, p, srvCfg, ln) }()
	cliErr := pingpong(ctx, &cliOut, p, cliCfg, nil)
	if cliErr != nil {
		ln.Close() // a server still waiting for the client gives up,
		cancel()   // and one waiting for completions
	}
	sErr := <-srvErr
	fmt.Fprintf(w, "server (%s, provider soft):\n%s", srvCfg.dev, srvOut.Bytes())
	fmt.Fprintf(w, "client (%s, provider soft):\n%s", cliCfg.dev, cliOut.Bytes())
	if sErr != nil {
		return fmt.Errorf("server: %w", sErr)
	}
	if cliErr != nil {
		return fmt.Errorf("client: %w", cliErr)
	}
	return nil
}
