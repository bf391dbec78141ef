package runtime

import (
	"context"
	"errors"
	"io"
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
// immediate data of its own SENDs, or, when it has nothing to send and half
// the window is unreported, in a credit-only SEND. Data sends never take
// the last credit, which is kept for that credit-only message, so two
// peers cannot both wait for credits only the other could report. The
// endpoint's actor owns the peer's credits beside its send-queue credits
// (qpactor.EnablePeerCredits): a send waits in the actor's inbox, in order,
// until both suffice, its credit report is stamped when it is posted, and
// the credit-only SEND is the actor's own, so no report is lost to a full
// inbox. A SEND never meets an empty receive queue, and RNR never happens
// in normal use. A batch may carry at most the peer's depth less one of
// ops that consume its receives; a larger one is refused.
const (
	creditOnly = 1 << 31 // imm flag: the message carries no data
	goodbye    = 1 << 30 // imm flag, with creditOnly: the peer closed its end
	creditMask = 0xffff  // imm bits: credits returned
)

// takeUnreported takes the re-posted receives not yet reported, at most
// what one immediate value carries; the rest stays for the next report.
func (r *recvSide) takeUnreported() int64 {
	n := r.unreported.Swap(0)
	if n > creditMask {
		r.unreported.Add(n - creditMask)
		n = creditMask
	}
	return n
}

// Message is a received message. Its bytes stay valid until Release, which
// gives the buffer back to the endpoint's pool.
type Message struct {
	r      *recvSide
	idx    int
	n      int
	imm    uint32
	hasImm bool
}

// Bytes returns the message's data (empty for a WriteImm notification).
func (m *Message) Bytes() []byte {
	off := m.idx * m.r.msgSize
	return m.r.mem[off : off+m.n : off+m.n]
}

// Imm returns the immediate data of a WriteImm notification.
func (m *Message) Imm() (uint32, bool) { return m.imm, m.hasImm }

// Release returns the message's buffer to the pool.
func (m *Message) Release() {
	r := m.r
	r.putFree(m.idx)
	r.replenish()
}

type recvSide struct {
	ep       *Endpoint
	buf      *Buffer
	mem      []byte
	msgSize  int
	depth    int
	msgs     chan *Message
	messages []Message

	mu     sync.Mutex // idle and posting
	idle   []int      // buffers neither posted nor held by a Message
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
	r.msgs = make(chan *Message, nbufs)
	r.messages = make([]Message, nbufs)
	r.idle = make([]int, 0, nbufs)
	for i := range nbufs {
		r.messages[i] = Message{r: r, idx: i}
		r.idle = append(r.idle, nbufs-1-i)
	}
	r.wrs = make([]verbs.RecvWR, depth)
	r.sges = make([]verbs.SGE, depth)
	r.replenish()
	r.unreported.Store(0) // the first window is the peer's initial credit
	return nil
}

func (r *recvSide) release() {
	if r.buf != nil {
		r.buf.Free()
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
	for r.posted+n < r.depth && len(r.idle) > 0 {
		idx := r.idle[len(r.idle)-1]
		r.idle = r.idle[:len(r.idle)-1]
		r.sges[n] = verbs.SGE{Addr: r.buf.Addr() + uint64(idx*r.msgSize), Length: uint32(r.msgSize), LKey: r.buf.LKey()}
		r.wrs[n] = verbs.RecvWR{ID: qpactor.RecvWRID(idx), SGL: r.sges[n : n+1 : n+1]}
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
	if idx >= len(r.messages) {
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
	m := &r.messages[idx]
	switch {
	case wc.Opcode == verbs.WCRecvRDMAWithImm:
		m.n, m.imm, m.hasImm = 0, wc.Imm, true
		r.msgs <- m
	case wc.Flags&verbs.WCFlagWithImm != 0 && wc.Imm&creditOnly != 0:
		r.ep.actor.GrantPeerCredits(int64(wc.Imm & creditMask))
		r.putFree(idx)
		if wc.Imm&goodbye != 0 {
			r.ep.fail(ErrPeerClosed, false)
			return
		}
	default:
		if wc.Flags&verbs.WCFlagWithImm != 0 {
			r.ep.actor.GrantPeerCredits(int64(wc.Imm & creditMask))
		}
		m.n, m.imm, m.hasImm = int(wc.ByteLen), 0, false
		r.msgs <- m // never blocks: the channel holds every buffer
	}
	r.replenish()
}

// Recv returns the next message, waiting until one arrives, ctx ends or the
// endpoint is over: after the peer closed gracefully, the messages that
// arrived before, then io.EOF; after a failure or Close, its error.
func (ep *Endpoint) Recv(ctx context.Context) (*Message, error) {
	select {
	case m := <-ep.recv.msgs:
		return m, nil
	default:
	}
	select {
	case m := <-ep.recv.msgs:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-ep.over:
		select {
		case m := <-ep.recv.msgs:
			return m, nil
		default:
		}
		err := ep.Err()
		if errors.Is(err, ErrPeerClosed) {
			return nil, io.EOF
		}
		return nil, err
	}
}

// The receive side reports its re-posted receives through the actor's
// SENDs (qpactor.CreditReporter).

// Stamp takes the unreported credits into a SEND's immediate data.
func (r *recvSide) Stamp(data bool) (imm, n uint32) {
	k := uint32(r.takeUnreported())
	if data {
		return k, k
	}
	return creditOnly | k, k
}

// Unstamp gives back the credits of a SEND that was not posted.
func (r *recvSide) Unstamp(n uint32) { r.unreported.Add(int64(n)) }

// Goodbye: a credit-only SEND that also says the connection is over.
func (r *recvSide) Goodbye() (imm, n uint32) {
	imm, n = r.Stamp(false)
	return imm | goodbye, n
}

// ReportDue: half the window is unreported.
func (r *recvSide) ReportDue() bool { return r.unreported.Load() >= int64(max(r.depth/2, 1)) }
