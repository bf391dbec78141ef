package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/sched"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// Receive credits.
//
// Every endpoint receives through its pool's shared receive queue
// (recvpool.go), and its peer holds credits for the receives posted there
// for it: initialWindow to begin with, then what the window grows to, up to
// WithRecvDepth. A SEND (or WRITE_WITH_IMM) spends one. The receiver gets a
// receive posted for it again as soon as a completion takes one (from the
// pool, not waiting for the application to Release the message) and
// reports it back: in the header in front of the data of its own SENDs,
// or, when it has nothing to send and half the window its pool backs is
// unreported, in a SEND of the header alone (a credit report). The
// immediate data of SENDs and WRITE_WITH_IMMs is the application's,
// delivered whole. Data sends never take the last credit, which is kept
// for that credit report, so two peers cannot both wait for credits only
// the other could report. The endpoint's actor owns the peer's credits
// beside its send-queue credits (qpactor.EnablePeerCredits): a send waits
// in the actor's inbox, in order, until both suffice, its credit report is
// stamped when it is posted, and the credit-only SEND is the actor's own,
// so no report is lost to a full inbox. A SEND never meets an empty
// receive queue, and RNR never happens in normal use. A batch may carry at
// most WithRecvDepth less one of ops that consume the peer's receives; a
// larger one is refused.

// The header in front of every SEND of the runtime (qpactor.HeaderSize
// bytes; doc.go, "Wire format"), which the actor gathers from its scratch
// and the receiver scatters into a header buffer of its own (recvSGEs):
//
//	0         4      5       6      8
//	| credits | kind | flags | want |
//
// credits, big-endian, are the receives its sender had posted for the peer
// since its last report (credits granted); flags bit 0 (flagBacklog) says
// the sender had more to send than its credits allowed; want, big-endian,
// is the window a credit-only SEND asks for (a batch needs it), or, with
// flags bit 1 (flagReturn), the credits an idle sender gives back; 0
// otherwise. The other flag bits are zero.
const (
	headerSize    = qpactor.HeaderSize
	headerCredits = 0
	headerKind    = 4
	headerFlags   = 5
	headerWant    = 6
	recvSGEs      = 2 // a receive's scatter list: the header, then the data
)

// A header's flags.
const (
	flagBacklog = 1 << 0 // the sender was held back by credits
	flagReturn  = 1 << 1 // want is credits given back, not a window asked for
)

// The kinds of SEND (the header's kind byte).
const (
	kindMessage = 0 // data for Recv (possibly none), and immediate data if any
	kindCredits = 1 // a credit report: the header alone, nothing for Recv
	kindGoodbye = 2 // a credit report that also says the sender closed its end
)

// makeHeader returns the header of a SEND of kind reporting credits.
func makeHeader(credits uint32, kind byte) (h qpactor.Header) {
	binary.BigEndian.PutUint32(h[headerCredits:], credits)
	h[headerKind] = kind
	return h
}

// header is a received SEND's header.
type header struct {
	credits  uint32
	kind     byte
	backlog  bool
	want     int
	returned int
}

// parseHeader reads the header of a SEND of n bytes, hdr.
func parseHeader(hdr []byte, n uint32) (header, error) {
	if n < headerSize {
		return header{}, fmt.Errorf("%w: a SEND of %d bytes, shorter than the %d-byte header", ErrProtocol, n, headerSize)
	}
	h := header{credits: binary.BigEndian.Uint32(hdr[headerCredits:]), kind: hdr[headerKind],
		backlog: hdr[headerFlags]&flagBacklog != 0}
	if w := int(binary.BigEndian.Uint16(hdr[headerWant:])); hdr[headerFlags]&flagReturn != 0 {
		h.returned = w
	} else {
		h.want = w
	}
	if h.kind > kindGoodbye {
		return header{}, fmt.Errorf("%w: a SEND of unknown kind %d", ErrProtocol, h.kind)
	}
	if hdr[headerFlags]&^(flagBacklog|flagReturn) != 0 {
		return header{}, fmt.Errorf("%w: a SEND with unknown flags %#x", ErrProtocol, hdr[headerFlags])
	}
	return h, nil
}

