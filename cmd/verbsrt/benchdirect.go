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

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/internal/perftest"
	"github.com/verbsrt/verbsrt/verbs"
)

// "verbsrt bench -direct": the Go floor of a bandwidth test. One goroutine
// per end owns its QP and CQs: the client posts chains of WRs itself,
// signalling every -cq-mod'th and the run's last, and polls its send CQ;
// the server of send posts receives and polls its receive CQ. No runtime,
// no actor, no future: what remains is the provider's cost and Go's. The
// ends meet over perftest's own protocol (perftest.go), so either may be
// ib_write_bw, ib_read_bw, ib_send_bw or ib_atomic_bw.

// Defaults of -direct's own flags, as perftest's.
const (
	directCQMod    = 100 // perftest's DEF_CQ_MOD
	directRxDepth  = 512 // perftest's DEF_RX_SEND
	directCacheLn  = 64  // perftest's DEF_CACHE_LINE_SIZE
	directPollSize = 64  // WCs polled a call
	// directRecvBytes bounds the receive region of a send server, which
	// gives each posted receive a slot of its own.
	directRecvBytes = 16 << 20
)

// directEnd is one end of a -direct run.
type directEnd struct {
	cfg     benchConfig
	client  bool
	ctx     verbs.Context
	scq     verbs.CQ
	rcq     verbs.CQ
	qp      verbs.QP
	arena   *verbs.Arena
	mr      verbs.MR
	buf     []byte
	local   []byte // the first part of buf: sources of WRITE and SEND, destinations of READ and atomics
	remote  []byte // the rest: what the peer accesses, or where SENDs land
	inline  bool
	withGID bool
	my, rem perftest.Dest
	hello   perftest.Hello
	devName string
	// out takes the address lines and the checks' verdicts; the result
	// lines are the caller's. header, if not nil, prints the table's head
	// once the device is open.
	out    io.Writer
	header func(dev string)
}

// directPattern is the byte at offset off of the buffers whose contents
// the peer checks: the sources of a verbsrt client and the region a
// verbsrt server exposes to READ.
func directPattern(off int) byte { return byte(off%251 + 1) }

// peerPatterned says whether the peer's buffers hold directPattern: it is
// verbsrt, or a perftest program that -peer-pattern vouches for.
func (e *directEnd) peerPatterned() bool { return e.hello.Verbsrt || e.cfg.peerPattern }

// directInc is perftest's INC: the stride between successive WRs'
// addresses, the size rounded up to a cache line.
func directInc(size, cacheLine int) int {
	if size <= cacheLine {
		return cacheLine
	}
	return (size + cacheLine - 1) / cacheLine * cacheLine
}

// slots is how many distinct addresses successive WRs cycle through in a
// region of cycle bytes, perftest's way: every stride of the cycle buffer
// while a message takes at most half of it, else one.
func directSlots(size, cacheLine, cycle int) int {
	if size > cycle/2 {
		return 1
	}
	return cycle / directInc(size, cacheLine)
}

func (e *directEnd) close() {
	if e.ctx != nil {
		e.ctx.Close()
	}
	if e.arena != nil {
		e.arena.Close()
	}
}

