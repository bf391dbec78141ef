package runtime

import (
	"errors"
	"fmt"

	"github.com/verbsrt/verbsrt/internal/credit"
	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/verbs"
)

// The shared receive side.
//
// The runtime's endpoints receive through shared receive queues (SRQs), not
// through receive queues of their own: a recvPool is one SRQ, shared by up
// to poolEndpoints endpoints, and the runtime opens another when every
// pool is full. The registered buffers posted to them are the runtime's
// (recvStore): a buffer released by a message of one pool's endpoint may
// be posted next to any pool, so that no buffer sits idle in one pool
// while another's endpoints wait for one under the memory limit. One
// mutex, the store's, guards the buffers and every pool's accounting. An
// idle endpoint then costs the pool the few receives that back its peer's
// initial credits (initialWindow), not a receive queue of WithRecvDepth
// buffers of its own.
//
// The pool keeps each endpoint's credit.Receiver backed: every credit a
// peer holds is a receive posted in the pool's SRQ and counted for that
// peer's endpoint (assigned). A receive completing on an endpoint takes one
// credit and one posted receive; the credit is owed to the peer until the
// pool posts a receive for it: at once while buffers are idle, when one
// is released, or when the pool grows. So the pool never has more credits
// out than receives posted, whatever the endpoints do. The window grows as
// the Receiver asks, by what the SRQ can still back, and an endpoint
// never takes credits back for more buffers than 2 x WithRecvDepth at
// once, counting the messages the application holds (a slow reader slows
// its writer, it does not grow the pool).

// initialWindow is the credits a peer starts with: one for data, one kept
// for credit reports, and one so that a request and its reply pass each
// other without a credit-only SEND (the report is due at two unreported).
const initialWindow = 3

// srqMaxWR is the most receives one pool's SRQ holds; devices report up
// to 32,767 (mlx5) or more (rxe: 1,048,576, which rxe allocates in full).
const srqMaxWR = 16384

// poolEndpoints is the most endpoints one pool serves. An SRQ hands out
// its receives in the order they were posted, so a message lands in the
// buffer posted longest ago: with every idle endpoint's initialWindow
// receives in one SRQ, each message of an active endpoint beside thousands
// of idle ones would land in a buffer last touched a whole cycle of them
// ago, out of every cache, where a small pool cycles a few hundred buffers
// (bench/scale -pairs 1,5000 shows the difference). Each pool's SRQ keeps
// srqMaxWR receives of room to grow its endpoints' windows.
const poolEndpoints = 256

// slabBuffers is how many receive buffers a pool adds at a time.
const slabBuffers = 64

// errPoolFull says a pool's SRQ has no room for another endpoint.
var errPoolFull = errors.New("receive pool full")

// recvStore is the runtime's receive buffers, posted to its pools' SRQs.
type recvStore struct {
	rt      *Runtime
	msgSize int

	mu      lockrank.Mutex[lockrank.RecvStore] // guards the store and every pool's counts
	slabs   []*recvSlab
	idle    []int // buffers neither posted nor held by a Message
	waiting []*recvSide
	closed  bool
	wrs     []verbs.RecvWR
	sges    []verbs.SGE
}

// recvPool is one SRQ and its accounting.
type recvPool struct {
	store *recvStore
	srq   verbs.SRQ
	maxWR int // receives the SRQ holds

	// Guarded by store.mu.
	posted   int // receives in the SRQ
	assigned int // credits out: backed by posted receives, counted for an endpoint
	members  int // endpoints joined and not left, at most poolEndpoints
}

// recvSlab is slabBuffers receive buffers: their data and their headers.
type recvSlab struct {
	data  *Buffer
	hdrs  *Buffer
	slots []msgSlot
}

func (rt *Runtime) newRecvStore() *recvStore {
	return &recvStore{rt: rt, msgSize: rt.cfg.msgSize}
}

func (st *recvStore) newPool() (*recvPool, error) {
	rt := st.rt
	maxWR := min(srqMaxWR, rt.devAttr.MaxSRQWR)
	if maxWR < initialWindow {
		return nil, verbs.Errorf("verbsrt", verbs.ErrNotSupported, "the device has no shared receive queues (max_srq_wr %d)", rt.devAttr.MaxSRQWR)
	}
	srq, err := rt.pd.CreateSRQ(verbs.SRQSpec{MaxWR: maxWR, MaxSGE: recvSGEs})
	if err != nil {
		return nil, err
	}
	return &recvPool{store: st, srq: srq, maxWR: maxWR}, nil
}

// slot returns buffer idx's message slot.
func (p *recvPool) slot(idx int) *msgSlot {
	st := p.store
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.slotLocked(idx)
}

