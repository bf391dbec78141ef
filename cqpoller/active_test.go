package cqpoller_test

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/cqpoller"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/verbs"
)

// watchedCQ counts what the poller does to the CQ it wraps, and counts as
// a trespass anything it does once gone is set (the CQ was removed).
type watchedCQ struct {
	verbs.CQ
	polls, arms, acks atomic.Int64
	gone              atomic.Bool
	trespass          atomic.Int64
	sleeps            func() uint64 // the poller's Sleeps, when set
	touchedAt         atomic.Uint64 // the poller's Sleeps at the last touch
}

func (c *watchedCQ) Unwrap() verbs.CQ { return c.CQ }

func (c *watchedCQ) touched() {
	if c.gone.Load() {
		c.trespass.Add(1)
	}
	if c.sleeps != nil {
		c.touchedAt.Store(c.sleeps())
	}
}

// quiet reports whether p went to sleep after it last touched any of cqs,
// each armed once at least: it polls and arms none of them until
// something wakes it. (Sleeps above 0 alone may be the poller's first
// sleep, before it armed the last of them and polled it once more.)
func quiet(p *cqpoller.Poller, cqs []*watchedCQ) bool {
	sleeps := p.Stats().Sleeps.Load()
	for _, c := range cqs {
		if c.arms.Load() == 0 || c.touchedAt.Load() >= sleeps {
			return false
		}
	}
	return true
}

func (c *watchedCQ) Poll(wcs []verbs.WC) (int, error) {
	c.touched()
	c.polls.Add(1)
	return c.CQ.Poll(wcs)
}

func (c *watchedCQ) ReqNotify(solicitedOnly bool) error {
	c.touched()
	c.arms.Add(1)
	return c.CQ.ReqNotify(solicitedOnly)
}

func (c *watchedCQ) AckEvents(n int) {
	c.touched()
	c.acks.Add(int64(n))
	c.CQ.AckEvents(n)
}