// open opens the device and makes the QP, its CQs and the registered
// buffer, laid out for the largest of the values the peer may announce
// (page size and cache line, known only after hello).
func (e *directEnd) open(p verbs.Provider) error {
	cfg := e.cfg
	dev, err := findDevice(p, e.devName)
	if err != nil {
		return err
	}
	e.devName = dev.Name()
	if e.ctx, err = dev.Open(); err != nil {
		return fmt.Errorf("couldn't get context for %s: %w", dev.Name(), err)
	}
	pd, err := e.ctx.AllocPD()
	if err != nil {
		return fmt.Errorf("couldn't allocate PD: %w", err)
	}
	if e.scq, err = e.ctx.CreateCQ(verbs.CQSpec{CQE: cfg.txDepth}); err != nil {
		return fmt.Errorf("couldn't create send CQ: %w", err)
	}
	recvDepth := e.recvDepth()
	if e.rcq, err = e.ctx.CreateCQ(verbs.CQSpec{CQE: max(recvDepth, 1)}); err != nil {
		return fmt.Errorf("couldn't create receive CQ: %w", err)
	}
	caps := verbs.QPCaps{MaxSendWR: cfg.txDepth, MaxRecvWR: max(recvDepth, 1), MaxSendSGE: 1, MaxRecvSGE: 1}
	if e.qp, err = pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: e.scq, RecvCQ: e.rcq, Caps: caps}); err != nil {
		return fmt.Errorf("couldn't create QP: %w", err)
	}
	attr, err := e.qp.Query()
	if err != nil {
		return fmt.Errorf("couldn't query QP: %w", err)
	}
	e.inline = (cfg.test == "write" || cfg.test == "send") && cfg.size <= attr.Cap.MaxInlineData
	// The local part holds a cycle of sources (or a result slot per WR
	// in flight for atomics); the remote part a cycle of targets, or a
	// slot per posted receive. Up to 64 KiB pages and 256-byte lines.
	const maxCycle, maxLine = 64 << 10, 256
	region := max(directInc(cfg.size, maxLine), maxCycle)
	localLen := max(region, cfg.txDepth*8)
	remoteLen := max(region, recvDepth*directInc(cfg.size, maxLine))
	if e.arena, err = verbs.NewArena(localLen + remoteLen); err != nil {
		return fmt.Errorf("couldn't allocate work buf: %w", err)
	}
	e.buf = e.arena.Bytes()[:localLen+remoteLen]
	e.local, e.remote = e.buf[:localLen], e.buf[localLen:]
	for i := range e.local {
		e.local[i] = directPattern(i)
	}
	if cfg.test == "read" || cfg.test == "atomic" {
		clear(e.local) // what lands here is the peer's
	}
	switch cfg.test {
	case "read":
		for i := range e.remote {
			e.remote[i] = directPattern(i)
		}
	default:
		clear(e.remote) // atomics count from 0; others are overwritten
	}
	if e.mr, err = pd.RegMR(e.buf, verbs.AccessAllRemote); err != nil {
		return fmt.Errorf("couldn't register MR: %w", err)
	}
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: uint8(cfg.ibPort),
		AccessFlags: verbs.AccessAllRemote}, verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return fmt.Errorf("failed to modify QP to INIT: %w", err)
	}
	return nil
}

// recvDepth is how many receives a send server, and a ping-pong client,
// keeps posted: -r (else perftest's 512), at most one per message, and as
// many as fit the receive region.
func (e *directEnd) recvDepth() int {
	if e.cfg.test != "send" || (e.client && !e.cfg.pingpong) {
		return 0
	}
	d := e.cfg.rxDepth
	if d == 0 {
		d = directRxDepth
	}
	return max(1, min(d, e.cfg.iters, directRecvBytes/directInc(e.cfg.size, 256)))
}

// dest fills this end's keys: the port's LID and GID, the QP, a random
// PSN, and the remote part of the buffer.
func (e *directEnd) dest() error {
	cfg := e.cfg
	port, err := e.ctx.QueryPort(uint8(cfg.ibPort))
	if err != nil {
		return fmt.Errorf("couldn't get port info: %w", err)
	}
	e.my = perftest.Dest{LID: port.LID, OutReads: 1, QPN: e.qp.QPN(), PSN: verbs.RandomPSN(),
		RKey: e.mr.RKey(), VAddr: e.mr.Addr() + uint64(len(e.local))}
	if cfg.test == "read" || cfg.test == "atomic" {
		dattr, err := e.ctx.QueryDevice()
		if err != nil {
			return fmt.Errorf("couldn't query device: %w", err)
		}
		e.my.OutReads = uint32(max(1, min(dattr.MaxQPRdAtom, 0xffff)))
	}
	gidx := cfg.gidIndex
	if gidx < 0 {
		switch {
		case cfg.provider == "soft":
			gidx = 1 // its IPv4-mapped GID, which every soft device has
		case port.LinkLayer == verbs.LinkLayerEthernet || cfg.provider == "rocev2":
			gidx = 0 // as perftest on RoCE without -x
		}
	}
	if gidx >= 0 {
		e.withGID = true
		if e.my.GID, err = e.ctx.QueryGID(uint8(cfg.ibPort), gidx); err != nil {
			return fmt.Errorf("can't read sgid of index %d: %w", gidx, err)
		}
		e.cfg.gidIndex = gidx
	}
	e.hello.MTU = port.ActiveMTU
	return nil
}

// connect moves the QP to RTR and RTS with perftest's attributes: a GRH
// with hop limit 255 when the ends use GIDs, the peer's out_reads as this
// end's outstanding READs and atomics, 14 (67 ms) for the ACK timeout, 7
// for the retries and the RNR retries (7: for ever).
func (e *directEnd) connect() error {
	cfg := e.cfg
	rtr := verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: e.hello.MTU, DestQPN: e.rem.QPN, RQPSN: e.rem.PSN,
		MaxDestRdAtomic: uint8(min(e.my.OutReads, 255)), MinRNRTimer: 12,
		AH: verbs.AHAttr{DLID: e.rem.LID, PortNum: uint8(cfg.ibPort)}}
	if e.withGID {
		rtr.AH.IsGlobal = true
		rtr.AH.GRH = verbs.GlobalRoute{DGID: e.rem.GID, HopLimit: 0xff, SGIDIndex: uint8(cfg.gidIndex)}
	}
	if err := e.qp.Modify(&rtr, verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
		verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		return fmt.Errorf("failed to modify QP to RTR: %w", err)
	}
	rdAtomic := e.rem.OutReads
	if dattr, err := e.ctx.QueryDevice(); err == nil && dattr.MaxQPInitRdAtom > 0 {
		rdAtomic = min(rdAtomic, uint32(dattr.MaxQPInitRdAtom))
	}
	rts := verbs.QPAttr{State: verbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: e.my.PSN,
		MaxRdAtomic: uint8(max(1, min(rdAtomic, 255)))}
	if err := e.qp.Modify(&rts, verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
		verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("failed to modify QP to RTS: %w", err)
	}
	return nil
}

