package direct

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/internal/perftest"
	"github.com/verbsrt/verbsrt/internal/provider"
	"github.com/verbsrt/verbsrt/verbs"
)

// DefaultCQMod is perftest's DEF_CQ_MOD: a bandwidth run signals every
// DefaultCQMod'th WR unless Config.CQMod says otherwise.
const DefaultCQMod = 100

// Defaults of the floor's own settings, as perftest's.
const (
	directRxDepth  = 512 // perftest's DEF_RX_SEND
	directCacheLn  = 64  // perftest's DEF_CACHE_LINE_SIZE
	directPollSize = 64  // WCs polled a call
	// directRecvBytes bounds the receive region of a send server, which
	// gives each posted receive a slot of its own.
	directRecvBytes = 16 << 20
)

// Config is what one end runs: perftest's flags, by the names of
// "verbsrt bench".
type Config struct {
	Test     string // write, read, send or atomic
	Lat      bool   // latency: one signalled WR at a time
	PingPong bool   // with Lat and send: half of a Send answered by the peer's
	Provider string // the provider's name: the GID choice and the rocev2 polling depend on it
	Size     int
	Iters    int
	TxDepth  int // WRs in flight
	RxDepth  int // receives a send server keeps posted (0: perftest's 512)
	// CQMod signals every CQMod'th WR (and the last); PostList posts in
	// chains of at most PostList (0: as many as the window has room
	// for), perftest's --cq-mod and --post_list.
	CQMod, PostList int
	// PeerPattern: the peer's buffers hold this end's pattern, so its
	// bytes are checked as a verbsrt peer's are.
	PeerPattern bool
	IBPort      int
	GIDIndex    int // < 0: the provider's choice
}

// end is one end of a run.
type end struct {
	cfg     Config
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
func (e *end) peerPatterned() bool { return e.hello.Verbsrt || e.cfg.PeerPattern }

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

func (e *end) close() {
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
func (e *end) open(p verbs.Provider) error {
	cfg := e.cfg
	dev, err := provider.FindDevice(p, e.devName)
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
	if e.scq, err = e.ctx.CreateCQ(verbs.CQSpec{CQE: cfg.TxDepth}); err != nil {
		return fmt.Errorf("couldn't create send CQ: %w", err)
	}
	recvDepth := e.recvDepth()
	if e.rcq, err = e.ctx.CreateCQ(verbs.CQSpec{CQE: max(recvDepth, 1)}); err != nil {
		return fmt.Errorf("couldn't create receive CQ: %w", err)
	}
	caps := verbs.QPCaps{MaxSendWR: cfg.TxDepth, MaxRecvWR: max(recvDepth, 1), MaxSendSGE: 1, MaxRecvSGE: 1}
	if e.qp, err = pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: e.scq, RecvCQ: e.rcq, Caps: caps}); err != nil {
		return fmt.Errorf("couldn't create QP: %w", err)
	}
	attr, err := e.qp.Query()
	if err != nil {
		return fmt.Errorf("couldn't query QP: %w", err)
	}
	e.inline = (cfg.Test == "write" || cfg.Test == "send") && cfg.Size <= attr.Cap.MaxInlineData
	// The local part holds a cycle of sources (or a result slot per WR
	// in flight for atomics); the remote part a cycle of targets, or a
	// slot per posted receive. Up to 64 KiB pages and 256-byte lines.
	const maxCycle, maxLine = 64 << 10, 256
	region := max(directInc(cfg.Size, maxLine), maxCycle)
	localLen := max(region, cfg.TxDepth*8)
	remoteLen := max(region, recvDepth*directInc(cfg.Size, maxLine))
	if e.arena, err = verbs.NewArena(localLen + remoteLen); err != nil {
		return fmt.Errorf("couldn't allocate work buf: %w", err)
	}
	e.buf = e.arena.Bytes()[:localLen+remoteLen]
	e.local, e.remote = e.buf[:localLen], e.buf[localLen:]
	for i := range e.local {
		e.local[i] = directPattern(i)
	}
	if cfg.Test == "read" || cfg.Test == "atomic" {
		clear(e.local) // what lands here is the peer's
	}
	switch cfg.Test {
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
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: uint8(cfg.IBPort),
		AccessFlags: verbs.AccessAllRemote}, verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return fmt.Errorf("failed to modify QP to INIT: %w", err)
	}
	return nil
}