func (st *recvStore) slotLocked(idx int) *msgSlot {
	if s := idx / slabBuffers; s < len(st.slabs) {
		return &st.slabs[s].slots[idx%slabBuffers]
	}
	return nil
}

// join gives r its initial window: receives posted and counted for it,
// which the peer's hello credits grant without a report.
func (p *recvPool) join(r *recvSide) error {
	st := p.store
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return ErrClosed
	}
	if p.members >= poolEndpoints || p.assigned+initialWindow > p.maxWR {
		return errPoolFull
	}
	if err := p.supplyLocked(initialWindow); err != nil {
		return err // what it posted stays, unassigned, for the next
	}
	p.assigned += initialWindow
	p.members++
	r.credits.Join(initialWindow, r.maxWindow)
	return nil
}

// postedNone reports whether p's SRQ holds no receive.
func (p *recvPool) postedNone() bool {
	st := p.store
	st.mu.Lock()
	defer st.mu.Unlock()
	return p.posted == 0
}

// supplyLocked makes n receives posted and unassigned in p's SRQ, posting
// idle buffers and adding slabs as needed. When the SRQ has no room or the
// arena cannot give a slab it posts what it can and returns that error
// (ErrNoMemory): fewer than n are then posted and unassigned.
func (p *recvPool) supplyLocked(n int) error {
	st := p.store
	need := n - (p.posted - p.assigned)
	if need <= 0 {
		return nil
	}
	var shortErr error
	if room := p.maxWR - p.posted; need > room {
		need = room
		shortErr = fmt.Errorf("%w: the shared receive queue holds %d receives", ErrNoMemory, p.maxWR)
	}
	for len(st.idle) < need {
		if err := st.growLocked(); err != nil {
			need, shortErr = len(st.idle), err
			break
		}
	}
	if need > 0 {
		if err := p.postLocked(need); err != nil {
			return err
		}
	}
	return shortErr
}

// availableLocked is how many more credits p's SRQ could back: posted and
// unassigned receives, and its room for more.
func (p *recvPool) availableLocked() int {
	return p.maxWR - p.assigned
}

// growLocked adds a slab of idle buffers, as the arena allows.
func (st *recvStore) growLocked() error {
	data, err := st.rt.allocOwn(slabBuffers * st.msgSize)
	if err != nil {
		return err
	}
	hdrs, err := st.rt.allocOwn(slabBuffers * headerSize)
	if err != nil {
		data.Free()
		return err
	}
	s := &recvSlab{data: data, hdrs: hdrs, slots: make([]msgSlot, slabBuffers)}
	base := len(st.slabs) * slabBuffers
	mem := data.Bytes()
	for i := range s.slots {
		s.slots[i] = msgSlot{store: st, slab: s, idx: base + i, data: mem[i*st.msgSize : (i+1)*st.msgSize : (i+1)*st.msgSize]}
		st.idle = append(st.idle, base+slabBuffers-1-i)
	}
	st.slabs = append(st.slabs, s)
	return nil
}

// postLocked posts n idle buffers to p's SRQ in one call.
func (p *recvPool) postLocked(n int) error {
	st := p.store
	if cap(st.wrs) < n {
		st.wrs = make([]verbs.RecvWR, n)
		st.sges = make([]verbs.SGE, recvSGEs*n)
	}
	wrs := st.wrs[:n]
	for i := range wrs {
		idx := st.idle[len(st.idle)-1-i]
		s := st.slotLocked(idx)
		sgl := st.sges[recvSGEs*i : recvSGEs*i+recvSGEs : recvSGEs*i+recvSGEs]
		off := idx % slabBuffers
		sgl[0] = s.slab.hdrs.Slice(off*headerSize, headerSize).sge()
		sgl[1] = s.slab.data.Slice(off*st.msgSize, st.msgSize).sge()
		wrs[i] = verbs.RecvWR{ID: wrid.Recv(idx), SGL: sgl}
	}
	posted, err := p.srq.PostRecv(wrs)
	st.idle = st.idle[:len(st.idle)-posted]
	p.posted += posted
	return err
}

// consumed accounts for a receive of r that completed (or that r's QP
// took before it was destroyed): one posted receive and one credit fewer,
// which r now owes its peer.
func (p *recvPool) consumed(r *recvSide) {
	st := p.store
	st.mu.Lock()
	p.posted--
	p.assigned--
	r.credits.Consumed()
	st.mu.Unlock()
}

// putIdle gives buffer idx back: its message was released or it carried
// none. What waits for a buffer is served.
func (p *recvPool) putIdle(idx int) {
	st := p.store
	st.mu.Lock()
	st.idle = append(st.idle, idx)
	st.serveWaitingLocked()
	st.mu.Unlock()
}

