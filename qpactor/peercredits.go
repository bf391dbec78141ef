package qpactor

import (
	"fmt"

	"github.com/verbsrt/verbsrt/internal/credit"
	"github.com/verbsrt/verbsrt/verbs"
)

// Peer receive credits. The protocol is internal/credit's (its doc.go is
// the specification); the actor holds its Sender and posts what the
// Sender decides: it takes a submission from the inbox only when
// send-queue credits and the Sender (Admit) both let it, so order is kept
// and there is one queue (the inbox, bounded) and one way to wait (a
// kick, which GrantPeerCredits and completions make). Each SEND
// carries the header in front of its data, gathered from the scratch
// slot of its send-queue entry, so the caller's buffer is neither copied
// nor moved; the credit-only SENDs (report, window asked, credits given
// back, goodbye) are the actor's own, so no report is lost to a full
// inbox.

// The header lives in the scratch slot of its SEND's send-queue entry,
// which an atomic would use and a SEND does not.
var _ [scratchSlot - credit.HeaderSize]struct{}

// peerCredits is the actor's share of the protocol.
type peerCredits struct {
	// s is nil for an actor without peer credits: it admits everything
	// and its SENDs carry no header.
	s *credit.Sender
	// uses[i] is what the chain's WR i took of the protocol.
	uses []peerUse
	// reportSub owns a credit-only SEND while it is chained; its future is
	// nil: nobody waits for it.
	reportSub submission
	// goodbye is what the goodbye SEND carries after its header
	// (SayGoodbye); Length 0 for nothing.
	goodbye verbs.SGE
}

type peerUse struct {
	credit  bool   // consumes a peer receive
	stamped uint32 // credits reported in hdr
	hdr     credit.Header
}

// EnablePeerCredits makes the actor spend the peer's receive credits, of
// which it starts with initial and may be granted up to window (the peer's
// largest window), and report r's credits in a header in front of each
// SEND's data: the QP needs max_send_sge 2. Call it before Start.
func (a *Actor) EnablePeerCredits(initial, window int, r *credit.Receiver) error {
	if a.limits.MaxSendSGE < 2 {
		return fmt.Errorf("qpactor: peer credits need max_send_sge 2 (a header and the data), the QP has %d: %w",
			a.limits.MaxSendSGE, verbs.ErrInvalidArgument)
	}
	s, err := credit.NewSender(initial, window, r)
	if err != nil {
		return fmt.Errorf("qpactor: %v: %w", err, verbs.ErrInvalidArgument)
	}
	a.peer.s = s
	return nil
}

// GrantPeerCredits adds n credits the peer reported and wakes the actor.
//
// Unlike a completion, a grant wakes even an actor with nothing to do: it
// comes in the header of a SEND, whose receiver is about to reply or to
// report credits, and an actor started now is spinning by then. With
// InlinePost the reply is posted by its caller, and an actor started
// ahead of it would only take the post from the caller and spin beside
// it: a grant then wakes only an actor that waits for credits, or that
// now holds more than the initial window, which an idle actor gives back
// (its rest arranges that). An actor that waits for these credits, gone
// idle, runs on the goroutine handling the grant (runInline), as it would
// on a caller that found it idle, instead of on a locked thread started
// for it.
func (a *Actor) GrantPeerCredits(n int64) {
	if n == 0 {
		return
	}
	beyond := a.peer.s.Grant(n) // before the view: it reads waitsForCredits after the credits land
	v := a.view()
	v.beyondWindow = beyond
	a.kickWith(kickGrant, v)
}

// WantReport asks the actor to report the receive side's credits in a
// credit-only SEND if no SEND of its own carries them first. The calling
// goroutine posts the report itself when the actor is idle and its
// submitters would post theirs (InlinePost, inlineWorthIt), as a grant's
// handler posts what waited for it: the report falls due where a receive
// is posted again (the CQ's handler) or a message released, often while
// the sender waits for it, and waking an idle actor's locked thread for
// one SEND costs more than the SEND. The caller must hold no lock a post
// may take (the receive pools' among them); WantReportLater is for
// callers that do.
func (a *Actor) WantReport() {
	if a.peer.s.WantReport() {
		a.kick(kickReport)
	}
}

