package runtime

import (
	"errors"
	"fmt"
	"sync"

	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// The shared receive side.
//
// The runtime's endpoints receive through shared receive queues (SRQs), not
// through receive queues of their own: a recvPool is one SRQ and the
// registered buffers posted to it, shared by up to srqMaxWR/initialWindow
// endpoints, and the runtime opens another when every pool is full. An
// idle endpoint then costs the pool the few receives that back its peer's
// initial credits (initialWindow), not a receive queue of WithRecvDepth
// buffers of its own.
//
// Credits are what keeps a SEND from meeting an empty SRQ (RNR): every
// credit a peer holds is backed by a receive posted in the pool's SRQ and
// counted for that peer's endpoint (assigned). A receive completing on an
// endpoint takes one credit and one posted receive; the endpoint owes its
// peer the credit back (debt) and gets it, with a receive the pool posts
// for it, at once while buffers are idle, when one is released, or when
// the pool grows. So the pool never has more credits out than receives
// posted, whatever the endpoints do.
//
// An endpoint's window (target, credits its peer holds plus those owed or
// unreported) starts at initialWindow and follows its peer's demand, up to
// WithRecvDepth: a SEND whose sender had more queued than its credits
// allowed (the header's backlog flag) grows it by one, so it doubles each
// round trip while the sender is held back. A sender whose next batch
// needs more than its window asks for it in a credit-only SEND (the
// header's want field): the pool grows the window to that at once or as
// buffers allow. A sender whose actor goes idle gives back what it holds
// beyond initialWindow (the header's flagReturn), which shrinks the window
// and frees those receives for other endpoints. An endpoint never takes credits back
// for more buffers than 2 x WithRecvDepth at once, counting the messages
// the application holds (a slow reader slows its writer, it does not grow
// the pool).

// initialWindow is the credits a peer starts with: one for data, one kept
// for credit reports, and one so that a request and its reply pass each
// other without a credit-only SEND (the report is due at two unreported).
const initialWindow = 3

// srqMaxWR is the most receives one pool's SRQ holds; devices report up
// to 32,767 (mlx5) or more (rxe: 1,048,576, which rxe allocates in full).
const srqMaxWR = 16384

// slabBuffers is how many receive buffers a pool adds at a time.
const slabBuffers = 64

// errPoolFull says a pool's SRQ has no room for another endpoint's window.
var errPoolFull = errors.New("receive pool full")

type recvPool struct {
	rt      *Runtime
	srq     verbs.SRQ
	msgSize int
	maxWR   int // receives the SRQ holds

	mu       sync.Mutex
	slabs    []*recvSlab
	idle     []int // buffers neither posted nor held by a Message
	posted   int   // receives in the SRQ
	assigned int   // credits out: backed by posted receives, counted for an endpoint
	waiting  []*recvSide
	closed   bool
	wrs      []verbs.RecvWR
	sges     []verbs.SGE
}

// recvSlab is slabBuffers receive buffers: their data and their headers.
type recvSlab struct {
	data  *Buffer
	hdrs  *Buffer
	slots []msgSlot
}

func (rt *Runtime) newRecvPool() (*recvPool, error) {
	maxWR := min(srqMaxWR, rt.devAttr.MaxSRQWR)
	if maxWR < initialWindow {
		return nil, verbs.Errorf("verbsrt", verbs.ErrNotSupported, "the device has no shared receive queues (max_srq_wr %d)", rt.devAttr.MaxSRQWR)
	}
	srq, err := rt.pd.CreateSRQ(verbs.SRQSpec{MaxWR: maxWR, MaxSGE: recvSGEs})
	if err != nil {
		return nil, err
	}
	return &recvPool{rt: rt, srq: srq, msgSize: rt.cfg.msgSize, maxWR: maxWR}, nil
}

// slot returns buffer idx's message slot.
func (p *recvPool) slot(idx int) *msgSlot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slotLocked(idx)
}

func (p *recvPool) slotLocked(idx int) *msgSlot {
	if s := idx / slabBuffers; s < len(p.slabs) {
		return &p.slabs[s].slots[idx%slabBuffers]
	}
	return nil
}

