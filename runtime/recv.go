package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/internal/credit"
	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/sched"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/verbs"
)

// Receive credits. The protocol is internal/credit's (its doc.go is the
// specification): each endpoint's recvSide holds a credit.Receiver, which
// its pool (recvpool.go) keeps backed by receives posted for it, and the
// endpoint's actor holds the credit.Sender that spends the peer's credits
// and reports the Receiver's in the header of its SENDs. The receiver
// scatters that header into a buffer of its own (recvSGEs), so the
// immediate data of SENDs and WRITE_WITH_IMMs is the application's,
// delivered whole.

const (
	headerSize = credit.HeaderSize
	recvSGEs   = 2 // a receive's scatter list: the header, then the data
)

// parseHeader reads the header of a SEND of n bytes, hdr.
func parseHeader(hdr []byte, n uint32) (credit.Fields, error) {
	f, err := credit.Decode(hdr, n)
	if err != nil {
		return credit.Fields{}, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return f, nil
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
	// taken is set while the application holds the message, from Recv
	// to Release (recvSide.appHeld counts it).
	taken bool
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
	if s.taken {
		s.taken = false
		s.r.appHeld.Add(-1)
	}
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

	// Guarded by the store's mu (recvpool.go), but for what the
	// Receiver says may be called without it.
	credits credit.Receiver // the window the peer's credits come from
	held    int             // messages delivered and not released
	waiting bool            // in the store's waiting list
	left    bool            // the QP is gone (leave)

	parked atomic.Int32 // Recvs parked on msgs, whose wake-ups deliver stamps

	// appHeld counts the messages Recv returned and the application has
	// not released. Only the application's calls change it (Recv and
	// Release). The pool backs at most 2 x maxWindow buffers for the
	// endpoint, held or posted (serveLocked), and the peer's last credit
	// is kept for its credit reports, which data never takes
	// (internal/credit, "The reserve"): once the application holds one
	// fewer than that, no message is on its way to Recv, and none can
	// come until it releases one.
	appHeld    atomic.Int32
	heldLogged atomic.Bool // the first ErrMessagesHeld was logged
}

// allHeld reports whether the application holds every receive buffer the
// endpoint may have; the first time, it logs it.
func (r *recvSide) allHeld() bool {
	n := int(r.appHeld.Load())
	if n < 2*r.maxWindow-1 {
		return false
	}
	r.ep.rt.counters.recvAllHeld.Inc()
	if r.heldLogged.CompareAndSwap(false, true) {
		r.ep.rt.log.Warn("verbsrt: Recv refused: the application holds every receive buffer of the endpoint; "+
			"no message arrives until it releases one (Message.Release)", "local", r.ep.LocalAddr(), "held", n)
	}
	return true
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

// reportDueLocked reports whether r's peer is due a credit report; the
// store's lock is held. The endpoint gone, or not started, has nothing to
// report.
func (r *recvSide) reportDueLocked() bool {
	return !r.left && r.ep.actor != nil && r.credits.Due()
}

// report asks the actor for the credit report serve found due, with the
// store's lock released: the actor stamps the report without it, and the
// calling goroutine may post it (qpactor.Actor.WantReport).
func (r *recvSide) report(due bool) {
	if due {
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
	r.ep.actor.GrantPeerCredits(int64(h.Credits))
	r.pool.adjust(r, h)
	switch h.Kind {
	case credit.KindMessage:
		m.n, m.imm, m.hasImm = int(wc.ByteLen)-headerSize, wc.Imm, wc.Flags&verbs.WCFlagWithImm != 0
		r.deliver(m)
	case credit.KindCredits:
		r.pool.putIdle(idx)
	case credit.KindGoodbye:
		err := peerGoodbye(m.data[:min(int(wc.ByteLen)-headerSize, len(m.data))])
		r.pool.putIdle(idx)
		r.ep.fail(err, false)
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
// arriving within some tens of µs costs no park and wake-up, which costs
// more than such a round trip. With Tuning.WaitPoll it polls the endpoint's
// CQ meanwhile.
//
// Each message holds one of the endpoint's receive buffers until Release,
// and an endpoint has at most 2 x WithRecvDepth of them, one of which its
// peer keeps for credit reports. When the application holds all the
// others (2 x WithRecvDepth - 1 messages), no message can arrive, and Recv fails at
// once with ErrMessagesHeld instead of waiting for ever (the failure is
// counted in Stats.RecvAllHeld, and the first one logged): release a
// message and call Recv again.
func (ep *Endpoint) Recv(ctx context.Context) (Message, error) {
	if ep == nil {
		return Message{}, errNilEndpoint
	}
	if ctx == nil {
		return Message{}, future.ErrNilContext
	}
	if ep.Err() == nil && ep.recv.allHeld() {
		return Message{}, ErrMessagesHeld
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

// message hands s to the application, which holds it until Release.
func (s *msgSlot) message() Message {
	s.taken = true
	s.r.appHeld.Add(1)
	return Message{s: s, gen: s.gen.Load()}
}
