package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/cqpoller"
	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// Endpoint is one end of an RC connection. Every method may be called from
// any goroutine; operations are posted by the endpoint's actor and complete
// through its poller.
//
// An operation method (Write, Read, CompareAndSwap, FetchAdd, Send,
// SendImm, WriteImm, Post) queues the operation and returns its future
// without waiting for the device. Its ctx bounds the time before the
// operation is posted: the wait for room when the endpoint's inbox is
// full, the wait in the inbox, and a Send's wait for the peer's receive
// credits. If ctx ends first, the operation is removed and never reaches
// the device; its future fails with ctx.Err(). Once posted, an operation
// cannot be recalled: its future resolves when the device is done with
// it, whatever ctx does, and its buffers stay the device's until then. (To
// stop waiting for a posted operation, give Future.Wait a context of its
// own.)
//
// One failed operation fails the connection: an RC QP moves to the error
// state on any failed work request. The operations posted after it come
// back flushed, those still queued or submitted later fail at once with
// ErrConnFailed, and Done and Err report it.
//
// As a nil *net.TCPConn's, the methods of a nil *Endpoint return an error
// (matching verbs.ErrInvalidArgument), through their futures for the
// operation methods; Done is closed, and the addresses are nil.
type Endpoint struct {
	rt     *Runtime
	qp     verbs.QP
	cq     verbs.CQ
	poller *cqpoller.Poller
	target *cqpoller.Target // ep.cq on poller; nil until start
	actor  *qpactor.Actor
	scrat  *Buffer
	watch  peerWatch // the connection beside the QP that says the peer is gone (peerlink.go)

	listIndex   int // in Runtime.epList, while registered
	recv        recvSide
	peerMsgSize int  // the largest message the peer receives (its hello)
	remote      Addr // the peer's QP
	// psn is the QP's first send PSN, drawn at random (verbs.RandomPSN)
	// and told to the peer in the hello: a stranger who guesses the QP
	// number must still guess where its sequence stands.
	psn uint32

	closeOnce sync.Once
	// goodbye holds the code and reason of CloseWithError, goodbyeLen
	// bytes, for the goodbye SEND; nil for a Close.
	goodbye    *Buffer
	goodbyeLen int
	failErr    atomic.Error
	closing    atomic.Bool // Close began: a disconnect is this side's own
	overOnce   sync.Once
	over       chan struct{} // Done
	overErr    error         // Err, set before over closes
}

// newEndpoint creates the QP (in INIT, receives posted), its CQ and actor.
func (rt *Runtime) newEndpoint() (*Endpoint, error) {
	cfg := rt.cfg
	pi := int(rt.nextPoller.Inc()) % len(rt.pollers)
	ep := &Endpoint{rt: rt, poller: rt.pollers[pi], over: make(chan struct{}), psn: verbs.RandomPSN()}
	cqe := cfg.tuning.CQSize
	if cqe <= 0 {
		// Room for a completion of every WR the QP may hold at once (a
		// flush completes each of them, signaled or not) and of every
		// receive its peer may consume (its largest window). Providers
		// round max_send_wr up, soft and rxe to 2n-1 (SEMANTICS 8a):
		// planned for here, and checked once the QP says what it got.
		cqe = 2*cfg.sqDepth + cfg.recvDepth + 16
	}
	var ch verbs.CompChannel
	if len(rt.chans) > 0 {
		ch = rt.chans[pi]
	}
	ep.recv.ep = ep
	pool, err := rt.joinRecvPool(&ep.recv)
	if errors.Is(err, errLimit) {
		return nil, rt.alloc.exhausted("no memory for a new endpoint's receive buffers")
	}
	if err != nil {
		return nil, err
	}
	if ep.cq, err = rt.vctx.CreateCQ(verbs.CQSpec{CQE: cqe, Channel: ch}); err != nil {
		ep.recv.release(nil)
		return nil, err
	}
	if ep.qp, err = rt.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: ep.cq, RecvCQ: ep.cq, SRQ: pool.srq,
		// A SEND's header and a gather list of MaxGather (recv.go).
		Caps: verbs.QPCaps{MaxSendWR: cfg.sqDepth, MaxSendSGE: 1 + MaxGather}}); err != nil {
		ep.recv.release(nil)
		ep.cq.Close()
		return nil, err
	}
	if err := ep.setup(); err != nil {
		ep.release()
		if errors.Is(err, errLimit) {
			return nil, rt.alloc.exhausted("no memory for a new endpoint's scratch")
		}
		return nil, err
	}
	return ep, nil
}

