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
	inflight := 0
	// Each signaled completion retires the chain it ended; batches holds
	// the lengths of the chains in flight (the last may be short).
	batches := make([]int, d.lb.capacity/directBatch+1)
	head, tail := 0, 0
	for posted := 0; posted < ops || inflight > 0; {
		if posted < ops && inflight+directBatch <= d.lb.capacity {
			n := min(directBatch, ops-posted)
			chain := d.wrs[:n]
			chain[n-1].Flags = verbs.SendSignaled
			_, err := d.lb.qp.PostSend(chain)
			chain[n-1].Flags = 0
			if err != nil {
				return err
			}
			d.posts++
			d.wrsN += uint64(n)
			posted += n
			inflight += n
			batches[tail%len(batches)] = n
			tail++
			continue
		}
		k, err := d.lb.cq.Poll(d.wcs)
		if err != nil {
			return err
		}
		for i := range d.wcs[:k] {
			if d.wcs[i].Status != verbs.WCSuccess {
				return fmt.Errorf("bench: direct write: %w", d.wcs[i].Err())
			}
			inflight -= batches[head%len(batches)]
			head++
		}
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