// takeUnreported takes the re-posted receives not yet reported, at most
// what one header carries; the rest stays for the next report.
func (r *recvSide) takeUnreported() uint32 {
	n := r.unreported.Swap(0)
	if n > math.MaxUint32 {
		r.unreported.Add(n - math.MaxUint32)
		n = math.MaxUint32
	}
	return uint32(n)
}

// Message is a received message (Endpoint.Recv). Its bytes stay valid
// until Release, which gives its buffer back to the endpoint's receive
// pool. It is a small value, like a Future: copy it freely, but Release it
// once; after that Bytes panics (with an error matching ErrFreed) and
// Release does nothing. A message the application holds keeps its memory
// even after the endpoint or the runtime closed.
type Message struct {
	s   *msgSlot
	gen uint32
}

// msgSlot is one receive buffer's message; gen counts its deliveries, so a
// Message of an earlier one is told apart.
type msgSlot struct {
	store  *recvStore
	slab   *recvSlab
	idx    int
	data   []byte    // the whole buffer
	r      *recvSide // the endpoint it was delivered to
	n      int
	imm    uint32
	hasImm bool
	gen    atomic.Uint32
	// wakeStamp is sched.WakeStamp at delivery when a Recv was parked
	// (recvSide.parked), else 0: the parked Recv reports its wake-up.
	wakeStamp int64
}

func (m Message) live(call string) *msgSlot {
	if m.s == nil {
		panic(fmt.Errorf("verbsrt: Message.%s: the zero Message, which Recv returns with an error: %w", call, verbs.ErrInvalidArgument))
	}
	if m.s.gen.Load() != m.gen {
		panic(fmt.Errorf("verbsrt: Message.%s: message used after Release: %w", call, ErrFreed))
	}
	return m.s
}

// Bytes returns the message's data (empty for a WriteImm notification),
// valid until Release. The slice never faults: kept past the runtimes'
// Close and the last reference to the Message (without Release), it stays
// mapped and reads zeros once its memory went back to the system; see
// the package documentation ("Memory").
func (m Message) Bytes() []byte {
	s := m.live("Bytes")
	return s.data[:s.n:s.n]
}

// Len returns the length of the message's data.
func (m Message) Len() int { return m.live("Len").n }

// Imm returns the immediate data of a message sent with SendImm (or a
// SEND_WITH_IMM of Post) or of a WriteImm notification, all 32 bits as the
// sender gave them, and whether the message had any.
func (m Message) Imm() (uint32, bool) {
	s := m.live("Imm")
	return s.imm, s.hasImm
}

// Release gives the message's buffer back to the runtime's receive pool,
// to be posted for another receive. Releasing again does nothing.
func (m Message) Release() {
	if m.s == nil || !m.s.gen.CompareAndSwap(m.gen, m.gen+1) {
		return
	}
	s := m.s
	s.store.released(s)
	s.slab.data.hold.Release()
}

// deliver hands slot s's message to Recv; it holds the slab's memory until
// Release.
func (r *recvSide) deliver(s *msgSlot) {
	s.slab.data.hold.Acquire() // the slab is freed only at release, after the last delivery
	s.r = r
	r.pool.delivered(r)
	s.wakeStamp = 0
	if r.parked.Load() > 0 {
		s.wakeStamp = sched.WakeStamp()
	}
	r.msgs <- s // never blocks: the channel holds every buffer the endpoint may hold
}