func (ep *Endpoint) setup() error {
	rt := ep.rt
	if err := verbs.Init(ep.qp, verbs.ConnectSpec{Port: rt.sel.port}); err != nil {
		return err
	}
	attr, err := ep.qp.Query()
	if err != nil {
		return err
	}
	if need := attr.Cap.MaxSendWR + rt.cfg.recvDepth; ep.cq.CQE() < need {
		// A flush would overrun the CQ and lose completions whose futures
		// then wait for ever.
		return fmt.Errorf("verbsrt: a CQ of %d entries cannot hold the completions of the QP's %d sends and %d receives (Tuning.CQSize): %w",
			ep.cq.CQE(), attr.Cap.MaxSendWR, rt.cfg.recvDepth, verbs.ErrInvalidArgument)
	}
	// The actor fills the send queue to what was asked for, not to what
	// the provider rounded that up to (256 asks, 511 granted): its shadow
	// and scratch are sized by it.
	depth := min(attr.Cap.MaxSendWR, rt.cfg.sqDepth)
	if ep.scrat, err = rt.allocOwn(qpactor.ScratchSize(depth)); err != nil {
		return err
	}
	ep.actor, err = qpactor.New(qpactor.Config{QP: ep.qp, ID: wrid.ActorID(rt.nextID.Inc()), SendDepth: depth,
		RingSize: rt.cfg.tuning.RingSize, SignalEvery: rt.cfg.tuning.SignalEvery, Spin: rt.cfg.tuning.Spin, Park: rt.cfg.parkActors,
		InlinePost: !rt.cfg.tuning.NoInlinePost, WaitPoll: waitPoll(rt.cfg.tuning), Executor: rt.pool, WrapError: ep.opError,
		Observer: ep.actorObserver(), Logger: rt.log, Scratch: qpactor.Scratch{Bytes: ep.scrat.mem, Addr: ep.scrat.addr, LKey: ep.scrat.lkey}})
	if err != nil {
		return err
	}
	return nil
}

// start connects the QP to the peer, with what the two hellos negotiate,
// registers the endpoint and starts its actor and polling.
func (ep *Endpoint) start(peer hello) error {
	rt := ep.rt
	spec := negotiate(rt.connectSpec(), rt.sel.attr.LinkLayer, rt.gid, peer)
	spec.PSN = ep.psn
	if err := verbs.Connect(ep.qp, spec, verbs.PeerInfo{QPN: peer.QPN, PSN: peer.PSN, LID: peer.LID, GID: peer.gid}); err != nil {
		return err
	}
	return ep.run(peer)
}

// connectSpec is how the runtime's QPs connect, out of band or through the
// connection manager (which takes only the retry counts and atomics), before
// the peer's hello narrows it (negotiate): this side's MTU and read/atomic
// depths.
func (rt *Runtime) connectSpec() verbs.ConnectSpec {
	initiator, responder := rt.rdAtomicDepths()
	// A port that reports no active MTU gets verbs.Connect's default.
	mtu := cmp.Or(min(rt.mtu, verbs.MTU4096), verbs.MTU1024)
	t := rt.cfg.tuning
	return verbs.ConnectSpec{Port: rt.sel.port, GIDIndex: rt.gidIndex, PathMTU: mtu, Explicit: true,
		Timeout: verbs.AckTimeoutCode(t.AckTimeout), RetryCnt: uint8(t.RetryCount), RNRRetry: uint8(t.RNRRetry),
		MaxRdAtomic: initiator, MaxDestRdAtomic: responder}
}

