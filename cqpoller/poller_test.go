package cqpoller_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/verbsrt/verbsrt/cqpoller"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// loop is a QP connected to itself: its sends complete on its own CQ.
type loop struct {
	qp verbs.QP
	cq verbs.CQ
	ch verbs.CompChannel
	mr verbs.MR
}

func newLoop(t *testing.T) *loop { return newLoops(t, 1)[0] }

// newLoops returns n loops of one device context, whose CQs share one
// completion channel, as a runtime's endpoints share their poller's.
func newLoops(t testing.TB, n int) []*loop {
	t.Helper()
	p := soft.New(soft.Config{})
	arena, _ := verbs.NewArena(1 << 16)
	t.Cleanup(func() { p.Close(); arena.Close() })
	devs, _ := p.Devices()
	c, _ := devs[0].Open()
	pd, _ := c.AllocPD()
	ch, _ := c.CreateCompChannel()
	mr, _ := pd.RegMR(arena.Bytes(), verbs.AccessAllRemote)
	gid, _ := c.QueryGID(1, 1)
	loops := make([]*loop, n)
	for i := range loops {
		l := &loop{ch: ch, mr: mr}
		var err error
		if l.cq, err = c.CreateCQ(verbs.CQSpec{CQE: 64, Channel: ch}); err != nil {
			t.Fatal(err)
		}
		if l.qp, err = pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: l.cq, RecvCQ: l.cq,
			Caps: verbs.QPCaps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			t.Fatal(err)
		}
		if err := verbs.Connect(l.qp, verbs.ConnectSpec{GIDIndex: 1}, verbs.PeerInfo{QPN: l.qp.QPN(), GID: gid}); err != nil {
			t.Fatal(err)
		}
		loops[i] = l
	}
	return loops
}