// printDirectDest prints a QP's keys as perftest does.
func printDirectDest(w io.Writer, side string, d perftest.Dest, withGID bool) {
	fmt.Fprintf(w, " %s address: LID %#04x QPN %#06x PSN %#06x OUT %#04x RKey %#08x VAddr %#016x\n",
		side, d.LID, d.QPN, d.PSN, d.OutReads, d.RKey, d.VAddr)
	if withGID {
		fmt.Fprintf(w, " GID: %s\n", net.IP(d.GID[:]))
	}
}

// runDirectEnd runs one end of a -direct test over the control
// connection c and returns the result to print: the client's own; a
// server's own for send, else the client's as it reported it.
func runDirectEnd(ctx context.Context, p verbs.Provider, cfg benchConfig, dev string, client bool, c net.Conn, out io.Writer,
	header func(dev string)) (benchResult, error) {
	e := &directEnd{cfg: cfg, client: client, devName: dev, out: out, header: header}
	defer e.close()
	stop := closeOnDone(ctx, c)
	defer stop()
	pc := perftest.NewConn(c, client)
	r, err := e.run(ctx, p, pc)
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return r, err
}

func (e *directEnd) run(ctx context.Context, p verbs.Provider, pc *perftest.Conn) (benchResult, error) {
	cfg := e.cfg
	if err := e.open(p); err != nil {
		return benchResult{}, err
	}
	if e.header != nil {
		e.header(e.devName)
	}
	if err := e.dest(); err != nil {
		return benchResult{}, err
	}
	var err error
	if e.hello, err = pc.Hello(os.Getpagesize(), directCacheLn, e.hello.MTU); err != nil {
		return benchResult{}, err
	}
	if e.hello.CycleBuffer > 64<<10 || e.hello.CacheLine > 256 || e.hello.CycleBuffer < 1 || e.hello.CacheLine < 1 {
		return benchResult{}, fmt.Errorf("perftest: the peer's page size %d or cache line %d is beyond what this end lays out (64 KiB, 256)",
			e.hello.CycleBuffer, e.hello.CacheLine)
	}
	if e.rem, err = pc.Handshake(e.my, e.withGID); err != nil {
		return benchResult{}, err
	}
	if e.withGID && perftest.V4Mapped(e.my.GID) != perftest.V4Mapped(e.rem.GID) {
		return benchResult{}, perftest.ErrGIDTypes
	}
	if err := e.connect(); err != nil {
		return benchResult{}, err
	}
	for range 2 {
		if _, err := pc.Handshake(e.my, e.withGID); err != nil {
			return benchResult{}, err
		}
	}
	printDirectDest(e.out, "local", e.my, e.withGID)
	printDirectDest(e.out, "remote", e.rem, e.withGID)
	fmt.Fprintf(e.out, " peer: perftest %s%s, MTU %s, cycle buffer %d, cache line %d\n", e.hello.PeerVersion,
		map[bool]string{true: " (verbsrt)"}[e.hello.Verbsrt], e.hello.MTU, e.hello.CycleBuffer, e.hello.CacheLine)

	res := benchResult{Test: cfg.test, Mode: cfg.mode(), Provider: cfg.provider, Device: e.devName, QPs: 1, Callers: 1,
		TxDepth: cfg.txDepth, Bytes: cfg.size, Iterations: uint64(cfg.iters)}
	if cfg.test == "send" {
		var recv *directRecv
		if !e.client || cfg.pingpong {
			if recv, err = e.postRecvs(); err != nil {
				return res, err
			}
		}
		if _, err := pc.Handshake(e.my, e.withGID); err != nil {
			return res, err
		}
		if err := e.measure(ctx, recv, &res); err != nil {
			return res, err
		}
		return res, pc.Close(e.my, e.withGID)
	}
	// write, read, atomic: no sync before the run; the client runs at once.
	var mine perftest.Report
	if e.client {
		if err := e.measure(ctx, nil, &res); err != nil {
			return res, err
		}
		// A latency run reports its size and count only: perftest's
		// report carries rates.
		mine = perftest.Report{Size: uint64(cfg.size), Iters: uint64(cfg.iters), BWPeak: res.BWPeakMBps, BWAvg: res.BWAvgMBps, MsgAvg: res.MsgRateMpps}
	}
	// The server waits here for the client's run.
	if err := e.pollWhile(ctx, func() error { _, err := pc.Handshake(e.my, e.withGID); return err }); err != nil {
		return res, err
	}
	theirs, err := pc.Reports(mine)
	if err != nil {
		return res, err
	}
	if !e.client {
		res.Bytes, res.Iterations = int(theirs.Size), theirs.Iters
		res.BWPeakMBps, res.BWAvgMBps, res.MsgRateMpps = theirs.BWPeak, theirs.BWAvg, theirs.MsgAvg
		if res.MsgRateMpps > 0 {
			res.Seconds = float64(res.Iterations) / (res.MsgRateMpps * 1e6)
		}
		if err := e.checkServer(int(theirs.Size), theirs.Iters); err != nil {
			return res, err
		}
	}
	return res, pc.Close(e.my, e.withGID)
}

