package bench

import (
	"fmt"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// directBatch is how many WRs the direct variant chains into one PostSend;
// only the last is signaled.
const directBatch = 64

// direct is one goroutine that owns a QP outright: it keeps the send queue
// (as granted for sqDepth, as the runtime's actor does) full with chains of
// directBatch WRs, the last of each signaled, and polls the CQ itself. No lock, no
// channel, no future: the most the soft provider gives for these writes.
type direct struct {
	lb    *loopback
	wrs   []verbs.SendWR
	sges  []verbs.SGE
	wcs   []verbs.WC
	posts uint64
	wrsN  uint64
}

func newDirect(tb testing.TB) *direct {
	d := &direct{lb: newLoopback(tb, directBatch, 64),
		wrs: make([]verbs.SendWR, directBatch), sges: make([]verbs.SGE, directBatch), wcs: make([]verbs.WC, 32)}
	for i := range d.wrs {
		d.sges[i] = d.lb.local(i)
		d.wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, SGL: d.sges[i : i+1 : i+1], RDMA: d.lb.remote(i)}
	}
	return d
}

// run writes ops times and returns once every write has completed.
func (d *direct) run(ops int) error {
	c := newSignaledChains(d.lb, &d.posts, &d.wrsN)
	for posted := 0; posted < ops || c.inflight > 0; {
		if n := min(directBatch, ops-posted); n > 0 && c.inflight+n <= d.lb.capacity {
			if err := c.post(d.wrs[:n]); err != nil {
				return err
			}
			posted += n
			continue
		}
		if err := c.poll(d.lb.cq, d.wcs, "write"); err != nil {
			return err
		}
	}
	return nil
}

// newSignaledChains returns the chains of lb's QP, counted into posts and
// wrs.
func newSignaledChains(lb *loopback, posts, wrs *uint64) *signaledChains {
	return &signaledChains{qp: lb.qp, batches: make([]int, lb.capacity/directBatch+1), posts: posts, wrs: wrs}
}

// signaledChains posts chains of WRs, the last of each signaled, and
// retires a whole chain on each signaled completion: the floors' send
// side.
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
			return fmt.Errorf("bench: direct %s: %w", what, wcs[i].Err())
		}
		c.inflight -= c.batches[c.head%len(c.batches)]
		c.head++
	}
	return nil
}

func (d *direct) stats() postStats { return postStats{calls: d.posts, wrs: d.wrsN} }

// roundTrips writes ops times, one at a time: post one signaled write, poll
// until it completed. What a caller that waits for each write costs without
// any runtime between it and the QP.
func (d *direct) roundTrips(ops int) error {
	wr := d.wrs[:1]
	wr[0].Flags = verbs.SendSignaled
	defer func() { wr[0].Flags = 0 }()
	for range ops {
		if _, err := d.lb.qp.PostSend(wr); err != nil {
			return err
		}
		d.posts++
		d.wrsN++
		for {
			k, err := d.lb.cq.Poll(d.wcs[:1])
			if err != nil {
				return err
			}
			if k == 1 {
				if d.wcs[0].Status != verbs.WCSuccess {
					return fmt.Errorf("bench: direct write: %w", d.wcs[0].Err())
				}
				break
			}
		}
	}
	return nil
}