func (l *loop) write(id uint64) {
	l.qp.PostSend([]verbs.SendWR{{ID: id, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL:  []verbs.SGE{{Addr: l.mr.Addr(), Length: 8, LKey: l.mr.LKey()}},
		RDMA: verbs.RDMA{RemoteAddr: l.mr.Addr() + 64, RKey: l.mr.RKey()}}})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// startAdaptive starts an adaptive poller with short spin and yield phases
// over l's CQ, whose every completion with RecvBit in its wr_id goes to the
// returned channel (a receive handler sees those); the poller closes when
// the test ends.
func startAdaptive(t *testing.T, l *loop) (*cqpoller.Poller, *cqpoller.Target, <-chan verbs.WC) {
	t.Helper()
	got := make(chan verbs.WC, 4)
	p, target := startAdaptiveRecv(t, l, 10*time.Microsecond, func(wc *verbs.WC) { got <- *wc })
	return p, target, got
}

// startAdaptiveRecv starts an adaptive poller over l's CQ, spinning and
// yielding for phase each, with recv as the CQ's receive handler; the
// poller closes when the test ends.
func startAdaptiveRecv(t *testing.T, l *loop, phase time.Duration, recv func(*verbs.WC)) (*cqpoller.Poller, *cqpoller.Target) {
	t.Helper()
	p, err := cqpoller.New(cqpoller.Config{Policy: cqpoller.Adaptive, Channel: l.ch, Spin: phase, Yield: phase})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(p.Close)
	target := &cqpoller.Target{CQ: l.cq, Recv: recv}
	if err := p.Add(target); err != nil {
		t.Fatal(err)
	}
	return p, target
}

// expectWC waits up to 5 s for the next completion on got, which must be
// wrid's; missed says what it means when none comes.
func expectWC(t *testing.T, got <-chan verbs.WC, wrid uint64, missed string) {
	t.Helper()
	select {
	case wc := <-got:
		if wc.WRID != wrid {
			t.Fatalf("got %+v, want wr_id %#x", wc, wrid)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(missed)
	}
}

// TestAdaptiveSleepsAndWakes: an idle adaptive poller sleeps on the
// completion channel, and a completion wakes it.
func TestAdaptiveSleepsAndWakes(t *testing.T) {
	l := newLoop(t)
	p, _, got := startAdaptive(t, l)
	eventually(t, "the poller to sleep", func() bool { return p.Stats().Sleeps.Load() > 0 })
	l.write(wrid.RecvBit | 42)
	expectWC(t, got, wrid.RecvBit|42, "the sleeping poller missed the completion")
}

// TestStaleCompletionCounted: a send completion no actor posted is counted
// as stale and dropped.
func TestStaleCompletionCounted(t *testing.T) {
	l := newLoop(t)
	p, _ := cqpoller.New(cqpoller.Config{Policy: cqpoller.Busy})
	p.Start()
	defer p.Close()
	act, err := qpactor.New(qpactor.Config{QP: l.qp, ID: 1,
		Scratch: qpactor.Scratch{Bytes: l.mr.Bytes()[4096:], Addr: l.mr.Addr() + 4096, LKey: l.mr.LKey()}})
	if err != nil {
		t.Fatal(err)
	}
	defer act.Close(context.Background())
	p.Add(&cqpoller.Target{CQ: l.cq, Send: act})
	l.write(wrid.Send(1, 999)) // never posted by the actor
	l.write(wrid.Send(2, 0))   // another actor's ID
	eventually(t, "two stale completions", func() bool { return p.Stats().Stale.Load() == 2 })
	if act.Stats().Stale.Load() != 2 {
		t.Fatalf("actor counted %d stale", act.Stats().Stale.Load())
	}
}

// TestDoRunsOnPoller: Do runs a function on the poller and waits for it;
// after Close it runs on the caller.
func TestDoRunsOnPoller(t *testing.T) {
	p, _ := cqpoller.New(cqpoller.Config{Policy: cqpoller.Busy})
	p.Start()
	ran := false
	p.Do(func() { ran = true })
	if !ran {
		t.Fatal("Do returned before running")
	}
	p.Close()
	ran = false
	p.Do(func() { ran = true })
	if !ran {
		t.Fatal("Do after Close did not run")
	}
}

// TestDriverTakesAndHandsBackCQ: while an actor drives a target, the
// poller leaves its completions to the driver's Progress; once the driver
// hands the CQ back, a sleeping poller wakes on its next completion.
func TestDriverTakesAndHandsBackCQ(t *testing.T) {
	l := newLoop(t)
	p, target, got := startAdaptive(t, l)
	d := p.Driver(target)
	d.Drive(true)
	l.write(wrid.RecvBit | 1)
	select {
	case wc := <-got:
		t.Fatalf("the poller handled %+v on a driven CQ", wc)
	case <-time.After(20 * time.Millisecond):
	}
	if n := d.Progress(); n != 1 {
		t.Fatalf("Progress handled %d completions, want 1", n)
	}
	if wc := <-got; wc.WRID != wrid.RecvBit|1 {
		t.Fatalf("%+v", wc)
	}
	eventually(t, "the poller to sleep", func() bool { return p.Stats().Sleeps.Load() > 0 })
	d.Drive(false)
	l.write(wrid.RecvBit | 2)
	expectWC(t, got, wrid.RecvBit|2, "the poller missed a completion on the CQ handed back to it")
}

// TestPollUndrivenLeavesADrivenCQ: a waiter without a polling slot
// (PollUndriven) leaves a CQ the actor or a polling waiter drives to them,
// and handles what is on one nobody drives.
func TestPollUndrivenLeavesADrivenCQ(t *testing.T) {
	l := newLoop(t)
	p, target, got := startAdaptive(t, l)
	d := p.Driver(target)
	for i, begin := range []func(){func() { d.Drive(true) }, d.WaitBegin} {
		begin()
		id := wrid.RecvBit | uint64(i)
		l.write(id)
		if n := d.PollUndriven(); n != 0 {
			t.Fatalf("PollUndriven handled %d completions of a driven CQ", n)
		}
		if n := d.Poll(); n != 1 {
			t.Fatalf("the driver's Poll handled %d completions, want 1", n)
		}
		expectWC(t, got, id, "the driver's completion was not handled")
		if i == 0 {
			d.Drive(false)
		} else {
			d.WaitEnd(true, 0)
		}
	}
	// Undriven, the CQ is armed and the poller asleep: the waiter's look
	// handles the completion, unless the poller, woken by its event, has.
	eventually(t, "the poller to sleep", func() bool { return p.Stats().Sleeps.Load() > 0 })
	l.write(wrid.RecvBit | 2)
	d.PollUndriven()
	expectWC(t, got, wrid.RecvBit|2, "a completion on an undriven CQ was not handled")
}

// TestDriveHandOffLosesNothing: a completion that lands on a target while
// its driver hands it back to the poller (before, during or after the
// hand-off, at random) is handled, by the driver or by the poller, with
// the driver parked afterwards as an idle actor would be. They come in
// pairs whose first takes its handler a while: handlers run with the CQ
// held, so the other side finds it taken.
func TestDriveHandOffLosesNothing(t *testing.T) {
	l := newLoop(t)
	got := make(chan uint64, 4)
	p, target := startAdaptiveRecv(t, l, 5*time.Microsecond, func(wc *verbs.WC) {
		if wc.WRID%2 == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		got <- wc.WRID &^ wrid.RecvBit
	})
	d := p.Driver(target)
	for i := uint64(0); i < 2000; i += 2 {
		d.Drive(true)
		parked := make(chan struct{})
		go func() { // the actor's part: drive a little, hand back, park
			for range rand.IntN(3) {
				d.Progress()
			}
			time.Sleep(time.Duration(rand.IntN(20)) * time.Microsecond)
			d.Drive(false)
			close(parked)
		}()
		time.Sleep(time.Duration(rand.IntN(30)) * time.Microsecond)
		l.write(wrid.RecvBit | i)
		l.write(wrid.RecvBit | (i + 1))
		<-parked
		for want := i; want < i+2; want++ {
			select {
			case id := <-got:
				if id != want {
					t.Fatalf("completion %d handled, want %d", id, want)
				}
			case <-time.After(2 * time.Second):
				t.Fatalf("completion %d was left on a CQ its parked driver handed back", want)
			}
		}
	}
}

// countingCQ counts the Polls of the CQ it wraps.
type countingCQ struct {
	verbs.CQ
	polls atomic.Int64
}

// Unwrap lets the poller match the completion channel's events, which name
// the wrapped CQ, to this one.
func (c *countingCQ) Unwrap() verbs.CQ { return c.CQ }

func (c *countingCQ) Poll(wcs []verbs.WC) (int, error) {
	c.polls.Add(1)
	return c.CQ.Poll(wcs)
}

// TestPollFailureReported: a CQ whose Poll fails is reported once through
// Target.PollFailed, with the error, and polled no more, under every policy:
// not ignored, not spun on. Its later completions stay where they are, and
// the poller keeps serving Do and Remove.
func TestPollFailureReported(t *testing.T) {
	for _, policy := range []cqpoller.Policy{cqpoller.Busy, cqpoller.Adaptive, cqpoller.Event} {
		t.Run(policy.String(), func(t *testing.T) {
			l := newLoop(t)
			type report struct {
				cq  verbs.CQ
				err error
			}
			reports := make(chan report, 4)
			cfg := cqpoller.Config{Policy: policy, Spin: 10 * time.Microsecond, Yield: 10 * time.Microsecond}
			if policy != cqpoller.Busy {
				cfg.Channel = l.ch
			}
			p, err := cqpoller.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			p.Start()
			defer p.Close()
			cq := &countingCQ{CQ: l.cq}
			got := make(chan verbs.WC, 4)
			if err := p.Add(&cqpoller.Target{CQ: cq, Recv: func(wc *verbs.WC) { got <- *wc },
				PollFailed: func(err error) { reports <- report{cq, err} }}); err != nil {
				t.Fatal(err)
			}
			if err := soft.InjectCQ(l.cq, soft.Fault{Kind: soft.FaultPollError}); err != nil {
				t.Fatal(err)
			}
			l.write(wrid.RecvBit | 1)
			select {
			case r := <-reports:
				if r.cq != cq || !errors.Is(r.err, verbs.ErrPollFailed) {
					t.Fatalf("PollFailed for %v: %v, want the target's CQ and verbs.ErrPollFailed", r.cq, r.err)
				}
			case wc := <-got:
				t.Fatalf("completion %+v handled, want the Poll failure reported", wc)
			case <-time.After(5 * time.Second):
				t.Fatal("the Poll failure was never reported")
			}
			polls := cq.polls.Load()
			l.write(wrid.RecvBit | 2)
			time.Sleep(20 * time.Millisecond)
			select {
			case r := <-reports:
				t.Fatalf("reported twice: %v", r.err)
			case wc := <-got:
				t.Fatalf("completion %+v handled on the failed CQ", wc)
			default:
			}
			if n := cq.polls.Load() - polls; n != 0 {
				t.Errorf("the failed CQ was polled %d more times", n)
			}
			if n := p.Stats().Failed.Load(); n != 1 {
				t.Errorf("Stats().Failed = %d, want 1", n)
			}
			ran := false
			p.Do(func() { ran = true })
			p.Remove(cq)
			if !ran {
				t.Error("Do did not run after the failure")
			}
		})
	}
}

// TestPollFailureLoggedWithoutHandler: with no PollFailed, the failure is
// logged at error level, not dropped.
func TestPollFailureLoggedWithoutHandler(t *testing.T) {
	l := newLoop(t)
	var mu sync.Mutex
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(b)
	}), &slog.HandlerOptions{Level: slog.LevelError}))
	p, _ := cqpoller.New(cqpoller.Config{Policy: cqpoller.Busy, Logger: log})
	p.Start()
	defer p.Close()
	if err := soft.InjectCQ(l.cq, soft.Fault{Kind: soft.FaultPollError}); err != nil {
		t.Fatal(err)
	}
	p.Add(&cqpoller.Target{CQ: l.cq, Recv: func(*verbs.WC) {}})
	l.write(wrid.RecvBit | 1)
	eventually(t, "the failure logged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logged.String(), "level=ERROR") && strings.Contains(logged.String(), "polling the CQ failed")
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestWaiterHandsBackCQ: a waiter that polls the CQ (WaitBegin, Poll) takes
// it from the poller; one that got its result leaves it (WaitEnd(false)),
// and a completion that lands afterwards, with no waiter, is still handled
// by the poller (the CQ handed back after a linger); one that parks
// (WaitEnd(true)) hands it back at once. Random timing, in both orders.
func TestWaiterHandsBackCQ(t *testing.T) {
	l := newLoop(t)
	got := make(chan uint64, 4)
	p, target := startAdaptiveRecv(t, l, 5*time.Microsecond, func(wc *verbs.WC) {
		got <- wc.WRID &^ wrid.RecvBit
	})
	d := p.Driver(target)
	eventually(t, "the poller to sleep", func() bool { return p.Stats().Sleeps.Load() > 0 })
	for i := uint64(0); i < 400; i += 2 {
		parking := i%4 == 0
		d.WaitBegin()
		l.write(wrid.RecvBit | i)
		// Polled by the waiter, or by the hand-back of the previous
		// round's lingering CQ, whose timer may fire just now.
		for handled := false; !handled; {
			d.Poll()
			select {
			case id := <-got:
				if id != i {
					t.Fatalf("completion %d handled, want %d", id, i)
				}
				handled = true
			default:
			}
		}
		if rand.IntN(2) == 0 {
			time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		}
		d.WaitEnd(parking, time.Duration(rand.IntN(500))*time.Microsecond)
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		l.write(wrid.RecvBit | (i + 1))
		select {
		case id := <-got:
			if id != i+1 {
				t.Fatalf("completion %d handled, want %d", id, i+1)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("completion %d was left on a CQ its waiter (parking: %v) let go", i+1, parking)
		}
	}
}

// TestLingerOutlastsWaits: when the linger's timer of a CQ fires after a
// wait ended within it, the CQ is not handed back (armed) and the timer
// runs again; once a linger passes with no wait, the CQ is handed back.
// The timer fires when the test says (ManualLinger).
func TestLingerOutlastsWaits(t *testing.T) {
	l := newLoop(t)
	p, err := cqpoller.New(cqpoller.Config{Policy: cqpoller.Adaptive, Channel: l.ch, Spin: 5 * time.Microsecond, Yield: 5 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	linger := cqpoller.UseManualLinger(p)
	p.Start()
	t.Cleanup(p.Close)
	target := &cqpoller.Target{CQ: l.cq, Recv: func(*verbs.WC) {}}
	if err := p.Add(target); err != nil {
		t.Fatal(err)
	}
	d := p.Driver(target)
	eventually(t, "the poller to sleep", func() bool { return p.Stats().Sleeps.Load() > 0 })
	armed := p.Stats().Armed.Load()
	wait := func() {
		d.WaitBegin()
		d.Poll()
		d.WaitEnd(false, time.Millisecond)
	}
	wait()
	for range 5 {
		wait()
		if n := linger.Fire(); n != 1 {
			t.Fatalf("%d linger timers fired, want 1", n)
		}
		if linger.Armed() != 1 {
			t.Fatal("the linger's timer did not run again after a wait ended within it")
		}
	}
	if n := p.Stats().Armed.Load() - armed; n != 0 {
		t.Errorf("the CQ was armed %d times while waits kept ending within their linger", n)
	}
	linger.Fire() // a linger with no wait
	if n := p.Stats().Armed.Load() - armed; n != 1 {
		t.Errorf("the CQ was armed %d times after a linger with no wait, want 1", n)
	}
	if linger.Armed() != 0 {
		t.Error("the linger's timer runs on after the CQ was handed back")
	}
}

// endlessCQ hands out a receive completion on every Poll until stop is
// set, and counts its Polls.
type endlessCQ struct {
	verbs.CQ
	polls atomic.Int64
	stop  atomic.Bool
}

func (c *endlessCQ) Unwrap() verbs.CQ { return c.CQ }

func (c *endlessCQ) Poll(wcs []verbs.WC) (int, error) {
	n := c.polls.Add(1)
	if c.stop.Load() || len(wcs) == 0 {
		return 0, nil
	}
	wcs[0] = verbs.WC{WRID: wrid.RecvBit | uint64(n), Status: verbs.WCSuccess, Opcode: verbs.WCRecv}
	return 1, nil
}

// TestPollerRunsWhomItWoke: a goroutine woken by a completion the poller
// handled runs within a few of the poller's rounds, even on one P and with
// completions that keep coming: the poller yields after a round that
// handled some, where a poller that kept its P while it found work would
// leave the goroutines it woke waiting in its run queue until it was
// preempted.
func TestPollerRunsWhomItWoke(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	l := newLoop(t)
	cq := &endlessCQ{CQ: l.cq}
	p, err := cqpoller.New(cqpoller.Config{Policy: cqpoller.Busy})
	if err != nil {
		t.Fatal(err)
	}
	wake := make(chan int64, 1)
	var wokeAt atomic.Int64 // the Poll count when the woken goroutine ran
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-wake
		wokeAt.Store(cq.polls.Load())
		cq.stop.Store(true)
	}()
	var sentAt int64
	target := &cqpoller.Target{CQ: cq, Recv: func(wc *verbs.WC) {
		if sentAt == 0 {
			sentAt = cq.polls.Load()
			wake <- sentAt
		}
	}}
	if err := p.Add(target); err != nil {
		t.Fatal(err)
	}
	p.Start()
	<-done
	p.Close()
	const most = 64
	if rounds := wokeAt.Load() - sentAt; rounds > most {
		t.Fatalf("the goroutine the poller woke ran %d of its polls later, want at most %d", rounds, most)
	}
}