// recvSide is an endpoint's share of its receive pool.
type recvSide struct {
	ep        *Endpoint
	pool      *recvPool
	maxWindow int // WithRecvDepth
	msgs      chan *msgSlot

	// The window, guarded by pool.mu (recvpool.go).
	target   int  // the window: credits the peer holds, owed and unreported
	want     int  // what the peer asked the window to grow to
	assigned int  // credits backed by posted receives: the peer's and unreported
	debt     int  // credits owed back, not yet backed by a posted receive
	held     int  // messages delivered and not released
	waiting  bool // in pool.waiting
	left     bool // the QP is gone (leave)

	unreported atomic.Int64 // credits granted the peer has not been told of
	parked     atomic.Int32 // Recvs parked on msgs, whose wake-ups deliver stamps
}

// release gives the window back once the QP is gone: the receives it took
// and no one saw (drained from the CQ first), the messages never received.
// A message the application holds keeps its buffer until Release.
func (r *recvSide) release(cq verbs.CQ) {
	if r.pool == nil {
		return
	}
	if cq != nil {
		var wcs [16]verbs.WC
		for {
			n, err := cq.Poll(wcs[:])
			for i := range wcs[:n] {
				if wrid.IsRecv(wcs[i].WRID) {
					r.pool.consumed(r)
					r.pool.putIdle(wrid.RecvIndex(wcs[i].WRID))
				}
			}
			if n == 0 || err != nil {
				break
			}
		}
	}
	r.pool.leave(r)
	for {
		select {
		case s := <-r.msgs:
			Message{s: s, gen: s.gen.Load()}.Release()
			continue
		default:
		}
		break
	}
}

// grantedLocked reports n credits the pool posted receives for; the pool's
// lock is held. It only wakes the actor, which takes the lock itself when
// it stamps a report. With n 0 it still asks for the report that is due: a
// window that shrank makes the credits already unreported due.
func (r *recvSide) grantedLocked(n int) {
	if r.left || r.ep.actor == nil {
		return // the endpoint is gone, or not started: nothing to report
	}
	if n > 0 {
		r.unreported.Add(int64(n))
	}
	if r.unreported.Load() > 0 && r.dueLocked() {
		r.ep.actor.WantReport()
	}
}

// onRecv handles a receive completion on the poller goroutine.
func (r *recvSide) onRecv(wc *verbs.WC) {
	idx := wrid.RecvIndex(wc.WRID)
	m := r.pool.slot(idx)
	if m == nil {
		return
	}
	r.pool.consumed(r)
	if wc.Status != verbs.WCSuccess {
		r.pool.putIdle(idx)
		r.pool.serve(r)
		// A receive that failed while the endpoint is open: the QP went to
		// the error state without a failure of its own (the peer's
		// operation failed on its side of the connection).
		r.ep.wcFailed(wc)
		return
	}
	if wc.Opcode == verbs.WCRecvRDMAWithImm {
		m.n, m.imm, m.hasImm = 0, wc.Imm, true
		r.deliver(m)
		r.pool.serve(r)
		return
	}
	hdr := m.slab.hdrs.mem[idx%slabBuffers*headerSize:][:headerSize]
	h, err := parseHeader(hdr, wc.ByteLen)
	if err != nil {
		r.pool.putIdle(idx)
		r.ep.fail(err, false)
		return
	}
	r.ep.actor.GrantPeerCredits(int64(h.credits))
	r.pool.adjust(r, h)
	switch h.kind {
	case kindMessage:
		m.n, m.imm, m.hasImm = int(wc.ByteLen)-headerSize, wc.Imm, wc.Flags&verbs.WCFlagWithImm != 0
		r.deliver(m)
	case kindCredits:
		r.pool.putIdle(idx)
	case kindGoodbye:
		r.pool.putIdle(idx)
		r.ep.fail(ErrPeerClosed, false)
		return
	}
	r.pool.serve(r)
}