// run starts an endpoint whose QP is in RTS: the credits the peer's hello
// grants, the registration, the polling and the actor.
func (ep *Endpoint) run(peer hello) error {
	rt := ep.rt
	if err := ep.actor.EnablePeerCredits(peer.Window, peer.RecvDepth, &ep.recv.credits); err != nil {
		return err
	}
	ep.peerMsgSize = peer.MsgSize
	ep.remote = rt.addr(peer.gid, peer.QPN)
	if err := rt.register(ep); err != nil {
		return err
	}
	ep.target = &cqpoller.Target{CQ: ep.cq, Send: ep.actor, Recv: ep.recv.onRecv, Failed: ep.wcFailed,
		PollFailed: ep.pollFailed}
	if err := ep.poller.Add(ep.target); err != nil {
		return err
	}
	ep.actor.SetDriver(ep.poller.Driver(ep.target))
	ep.actor.Start()
	return nil
}

// release frees what newEndpoint made (and the link to the peer, once
// the QP is gone).
func (ep *Endpoint) release() {
	defer ep.releaseLink()
	if ep.qp != nil {
		ep.qp.Close()
	}
	// The receives the QP took from the shared queue before it was
	// destroyed and no one polled are counted before its window leaves the
	// pool (recvpool.go).
	ep.recv.release(ep.cq)
	if ep.cq != nil {
		ep.cq.Close()
	}
	if ep.scrat != nil {
		ep.scrat.Free()
	}
	if ep.goodbye != nil {
		ep.goodbye.Free()
	}
}

// LocalAddr returns this end of the connection: the runtime's GID and the
// endpoint's QP number.
func (ep *Endpoint) LocalAddr() net.Addr {
	if ep == nil {
		return nil
	}
	return ep.rt.addr(ep.rt.gid, ep.qp.QPN())
}

// RemoteAddr returns the peer's end of the connection.
func (ep *Endpoint) RemoteAddr() net.Addr {
	if ep == nil {
		return nil
	}
	return ep.remote
}

// nilFuture is the future of an operation method called on a nil
// *Endpoint.
func nilFuture() Future { return Future{future.Failed(errNilEndpoint, nil)} }

// Runtime returns the runtime the endpoint belongs to.
func (ep *Endpoint) Runtime() *Runtime { return ep.rt }

// PeerMessageSize returns the largest message Send may carry to this peer:
// the message size its runtime accepts (WithMessageSize on its side).
func (ep *Endpoint) PeerMessageSize() int { return ep.peerMsgSize }

// failed returns a future failed with err, the failure of op (of a batch
// of that many ops, 0 alone) before it reached the actor's queue.
func (ep *Endpoint) failed(op *qpactor.Op, batch int, err error) Future {
	return Future{future.Failed(ep.opError(op, batch, err), ep.rt.pool)}
}

func (ep *Endpoint) submit(ctx context.Context, op *qpactor.Op) Future {
	f, err := ep.actor.Submit(ctx, op)
	if err != nil {
		return ep.failed(op, 0, ep.mapErr(err))
	}
	return Future{f}
}

// mapErr turns an actor error into what the endpoint reports.
func (ep *Endpoint) mapErr(err error) error {
	if e := ep.failErr.Load(); e != nil && errors.Is(err, verbs.ErrClosed) {
		return e
	}
	return err
}

// Write copies local to remote (RDMA WRITE). It moves local.Len() bytes
// to the start of remote: a local range shorter than the remote reference
// succeeds, with Completion.ByteLen that length, and one longer than it is
// refused before it reaches the device, with an error matching
// verbs.ErrInvalidArgument.
func (ep *Endpoint) Write(ctx context.Context, local Local, remote RemoteRef) Future {
	return ep.one(ctx, verbs.OpWrite, local, remote, 0)
}