// measure runs this end's part of the test and fills res from it: a
// latency client's samples, or the rates over the time a bandwidth end's
// run took (a latency server's run only serves), and the CPU per
// operation. recv holds the receives a send server or a ping-pong client
// posted.
func (e *directEnd) measure(ctx context.Context, recv *directRecv, res *benchResult) error {
	cfg := e.cfg
	cpuStart, start := benchkit.CPUTime(), time.Now()
	var (
		d    time.Duration
		lats []time.Duration
		err  error
	)
	switch {
	case e.client && cfg.lat:
		lats, err = e.latency(ctx, recv)
	case e.client:
		d, err = e.post(ctx)
	case cfg.pingpong:
		err = e.echo(ctx, recv)
	default:
		d, err = e.receive(ctx, recv)
	}
	if err != nil {
		return err
	}
	if cfg.lat {
		res.Seconds = time.Since(start).Seconds()
		latencyStats(res, lats)
	} else {
		directRates(res, d)
	}
	res.CPUNsPerOp, _ = benchkit.CPUPerOp(cpuStart, res.Iterations)
	return nil
}

// pollWhile runs f, a wait on the control connection, and on the rocev2
// provider polls this end's CQs meanwhile: that device runs in this
// process, and a poll that finds nothing reads its socket, so the
// responder answers at once rather than when the scheduler wakes the
// transport's receive goroutine. On soft and ibv the device needs no
// poller, and a spinning server would take a CPU from the client. No
// completion is due while it waits: one is an error.
func (e *directEnd) pollWhile(ctx context.Context, f func() error) error {
	if e.cfg.provider != "rocev2" {
		return f()
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	var wcs [1]verbs.WC
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		for _, cq := range []verbs.CQ{e.scq, e.rcq} {
			if n, err := cq.Poll(wcs[:]); err != nil || n > 0 {
				return errors.Join(err, wcs[0].Err(), fmt.Errorf("an unexpected completion while the client runs: %+v", wcs[0]))
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		runtime.Gosched()
	}
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
	p, closeProv, err := openProvider(providerSpec{name: cfg.provider, addr: cfg.rocev2Addr, port: cfg.rocev2Port}, 2)
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var srvOut bytes.Buffer
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		_, err = runDirectEnd(ctx, p, cfg, srvDev, false, c, &srvOut, nil)
		if err != nil {
			cancel()
		}
		srvErr <- err
	}()
	var cliOut bytes.Buffer
	r, cliErr := func() (benchResult, error) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return benchResult{}, err
		}
		defer c.Close()
		return runDirectEnd(ctx, p, cfg, cliDev, true, c, &cliOut, nil)
	}()
	if cliErr != nil {
		ln.Close()
		cancel()
	}
	sErr := <-srvErr
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
	p, closeProv, err := openProvider(providerSpec{name: cfg.provider, addr: cfg.rocev2Addr, port: cfg.rocev2Port}, 1)
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
	spec := providerSpec{name: cfg.provider, addr: cfg.rocev2Addr, port: cfg.rocev2Port}
	if err := checkRocev2Reach(spec, c.RemoteAddr()); err != nil {
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
	r, err := runDirectEnd(ctx, p, cfg, cfg.dev, ln == nil, c, info, header)
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

// closeOnDone closes c when ctx ends, so that a read or write blocked on
// the peer returns; the returned function stops watching.
func closeOnDone(ctx context.Context, c net.Conn) func() bool {
	return context.AfterFunc(ctx, func() { c.Close() })
}