// join gives r its initial window: receives posted and counted for it,
// which the peer's hello credits grant without a report.
func (p *recvPool) join(r *recvSide) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.assigned+initialWindow > p.maxWR {
		return errPoolFull
	}
	if err := p.supplyLocked(initialWindow); err != nil {
		return err // what it posted stays, unassigned, for the next
	}
	p.assigned += initialWindow
	r.assigned, r.target, r.want = initialWindow, initialWindow, initialWindow
	return nil
}

// supplyLocked makes n receives posted and unassigned, posting idle
// buffers and adding slabs as needed. When the arena cannot give a slab it
// posts what it can and returns that error (ErrNoMemory): fewer than n are
// then posted and unassigned.
func (p *recvPool) supplyLocked(n int) error {
	need := n - (p.posted - p.assigned)
	if need <= 0 {
		return nil
	}
	var growErr error
	for len(p.idle) < need {
		if growErr = p.growLocked(); growErr != nil {
			need = len(p.idle)
			break
		}
	}
	if need > 0 {
		if err := p.postLocked(need); err != nil {
			return err
		}
	}
	return growErr
}

// availableLocked is how many more receives could be supplied without
// waiting for a Release: posted and unassigned, idle, and what the SRQ
// still holds as new slabs (if the arena gives them).
func (p *recvPool) availableLocked() int {
	return p.maxWR - p.assigned - p.heldLocked()
}

// heldLocked counts the buffers the application holds (delivered
// messages): neither idle nor posted.
func (p *recvPool) heldLocked() int {
	return len(p.slabs)*slabBuffers - len(p.idle) - p.posted
}

func (p *recvPool) growLocked() error {
	if p.posted+len(p.idle)+slabBuffers > p.maxWR {
		return fmt.Errorf("%w: the shared receive queue holds %d receives", ErrNoMemory, p.maxWR)
	}
	data, err := p.rt.Alloc(slabBuffers * p.msgSize)
	if err != nil {
		return err
	}
	hdrs, err := p.rt.Alloc(slabBuffers * headerSize)
	if err != nil {
		data.Free()
		return err
	}
	s := &recvSlab{data: data, hdrs: hdrs, slots: make([]msgSlot, slabBuffers)}
	base := len(p.slabs) * slabBuffers
	mem := data.Bytes()
	for i := range s.slots {
		s.slots[i] = msgSlot{pool: p, slab: s, idx: base + i, data: mem[i*p.msgSize : (i+1)*p.msgSize : (i+1)*p.msgSize]}
		p.idle = append(p.idle, base+slabBuffers-1-i)
	}
	p.slabs = append(p.slabs, s)
	return nil
}

// postLocked posts n idle buffers to the SRQ in one call.
func (p *recvPool) postLocked(n int) error {
	if cap(p.wrs) < n {
		p.wrs = make([]verbs.RecvWR, n)
		p.sges = make([]verbs.SGE, recvSGEs*n)
	}
	wrs := p.wrs[:n]
	for i := range wrs {
		idx := p.idle[len(p.idle)-1-i]
		s := p.slotLocked(idx)
		sgl := p.sges[recvSGEs*i : recvSGEs*i+recvSGEs : recvSGEs*i+recvSGEs]
		off := idx % slabBuffers
		sgl[0] = s.slab.hdrs.Slice(off*headerSize, headerSize).sge()
		sgl[1] = s.slab.data.Slice(off*p.msgSize, p.msgSize).sge()
		wrs[i] = verbs.RecvWR{ID: qpactor.RecvWRID(idx), SGL: sgl}
	}
	posted, err := p.srq.PostRecv(wrs)
	p.idle = p.idle[:len(p.idle)-posted]
	p.posted += posted
	return err
}

// consumed accounts for a receive of r that completed (or that r's QP
// took before it was destroyed): one posted receive and one credit fewer,
// which r now owes its peer.
func (p *recvPool) consumed(r *recvSide) {
	p.mu.Lock()
	p.posted--
	p.assigned--
	r.assigned--
	r.debt++
	p.mu.Unlock()
}

// putIdle gives buffer idx back: its message was released or it carried
// none. What waits for a buffer is served.
func (p *recvPool) putIdle(idx int) {
	p.mu.Lock()
	p.idle = append(p.idle, idx)
	p.serveWaitingLocked()
	p.mu.Unlock()
}

// serve returns r's debt to its peer as far as receives can be posted for
// it now, growing its window first when its peer asked; the rest waits
// for a buffer.
func (p *recvPool) serve(r *recvSide) {
	p.mu.Lock()
	r.grantedLocked(p.serveLocked(r))
	p.mu.Unlock()
}