// Read copies remote into local (RDMA READ). It moves local.Len() bytes
// from the start of remote: a local range shorter than the remote
// reference succeeds, with Completion.ByteLen that length, and one longer
// than it is refused before it reaches the device, with an error matching
// verbs.ErrInvalidArgument.
func (ep *Endpoint) Read(ctx context.Context, local Local, remote RemoteRef) Future {
	return ep.one(ctx, verbs.OpRead, local, remote, 0)
}

// CompareAndSwap swaps the 8 bytes at remote (host order) for swap when
// they equal compare. Completion.Value is what it found: the swap happened
// when that equals compare.
func (ep *Endpoint) CompareAndSwap(ctx context.Context, remote RemoteRef, compare, swap uint64) Future {
	op := qpactor.Op{Opcode: verbs.OpAtomicCmpSwp, CompareAdd: compare, Swap: swap, Remote: remote.rdma()}
	return ep.atomic(ctx, &op, remote)
}

// FetchAdd adds add to the 8 bytes at remote; Completion.Value is the value
// before.
func (ep *Endpoint) FetchAdd(ctx context.Context, remote RemoteRef, add uint64) Future {
	op := qpactor.Op{Opcode: verbs.OpAtomicFetchAdd, CompareAdd: add, Remote: remote.rdma()}
	return ep.atomic(ctx, &op, remote)
}

func (ep *Endpoint) atomic(ctx context.Context, op *qpactor.Op, remote RemoteRef) Future {
	if ep == nil {
		return nilFuture()
	}
	if err := checkRemote(op.Opcode, 8, remote); err != nil {
		return ep.failed(op, 0, err)
	}
	return ep.submit(ctx, op)
}

// Send sends local as one message; the peer gets it from Recv. It uses one
// of the peer's receive credits: without one it queues, in order, until the
// peer returns some, so it never meets an empty receive queue.
func (ep *Endpoint) Send(ctx context.Context, local Local) Future {
	return ep.one(ctx, verbs.OpSend, local, RemoteRef{}, 0)
}

// SendBytes sends a copy of p as one message: the runtime copies it into
// registered memory of its own, given back when the send is done. For
// small messages; larger ones are better sent from a Buffer.
func (ep *Endpoint) SendBytes(ctx context.Context, p []byte) Future {
	if ep == nil {
		return nilFuture()
	}
	if len(p) == 0 {
		return ep.Send(ctx, Local{})
	}
	b, err := ep.rt.Alloc(len(p))
	if err != nil {
		op := qpactor.Op{Opcode: verbs.OpSend, Local: verbs.SGE{Length: uint32(min(len(p), maxOpBytes))}}
		return ep.failed(&op, 0, err)
	}
	copy(b.mem, p)
	f := ep.Send(ctx, b.Local())
	b.Free() // once the send is done with it
	return f
}

// SendImm is Send with immediate data (SEND_WITH_IMM): the peer's Recv
// returns a message whose Imm is imm, all 32 bits.
func (ep *Endpoint) SendImm(ctx context.Context, local Local, imm uint32) Future {
	return ep.one(ctx, verbs.OpSendImm, local, RemoteRef{}, imm)
}

// WriteImm copies local to remote and delivers imm to the peer's Recv as a
// message without bytes. Like Send it uses a receive credit.
func (ep *Endpoint) WriteImm(ctx context.Context, local Local, remote RemoteRef, imm uint32) Future {
	return ep.one(ctx, verbs.OpWriteImm, local, remote, imm)
}

// one submits an operation on one local range.
func (ep *Endpoint) one(ctx context.Context, opcode verbs.Opcode, local Local, remote RemoteRef, imm uint32) Future {
	if ep == nil {
		return nilFuture()
	}
	op := qpactor.Op{Opcode: opcode, Local: local.sge(), Remote: remote.rdma(), Imm: imm}
	if err := ep.check(opcode, local.n, remote); err != nil {
		return ep.failed(&op, 0, err)
	}
	h, err := ep.rt.alloc.useOne(local)
	if err != nil {
		return ep.failed(&op, 0, err)
	}
	op.Hold = h
	return ep.submit(ctx, &op)
}

