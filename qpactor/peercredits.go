package qpactor

import (
	"fmt"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/verbs"
)

// Peer receive credits.
//
// An op that consumes one of the peer's posted receives (SEND, SEND_WITH_IMM,
// WRITE_WITH_IMM) must not go out before the peer has posted one, or it
// meets an empty receive queue (RNR). With EnablePeerCredits the actor owns
// those credits next to its send-queue credits: it takes a submission from
// the inbox only when both kinds suffice, so order is kept and there is one
// queue (the inbox, bounded) and one way to wait (the actor's waker, which
// GrantPeerCredits and completions ring).
//
// The credits travel back in a header (HeaderSize bytes, the
// CreditReporter's) that the actor gathers in front of the data of each of
// its SENDs from its own registered scratch, so the caller's buffer is
// neither copied nor moved and the immediate data of a SEND_WITH_IMM stays
// the caller's. The header is stamped at the moment the SEND is chained
// (so a SEND that waits carries nothing yet, and one that is not posted
// gives its report back), or, when the receive side asks for it
// (WantReport), the actor sends it alone in a credit-only SEND of its own.
// Data never takes the last credit: it is kept for that report, so two
// peers cannot both wait for credits only the other could report.

// HeaderSize is the length of the header in front of the data of every
// SEND of an actor with peer credits: one scratch slot, and a multiple of
// 8, so that data received behind it in the same buffer stays 8-byte
// aligned.
const HeaderSize = 8

// The header lives in the scratch slot of its SEND's send-queue entry,
// which an atomic would use and a SEND does not.
var _ [scratchSlot - HeaderSize]struct{}

// Header is what a SEND of an actor with peer credits carries in front of
// its data; its content is the CreditReporter's business.
type Header [HeaderSize]byte

// CreditReporter is the receive side whose re-posted receives an actor's
// SENDs report to the peer.
type CreditReporter interface {
	// Stamp takes the credits not yet reported and returns the header
	// that reports them, for a SEND with a message (msg true) or for a
	// credit-only SEND, and how many it reports.
	Stamp(msg bool) (h Header, n uint32)
	// Unstamp gives back the n credits of a stamped SEND that was not
	// posted.
	Unstamp(n uint32)
	// ReportDue reports whether enough credits are unreported to be worth
	// a credit-only SEND.
	ReportDue() bool
	// Goodbye returns the header of the last SEND a closing actor makes,
	// which tells the peer the connection is over, and the credits it
	// reports.
	Goodbye() (h Header, n uint32)
	// MarkBacklog flags the stamped header of a SEND posted while the
	// actor had more to send than the peer's credits allowed: the peer
	// may grow the window.
	MarkBacklog(h *Header)
	// Want returns the header of a credit-only SEND (reporting n credits,
	// as Stamp(false)) that asks the peer for a window of window credits:
	// the actor's next submission needs that many.
	Want(window int) (h Header, n uint32)
	// Return returns the header of a credit-only SEND (reporting n
	// credits, as Stamp(false)) that gives the peer back returned credits
	// the actor holds and has no use for: an idle actor keeps its initial
	// window, so that what a burst made the peer grant serves others.
	Return(returned int) (h Header, n uint32)
}

// peerCredits is the actor's share of the scheme.
type peerCredits struct {
	window  int64 // the most credits the peer grants: its largest window
	initial int64 // the credits the peer granted first: an idle actor keeps these
	rep     CreditReporter
	// lastUse is when the actor rested after the last submission that
	// consumed the peer's receives (returnIdle), on the actor's clock
	// (sampler.now).
	lastUse time.Duration

	credits atomic.Int64 // the peer's receives we may still consume
	report  atomic.Bool  // a credit-only SEND is wanted
	goodbye atomic.Bool  // a closing actor says goodbye (SayGoodbye)
	saidBye atomic.Bool  // the goodbye SEND was posted
	on      bool         // set by EnablePeerCredits, before Start
	// wanted: the actor asked the peer for a larger window since it last
	// took a submission that consumes the peer's receives.
	wanted bool
	// used: a submission consumed the peer's receives since the actor
	// last rested.
	used bool
	// uses[i] is what the chain's WR i took of the scheme.
	uses []peerUse
	// reportSub owns a credit-only SEND while it is chained; its future is
	// nil: nobody waits for it.
	reportSub submission
}