// watchLoops starts a poller of policy over loops, each CQ wrapped in a
// watchedCQ, whose receive completions (RecvBit in the wr_id) are counted
// per loop in the returned slice; the poller closes when the test ends.
func watchLoops(t *testing.T, policy cqpoller.Policy, loops []*loop) (*cqpoller.Poller, []*watchedCQ, []atomic.Int64) {
	t.Helper()
	p, err := cqpoller.New(cqpoller.Config{Policy: policy, Channel: loops[0].ch,
		Spin: 20 * time.Microsecond, Yield: 20 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(p.Close)
	cqs := make([]*watchedCQ, len(loops))
	got := make([]atomic.Int64, len(loops))
	for i, l := range loops {
		cqs[i] = &watchedCQ{CQ: l.cq, sleeps: p.Stats().Sleeps.Load}
		if err := p.Add(&cqpoller.Target{CQ: cqs[i], Recv: func(*verbs.WC) { got[i].Add(1) }}); err != nil {
			t.Fatal(err)
		}
	}
	return p, cqs, got
}

func sumOf(cqs []*watchedCQ, f func(*watchedCQ) int64) int64 {
	n := int64(0)
	for _, c := range cqs {
		n += f(c)
	}
	return n
}

// TestIdleTargetsLeftAlone: once the idle targets have been armed, a
// poller busy with one target neither polls nor re-arms them, however
// often it goes to sleep and wakes. (Before, each round polled every CQ
// and each sleep re-armed every one: 200 idle targets cost the active one
// 200 polls per round.)
func TestIdleTargetsLeftAlone(t *testing.T) {
	const idle = 200
	loops := newLoops(t, idle+1)
	p, cqs, got := watchLoops(t, cqpoller.Adaptive, loops)
	active, idles := loops[idle], cqs[:idle]
	eventually(t, "every target armed, the poller asleep", func() bool { return quiet(p, cqs) })
	polls, arms := sumOf(idles, func(c *watchedCQ) int64 { return c.polls.Load() }), sumOf(idles, func(c *watchedCQ) int64 { return c.arms.Load() })
	sleeps := p.Stats().Sleeps.Load()
	for i := range 300 {
		active.write(wrid.RecvBit | uint64(i))
		eventually(t, "the active target's completion", func() bool { return got[idle].Load() == int64(i+1) })
		if i%30 == 0 {
			time.Sleep(time.Millisecond) // past the window: the poller sleeps and wakes
		}
	}
	if p.Stats().Sleeps.Load() == sleeps {
		t.Fatal("the poller never slept between completions; the test needs it to")
	}
	if n := sumOf(idles, func(c *watchedCQ) int64 { return c.polls.Load() }) - polls; n != 0 {
		t.Errorf("idle CQs polled %d times while one other target worked", n)
	}
	if n := sumOf(idles, func(c *watchedCQ) int64 { return c.arms.Load() }) - arms; n != 0 {
		t.Errorf("idle CQs armed %d times while one other target worked", n)
	}
}

// TestAddRemoveLeaveOthersAlone: adding and removing targets polls and
// arms only those, so setting up and tearing down the n-th costs the same
// as the first. (Before, each Add and Remove woke a poller that polled
// every CQ, and armed every one before it slept again.)
func TestAddRemoveLeaveOthersAlone(t *testing.T) {
	const settled, more = 100, 20
	loops := newLoops(t, settled+more)
	p, cqs, _ := watchLoops(t, cqpoller.Adaptive, loops[:settled])
	eventually(t, "every target armed, the poller asleep", func() bool { return quiet(p, cqs) })
	polls, arms := sumOf(cqs, func(c *watchedCQ) int64 { return c.polls.Load() }), sumOf(cqs, func(c *watchedCQ) int64 { return c.arms.Load() })
	added := make([]*watchedCQ, more)
	for i, l := range loops[settled:] {
		added[i] = &watchedCQ{CQ: l.cq}
		if err := p.Add(&cqpoller.Target{CQ: added[i], Recv: func(*verbs.WC) {}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the new target armed", func() bool { return added[i].arms.Load() > 0 })
	}
	for _, c := range added {
		p.Remove(c)
	}
	if n := sumOf(cqs, func(c *watchedCQ) int64 { return c.polls.Load() }) - polls; n != 0 {
		t.Errorf("%d Adds and Removes polled the %d other CQs %d times", 2*more, settled, n)
	}
	if n := sumOf(cqs, func(c *watchedCQ) int64 { return c.arms.Load() }) - arms; n != 0 {
		t.Errorf("%d Adds and Removes armed the %d other CQs %d times", 2*more, settled, n)
	}
}

// TestEventPollsOnlyItsTarget: a sleeping poller woken by a completion
// polls the CQ that raised the event, not the others.
func TestEventPollsOnlyItsTarget(t *testing.T) {
	for _, policy := range []cqpoller.Policy{cqpoller.Adaptive, cqpoller.Event} {
		t.Run(policy.String(), func(t *testing.T) {
			loops := newLoops(t, 50)
			p, cqs, got := watchLoops(t, policy, loops)
			eventually(t, "the poller to sleep with every target armed", func() bool { return quiet(p, cqs) })
			before := make([]int64, len(cqs))
			for i, c := range cqs {
				before[i] = c.polls.Load()
			}
			loops[17].write(wrid.RecvBit | 1)
			eventually(t, "the completion handled", func() bool { return got[17].Load() == 1 })
			for i, c := range cqs {
				if n := c.polls.Load() - before[i]; i != 17 && n != 0 {
					t.Errorf("target %d polled %d times for target 17's event", i, n)
				}
			}
			if c := cqs[17]; c.acks.Load() == 0 {
				t.Error("the event was not acknowledged")
			}
		})
	}
}

// TestManyTargetsLoseNothing: completions on random targets of one
// channel, spaced at random around the spin window so that targets keep
// leaving the active set and coming back by their events, are all
// handled.
func TestManyTargetsLoseNothing(t *testing.T) {
	for _, policy := range []cqpoller.Policy{cqpoller.Adaptive, cqpoller.Event, cqpoller.Busy} {
		t.Run(policy.String(), func(t *testing.T) {
			const n, writes = 40, 1500
			loops := newLoops(t, n)
			_, _, got := watchLoops(t, policy, loops)
			want := make([]int64, n)
			for i := range writes {
				k := rand.IntN(n)
				want[k]++
				loops[k].write(wrid.RecvBit | uint64(i))
				if rand.IntN(4) == 0 {
					time.Sleep(time.Duration(rand.IntN(60)) * time.Microsecond)
				}
				if i%8 == 7 { // stay within the CQs' and send queues' room
					eventually(t, "the completions so far", func() bool { return sumGot(got) == int64(i+1) })
				}
			}
			eventually(t, "every completion", func() bool { return sumGot(got) == writes })
			for k := range n {
				if got[k].Load() != want[k] {
					t.Errorf("target %d: %d completions handled, want %d", k, got[k].Load(), want[k])
				}
			}
		})
	}
}

func sumGot(got []atomic.Int64) int64 {
	n := int64(0)
	for i := range got {
		n += got[i].Load()
	}
	return n
}

// TestRemoveLeavesCQAlone: once Remove returns, the poller neither polls,
// arms nor acknowledges the CQ, whether the target was active, armed,
// queued to become active, or raising events while it was removed.
func TestRemoveLeavesCQAlone(t *testing.T) {
	loops := newLoops(t, 8)
	p, cqs, _ := watchLoops(t, cqpoller.Adaptive, loops)
	for round := range 200 {
		k := round % len(loops)
		c := cqs[k]
		stop := make(chan struct{})
		wrote := make(chan struct{})
		go func() { // keep completions (and, once armed, events) coming
			defer close(wrote)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				loops[k].write(wrid.RecvBit | uint64(i))
				time.Sleep(time.Duration(rand.IntN(40)) * time.Microsecond)
			}
		}()
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		p.Remove(c)
		c.gone.Store(true)
		time.Sleep(100 * time.Microsecond)
		close(stop)
		<-wrote
		time.Sleep(200 * time.Microsecond) // let late events come
		if n := c.trespass.Load(); n != 0 {
			t.Fatalf("round %d: the poller touched the CQ %d times after Remove returned", round, n)
		}
		// Empty the CQ and give the target back for a later round.
		for n, _ := loops[k].cq.Poll(make([]verbs.WC, 64)); n > 0; n, _ = loops[k].cq.Poll(make([]verbs.WC, 64)) {
		}
		cqs[k] = &watchedCQ{CQ: loops[k].cq}
		if err := p.Add(&cqpoller.Target{CQ: cqs[k], Recv: func(*verbs.WC) {}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAddTwiceRefused: a second target for a CQ the poller has is refused
// (its events could reach only one of them).
func TestAddTwiceRefused(t *testing.T) {
	l := newLoop(t)
	p, _, _ := startAdaptive(t, l)
	if err := p.Add(&cqpoller.Target{CQ: l.cq}); err != cqpoller.ErrDupCQ {
		t.Fatalf("second Add of a CQ: %v, want ErrDupCQ", err)
	}
}

// TestBusyDriverHandsBack: under Busy (no events), a CQ its actor drove
// and handed back is polled by the poller again.
func TestBusyDriverHandsBack(t *testing.T) {
	l := newLoop(t)
	p, err := cqpoller.New(cqpoller.Config{Policy: cqpoller.Busy})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	defer p.Close()
	got := make(chan verbs.WC, 4)
	target := &cqpoller.Target{CQ: l.cq, Recv: func(wc *verbs.WC) { got <- *wc }}
	if err := p.Add(target); err != nil {
		t.Fatal(err)
	}
	d := p.Driver(target)
	for i := range uint64(20) {
		d.Drive(true)
		time.Sleep(100 * time.Microsecond) // the poller sees the CQ driven
		d.Drive(false)
		l.write(wrid.RecvBit | i)
		expectWC(t, got, wrid.RecvBit|i, "the busy poller missed a completion on a CQ handed back to it")
	}
}