// Op is one operation of a batch given to Endpoint.Post. A batch of one
// op is how an operation gathers several local ranges (a header and a
// block in one WRITE or SEND) or scatters a READ into them.
type Op struct {
	// Opcode is one of OpWrite, OpWriteImm, OpSend, OpSendImm, OpRead,
	// OpAtomicCmpSwp and OpAtomicFetchAdd; Post refuses the others of
	// verbs (memory windows, invalidation, TSO) with an error matching
	// ErrInvalidArgument, before they reach the device.
	Opcode verbs.Opcode
	// Flags may hold FENCE, SOLICITED and INLINE; SIGNALED is the
	// runtime's business and ignored.
	Flags verbs.SendFlags
	// Local is the operation's local memory, in order: what a WRITE or a
	// SEND gathers, what a READ scatters into; at most MaxGather ranges.
	// None for an atomic (its result is Completion.Value) or a message
	// without data.
	Local []Local
	// Remote is the peer's memory a READ, WRITE or atomic acts on.
	Remote     RemoteRef
	CompareAdd uint64
	Swap       uint64
	Imm        uint32
}

// The opcodes an Op may carry, the verbs layer's (verbs.Opcode): an
// application posts them without importing verbs.
const (
	OpWrite          = verbs.OpWrite          // RDMA_WRITE: Local to Remote (Write)
	OpWriteImm       = verbs.OpWriteImm       // RDMA_WRITE_WITH_IMM: a write that tells the peer's Recv Imm (WriteImm)
	OpSend           = verbs.OpSend           // SEND: Local to the peer's Recv (Send)
	OpSendImm        = verbs.OpSendImm        // SEND_WITH_IMM: a send with Imm (SendImm)
	OpRead           = verbs.OpRead           // RDMA_READ: Remote into Local (Read)
	OpAtomicCmpSwp   = verbs.OpAtomicCmpSwp   // ATOMIC_CMP_AND_SWP: Swap at Remote if it holds CompareAdd (CompareAndSwap)
	OpAtomicFetchAdd = verbs.OpAtomicFetchAdd // ATOMIC_FETCH_AND_ADD: CompareAdd added at Remote (FetchAdd)
)

// MaxGather, 4, is the most ranges one operation gathers or scatters: the
// bound of the actor that posts it.
const MaxGather = qpactor.MaxGather

// toOp checks op and turns it into the actor's, its gather list, if it
// has one, in b's room for op i. The use of its memory is Post's to take,
// once for the batch.
func (ep *Endpoint) toOp(op *Op, b *opBatch, i int) (qpactor.Op, error) {
	q := qpactor.Op{Opcode: op.Opcode, Flags: op.Flags, Remote: op.Remote.rdma(), CompareAdd: op.CompareAdd,
		Swap: op.Swap, Imm: op.Imm}
	if _, ok := opNames[op.Opcode]; !ok {
		// The QP would take some of these (LOCAL_INV, BIND_MW,
		// SEND_WITH_INV are RC's) and fail them on the wire, the
		// connection with them: the runtime hands out no memory window
		// or key to invalidate, and no UD or raw QP for TSO.
		return q, fmt.Errorf("verbsrt: post: opcode %v: an endpoint carries only RDMA_WRITE, RDMA_WRITE_WITH_IMM, SEND, SEND_WITH_IMM, "+
			"RDMA_READ, ATOMIC_CMP_AND_SWP and ATOMIC_FETCH_AND_ADD: %w", op.Opcode, verbs.ErrInvalidArgument)
	}
	if len(op.Local) > MaxGather {
		return q, fmt.Errorf("verbsrt: a gather list of %d ranges, at most %d (MaxGather): %w", len(op.Local), MaxGather, verbs.ErrInvalidArgument)
	}
	n := 0
	if len(op.Local) == 1 {
		q.Local = op.Local[0].sge()
	} else if len(op.Local) > 1 {
		q.Gather = b.gatherOf(i)
		for _, l := range op.Local {
			if l.n > 0 {
				q.Gather = append(q.Gather, l.sge())
			}
		}
	}
	for _, l := range op.Local {
		n += l.n
	}
	if n > maxOpBytes {
		return q, fmt.Errorf("verbsrt: %d bytes in one operation, at most %d: %w", n, maxOpBytes, verbs.ErrInvalidArgument)
	}
	if op.Opcode.IsAtomic() {
		n = 8
	}
	return q, ep.check(op.Opcode, n, op.Remote)
}