func (p *recvPool) serveLocked(r *recvSide) int {
	if p.closed || r.left {
		return 0
	}
	if r.target < r.want {
		// Grow only by what the SRQ can still back: a window the pool can
		// never post for would keep the endpoint waiting for nothing.
		if grow := min(r.want-r.target, p.availableLocked()-r.debt); grow > 0 {
			r.target += grow
			r.debt += grow
		}
	}
	// At most 2 x WithRecvDepth buffers for one endpoint, counting the
	// messages its application holds.
	n := min(r.debt, 2*r.maxWindow-r.assigned-r.held)
	if n <= 0 {
		return 0
	}
	if err := p.supplyLocked(n); err != nil && !errors.Is(err, ErrNoMemory) {
		p.rt.log.Warn("verbsrt: posting shared receives failed", "err", err)
	}
	n = min(n, p.posted-p.assigned)
	if n > 0 {
		p.assigned += n
		r.assigned += n
		r.debt -= n
	}
	if r.debt > 0 && !r.waiting && r.assigned+r.held < 2*r.maxWindow {
		r.waiting = true
		p.waiting = append(p.waiting, r)
	}
	return max(n, 0)
}

// adjust moves r's window by what its peer's SEND said: backlog grows it
// by one, a want to that size, returned credits shrink it by as many (the
// peer holds them no more: their receives are free for others). Nothing
// else shrinks it: shrinking by one on every SEND without backlog (tried
// first) kept a busy sender's window at the edge of starvation, and 16
// callers' SEND+Wait took 35% longer (bench/README.md).
func (p *recvPool) adjust(r *recvSide, h header) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case h.returned > 0:
		n := max(0, min(h.returned, r.assigned, r.target-initialWindow))
		r.target -= n
		r.assigned -= n
		p.assigned -= n
		r.want = min(r.want, r.target)
		p.serveWaitingLocked()
	case h.want > 0:
		r.want = max(r.want, min(h.want, r.maxWindow))
	case h.backlog:
		r.want = max(r.want, min(r.target+1, r.maxWindow))
	}
}

// delivered counts a message r's application now holds.
func (p *recvPool) delivered(r *recvSide) {
	p.mu.Lock()
	r.held++
	p.mu.Unlock()
}

// released gives a delivered message's buffer back: its endpoint may take
// credits back for one more, and what waits for a buffer is served.
func (p *recvPool) released(s *msgSlot) {
	r := s.r
	p.mu.Lock()
	r.held--
	p.idle = append(p.idle, s.idx)
	r.grantedLocked(p.serveLocked(r))
	p.serveWaitingLocked()
	p.mu.Unlock()
}

// serveWaitingLocked serves the endpoints that wait for buffers, in the
// order they began to wait, while buffers last.
func (p *recvPool) serveWaitingLocked() {
	for len(p.waiting) > 0 && (len(p.idle) > 0 || p.posted > p.assigned) {
		r := p.waiting[0]
		p.waiting = p.waiting[1:]
		r.waiting = false
		// granted takes no lock of the pool's and wakes the actor
		// without waiting for it.
		r.grantedLocked(p.serveLocked(r))
	}
}

// leave takes r's window out of the pool: r's QP is gone (and the
// receives it took before, drained from its CQ, were consumed), so the
// credits its peer held back receives no one will use up.
func (p *recvPool) leave(r *recvSide) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.left {
		return
	}
	r.left = true
	p.assigned -= r.assigned
	r.assigned, r.debt = 0, 0
	for i, w := range p.waiting {
		if w == r {
			p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
			break
		}
	}
	r.waiting = false
	p.serveWaitingLocked()
}

// close destroys the SRQ, once no endpoint's QP uses it, and gives its
// buffers back as their messages are released.
func (p *recvPool) close() {
	p.mu.Lock()
	p.closed = true
	slabs := p.slabs
	p.mu.Unlock()
	if p.srq != nil {
		p.srq.Close()
	}
	for _, s := range slabs {
		s.data.Free()
		s.hdrs.Free()
	}
}

// poolStats are the pools' figures for Stats.
func (p *recvPool) stats() (posted, buffers int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posted, len(p.slabs) * slabBuffers
}
