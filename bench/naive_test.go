package bench

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// naive is the obvious way to share one QP among goroutines without the
// runtime: a mutex around the QP, one signaled WR per PostSend, a channel
// made per operation and found again by wr_id in a map, and one goroutine
// that polls the CQ and sends each completion to its operation's channel.
// Safe for concurrent use.
type naive struct {
	lb *loopback

	mu      sync.Mutex // guards everything below, and posting to lb.qp
	next    uint64
	pending map[uint64]chan error
	wr      [1]verbs.SendWR
	sge     [1]verbs.SGE
	posts   uint64

	stop chan struct{}
	done chan struct{}
}

func newNaive(tb testing.TB, slots int) *naive {
	n := &naive{lb: newLoopback(tb, slots, sqDepth+16), pending: make(map[uint64]chan error),
		stop: make(chan struct{}), done: make(chan struct{})}
	go n.poll()
	tb.Cleanup(n.close) // before the loopback's: the poller stops first
	return n
}

// write copies slot's 64 bytes to the target and waits for the completion
// (or for ctx, which only a stall cancels).
func (n *naive) write(ctx context.Context, slot int) error {
	ch := make(chan error, 1)
	n.mu.Lock()
	id := n.next
	n.next++
	n.pending[id] = ch
	n.sge[0] = n.lb.local(slot)
	n.wr[0] = verbs.SendWR{ID: id, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: n.sge[:], RDMA: n.lb.remote(slot)}
	_, err := n.lb.qp.PostSend(n.wr[:])
	if err != nil {
		delete(n.pending, id)
	} else {
		n.posts++
	}
	n.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// poll is the completion goroutine: it spins on the CQ, yielding while it
// is empty, until stop is closed.
func (n *naive) poll() {
	defer close(n.done)
	wcs := make([]verbs.WC, 32)
	chs := make([]chan error, 32)
	for {
		k, err := n.lb.cq.Poll(wcs)
		if err != nil {
			panic(err) // the CQ is closed only after this goroutine ends
		}
		if k == 0 {
			select {
			case <-n.stop:
				return
			default:
			}
			runtime.Gosched()
			continue
		}
		n.mu.Lock()
		for i := range wcs[:k] {
			chs[i] = n.pending[wcs[i].WRID]
			delete(n.pending, wcs[i].WRID)
		}
		n.mu.Unlock()
		for i := range wcs[:k] {
			if chs[i] != nil {
				chs[i] <- wcs[i].Err()
				chs[i] = nil
			}
		}
	}
}

// stats returns the doorbells rung and WRs posted so far.
func (n *naive) stats() postStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return postStats{calls: n.posts, wrs: n.posts}
}

func (n *naive) close() {
	select {
	case <-n.stop:
	default:
		close(n.stop)
	}
	<-n.done
}