// Post submits ops as one batch with one future: they are chained into one
// PostSend when credits allow. A SEND op reaches the peer's Recv as Send's
// message does, and a SEND_WITH_IMM as SendImm's, with its Imm whole. Each
// of them, and each WRITE_WITH_IMM, waits for one of the peer's receives
// (receive credits). Post copies ops: the slice and its Local lists are
// the caller's again once it returns.
func (ep *Endpoint) Post(ctx context.Context, ops []Op) Future {
	if ep == nil {
		return nilFuture()
	}
	if len(ops) == 0 {
		return Future{future.Failed(fmt.Errorf("verbsrt: post: empty batch: %w", verbs.ErrInvalidArgument), ep.rt.pool)}
	}
	b := getBatch(len(ops))
	qops := b.ops
	for i := range ops {
		var err error
		if qops[i], err = ep.toOp(&ops[i], b, i); err != nil {
			return ep.failed(&qops[i], len(ops), err)
		}
	}
	// The batch's one future gives its memory back at once, so one use
	// of each buffer serves all its ops.
	h, i, err := ep.rt.alloc.use(ops)
	if err != nil {
		return ep.failed(&qops[i], len(ops), err)
	}
	qops[0].Hold = h
	f, err := ep.actor.SubmitBatch(ctx, qops, b.giveBack)
	if err != nil {
		return ep.failed(&qops[0], len(ops), ep.mapErr(err))
	}
	return Future{f}
}

// check refuses what would fail the connection: a SEND larger than the
// peer's receive buffers (a WRITE_WITH_IMM needs none), and n bytes that
// do not fit the remote reference of a READ, WRITE or atomic.
func (ep *Endpoint) check(opcode verbs.Opcode, n int, remote RemoteRef) error {
	if opcode.IsSend() {
		if n > ep.peerMsgSize {
			return fmt.Errorf("%w: %d > %d bytes", ErrMessageTooLarge, n, ep.peerMsgSize)
		}
		return nil
	}
	return checkRemote(opcode, n, remote)
}

func checkRemote(opcode verbs.Opcode, n int, r RemoteRef) error {
	if uint64(n) > r.Len {
		return fmt.Errorf("verbsrt: %d bytes do not fit the remote reference %v: %w", n, r, verbs.ErrInvalidArgument)
	}
	if opcode.IsAtomic() && r.Addr%8 != 0 {
		// The device would fail it on the wire, and the connection with it.
		return fmt.Errorf("verbsrt: %s at %#x: an atomic acts on an 8-byte aligned word: %w", opName(opcode), r.Addr, verbs.ErrInvalidArgument)
	}
	return nil
}

// fail breaks the endpoint after an asynchronous event: new and queued
// operations fail with err and the QP goes to ERR. When completions were
// lost (lost: a CQ overrun, a dead device) every outstanding WR fails with
// err at once; otherwise each resolves with its flush completion, once the
// device has given it back.
//
// The actor refuses new operations before Done closes, as Close does it:
// an operation submitted after Done must fail with err, not reach a QP
// going to ERR and come back flushed.
func (ep *Endpoint) fail(err error, lost bool) {
	if ep.failErr.CompareAndSwap(nil, err) {
		ep.actor.Break(err)
		ep.finish(err)
		ep.toError()
		ep.hangUp()
	}
	if lost {
		// Also when the endpoint had failed already for another reason:
		// the completions lost now would otherwise be waited for forever.
		ep.actor.Abandon(err)
		ep.poller.DoTarget(ep.target, func() { ep.actor.FailOutstanding(err) })
	}
}

