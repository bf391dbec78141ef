package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// Receive credits.
//
// Each endpoint keeps recvDepth receives posted from a pool of 2*recvDepth
// registered buffers, and its peer starts with recvDepth send credits. A
// SEND (or WRITE_WITH_IMM) spends one. The receiver re-posts a buffer as
// soon as a completion frees one (from the pool, not waiting for the
// application to Release the message) and reports the re-posts back: in the
// header in front of the data of its own SENDs, or, when it has nothing to
// send and half the window is unreported, in a SEND of the header alone (a
// credit report). The immediate data of SENDs and WRITE_WITH_IMMs is the
// application's, delivered whole. Data sends never take the last credit,
// which is kept for that credit report, so two peers cannot both wait for
// credits only the other could report. The
// endpoint's actor owns the peer's credits beside its send-queue credits
// (qpactor.EnablePeerCredits): a send waits in the actor's inbox, in order,
// until both suffice, its credit report is stamped when it is posted, and
// the credit-only SEND is the actor's own, so no report is lost to a full
// inbox. A SEND never meets an empty receive queue, and RNR never happens
// in normal use. A batch may carry at most the peer's depth less one of
// ops that consume its receives; a larger one is refused.

// The header in front of every SEND of the runtime (qpactor.HeaderSize
// bytes; doc.go, "Wire format"), which the actor gathers from its scratch
// and the receiver scatters into a header buffer of its own (recvSGEs):
//
//	0         4      5          8
//	| credits | kind | reserved |
//
// credits, big-endian, are the receives its sender re-posted since its last
// report; reserved is zero.
const (
	headerSize    = qpactor.HeaderSize
	headerCredits = 0
	headerKind    = 4
	recvSGEs      = 2 // a receive's scatter list: the header, then the data
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

// parseHeader reads the header of a SEND of n bytes, hdr.
func parseHeader(hdr []byte, n uint32) (credits uint32, kind byte, err error) {
	if n < headerSize {
		return 0, 0, fmt.Errorf("%w: a SEND of %d bytes, shorter than the %d-byte header", ErrProtocol, n, headerSize)
	}
	if kind = hdr[headerKind]; kind > kindGoodbye {
		return 0, 0, fmt.Errorf("%w: a SEND of unknown kind %d", ErrProtocol, kind)
	}
	return binary.BigEndian.Uint32(hdr[headerCredits:]), kind, nil
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
	r      *recvSide
	idx    int
	n      int
	imm    uint32
	hasImm bool
	gen    atomic.Uint32
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

// Bytes returns the message's data (empty for a WriteImm notification).
func (m Message) Bytes() []byte {
	s := m.live("Bytes")
	off := s.idx * s.r.msgSize
	return s.r.mem[off : off+s.n : off+s.n]
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

// Release gives the message's buffer back to the endpoint's pool, to be
// posted for another receive. Releasing again does nothing.
func (m Message) Release() {
	if m.s == nil || !m.s.gen.CompareAndSwap(m.gen, m.gen+1) {
		return
	}
	r := m.s.r
	r.putFree(m.s.idx)
	r.replenish()
	r.buf.hold.Release()
}

// deliver hands slot s's message to Recv; it holds the pool's memory until
// Release.
func (r *recvSide) deliver(s *msgSlot) {
	r.buf.hold.Acquire() // the pool is freed only at release, after the last delivery
	r.msgs <- s          // never blocks: the channel holds every buffer
}

type recvSide struct {
	ep      *Endpoint
	buf     *Buffer // the messages' data, msgSize bytes per buffer
	mem     []byte
	hdrBuf  *Buffer // the SENDs' headers, headerSize bytes per buffer
	hdrs    []byte
	msgSize int
	depth   int
	msgs    chan *msgSlot
	slots   []msgSlot

	mu     sync.Mutex // idle, closed and posting
	idle   []int      // buffers neither posted nor held by a Message
	closed bool       // the QP is gone: nothing to post any more
	posted int
	wrs    []verbs.RecvWR
	sges   []verbs.SGE

	unreported atomic.Int64 // re-posted receives the peer has not been told of
}

func (r *recvSide) init(ep *Endpoint, nbufs, depth, msgSize int) error {
	r.ep, r.depth, r.msgSize = ep, depth, msgSize
	var err error
	if r.buf, err = ep.rt.Alloc(nbufs * msgSize); err != nil {
		return err
	}
	r.mem = r.buf.Bytes()
	// The headers apart from the data: a receive scatters a SEND's header
	// into one and its data into the other, so each data buffer keeps the
	// size and alignment the application asked for, and the arena's
	// power-of-two blocks do not double for a few bytes each.
	if r.hdrBuf, err = ep.rt.Alloc(nbufs * headerSize); err != nil {
		return err
	}
	r.hdrs = r.hdrBuf.Bytes()
	r.msgs = make(chan *msgSlot, nbufs)
	r.slots = make([]msgSlot, nbufs)
	r.idle = make([]int, 0, nbufs)
	for i := range nbufs {
		r.slots[i].r, r.slots[i].idx = r, i
		r.idle = append(r.idle, nbufs-1-i)
	}
	r.wrs = make([]verbs.RecvWR, depth)
	r.sges = make([]verbs.SGE, recvSGEs*depth)
	r.replenish()
	r.unreported.Store(0) // the first window is the peer's initial credit
	return nil
}

// release gives the pool back once the QP is gone: the messages never
// received are released here, and the memory returns when the
// application released the ones it holds (Buffer.Free waits for them).
func (r *recvSide) release() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	for {
		select {
		case s := <-r.msgs:
			Message{s: s, gen: s.gen.Load()}.Release()
			continue
		default:
		}
		break
	}
	if r.buf != nil {
		r.buf.Free()
	}
	if r.hdrBuf != nil {
		r.hdrBuf.Free()
	}
}

func (r *recvSide) putFree(idx int) {
	r.mu.Lock()
	r.idle = append(r.idle, idx)
	r.mu.Unlock()
}

// replenish posts free buffers until depth receives are posted, in one
// PostRecv, and reports them as credits when that is due.
func (r *recvSide) replenish() {
	r.mu.Lock()
	n := 0
	for !r.closed && r.posted+n < r.depth && len(r.idle) > 0 {
		idx := r.idle[len(r.idle)-1]
		r.idle = r.idle[:len(r.idle)-1]
		sgl := r.sges[recvSGEs*n : recvSGEs*n+recvSGEs : recvSGEs*n+recvSGEs]
		sgl[0] = r.hdrBuf.Slice(idx*headerSize, headerSize).sge()
		sgl[1] = r.buf.Slice(idx*r.msgSize, r.msgSize).sge()
		r.wrs[n] = verbs.RecvWR{ID: qpactor.RecvWRID(idx), SGL: sgl}
		n++
	}
	posted := 0
	if n > 0 {
		var err error
		posted, err = r.ep.qp.PostRecv(r.wrs[:n])
		if err != nil {
			// The QP left the states that take receives (closing or
			// failed): the buffers go back to the pool.
			for _, wr := range r.wrs[posted:n] {
				r.idle = append(r.idle, qpactor.RecvIndex(wr.ID))
			}
		}
		r.posted += posted
	}
	r.mu.Unlock()
	if posted > 0 {
		r.unreported.Add(int64(posted))
		if r.ReportDue() {
			r.ep.actor.WantReport()
		}
	}
}

// onRecv handles a receive completion on the poller goroutine.
func (r *recvSide) onRecv(wc *verbs.WC) {
	idx := qpactor.RecvIndex(wc.WRID)
	r.mu.Lock()
	r.posted--
	r.mu.Unlock()
	if idx >= len(r.slots) {
		return
	}
	if wc.Status != verbs.WCSuccess {
		r.putFree(idx)
		// A receive flushed while the endpoint is open: the QP went to
		// the error state without a failure of its own (the peer's
		// operation failed on its side of the connection).
		r.ep.wcFailed(wc)
		return
	}
	m := &r.slots[idx]
	if wc.Opcode == verbs.WCRecvRDMAWithImm {
		m.n, m.imm, m.hasImm = 0, wc.Imm, true
		r.deliver(m)
		r.replenish()
		return
	}
	credits, kind, err := parseHeader(r.hdrs[idx*headerSize:idx*headerSize+headerSize], wc.ByteLen)
	if err != nil {
		r.putFree(idx)
		r.ep.fail(err, false)
		return
	}
	r.ep.actor.GrantPeerCredits(int64(credits))
	switch kind {
	case kindMessage:
		m.n, m.imm, m.hasImm = int(wc.ByteLen)-headerSize, wc.Imm, wc.Flags&verbs.WCFlagWithImm != 0
		r.deliver(m)
	case kindCredits:
		r.putFree(idx)
	case kindGoodbye:
		r.putFree(idx)
		r.ep.fail(ErrPeerClosed, false)
		return
	}
	r.replenish()
}

// Recv returns the next message, waiting until one arrives, ctx ends or the
// endpoint is over: after the peer closed gracefully, the messages that
// arrived before, then io.EOF; after a failure or Close, its error.
func (ep *Endpoint) Recv(ctx context.Context) (Message, error) {
	select {
	case s := <-ep.recv.msgs:
		return s.message(), nil
	default:
	}
	select {
	case s := <-ep.recv.msgs:
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

// The receive side reports its re-posted receives through the actor's
// SENDs (qpactor.CreditReporter).

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

// ReportDue: half the window is unreported.
func (r *recvSide) ReportDue() bool { return r.unreported.Load() >= int64(max(r.depth/2, 1)) }
