package direct

import (
	"fmt"

	"github.com/verbsrt/verbsrt/verbs"
)

// Chain is how many WRs the in-process floor chains into one PostSend;
// only the last of a chain is signaled.
const Chain = 64

// Loop is the in-process Go floor that the benchmarks of bench/ measure
// the runtime against: one goroutine owns a connected pair of QPs
// outright, keeps the send queue full with chains of Chain WRs, the last
// of each signaled, and polls the CQs itself. No lock, no channel, no
// future, no credit protocol: the most the provider gives. One goroutine
// uses a Loop at a time.
type Loop struct {
	QP       verbs.QP // the sender
	CQ       verbs.CQ // QP's send CQ
	Peer     verbs.QP // the QP that QP is connected to: the receiver of Sends
	PeerCQ   verbs.CQ // Peer's receive CQ
	Capacity int      // QP's max_send_wr as granted
	// Local is the source of the operations of slot i; Remote their
	// target, of a Write, and the receive buffer of a Send. Both are in
	// one MR, Local's lkey.
	Local  func(slot int) verbs.SGE
	Remote func(slot int) verbs.RDMA
	// Posts and WRs count the PostSend calls and the WRs they posted.
	Posts, WRs uint64

	writes []verbs.SendWR
	wcs    []verbs.WC
}

// init builds the chain of writes, slots 0 to Chain-1.
func (l *Loop) init() {
	if l.writes != nil {
		return
	}
	l.writes = make([]verbs.SendWR, Chain)
	sges := make([]verbs.SGE, Chain)
	for i := range l.writes {
		sges[i] = l.Local(i)
		l.writes[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, SGL: sges[i : i+1 : i+1], RDMA: l.Remote(i)}
	}
	l.wcs = make([]verbs.WC, 32)
}

// Writes writes ops times, in chains, and returns once every write has
// completed.
func (l *Loop) Writes(ops int) error {
	l.init()
	c := l.chains()
	for posted := 0; posted < ops || c.inflight > 0; {
		if n := min(Chain, ops-posted); n > 0 && c.inflight+n <= l.Capacity {
			if err := c.post(l.writes[:n]); err != nil {
				return err
			}
			posted += n
			continue
		}
		if err := c.poll(l.CQ, l.wcs, "write"); err != nil {
			return err
		}
	}
	return nil
}

// WriteRoundTrips writes ops times, one at a time: post one signaled
// write, poll until it completed. What a caller that waits for each write
// costs without any runtime between it and the QP.
func (l *Loop) WriteRoundTrips(ops int) error {
	l.init()
	wr := l.writes[:1]
	wr[0].Flags = verbs.SendSignaled
	defer func() { wr[0].Flags = 0 }()
	for range ops {
		if _, err := l.QP.PostSend(wr); err != nil {
			return err
		}
		l.Posts++
		l.WRs++
		for {
			k, err := l.CQ.Poll(l.wcs[:1])
			if err != nil {
				return err
			}
			if k == 1 {
				if l.wcs[0].Status != verbs.WCSuccess {
					return fmt.Errorf("direct write: %w", l.wcs[0].Err())
				}
				break
			}
		}
	}
	return nil
}

// SendRecvDepth is how many receives Sends keeps posted on the peer: two
// send queues' worth of chains. Peer must take that many.
const SendRecvDepth = 8 * Chain

// Sends sends ops messages and returns once every one has been received
// and every SEND has completed. It keeps SendRecvDepth receives posted on
// the peer, in chains of Chain, never more SENDs in flight than receives
// posted, and reposts a chain of receives once Chain of them were
// consumed.
func (l *Loop) Sends(ops int) error {
	l.init()
	sends := make([]verbs.SendWR, Chain)
	for i := range sends {
		sends[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, SGL: []verbs.SGE{l.Local(i)}}
	}
	recvs := make([]verbs.RecvWR, Chain)
	rsges := make([]verbs.SGE, Chain)
	postRecvs := func(first int) error {
		for i := range recvs {
			r, src := l.Remote(first+i), l.Local(first+i)
			rsges[i] = verbs.SGE{Addr: r.RemoteAddr, Length: src.Length, LKey: src.LKey}
			recvs[i] = verbs.RecvWR{ID: uint64(first + i), SGL: rsges[i : i+1 : i+1]}
		}
		_, err := l.Peer.PostRecv(recvs)
		return err
	}
	c := l.chains()
	var (
		sent, received, recvsPosted int
		consumed                    int // receives completed and not yet reposted
	)
	// A SEND goes out only onto a posted receive (sent <= recvsPosted):
	// the floor never meets an RNR NAK.
	for recvsPosted < SendRecvDepth {
		if err := postRecvs(recvsPosted); err != nil {
			return err
		}
		recvsPosted += Chain
	}
	for received < ops || c.inflight > 0 {
		if n := min(Chain, ops-sent); n > 0 && c.inflight+n <= l.Capacity && sent+n <= recvsPosted {
			if err := c.post(sends[:n]); err != nil {
				return err
			}
			sent += n
			continue
		}
		if err := c.poll(l.CQ, l.wcs, "send"); err != nil {
			return err
		}
		k, err := l.PeerCQ.Poll(l.wcs)
		if err != nil {
			return err
		}
		for i := range l.wcs[:k] {
			if l.wcs[i].Status != verbs.WCSuccess {
				return fmt.Errorf("direct receive: %w", l.wcs[i].Err())
			}
		}
		received += k
		consumed += k
		for consumed >= Chain {
			if err := postRecvs(recvsPosted); err != nil {
				return err
			}
			recvsPosted += Chain
			consumed -= Chain
		}
	}
	return nil
}

// chains returns the chains of l's QP, counted into l.Posts and l.WRs.
func (l *Loop) chains() *signaledChains {
	return &signaledChains{qp: l.QP, batches: make([]int, l.Capacity/Chain+1), posts: &l.Posts, wrs: &l.WRs}
}

// signaledChains posts chains of WRs, the last of each signaled, and
// retires a whole chain on each signaled completion: the loop's send side.
type signaledChains struct {
	qp         verbs.QP
	batches    []int // the lengths of the chains in flight, a ring
	head, tail int
	inflight   int // WRs posted and not retired
	posts, wrs *uint64
}

// post posts chain, its last WR signaled.
func (c *signaledChains) post(chain []verbs.SendWR) error {
	n := len(chain)
	chain[n-1].Flags = verbs.SendSignaled
	_, err := c.qp.PostSend(chain)
	chain[n-1].Flags = 0
	if err != nil {
		return err
	}
	*c.posts++
	*c.wrs += uint64(n)
	c.inflight += n
	c.batches[c.tail%len(c.batches)] = n
	c.tail++
	return nil
}

// poll polls cq once into wcs and retires a chain for each completion; a
// failed one is an error naming what.
func (c *signaledChains) poll(cq verbs.CQ, wcs []verbs.WC, what string) error {
	k, err := cq.Poll(wcs)
	if err != nil {
		return err
	}
	for i := range wcs[:k] {
		if wcs[i].Status != verbs.WCSuccess {
			return fmt.Errorf("direct %s: %w", what, wcs[i].Err())
		}
		c.inflight -= c.batches[c.head%len(c.batches)]
		c.head++
	}
	return nil
}