// failHearingPeer fails the endpoint as fail does, for an error of its QP
// that a request of the peer caused (the device refused it as responder):
// the peer's operation failed too, and its endpoint, ending, names the key
// that operation used (lastWords). So the link stays open for those
// words: the watcher answers them and hangs up as soon as the peer's end
// of the link comes (linkEnded), and hangUp comes after verdictWait if it
// does not.
func (ep *Endpoint) failHearingPeer(err error) {
	w := &ep.watch
	if w.link == nil {
		ep.fail(err, false)
		return
	}
	if ep.failErr.CompareAndSwap(nil, err) {
		ep.actor.Break(err)
		ep.finish(err)
		ep.toError()
		w.vmu.Lock()
		w.hangUpLater = time.AfterFunc(verdictWait, ep.hangUp)
		w.vmu.Unlock()
	}
}

// wcFailed ends the endpoint when a WR failed: RC moved the QP to the
// error state, what was outstanding comes back flushed, and later
// operations fail at once. Err then matches ErrConnFailed and the failure
// (errors.Is(err, verbs.ErrRetryExceeded) for a peer that stopped
// answering, ...), unless the link beside the QP says the peer died
// (ErrPeerLost; peerlink.go).
func (ep *Endpoint) wcFailed(wc *verbs.WC) {
	if ep.closing.Load() || ep.Err() != nil {
		return // Close's own doing, or the endpoint is over already
	}
	var words lastWords
	if wc.Status == verbs.WCRemAccessErr && !wrid.IsRecv(wc.WRID) {
		words.rkey, words.hasKey = ep.actor.RemoteKey(wc.WRID)
	}
	ep.connFailedFor(wc.Status, &connFailed{cause: wc.Err().(*verbs.WCError)}, words)
}

// pollFailed is the target's PollFailed: an endpoint whose CQ cannot be
// polled fails, with its outstanding WRs (their completions are lost, as
// in an overrun); the poller no longer polls that CQ.
func (ep *Endpoint) pollFailed(err error) {
	ep.rt.log.Error("verbsrt: polling an endpoint's CQ failed; the endpoint fails", "qpn", ep.qp.QPN(), "err", err)
	ep.fail(fmt.Errorf("verbsrt: QP %#x: %w", ep.qp.QPN(), err), true)
}

// finish ends the endpoint's life as Done and Err report it, once: err is
// why.
func (ep *Endpoint) finish(err error) {
	ep.overOnce.Do(func() {
		ep.overErr = err
		close(ep.over)
	})
}

// Done returns a channel closed once the endpoint is over: Close was
// called, the peer closed its end (Err is ErrPeerClosed), the peer went
// away without closing (ErrPeerLost), or the connection failed (Err says
// how: ErrConnFailed with the failure of the operation that ended it, an
// *AsyncError, ...). What was pending then resolves, and Recv
// returns.
//
// A peer whose process dies is noticed at once: its kernel ends the
// connection the endpoint keeps beside the QP (the handshake's TCP
// connection, or rdma_cm's). An operation in flight then fails with what
// the peer's device answered while that kernel tore the process's objects
// down, newest first: REM_ACCESS_ERR for a READ or WRITE that reached an
// exposure already gone, a flush or RETRY_EXC_ERR otherwise. Err is
// ErrPeerLost whichever the endpoint sees first, that failure or the end
// of the connection, and those operations' errors match it too: an
// operation failing with a status a dead peer can cause ends the endpoint
// only once the connection beside the QP says whether the peer is alive
// (a live peer's endpoint hangs up with a word, "bye", a dead one's kernel
// without; no answer within a second leaves ErrConnFailed). Through
// rdma_cm, which carries no such word, the first signal decides.
// A peer whose host stops answering is noticed
// within 10 s of its last sign of life on a TCP-handshake endpoint (TCP
// keepalive), and through rdma_cm only by the endpoint's own traffic (an
// operation fails with RETRY_EXC_ERR after about half a second).
func (ep *Endpoint) Done() <-chan struct{} {
	if ep == nil {
		return closedOver
	}
	return ep.over
}

