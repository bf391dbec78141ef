package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"

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
	my, rem ptDest
	hello   ptHello
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
	devs, err := p.Devices()
	if err != nil {
		return fmt.Errorf("failed to get IB devices list: %w", err)
	}
	var dev verbs.Device
	for _, d := range devs {
		if e.devName == "" || d.Name() == e.devName {
			dev = d
			break
		}
	}
	if dev == nil {
		return fmt.Errorf("IB device %q not found", e.devName)
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

// recvDepth is how many receives a send server keeps posted: -r (else
// perftest's 512), at most one per message, and as many as fit the
// receive region.
func (e *directEnd) recvDepth() int {
	if e.client || e.cfg.test != "send" {
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
	e.my = ptDest{LID: port.LID, OutReads: 1, QPN: e.qp.QPN(), PSN: rand.Uint32() & 0xffffff,
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
func printDirectDest(w io.Writer, side string, d ptDest, withGID bool) {
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
	pc := &ptConn{c: c, client: client}
	r, err := e.run(ctx, p, pc)
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return r, err
}

func (e *directEnd) run(ctx context.Context, p verbs.Provider, pc *ptConn) (benchResult, error) {
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
	if e.hello, err = pc.hello(os.Getpagesize(), directCacheLn, e.hello.MTU); err != nil {
		return benchResult{}, err
	}
	if e.hello.CycleBuffer > 64<<10 || e.hello.CacheLine > 256 || e.hello.CycleBuffer < 1 || e.hello.CacheLine < 1 {
		return benchResult{}, fmt.Errorf("perftest: the peer's page size %d or cache line %d is beyond what this end lays out (64 KiB, 256)",
			e.hello.CycleBuffer, e.hello.CacheLine)
	}
	if e.rem, err = pc.handshake(e.my, e.withGID); err != nil {
		return benchResult{}, err
	}
	if e.withGID && ptV4Mapped(e.my.GID) != ptV4Mapped(e.rem.GID) {
		return benchResult{}, errPtGIDTypes
	}
	if err := e.connect(); err != nil {
		return benchResult{}, err
	}
	for range 2 {
		if _, err := pc.handshake(e.my, e.withGID); err != nil {
			return benchResult{}, err
		}
	}
	printDirectDest(e.out, "local", e.my, e.withGID)
	printDirectDest(e.out, "remote", e.rem, e.withGID)
	fmt.Fprintf(e.out, " peer: perftest %s%s, MTU %s, cycle buffer %d, cache line %d\n", e.hello.PeerVersion,
		map[bool]string{true: " (verbsrt)"}[e.hello.Verbsrt], e.hello.MTU, e.hello.CycleBuffer, e.hello.CacheLine)

	res := benchResult{Test: cfg.test, Mode: "bw", Provider: cfg.provider, Device: e.devName, QPs: 1, Callers: 1,
		TxDepth: cfg.txDepth, Bytes: cfg.size, Iterations: uint64(cfg.iters)}
	if cfg.test == "send" {
		var recv *directRecv
		if !e.client {
			if recv, err = e.postRecvs(); err != nil {
				return res, err
			}
		}
		if _, err := pc.handshake(e.my, e.withGID); err != nil {
			return res, err
		}
		var d time.Duration
		if e.client {
			d, err = e.post(ctx)
		} else {
			d, err = e.receive(ctx, recv)
		}
		if err != nil {
			return res, err
		}
		directRates(&res, d)
		return res, pc.close(e.my, e.withGID)
	}
	// write, read, atomic: no sync before the run; the client runs at once.
	var mine ptReport
	if e.client {
		d, err := e.post(ctx)
		if err != nil {
			return res, err
		}
		directRates(&res, d)
		mine = ptReport{Size: uint64(cfg.size), Iters: uint64(cfg.iters), BWPeak: res.BWPeakMBps, BWAvg: res.BWAvgMBps, MsgAvg: res.MsgRateMpps}
	}
	// The server waits here for the client's run.
	if err := e.pollWhile(ctx, func() error { _, err := pc.handshake(e.my, e.withGID); return err }); err != nil {
		return res, err
	}
	theirs, err := pc.reports(mine)
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
	return res, pc.close(e.my, e.withGID)
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

// directRates fills r's rates from the run's time.
func directRates(r *benchResult, d time.Duration) {
	r.Seconds = d.Seconds()
	if r.Seconds <= 0 {
		return
	}
	r.BWAvgMBps = float64(r.Bytes) * float64(r.Iterations) / r.Seconds / (1 << 20)
	// One figure a run: the floor keeps no per-operation timestamps.
	r.BWPeakMBps = r.BWAvgMBps
	r.MsgRateMpps = float64(r.Iterations) / r.Seconds / 1e6
}

// spinPoll polls cq into wcs until it returns something or ctx ends,
// yielding between empty polls: a soft provider's engine needs a P.
func spinPoll(ctx context.Context, cq verbs.CQ, wcs []verbs.WC) (int, error) {
	for empty := 1; ; empty++ {
		n, err := cq.Poll(wcs)
		if n > 0 || err != nil {
			return n, err
		}
		runtime.Gosched()
		if empty%1024 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
}

// post is the client's run: -n operations, at most -t in flight, posted
// in chains of up to -l (0: whatever the window has room for), every
// -cq-mod'th and the last signalled. A signalled WR's completion
// completes every earlier one (RC completes in order), so its wr_id, the
// operation's sequence number, counts them.
func (e *directEnd) post(ctx context.Context) (time.Duration, error) {
	cfg := e.cfg
	total := uint64(cfg.iters)
	depth := uint64(cfg.txDepth)
	cqMod := uint64(max(1, min(cfg.cqMod, cfg.txDepth)))
	chain := depth
	if cfg.postList > 0 {
		chain = uint64(cfg.postList)
	}
	inc := directInc(cfg.size, e.hello.CacheLine)
	locSlots := uint64(directSlots(cfg.size, e.hello.CacheLine, e.hello.CycleBuffer))
	remSlots := locSlots
	if cfg.test == "atomic" {
		// Results land in a slot per WR in flight, so the check can read
		// each; the targets cycle through the peer's buffer by lines.
		remSlots = uint64(directSlots(8, e.hello.CacheLine, e.hello.CycleBuffer))
	}
	wrs := make([]verbs.SendWR, chain)
	sges := make([]verbs.SGE, chain)
	var opcode verbs.Opcode
	switch cfg.test {
	case "write":
		opcode = verbs.OpWrite
	case "read":
		opcode = verbs.OpRead
	case "send":
		opcode = verbs.OpSend
	case "atomic":
		opcode = verbs.OpAtomicFetchAdd
	}
	for i := range wrs {
		sges[i] = verbs.SGE{Length: uint32(cfg.size), LKey: e.mr.LKey()}
		wrs[i] = verbs.SendWR{SGL: sges[i : i+1], Opcode: opcode}
	}
	base := e.mr.Addr()
	check := newAtomicCheck(e, remSlots)
	wcs := make([]verbs.WC, directPollSize)
	var posted, completed uint64
	start := time.Now()
	for completed < total {
		if n := min(depth-(posted-completed), total-posted, chain); n > 0 {
			for i := range n {
				seq := posted + i
				wr := &wrs[i]
				wr.ID = seq
				wr.Flags = 0
				if (seq+1)%cqMod == 0 || seq == total-1 {
					wr.Flags = verbs.SendSignaled
				}
				if e.inline {
					wr.Flags |= verbs.SendInline
				}
				loc := uint64(0)
				if cfg.test == "atomic" {
					loc = (seq % depth) * 8
				} else {
					loc = (seq % locSlots) * uint64(inc)
				}
				wr.SGL[0].Addr = base + loc
				switch cfg.test {
				case "write", "read":
					wr.RDMA = verbs.RDMA{RemoteAddr: e.rem.VAddr + (seq%remSlots)*uint64(inc), RKey: e.rem.RKey}
				case "atomic":
					wr.Atomic = verbs.Atomic{RemoteAddr: e.rem.VAddr + (seq%remSlots)*uint64(e.hello.CacheLine), RKey: e.rem.RKey, CompareAdd: 1}
				}
			}
			if k, err := e.qp.PostSend(wrs[:n]); err != nil {
				return 0, fmt.Errorf("couldn't post send: scnt=%d: %w", posted+uint64(k), err)
			}
			posted += n
		}
		k, err := e.scq.Poll(wcs)
		if err != nil {
			return 0, fmt.Errorf("poll CQ failed: %w", err)
		}
		if k == 0 && (posted-completed == depth || posted == total) {
			// Nothing to post until a completion: wait for one.
			if k, err = spinPoll(ctx, e.scq, wcs); err != nil {
				return 0, fmt.Errorf("poll CQ: %w", err)
			}
		}
		for i := range wcs[:k] {
			wc := &wcs[i]
			if wc.Status != verbs.WCSuccess {
				return 0, fmt.Errorf("completion with error at scnt=%d, ccnt=%d: %w", posted, completed, wc.Err())
			}
			if wc.WRID+1 > completed {
				if err := check.done(completed, wc.WRID+1); err != nil {
					return 0, err
				}
				completed = wc.WRID + 1
			}
		}
	}
	d := time.Since(start)
	if err := e.checkClient(posted, check); err != nil {
		return d, err
	}
	return d, nil
}

// atomicCheck checks the values an atomic client fetched: the n'th
// FETCH_AND_ADD of 1 to a slot returns the slot's first value plus n-1,
// whatever the server's buffer held at the start.
type atomicCheck struct {
	e     *directEnd
	slots uint64
	first map[uint64]uint64 // slot -> value the first fetch returned
	depth uint64
}

func newAtomicCheck(e *directEnd, slots uint64) *atomicCheck {
	if e.cfg.test != "atomic" {
		return nil
	}
	return &atomicCheck{e: e, slots: slots, first: map[uint64]uint64{}, depth: uint64(e.cfg.txDepth)}
}

// done checks the results of operations from to to-1, just completed.
func (c *atomicCheck) done(from, to uint64) error {
	if c == nil {
		return nil
	}
	for seq := from; seq < to; seq++ {
		v := binary.LittleEndian.Uint64(c.e.local[(seq%c.depth)*8:])
		slot, n := seq%c.slots, seq/c.slots
		f, ok := c.first[slot]
		if !ok {
			c.first[slot] = v - n
			continue
		}
		if v != f+n {
			return fmt.Errorf("fetch-and-add %d fetched %#x from line %d of the peer's buffer, want %#x (its first fetch plus %d)", seq, v, slot, f+n, n)
		}
	}
	return nil
}

// checkClient checks what a client can once its run is over: the bytes
// READ from a verbsrt server follow its pattern; the fetched values were
// checked as they completed.
func (e *directEnd) checkClient(ops uint64, c *atomicCheck) error {
	cfg := e.cfg
	switch {
	case cfg.test == "atomic":
		fmt.Fprintf(e.out, " check: %d fetch-and-adds fetched consecutive values from each of %d lines of the peer's buffer\n", ops, c.slots)
	case cfg.test == "read" && e.hello.Verbsrt:
		inc := directInc(cfg.size, e.hello.CacheLine)
		slots := min(uint64(directSlots(cfg.size, e.hello.CacheLine, e.hello.CycleBuffer)), ops)
		for s := range int(slots) {
			off := s * inc
			for i, b := range e.local[off : off+cfg.size] {
				if b != directPattern(off+i) {
					return fmt.Errorf("READ into slot %d: byte %d is %#x, the server's pattern has %#x", s, i, b, directPattern(off+i))
				}
			}
		}
		fmt.Fprintf(e.out, " check: the bytes READ are the server's pattern\n")
	}
	return nil
}

// checkServer checks what a server of write or atomic can once the client
// reported its run: the bytes a verbsrt client wrote follow its pattern;
// the counters the fetch-and-adds of 1 incremented add up to their
// number (perftest's client adds 1 per operation and, without
// --perform_warm_up, does no others).
func (e *directEnd) checkServer(size int, iters uint64) error {
	cfg := e.cfg
	switch {
	case size < 1 || size > len(e.remote):
		return fmt.Errorf("the client reports %d-byte messages; this end's buffer takes %d (give the server the client's -s)", size, len(e.remote))
	case cfg.test == "atomic":
		var sum uint64
		for i := 0; i+8 <= len(e.remote); i += 8 {
			sum += binary.LittleEndian.Uint64(e.remote[i:])
		}
		if sum != iters {
			return fmt.Errorf("the counters in this end's buffer add up to %d after %d fetch-and-adds of 1", sum, iters)
		}
		fmt.Fprintf(e.out, " check: the counters add up to %d, one per fetch-and-add\n", sum)
	case cfg.test == "write" && e.hello.Verbsrt:
		inc := directInc(size, e.hello.CacheLine)
		slots := min(uint64(directSlots(size, e.hello.CacheLine, e.hello.CycleBuffer)), iters)
		for s := range int(slots) {
			off := s * inc
			if !bytes.Equal(e.remote[off:off+size], e.local[off:off+size]) {
				return fmt.Errorf("the WRITEs into slot %d are not the client's pattern", s)
			}
		}
		fmt.Fprintf(e.out, " check: the bytes written are the client's pattern\n")
	}
	return nil
}

// directRecv is a send server's receive state: one WR per slot of the
// receive region, re-posted as its message is consumed.
type directRecv struct {
	wrs    []verbs.RecvWR
	posted uint64
}

// postRecvs posts the send server's receives, each into its own slot, so
// that a message is checked before another can land there.
func (e *directEnd) postRecvs() (*directRecv, error) {
	depth := e.recvDepth()
	inc := directInc(e.cfg.size, e.hello.CacheLine)
	r := &directRecv{wrs: make([]verbs.RecvWR, depth)}
	sges := make([]verbs.SGE, depth)
	for i := range r.wrs {
		sges[i] = verbs.SGE{Addr: e.mr.Addr() + uint64(len(e.local)+i*inc), Length: uint32(e.cfg.size), LKey: e.mr.LKey()}
		r.wrs[i] = verbs.RecvWR{ID: uint64(i), SGL: sges[i : i+1]}
	}
	if n, err := e.qp.PostRecv(r.wrs); err != nil {
		return nil, fmt.Errorf("couldn't post receive (%d): %w", n, err)
	}
	r.posted = uint64(depth)
	return r, nil
}

// receive is a send server's run: it polls the receive CQ until -n
// messages arrived, checks each (its length; its bytes when the client is
// verbsrt) and re-posts its receive in one chain a poll while more are
// to come. The time runs from the first message to the last.
func (e *directEnd) receive(ctx context.Context, r *directRecv) (time.Duration, error) {
	cfg := e.cfg
	total := uint64(cfg.iters)
	depth := uint64(len(r.wrs))
	inc := directInc(cfg.size, e.hello.CacheLine)
	srcSlots := uint64(directSlots(cfg.size, e.hello.CacheLine, e.hello.CycleBuffer))
	wcs := make([]verbs.WC, directPollSize)
	repost := make([]verbs.RecvWR, 0, directPollSize)
	var got uint64
	var start time.Time
	for got < total {
		k, err := spinPoll(ctx, e.rcq, wcs)
		if err != nil {
			return 0, fmt.Errorf("poll receive CQ: %w", err)
		}
		if got == 0 {
			start = time.Now()
		}
		repost = repost[:0]
		for i := range wcs[:k] {
			wc := &wcs[i]
			if wc.Status != verbs.WCSuccess {
				return 0, fmt.Errorf("receive %d completed with error: %w", got, wc.Err())
			}
			if int(wc.ByteLen) != cfg.size {
				return 0, fmt.Errorf("message %d: %d bytes, want %d (give the server the client's -s)", got, wc.ByteLen, cfg.size)
			}
			slot := wc.WRID % depth
			if e.hello.Verbsrt {
				// The client sent message got from this slot of its cycle
				// of sources, which hold the pattern as this end's do.
				src := int(got%srcSlots) * inc
				off := int(slot) * inc
				if !bytes.Equal(e.remote[off:off+cfg.size], e.local[src:src+cfg.size]) {
					return 0, fmt.Errorf("message %d is not the client's pattern", got)
				}
			}
			got++
			if r.posted < total {
				wr := r.wrs[slot]
				wr.ID = r.posted
				repost = append(repost, wr)
				r.posted++
			}
		}
		if len(repost) > 0 {
			if n, err := e.qp.PostRecv(repost); err != nil {
				return 0, fmt.Errorf("couldn't post receive (%d): %w", n, err)
			}
		}
	}
	d := time.Since(start)
	if e.hello.Verbsrt {
		fmt.Fprintf(e.out, " check: %d messages of %d bytes, each the client's pattern\n", got, cfg.size)
	} else {
		fmt.Fprintf(e.out, " check: %d messages of %d bytes\n", got, cfg.size)
	}
	return d, nil
}

// printDirectHeader prints the report's header for a -direct run.
func printDirectHeader(w io.Writer, cfg benchConfig, dev, peerDev string) {
	fmt.Fprintln(w, benchRule)
	fmt.Fprintf(w, "                    %s BW Test\n", benchTests[cfg.test])
	fmt.Fprintf(w, " Provider        : %-8s\tDevice         : %s -> %s\n", cfg.provider, dev, peerDev)
	fmt.Fprintf(w, " Number of qps   : 1       \tConnection type: RC\n")
	fmt.Fprintf(w, " TX depth        : %-8d\tCQ moderation  : %d\n", cfg.txDepth, max(1, min(cfg.cqMod, cfg.txDepth)))
	pl := "the window's room"
	if cfg.postList > 0 {
		pl = strconv.Itoa(cfg.postList)
	}
	fmt.Fprintf(w, " Runtime         : none    \tPost list      : %s\n", pl)
	fmt.Fprintln(w, " -direct: one goroutine posts and polls its QP, the Go floor")
	fmt.Fprintln(w, benchRule)
	unit := "MB/sec"
	if cfg.gbits {
		unit = "Gb/sec"
	}
	fmt.Fprintf(w, " #bytes     #iterations    BW peak[%s]    BW average[%[1]s]   MsgRate[Mpps]\n", unit)
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
// client's, as perftest's server does).
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
	printBenchResult(w, cfg, r)
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