type peerUse struct {
	credit  bool   // consumes a peer receive
	stamped uint32 // credits reported in hdr
	hdr     Header // a SEND's header
}

// EnablePeerCredits makes the actor spend the peer's receive credits, of
// which it starts with initial and may be granted up to window (the peer's
// largest window), and report the receive side's credits through r, in a
// header in front of each SEND's data: the QP needs max_send_sge 2. Call
// it before Start.
func (a *Actor) EnablePeerCredits(initial, window int, r CreditReporter) error {
	if a.limits.MaxSendSGE < 2 {
		return fmt.Errorf("qpactor: peer credits need max_send_sge 2 (a header and the data), the QP has %d: %w",
			a.limits.MaxSendSGE, verbs.ErrInvalidArgument)
	}
	if initial < 2 || window < initial {
		return fmt.Errorf("qpactor: peer credits: an initial window of %d and a largest of %d (at least 2, one kept for reports): %w",
			initial, window, verbs.ErrInvalidArgument)
	}
	a.peer.on, a.peer.window, a.peer.initial, a.peer.rep = true, int64(window), int64(initial), r
	a.peer.credits.Store(int64(initial))
	a.peer.uses = make([]peerUse, 0, cap(a.chain))
	return nil
}

// GrantPeerCredits adds n credits the peer returned and wakes the actor.
//
// Unlike a completion, a grant wakes even an actor with nothing to do: it
// comes in the header of a SEND, whose receiver is about to reply or to
// report credits, and an actor started now is spinning by then. Waking
// only an actor that waits for credits (as Complete does) made a stream
// of SEND+Wait on soft 40% slower (BenchmarkSend/size=64/callers=1: 24-30
// µs against 17-20), the receiver's credit reports each starting its
// actor on the sender's critical path; the SEND/Recv round trip in
// bench/scale gained 5-15%. Which to keep belongs with the spin policy
// (how long an actor spins, and when it starts ahead of work). With
// InlinePost the reply is posted by its caller, and an actor started
// ahead of it would only take the post from the caller and spin beside
// it: a grant then wakes only an actor that waits for credits, or that
// now holds more than the initial window, which an idle actor gives back
// once idle for returnAfter (its rest arranges that). An actor that waits
// for these credits, gone idle, runs on the goroutine handling the grant
// (runInline), as it would on a caller that found it idle: an actor
// goroutine started instead costs a locked thread per starved SEND (a
// one-way stream of 64-byte SEND+Wait on soft: 21-27 µs a message that
// way, 2.9-3.2 this way).
func (a *Actor) GrantPeerCredits(n int64) {
	if n == 0 {
		return
	}
	held := a.peer.credits.Add(n)
	if !a.inline {
		a.waker.Wake()
		return
	}
	waiting := a.waitsForCredits.Load()
	if held <= a.peer.initial && !waiting {
		return
	}
	// A SEND that waited for these credits is posted by the goroutine
	// that handled the grant (a waiter polling the CQ, or the poller), as
	// a submission that finds the actor idle is by its caller.
	if waiting && a.waker.Claim() {
		a.waker.StopLater()
		a.runInline()
		return
	}
	a.waker.Wake()
}

// WantReport asks the actor to report the receive side's credits in a
// credit-only SEND if no SEND of its own carries them first.
func (a *Actor) WantReport() {
	if a.peer.report.CompareAndSwap(false, true) {
		a.waker.Wake()
	}
}

// PeerCredits returns the peer's receives the actor may still consume.
func (a *Actor) PeerCredits() int64 { return a.peer.credits.Load() }

// consumesPeer reports whether op uses one of the peer's receives.
func consumesPeer(op verbs.Opcode) bool { return op.IsSend() || op == verbs.OpWriteImm }

// withHeader returns the gather list of the WR at position pos of the
// chain that carries a header in front of local (none when its length is
// 0): the header's scratch slot is the WR's send-queue slot, whose address
// placeHeader sets once post has assigned it.
func (a *Actor) withHeader(pos int, local []verbs.SGE) []verbs.SGE {
	sgl := a.chainSGE[sgesPerWR*pos : sgesPerWR*pos+sgesPerWR : sgesPerWR*pos+sgesPerWR]
	sgl[0] = verbs.SGE{Length: HeaderSize, LKey: a.scratch.LKey}
	n := 1 + copy(sgl[1:], local)
	return sgl[:n:n]
}