// Err returns nil while the endpoint is open, then why it is over. Once an
// operation failed the connection, Err reports it (ErrConnFailed) at once,
// also while the endpoint waits for its link to say whether the peer died
// (Done above): Done then closes with the final Err, ErrPeerLost if so.
func (ep *Endpoint) Err() error {
	if ep == nil {
		return errNilEndpoint
	}
	select {
	case <-ep.over:
		return ep.overErr
	default:
		return ep.watch.pendingErr()
	}
}

func (ep *Endpoint) toError() {
	if err := ep.qp.Modify(&verbs.QPAttr{State: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
		ep.rt.log.Debug("verbsrt: modify to ERR", "qpn", ep.qp.QPN(), "err", err)
	}
}

// flushWait bounds how long Close waits, after moving the QP to ERR, for
// the flush completions of what was outstanding: they come at once unless a
// CQ overrun lost them.
const flushWait = 5 * time.Second

// goodbyeWait bounds how long Close waits for the peer to acknowledge the
// goodbye SEND that tells it the connection is over.
var goodbyeWait = 500 * time.Millisecond

// Close drains the endpoint's queued work while ctx allows, moves the QP to
// ERR (flushing what is outstanding), resolves every pending future and
// releases the QP, CQ and buffers. Recv returns ErrClosed afterwards. A
// send still waiting for the peer's receive credits is not waited for: it
// fails with ErrClosed at once, as the peer may never grant them (to
// deliver such sends, wait for their futures before Close). Even
// with ctx spent, no future resolves before the device has given its WRs
// back (their flush completions, waited for up to flushWait), so their
// memory is the application's again when it learns the outcome.
func (ep *Endpoint) Close(ctx context.Context) error {
	if ep == nil {
		return errNilEndpoint
	}
	if ctx == nil {
		return future.ErrNilContext
	}
	var err error
	ep.closeOnce.Do(func() { err = ep.close(ctx) })
	return err
}

func (ep *Endpoint) close(ctx context.Context) error {
	ep.closing.Store(true)
	ep.actor.SayGoodbye(ep.goodbyeData()) // after what is queued: the peer sees a graceful close
	err := ep.actor.Close(ctx)
	// In-flight work finishes while ctx allows. The goodbye, posted last
	// (RC completes in order), gets goodbyeWait at most: a peer that
	// closed or failed first never acknowledges it (rxe's requester then
	// retries for as long as it is let).
	if ep.actor.SaidGoodbye() {
		ep.waitOutstanding(ctx, 1)
		gctx, cancel := context.WithTimeout(ctx, goodbyeWait)
		ep.waitOutstanding(gctx, 0)
		cancel()
	} else {
		ep.waitOutstanding(ctx, 0)
	}
	ep.toError()
	ep.hangUp()
	// The device gives back what was outstanding as flush completions, and
	// until then the memory of those WRs is its own: wait for them whatever
	// ctx says, bounded only for completions a CQ overrun lost, which never
	// come; then fail whatever is left.
	flushCtx, cancel := context.WithTimeout(context.Background(), flushWait)
	ep.waitOutstanding(flushCtx, 0)
	cancel()
	ep.poller.DoTarget(ep.target, func() { ep.actor.FailOutstanding(ErrClosed) })
	ep.poller.Remove(ep.cq)
	ep.finish(ErrClosed)
	ep.stopWatching()
	ep.rt.unregister(ep)
	ep.release()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// waitOutstanding waits until at most n WRs are outstanding or ctx ends.
func (ep *Endpoint) waitOutstanding(ctx context.Context, n int) {
	for d := time.Microsecond; ep.actor.Outstanding() > n; d = min(2*d, time.Millisecond) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}