// recvDepth is how many receives a send server, and a ping-pong client,
// keeps posted: -r (else perftest's 512), at most one per message, and as
// many as fit the receive region.
func (e *end) recvDepth() int {
	if e.cfg.Test != "send" || (e.client && !e.cfg.PingPong) {
		return 0
	}
	d := e.cfg.RxDepth
	if d == 0 {
		d = directRxDepth
	}
	return max(1, min(d, e.cfg.Iters, directRecvBytes/directInc(e.cfg.Size, 256)))
}

// dest fills this end's keys: the port's LID and GID, the QP, a random
// PSN, and the remote part of the buffer.
func (e *end) dest() error {
	cfg := e.cfg
	port, err := e.ctx.QueryPort(uint8(cfg.IBPort))
	if err != nil {
		return fmt.Errorf("couldn't get port info: %w", err)
	}
	e.my = perftest.Dest{LID: port.LID, OutReads: 1, QPN: e.qp.QPN(), PSN: verbs.RandomPSN(),
		RKey: e.mr.RKey(), VAddr: e.mr.Addr() + uint64(len(e.local))}
	if cfg.Test == "read" || cfg.Test == "atomic" {
		dattr, err := e.ctx.QueryDevice()
		if err != nil {
			return fmt.Errorf("couldn't query device: %w", err)
		}
		e.my.OutReads = uint32(max(1, min(dattr.MaxQPRdAtom, 0xffff)))
	}
	gidx := cfg.GIDIndex
	if gidx < 0 {
		switch {
		case cfg.Provider == "soft":
			gidx = 1 // its IPv4-mapped GID, which every soft device has
		case port.LinkLayer == verbs.LinkLayerEthernet || cfg.Provider == "rocev2":
			gidx = 0 // as perftest on RoCE without -x
		}
	}
	if gidx >= 0 {
		e.withGID = true
		if e.my.GID, err = e.ctx.QueryGID(uint8(cfg.IBPort), gidx); err != nil {
			return fmt.Errorf("can't read sgid of index %d: %w", gidx, err)
		}
		e.cfg.GIDIndex = gidx
	}
	e.hello.MTU = port.ActiveMTU
	return nil
}

