package bench

import (
	"fmt"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// directRecvDepth is how many receives the direct SEND floor keeps posted
// on the receiving QP: two send queues' worth of chains.
const directRecvDepth = 8 * directBatch

// directSend is the Go floor of a SEND stream: one goroutine owns both
// QPs outright. It keeps receives posted on the receiving QP, in chains
// of directBatch, and the send queue full with chains of directBatch
// SENDs, the last of each signaled, never more SENDs in flight than
// receives posted; it polls both CQs itself, and reposts a chain of
// receives once directBatch of them were consumed. No lock, no channel,
// no future, no credit protocol: the most the soft provider gives for
// these messages.
type directSend struct {
	lb    *loopback
	sends []verbs.SendWR
	recvs []verbs.RecvWR
	rsges []verbs.SGE // the receives' scatter lists, one entry each
	wcs   []verbs.WC
	posts uint64
	wrsN  uint64
}

func newDirectSend(tb testing.TB) *directSend {
	d := &directSend{lb: newLoopbackRecv(tb, directRecvDepth, directBatch, directRecvDepth),
		sends: make([]verbs.SendWR, directBatch), recvs: make([]verbs.RecvWR, directBatch), rsges: make([]verbs.SGE, directBatch), wcs: make([]verbs.WC, 32)}
	for i := range d.sends {
		sge := d.lb.local(i)
		d.sends[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, SGL: []verbs.SGE{sge}}
	}
	return d
}

// postRecvs posts one chain of directBatch receives, into the target
// slots from first on.
func (d *directSend) postRecvs(first int) error {
	for i := range d.recvs {
		r := d.lb.remote(first + i)
		d.rsges[i] = verbs.SGE{Addr: r.RemoteAddr, Length: opSize, LKey: d.lb.mr.LKey()}
		d.recvs[i] = verbs.RecvWR{ID: uint64(first + i), SGL: d.rsges[i : i+1 : i+1]}
	}
	_, err := d.lb.peer.PostRecv(d.recvs)
	return err
}

// run sends ops messages and returns once every one has been received
// and every SEND has completed.
func (d *directSend) run(ops int) error {
	c := newSignaledChains(d.lb, &d.posts, &d.wrsN)
	var (
		sent, received, recvsPosted int
		consumed                    int // receives completed and not yet reposted
	)
	// A SEND goes out only onto a posted receive (sent <= recvsPosted):
	// the floor never meets an RNR NAK.
	for recvsPosted < directRecvDepth {
		if err := d.postRecvs(recvsPosted); err != nil {
			return err
		}
		recvsPosted += directBatch
	}
	for received < ops || c.inflight > 0 {
		if n := min(directBatch, ops-sent); n > 0 && c.inflight+n <= d.lb.capacity && sent+n <= recvsPosted {
			if err := c.post(d.sends[:n]); err != nil {
				return err
			}
			sent += n
			continue
		}
		if err := c.poll(d.lb.cq, d.wcs, "send"); err != nil {
			return err
		}
		k, err := d.lb.peerCQ.Poll(d.wcs)
		if err != nil {
			return err
		}
		for i := range d.wcs[:k] {
			if d.wcs[i].Status != verbs.WCSuccess {
				return fmt.Errorf("bench: direct receive: %w", d.wcs[i].Err())
			}
		}
		received += k
		consumed += k
		for consumed >= directBatch {
			if err := d.postRecvs(recvsPosted); err != nil {
				return err
			}
			recvsPosted += directBatch
			consumed -= directBatch
		}
	}
	return nil
}

func (d *directSend) stats() postStats { return postStats{calls: d.posts, wrs: d.wrsN} }