// placeHeader writes the header of the chain's SEND i into the scratch
// slot of its send-queue entry: the slot is the SEND's until it completes,
// so the device may read the header from there at any time until then.
func (a *Actor) placeHeader(i int, wr *verbs.SendWR, slot uint64) {
	off := scratchSlot * slot
	copy(a.scratch.Bytes[off:off+HeaderSize], a.peer.uses[i].hdr[:])
	wr.SGL[0].Addr = a.scratch.Addr + off
}

// peerNeed counts the ops of ops that consume a peer receive.
func peerNeed(ops []Op) int64 {
	var n int64
	for i := range ops {
		if consumesPeer(ops[i].Opcode) {
			n++
		}
	}
	return n
}

// checkPeerWindow refuses a batch that needs more of the peer's receives
// than data may ever hold at once.
func (a *Actor) checkPeerWindow(ops []Op) error {
	if !a.peer.on {
		return nil
	}
	if need := peerNeed(ops); need > a.peer.window-1 {
		return fmt.Errorf("verbsrt: a batch may carry at most %d SENDs and WRITE_WITH_IMMs (the peer's %d receives, less one kept for credit reports), not %d: %w",
			a.peer.window-1, a.peer.window, need, verbs.ErrInvalidArgument)
	}
	return nil
}

// stampChain marks the chain's WRs from start on that use the peer's
// receives, takes their credits (need, as drain counted them), and stamps
// the credit reports into the headers of its SENDs (buildWR gave them
// room: withHeader).
func (a *Actor) stampChain(start int, need int64) {
	for i := start; i < len(a.chain); i++ {
		op := a.chain[i].Opcode
		u := peerUse{credit: consumesPeer(op)}
		if op.IsSend() {
			u.hdr, u.stamped = a.peer.rep.Stamp(true)
		}
		a.peer.uses = append(a.peer.uses, u)
	}
	a.peer.credits.Sub(need)
	if need > 0 {
		a.peer.used = true
	}
}

// appendWant asks the peer for a window of need+1 in a credit-only SEND,
// once per submission that waits for more credits than the peer granted,
// when a send-queue slot and two peer receives are left: one for it, one
// kept for reports. Without it, a batch larger than the window would wait
// for credits nothing in flight brings.
func (a *Actor) appendWant(sqCredits int, peerLeft, need int64) int64 {
	if a.peer.wanted || len(a.chain) >= sqCredits || peerLeft < 2 {
		return peerLeft
	}
	a.peer.wanted = true
	h, n := a.peer.rep.Want(int(need + 1))
	a.appendCreditOnly(h, n, sqCredits)
	return peerLeft - 1
}

// markBacklog flags the headers of the chain's SENDs: the actor had more
// to send than the peer's credits allowed.
func (a *Actor) markBacklog() {
	for i := range a.peer.uses {
		if a.chain[i].Opcode.IsSend() {
			a.peer.rep.MarkBacklog(&a.peer.uses[i].hdr)
		}
	}
}

// appendReport chains a credit-only SEND when one is wanted and due, and
// a peer receive and a send-queue slot are left for it.
func (a *Actor) appendReport(sqCredits int, peerLeft int64) {
	if !a.peer.report.Load() || len(a.chain) >= sqCredits || peerLeft < 1 {
		return
	}
	a.peer.report.Store(false)
	if !a.peer.rep.ReportDue() {
		return
	}
	if h, n := a.peer.rep.Stamp(false); n > 0 {
		a.appendCreditOnly(h, n, sqCredits)
	}
}

// appendCreditOnly chains a SEND of header h alone (reporting n credits),
// which consumes one of the peer's receives; nobody waits for it. The
// actor holds credits send-queue credits, more than the chain has WRs.
func (a *Actor) appendCreditOnly(h Header, n uint32, credits int) {
	if len(a.chain) == cap(a.chain) {
		a.growPost(2 * cap(a.chain))
	}
	if len(a.chain) >= a.shadowRoom(credits) {
		a.growShadow(int(a.sqDepth) - credits + len(a.chain) + 1)
	}
	a.chain = append(a.chain, verbs.SendWR{Opcode: verbs.OpSend, SGL: a.withHeader(len(a.chain), nil)})
	a.owners = append(a.owners, &a.peer.reportSub)
	a.peer.uses = append(a.peer.uses, peerUse{credit: true, stamped: n, hdr: h})
	a.peer.credits.Dec()
}