// connect moves the QP to RTR and RTS with perftest's attributes: a GRH
// with hop limit 255 when the ends use GIDs, the peer's out_reads as this
// end's outstanding READs and atomics, 14 (67 ms) for the ACK timeout, 7
// for the retries and the RNR retries (7: for ever).
func (e *end) connect() error {
	cfg := e.cfg
	rtr := verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: e.hello.MTU, DestQPN: e.rem.QPN, RQPSN: e.rem.PSN,
		MaxDestRdAtomic: uint8(min(e.my.OutReads, 255)), MinRNRTimer: 12,
		AH: verbs.AHAttr{DLID: e.rem.LID, PortNum: uint8(cfg.IBPort)}}
	if e.withGID {
		rtr.AH.IsGlobal = true
		rtr.AH.GRH = verbs.GlobalRoute{DGID: e.rem.GID, HopLimit: 0xff, SGIDIndex: uint8(cfg.GIDIndex)}
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

// RunEnd runs one end of a test on p's device dev ("": the first), the
// client when client is set, over the control connection c, and returns the result to print: the client's own; a
// server's own for send, else the client's as it reported it.
func RunEnd(ctx context.Context, p verbs.Provider, cfg Config, dev string, client bool, c net.Conn, out io.Writer,
	header func(dev string)) (benchkit.Result, error) {
	e := &end{cfg: cfg, client: client, devName: dev, out: out, header: header}
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

func (e *end) run(ctx context.Context, p verbs.Provider, pc *perftest.Conn) (benchkit.Result, error) {
	cfg := e.cfg
	if err := e.open(p); err != nil {
		return benchkit.Result{}, err
	}
	if e.header != nil {
		e.header(e.devName)
	}
	if err := e.dest(); err != nil {
		return benchkit.Result{}, err
	}
	var err error
	if e.hello, err = pc.Hello(os.Getpagesize(), directCacheLn, e.hello.MTU); err != nil {
		return benchkit.Result{}, err
	}
	if e.hello.CycleBuffer > 64<<10 || e.hello.CacheLine > 256 || e.hello.CycleBuffer < 1 || e.hello.CacheLine < 1 {
		return benchkit.Result{}, fmt.Errorf("perftest: the peer's page size %d or cache line %d is beyond what this end lays out (64 KiB, 256)",
			e.hello.CycleBuffer, e.hello.CacheLine)
	}
	if e.rem, err = pc.Handshake(e.my, e.withGID); err != nil {
		return benchkit.Result{}, err
	}
	if e.withGID && perftest.V4Mapped(e.my.GID) != perftest.V4Mapped(e.rem.GID) {
		return benchkit.Result{}, perftest.ErrGIDTypes
	}
	if err := e.connect(); err != nil {
		return benchkit.Result{}, err
	}
	for range 2 {
		if _, err := pc.Handshake(e.my, e.withGID); err != nil {
			return benchkit.Result{}, err
		}
	}
	printDirectDest(e.out, "local", e.my, e.withGID)
	printDirectDest(e.out, "remote", e.rem, e.withGID)
	fmt.Fprintf(e.out, " peer: perftest %s%s, MTU %s, cycle buffer %d, cache line %d\n", e.hello.PeerVersion,
		map[bool]string{true: " (verbsrt)"}[e.hello.Verbsrt], e.hello.MTU, e.hello.CycleBuffer, e.hello.CacheLine)

	res := benchkit.Result{Test: cfg.Test, Mode: benchkit.Mode(cfg.Lat, cfg.PingPong), Provider: cfg.Provider, Device: e.devName, QPs: 1, Callers: 1,
		TxDepth: cfg.TxDepth, Bytes: cfg.Size, Iterations: uint64(cfg.Iters)}
	if cfg.Test == "send" {
		var recv *directRecv
		if !e.client || cfg.PingPong {
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
		mine = perftest.Report{Size: uint64(cfg.Size), Iters: uint64(cfg.Iters), BWPeak: res.BWPeakMBps, BWAvg: res.BWAvgMBps, MsgAvg: res.MsgRateMpps}
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
func (e *end) measure(ctx context.Context, recv *directRecv, res *benchkit.Result) error {
	cfg := e.cfg
	cpuStart, start := benchkit.CPUTime(), time.Now()
	var (
		d    time.Duration
		lats []time.Duration
		err  error
	)
	switch {
	case e.client && cfg.Lat:
		lats, err = e.latency(ctx, recv)
	case e.client:
		d, err = e.post(ctx)
	case cfg.PingPong:
		err = e.echo(ctx, recv)
	default:
		d, err = e.receive(ctx, recv)
	}
	if err != nil {
		return err
	}
	if cfg.Lat {
		res.Seconds = time.Since(start).Seconds()
		benchkit.LatencyStats(res, lats)
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
func (e *end) pollWhile(ctx context.Context, f func() error) error {
	if e.cfg.Provider != "rocev2" {
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

// closeOnDone closes c when ctx ends, so that a read or write blocked on
// the peer returns; the returned function stops watching.
func closeOnDone(ctx context.Context, c net.Conn) func() bool {
	return context.AfterFunc(ctx, func() { c.Close() })
}

// RunPair runs both ends of a test in this process, the client on p's
// device cliDev and the server on srvDev, over perftest's protocol on the
// loopback, and returns the client's result and each end's error; each
// end's address lines and checks go to its writer.
func RunPair(ctx context.Context, p verbs.Provider, cfg Config, cliDev, srvDev string, cliOut, srvOut io.Writer) (r benchkit.Result, cliErr, srvErr error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return r, err, nil
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		_, err = RunEnd(ctx, p, cfg, srvDev, false, c, srvOut, nil)
		if err != nil {
			cancel()
		}
		served <- err
	}()
	r, cliErr = func() (benchkit.Result, error) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return benchkit.Result{}, err
		}
		defer c.Close()
		return RunEnd(ctx, p, cfg, cliDev, true, c, cliOut, nil)
	}()
	if cliErr != nil {
		ln.Close()
		cancel()
	}
	return r, cliErr, <-served
}