// Recv returns the next message, waiting until one arrives, ctx ends or the
// endpoint is over: after the peer closed gracefully, the messages that
// arrived before, then io.EOF; after a failure or Close, its error.
//
// Like Future.Wait, a Recv that finds no message yields the processor a
// few dozen times before it parks (sched.YieldUntil), so that a reply
// arriving within some tens of µs costs no park and wake-up: a SEND/Recv
// round trip on soft took 180 µs parked and takes 15 µs so. With
// Tuning.WaitPoll it polls the endpoint's CQ meanwhile.
func (ep *Endpoint) Recv(ctx context.Context) (Message, error) {
	if ctx == nil {
		return Message{}, future.ErrNilContext
	}
	var s *msgSlot
	if ep.actor.WaitUntil(func() bool {
		select {
		case s = <-ep.recv.msgs:
			return true
		default:
			return false
		}
	}) {
		return s.message(), nil
	}
	ep.recv.parked.Add(1)
	defer ep.recv.parked.Add(-1)
	select {
	case s := <-ep.recv.msgs:
		sched.WokeUp(s.wakeStamp)
		return s.message(), nil
	case <-ctx.Done():
		return Message{}, ctx.Err()
	case <-ep.over:
		select {
		case s := <-ep.recv.msgs:
			return s.message(), nil
		default:
		}
		err := ep.Err()
		if errors.Is(err, ErrPeerClosed) {
			return Message{}, io.EOF
		}
		return Message{}, err
	}
}

func (s *msgSlot) message() Message { return Message{s: s, gen: s.gen.Load()} }

// The receive side reports its credits through the actor's SENDs
// (qpactor.CreditReporter).

// Stamp takes the unreported credits into a SEND's header.
func (r *recvSide) Stamp(msg bool) (h qpactor.Header, n uint32) {
	n = r.takeUnreported()
	if msg {
		return makeHeader(n, kindMessage), n
	}
	return makeHeader(n, kindCredits), n
}

// Unstamp gives back the credits of a SEND that was not posted.
func (r *recvSide) Unstamp(n uint32) { r.unreported.Add(int64(n)) }

// Goodbye: a credit report that also says the connection is over.
func (r *recvSide) Goodbye() (h qpactor.Header, n uint32) {
	n = r.takeUnreported()
	return makeHeader(n, kindGoodbye), n
}

// MarkBacklog flags a stamped SEND's header: its sender had more to send
// than the peer's credits allowed.
func (r *recvSide) MarkBacklog(h *qpactor.Header) { h[headerFlags] |= flagBacklog }

// Want returns a credit report that asks the peer for a window of n.
func (r *recvSide) Want(n int) (h qpactor.Header, stamped uint32) {
	h, stamped = r.Stamp(false)
	binary.BigEndian.PutUint16(h[headerWant:], uint16(min(n, math.MaxUint16)))
	return h, stamped
}

// Return returns a credit report that gives the peer back returned
// credits.
func (r *recvSide) Return(returned int) (h qpactor.Header, stamped uint32) {
	h, stamped = r.Stamp(false)
	h[headerFlags] |= flagReturn
	binary.BigEndian.PutUint16(h[headerWant:], uint16(min(returned, math.MaxUint16)))
	return h, stamped
}

// ReportDue: half the window the pool backs is unreported (at least one
// credit, and no more than the peer can spend before it needs them back).
func (r *recvSide) ReportDue() bool {
	r.pool.store.mu.Lock()
	defer r.pool.store.mu.Unlock()
	return r.dueLocked()
}

// dueLocked measures the window without the credits owed (debt): those
// wait for a buffer, and until one comes they are neither the peer's nor
// to be reported. Measured against the whole window, a receiver whose pool
// ran out of buffers kept 4-5 credits unreported against a threshold of 7
// (a window of 13, 8 of them owed), its peer held the last credit only
// (kept for reports), and its application held 3 messages while it waited
// for the fourth: no side could move (TestNoRNRWithManySendersOnOneReceiver,
// 760 of 1,000 connections stuck).
func (r *recvSide) dueLocked() bool {
	w := r.target - r.debt
	return r.unreported.Load() >= int64(max(1, min(w-1, (w+1)/2)))
}