// WantReportLater is WantReport for a caller holding a lock: the actor,
// woken, posts the report.
func (a *Actor) WantReportLater() {
	if a.peer.s.WantReport() {
		a.kick(kickWake)
	}
}

// PeerCredits returns the peer's receives the actor may still consume.
func (a *Actor) PeerCredits() int64 { return a.peer.s.Credits() }

// consumesPeer reports whether op uses one of the peer's receives.
func consumesPeer(op verbs.Opcode) bool { return op.IsSend() || op == verbs.OpWriteImm }

// withHeader returns the gather list of the WR at position pos of the
// chain that carries a header in front of local (none when its length is
// 0): the header's scratch slot is the WR's send-queue slot, whose address
// placeHeader sets once post has assigned it.
func (a *Actor) withHeader(pos int, local []verbs.SGE) []verbs.SGE {
	sgl := a.chainSGE[sgesPerWR*pos : sgesPerWR*pos+sgesPerWR : sgesPerWR*pos+sgesPerWR]
	sgl[0] = verbs.SGE{Length: credit.HeaderSize, LKey: a.scratch.LKey}
	n := 1 + copy(sgl[1:], local)
	return sgl[:n:n]
}

// placeHeader writes the header of the chain's SEND i into the scratch
// slot of its send-queue entry: the slot is the SEND's until it completes,
// so the device may read the header from there at any time until then.
func (a *Actor) placeHeader(i int, wr *verbs.SendWR, slot uint64) {
	off := scratchSlot * slot
	copy(a.scratch.Bytes[off:off+credit.HeaderSize], a.peer.uses[i].hdr[:])
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
	need := peerNeed(ops)
	if need == 0 {
		return nil // the Sender is the actor's: a submitter need not read it
	}
	if most := a.peer.s.MaxBatch(); need > most {
		return fmt.Errorf("verbsrt: a batch may carry at most %d SENDs and WRITE_WITH_IMMs (the peer's %d receives, less one kept for credit reports), not %d: %w",
			most, most+1, need, verbs.ErrInvalidArgument)
	}
	return nil
}

// admitHead is the Sender's verdict on the submission at the head of the
// inbox, whose ops need need of the peer's receives, when left of them
// are not yet spent by the chain: the one rule canDrain and drain share.
func (a *Actor) admitHead(ops []Op, left int64) (v credit.Verdict, need int64) {
	need = peerNeed(ops)
	return a.peer.s.Admit(need, left, a.run.has(lifeClosing)), need
}

// stampChain records what the chain's WRs from start on take of the
// protocol, spends their credits (need, as drain counted them), and
// stamps the credit reports into the headers of its SENDs (buildWR gave
// them room: withHeader).
func (a *Actor) stampChain(start int, need int64) {
	for i := start; i < len(a.chain); i++ {
		op := a.chain[i].Opcode
		u := peerUse{credit: consumesPeer(op)}
		if op.IsSend() {
			u.hdr, u.stamped = a.peer.s.Stamp()
		}
		a.peer.uses = append(a.peer.uses, u)
	}
	a.peer.s.Spend(need)
}

// markBacklog flags the headers of the chain's SENDs: the actor had more
// to send than the peer's credits allowed.
func (a *Actor) markBacklog() {
	for i := range a.peer.uses {
		if a.chain[i].Opcode.IsSend() {
			a.peer.uses[i].hdr.SetBacklog()
		}
	}
}

// appendAsk asks the peer for a window the submission that waits for
// need credits fits in (the Sender said Ask), in a credit-only SEND, when
// a send-queue slot is left; it returns the credits left.
func (a *Actor) appendAsk(sqCredits int, peerLeft, need int64) int64 {
	if len(a.chain) >= sqCredits {
		return peerLeft
	}
	h, n := a.peer.s.Ask(need)
	a.appendCreditOnly(h, n, sqCredits)
	return peerLeft - 1
}

// appendReport chains a credit-only SEND when one is wanted and due, and
// a send-queue slot is left for it.
func (a *Actor) appendReport(sqCredits int, peerLeft int64) {
	if len(a.chain) >= sqCredits {
		return
	}
	if h, n, ok := a.peer.s.Report(peerLeft); ok {
		a.appendCreditOnly(h, n, sqCredits)
	}
}