// serve returns r's debt to its peer as far as receives can be posted for
// it now, growing its window first when its peer asked; the rest waits
// for a buffer.
func (p *recvPool) serve(r *recvSide) {
	st := p.store
	st.mu.Lock()
	due := p.serveLocked(r)
	st.mu.Unlock()
	r.report(due)
}

// serveLocked is serve with the store's lock held. It reports whether a
// credit report is due, even when it posted nothing (a window that shrank
// makes the credits already unreported due), for its caller to ask the
// actor for once the lock is released.
func (p *recvPool) serveLocked(r *recvSide) (reportDue bool) {
	st := p.store
	if st.closed || r.left {
		return false
	}
	// Grow only by what the SRQ can still back.
	r.credits.Grow(p.availableLocked())
	// At most 2 x WithRecvDepth buffers for one endpoint, counting the
	// messages its application holds.
	n := min(r.credits.Owed(), 2*r.maxWindow-r.credits.Backed()-r.held)
	if n > 0 {
		if err := p.supplyLocked(n); err != nil && !errors.Is(err, ErrNoMemory) {
			st.rt.log.Warn("verbsrt: posting shared receives failed", "err", err)
		}
		n = min(n, p.posted-p.assigned)
		if n > 0 {
			p.assigned += n
			r.credits.Grant(n)
		}
		if r.credits.Owed() > 0 && !r.waiting && r.credits.Backed()+r.held < 2*r.maxWindow {
			r.waiting = true
			st.waiting = append(st.waiting, r)
		}
	}
	return r.reportDueLocked()
}

// adjust moves r's window by what its peer's SEND said
// (credit.Receiver.Adjust); the receives of credits given back are free
// for the endpoints that wait.
func (p *recvPool) adjust(r *recvSide, h credit.Fields) {
	st := p.store
	st.mu.Lock()
	defer st.mu.Unlock()
	p.assigned -= r.credits.Adjust(h)
	if h.Returned() > 0 {
		st.serveWaitingLocked()
	}
}

// delivered counts a message r's application now holds.
func (p *recvPool) delivered(r *recvSide) {
	st := p.store
	st.mu.Lock()
	r.held++
	st.mu.Unlock()
}

// released gives a delivered message's buffer back: its endpoint may take
// credits back for one more, and what waits for a buffer is served.
func (st *recvStore) released(s *msgSlot) {
	r := s.r
	st.mu.Lock()
	r.held--
	st.idle = append(st.idle, s.idx)
	due := r.pool.serveLocked(r)
	st.serveWaitingLocked()
	st.mu.Unlock()
	r.report(due)
}

// serveWaitingLocked serves the endpoints that wait for buffers, of every
// pool, in the order they began to wait, while buffers last. Each is
// looked at once: one its pool cannot serve now (its SRQ is full, or it
// has no receive posted and unassigned and there is no idle buffer to
// post) waits on at the back, and the next is looked at: another pool may
// have receives to spare, which the endpoints behind one of a full pool
// would otherwise never get.
func (st *recvStore) serveWaitingLocked() {
	for range len(st.waiting) {
		r := st.waiting[0]
		st.waiting = st.waiting[1:]
		if len(st.idle) == 0 && r.pool.posted <= r.pool.assigned {
			st.waiting = append(st.waiting, r)
			continue
		}
		r.waiting = false
		// Another endpoint's report: its actor, woken, posts it without
		// the store's lock.
		if r.pool.serveLocked(r) {
			r.ep.actor.WantReportLater()
		}
	}
}

// leave takes r's window out of its pool: r's QP is gone (and the
// receives it took before, drained from its CQ, were consumed), so the
// credits its peer held back receives no one will use up.
func (p *recvPool) leave(r *recvSide) {
	st := p.store
	st.mu.Lock()
	defer st.mu.Unlock()
	if r.left {
		return
	}
	r.left = true
	p.members--
	p.assigned -= r.credits.Leave()
	for i, w := range st.waiting {
		if w == r {
			st.waiting = append(st.waiting[:i], st.waiting[i+1:]...)
			break
		}
	}
	r.waiting = false
	st.serveWaitingLocked()
}

// close destroys the pools' SRQs, once no endpoint's QP uses them, and
// gives the buffers back as their messages are released.
func (st *recvStore) close(pools []*recvPool) {
	st.mu.Lock()
	st.closed = true
	slabs := st.slabs
	st.mu.Unlock()
	for _, p := range pools {
		p.srq.Close()
	}
	for _, s := range slabs {
		s.data.Free()
		s.hdrs.Free()
	}
}

// stats are the store's figures for Stats: receives posted over every
// pool, and buffers.
func (st *recvStore) stats(pools []*recvPool) (posted, buffers int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, p := range pools {
		posted += p.posted
	}
	return posted, len(st.slabs) * slabBuffers
}