// unusePeer gives back what the chain's WRs from i to j took: the peer
// receives they would have consumed and the credits they would have
// reported. For WRs that were not posted.
func (a *Actor) unusePeer(i, j int) {
	if !a.peer.on {
		return
	}
	var back int64
	for k := i; k < j; k++ {
		u := &a.peer.uses[k]
		if u.credit {
			back++
		}
		if u.stamped > 0 {
			a.peer.rep.Unstamp(u.stamped)
		}
		*u = peerUse{}
	}
	if back > 0 {
		a.peer.credits.Add(back)
	}
}

// SayGoodbye makes the actor, once it closes with nothing left queued, post
// one last SEND (CreditReporter.Goodbye) that tells the peer the connection
// is over: a graceful close the peer sees as such. It uses the peer receive
// kept back for credit reports; without one it sends nothing. Call it
// before Close.
func (a *Actor) SayGoodbye() { a.peer.goodbye.Store(true) }

// postGoodbye posts the goodbye SEND of a closing actor, when one is wanted
// and a send-queue slot and a peer receive are left for it.
func (a *Actor) postGoodbye() {
	credits := int(a.credits.Load())
	if !a.peer.on || !a.peer.goodbye.CompareAndSwap(true, false) || a.broken.Load() != nil ||
		credits < 1 || a.peer.credits.Load() < 1 {
		return
	}
	a.chain, a.owners = a.chain[:0], a.owners[:0]
	a.peer.uses = a.peer.uses[:0]
	a.drained = a.drained[:0]
	h, n := a.peer.rep.Goodbye()
	a.appendCreditOnly(h, n, credits)
	seq := a.seq
	a.post()
	a.peer.saidBye.Store(a.seq != seq) // post advances seq by the WRs posted
}

// returnAfter is how long an actor holding more of the peer's credits
// than its initial window stays idle before it gives them back
// (returnIdle). Giving them back at the first rest made a stream shrink
// its window whenever its inbox was empty for a moment: each SEND posted
// inline by its caller was followed by a rest. In a TCG guest over rxe,
// where a 64-byte stream's SENDs go out in batches a few ms apart, the
// window (WithRecvDepth 512) grew to 150-280 and fell back to 30-130
// again and again, and the sender waited for credits in every batch.
const returnAfter = 10 * time.Millisecond

// returnIdle gives the peer back the credits the actor holds beyond its
// initial window once it has not consumed any for returnAfter; until then
// it arranges a wake-up for it. Only the actor calls it, resting with
// nothing queued.
func (a *Actor) returnIdle() {
	// Credits beyond the initial window came from growth that the
	// actor's own submissions asked for, so used was set before the first
	// rest that finds them.
	now := a.lat.now()
	if a.peer.used {
		a.peer.used, a.peer.lastUse = false, now
	}
	if idle := now - a.peer.lastUse; idle < returnAfter {
		a.waker.WakeAfter(returnAfter - idle)
		return
	}
	a.postReturn()
}

// postReturn gives the peer back the credits an idle actor holds beyond
// its initial window, in a credit-only SEND that takes one of them: the
// peer's shared receives they stand for serve other senders (the peer
// sends that one back, so the actor keeps its initial window). Only the
// actor calls it, with nothing queued.
func (a *Actor) postReturn() {
	credits := int(a.credits.Load())
	left := a.peer.credits.Load()
	if !a.peer.on || left <= a.peer.initial || a.broken.Load() != nil || a.closing.Load() || credits < 1 {
		return
	}
	a.chain, a.owners = a.chain[:0], a.owners[:0]
	a.peer.uses = a.peer.uses[:0]
	a.drained = a.drained[:0]
	returned := left - a.peer.initial
	h, n := a.peer.rep.Return(int(returned))
	a.appendCreditOnly(h, n, credits) // takes one credit
	a.peer.credits.Sub(returned)
	seq := a.seq
	a.post()
	if a.seq == seq { // not posted: post gave the credit-only SEND's back
		a.peer.credits.Add(returned)
	}
}

// SaidGoodbye reports whether the closed actor posted its goodbye SEND, the
// last WR it posted.
func (a *Actor) SaidGoodbye() bool { return a.peer.saidBye.Load() }