// appendCreditOnly chains a SEND of header h alone (reporting n credits),
// whose peer credit the Sender took; nobody waits for it. The actor holds
// credits send-queue credits, more than the chain has WRs.
func (a *Actor) appendCreditOnly(h credit.Header, n uint32, credits int) {
	if len(a.chain) == cap(a.chain) {
		a.growPost(2 * cap(a.chain))
	}
	if len(a.chain) >= a.shadowRoom(credits) {
		a.growShadow(int(a.sqDepth) - credits + len(a.chain) + 1)
	}
	a.chain = append(a.chain, verbs.SendWR{Opcode: verbs.OpSend, SGL: a.withHeader(len(a.chain), nil)})
	a.owners = append(a.owners, &a.peer.reportSub)
	a.peer.uses = append(a.peer.uses, peerUse{credit: true, stamped: n, hdr: h})
}

// unusePeer gives back what the chain's WRs from i to j took: the peer
// receives they would have consumed and the credits they would have
// reported. For WRs that were not posted.
func (a *Actor) unusePeer(i, j int) {
	var back int64
	var stamped uint32
	for k := i; k < j; k++ {
		u := &a.peer.uses[k]
		if u.credit {
			back++
		}
		stamped += u.stamped
		*u = peerUse{}
	}
	a.peer.s.Unspend(back, stamped)
}

// SayGoodbye makes the actor, once it closes with nothing left queued, post
// one last SEND that tells the peer the connection is over: a graceful
// close the peer sees as such. It uses the peer receive kept back for
// credit reports; without one it sends nothing. data, when it has bytes,
// follows the SEND's header: registered memory the caller keeps until the
// actor closed and its WRs completed, no longer than the peer's receives
// take. Call it before Close.
func (a *Actor) SayGoodbye(data verbs.SGE) {
	a.peer.goodbye = data
	a.peer.s.SayGoodbye()
}

// postGoodbye posts the goodbye SEND of a closing actor, when one is wanted
// and a send-queue slot and a peer receive are left for it.
func (a *Actor) postGoodbye() {
	credits := int(a.credits.Load())
	if a.run.has(lifeBroken) || credits < 1 {
		return
	}
	h, n, ok := a.peer.s.Goodbye()
	if !ok {
		return
	}
	a.chain, a.owners = a.chain[:0], a.owners[:0]
	a.peer.uses = a.peer.uses[:0]
	a.drained = a.drained[:0]
	a.appendCreditOnly(h, n, credits)
	if data := a.peer.goodbye; data.Length > 0 {
		wr := &a.chain[len(a.chain)-1]
		wr.SGL = a.withHeader(len(a.chain)-1, []verbs.SGE{data})
	}
	seq := a.seq
	a.post()
	a.peer.s.Said(a.seq != seq) // post advances seq by the WRs posted
}

// returnIdle gives the peer back the credits the actor holds beyond its
// initial window once it has not consumed any for credit.ReturnAfter;
// until then it arranges a wake-up for it. Only the actor calls it,
// resting with nothing queued.
func (a *Actor) returnIdle() {
	if wait := a.peer.s.ReturnIn(a.lat.now()); wait > 0 {
		a.run.wakeAfter(wait)
		return
	}
	a.postReturn()
}

// postReturn gives the peer back the credits an idle actor holds beyond
// its initial window, in a credit-only SEND. Only the actor calls it,
// with nothing queued.
func (a *Actor) postReturn() {
	credits := int(a.credits.Load())
	if a.run.hasAny(lifeBroken|lifeClosing) || credits < 1 {
		return
	}
	h, n, returned, ok := a.peer.s.Return()
	if !ok {
		return
	}
	a.chain, a.owners = a.chain[:0], a.owners[:0]
	a.peer.uses = a.peer.uses[:0]
	a.drained = a.drained[:0]
	a.appendCreditOnly(h, n, credits)
	seq := a.seq
	a.post()
	if a.seq == seq { // not posted: post gave the credit-only SEND's back
		a.peer.s.Unspend(returned, 0)
	}
}

// SaidGoodbye reports whether the closed actor posted its goodbye SEND, the
// last WR it posted.
func (a *Actor) SaidGoodbye() bool { return a.peer.s.SaidGoodbye() }
