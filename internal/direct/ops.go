package direct

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/verbs"
)

// directRates fills r's rates from the run's time.
func directRates(r *benchkit.Result, d time.Duration) {
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

// directLayout is where a client's WRs point: each operation's source
// (or, for atomics, result) slot in this end's buffer and its target in
// the peer's, cycling as perftest's do, by sequence number.
type directLayout struct {
	e        *end
	opcode   verbs.Opcode
	inc      uint64 // the stride between slots: the size rounded up to a cache line
	locSlots uint64
	remSlots uint64
	depth    uint64 // atomics: a result slot per WR in flight
}

func (e *end) layout() directLayout {
	cfg := e.cfg
	l := directLayout{e: e, inc: uint64(directInc(cfg.Size, e.hello.CacheLine)), depth: uint64(cfg.TxDepth),
		locSlots: uint64(directSlots(cfg.Size, e.hello.CacheLine, e.hello.CycleBuffer))}
	l.remSlots = l.locSlots
	switch cfg.Test {
	case "write":
		l.opcode = verbs.OpWrite
	case "read":
		l.opcode = verbs.OpRead
	case "send":
		l.opcode = verbs.OpSend
	case "atomic":
		l.opcode = verbs.OpAtomicFetchAdd
		// Results land in a slot per WR in flight, so the check can read
		// each; the targets cycle through the peer's buffer by lines.
		l.remSlots = uint64(directSlots(8, e.hello.CacheLine, e.hello.CycleBuffer))
	}
	return l
}

// wr returns a WR of the test's opcode with one SGE of the size, for aim
// to point.
func (l directLayout) wr() verbs.SendWR {
	return verbs.SendWR{SGL: []verbs.SGE{{Length: uint32(l.e.cfg.Size), LKey: l.e.mr.LKey()}}, Opcode: l.opcode}
}

// aim points wr, operation seq, at its slots, with flags and this end's
// inline choice.
func (l directLayout) aim(wr *verbs.SendWR, seq uint64, flags verbs.SendFlags) {
	e := l.e
	wr.ID = seq
	wr.Flags = flags
	if e.inline {
		wr.Flags |= verbs.SendInline
	}
	loc := (seq % l.locSlots) * l.inc
	if l.opcode == verbs.OpAtomicFetchAdd {
		loc = (seq % l.depth) * 8
	}
	wr.SGL[0].Addr = e.mr.Addr() + loc
	switch l.opcode {
	case verbs.OpWrite, verbs.OpRead:
		wr.RDMA = verbs.RDMA{RemoteAddr: e.rem.VAddr + (seq%l.remSlots)*l.inc, RKey: e.rem.RKey}
	case verbs.OpAtomicFetchAdd:
		wr.Atomic = verbs.Atomic{RemoteAddr: e.rem.VAddr + (seq%l.remSlots)*uint64(e.hello.CacheLine), RKey: e.rem.RKey, CompareAdd: 1}
	}
}

// post is the client's run: -n operations, at most -t in flight, posted
// in chains of up to -l (0: whatever the window has room for), every
// -cq-mod'th and the last signalled. A signalled WR's completion
// completes every earlier one (RC completes in order), so its wr_id, the
// operation's sequence number, counts them.
func (e *end) post(ctx context.Context) (time.Duration, error) {
	cfg := e.cfg
	total := uint64(cfg.Iters)
	depth := uint64(cfg.TxDepth)
	cqMod := uint64(max(1, min(cfg.CQMod, cfg.TxDepth)))
	chain := depth
	if cfg.PostList > 0 {
		chain = uint64(cfg.PostList)
	}
	l := e.layout()
	wrs := make([]verbs.SendWR, chain)
	for i := range wrs {
		wrs[i] = l.wr()
	}
	check := newAtomicCheck(e, l.remSlots)
	wcs := make([]verbs.WC, directPollSize)
	var posted, completed uint64
	start := time.Now()
	for completed < total {
		if n := min(depth-(posted-completed), total-posted, chain); n > 0 {
			for i := range n {
				seq := posted + i
				var flags verbs.SendFlags
				if (seq+1)%cqMod == 0 || seq == total-1 {
					flags = verbs.SendSignaled
				}
				l.aim(&wrs[i], seq, flags)
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
	e     *end
	slots uint64
	first map[uint64]uint64 // slot -> value the first fetch returned
	depth uint64
}

func newAtomicCheck(e *end, slots uint64) *atomicCheck {
	if e.cfg.Test != "atomic" {
		return nil
	}
	return &atomicCheck{e: e, slots: slots, first: map[uint64]uint64{}, depth: uint64(e.cfg.TxDepth)}
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
func (e *end) checkClient(ops uint64, c *atomicCheck) error {
	cfg := e.cfg
	switch {
	case cfg.Test == "atomic":
		fmt.Fprintf(e.out, " check: %d fetch-and-adds fetched consecutive values from each of %d lines of the peer's buffer\n", ops, c.slots)
	case cfg.Test == "read" && e.peerPatterned():
		inc := directInc(cfg.Size, e.hello.CacheLine)
		slots := min(uint64(directSlots(cfg.Size, e.hello.CacheLine, e.hello.CycleBuffer)), ops)
		for s := range int(slots) {
			off := s * inc
			for i, b := range e.local[off : off+cfg.Size] {
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
func (e *end) checkServer(size int, iters uint64) error {
	cfg := e.cfg
	switch {
	case size < 1 || size > len(e.remote):
		return fmt.Errorf("the client reports %d-byte messages; this end's buffer takes %d (give the server the client's -s)", size, len(e.remote))
	case cfg.Test == "atomic":
		var sum uint64
		for i := 0; i+8 <= len(e.remote); i += 8 {
			sum += binary.LittleEndian.Uint64(e.remote[i:])
		}
		if sum != iters {
			return fmt.Errorf("the counters in this end's buffer add up to %d after %d fetch-and-adds of 1", sum, iters)
		}
		fmt.Fprintf(e.out, " check: the counters add up to %d, one per fetch-and-add\n", sum)
	case cfg.Test == "write" && e.peerPatterned():
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
func (e *end) postRecvs() (*directRecv, error) {
	depth := e.recvDepth()
	inc := directInc(e.cfg.Size, e.hello.CacheLine)
	r := &directRecv{wrs: make([]verbs.RecvWR, depth)}
	sges := make([]verbs.SGE, depth)
	for i := range r.wrs {
		sges[i] = verbs.SGE{Addr: e.mr.Addr() + uint64(len(e.local)+i*inc), Length: uint32(e.cfg.Size), LKey: e.mr.LKey()}
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
func (e *end) receive(ctx context.Context, r *directRecv) (time.Duration, error) {
	total := uint64(e.cfg.Iters)
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
			if err := r.consume(e, &wcs[i], got, total, &repost); err != nil {
				return 0, err
			}
			got++
		}
		if err := r.repost(e, repost); err != nil {
			return 0, err
		}
	}
	d := time.Since(start)
	r.reportCheck(e, got)
	return d, nil
}

// consume checks message n, which wc completed: its status, its length,
// and its bytes when the peer is verbsrt (message n came from slot n of
// the peer's cycle of sources, which hold the pattern as this end's do).
// Its receive goes on repost while fewer than total have been posted.
func (r *directRecv) consume(e *end, wc *verbs.WC, n, total uint64, repost *[]verbs.RecvWR) error {
	size := e.cfg.Size
	if wc.Status != verbs.WCSuccess {
		return fmt.Errorf("receive %d completed with error: %w", n, wc.Err())
	}
	if int(wc.ByteLen) != size {
		return fmt.Errorf("message %d: %d bytes, want %d (give the server the client's -s)", n, wc.ByteLen, size)
	}
	inc := directInc(size, e.hello.CacheLine)
	slot := wc.WRID % uint64(len(r.wrs))
	if e.peerPatterned() {
		src := int(n%uint64(directSlots(size, e.hello.CacheLine, e.hello.CycleBuffer))) * inc
		off := int(slot) * inc
		if !bytes.Equal(e.remote[off:off+size], e.local[src:src+size]) {
			return fmt.Errorf("message %d is not the peer's pattern", n)
		}
	}
	if r.posted < total {
		wr := r.wrs[slot]
		wr.ID = r.posted
		*repost = append(*repost, wr)
		r.posted++
	}
	return nil
}

// repost posts the receives consume gathered, in one chain.
func (r *directRecv) repost(e *end, wrs []verbs.RecvWR) error {
	if len(wrs) == 0 {
		return nil
	}
	if n, err := e.qp.PostRecv(wrs); err != nil {
		return fmt.Errorf("couldn't post receive (%d): %w", n, err)
	}
	return nil
}

// reportCheck prints what consume checked of got messages.
func (r *directRecv) reportCheck(e *end, got uint64) {
	if e.peerPatterned() {
		fmt.Fprintf(e.out, " check: %d messages of %d bytes, each the peer's pattern\n", got, e.cfg.Size)
	} else {
		fmt.Fprintf(e.out, " check: %d messages of %d bytes\n", got, e.cfg.Size)
	}
}
