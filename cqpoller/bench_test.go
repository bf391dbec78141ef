package cqpoller_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/cqpoller"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// The benchmarks here use only the API that the poller had before it kept
// an active set (commit 0da083e), so that the same file measures both.

// benchIdleCounts are the numbers of idle targets beside the active one.
var benchIdleCounts = []int{1, 1000, 10000}

// benchPoller is an adaptive poller, with the runtime's default phases,
// over one loop's CQ and idle more CQs of the same context and channel.
type benchPoller struct {
	p      *cqpoller.Poller
	active *loop
	got    atomic.Int64 // the active target's completions handled
	newCQ  func() verbs.CQ
}

func newBenchPoller(b *testing.B, idle int) *benchPoller {
	b.Helper()
	prov := soft.New(soft.Config{})
	arena, _ := verbs.NewArena(1 << 16)
	b.Cleanup(func() { prov.Close(); arena.Close() })
	devs, _ := prov.Devices()
	c, _ := devs[0].Open()
	pd, _ := c.AllocPD()
	ch, _ := c.CreateCompChannel()
	l := &loop{ch: ch}
	var err error
	if l.cq, err = c.CreateCQ(verbs.CQSpec{CQE: 64, Channel: ch}); err != nil {
		b.Fatal(err)
	}
	if l.qp, err = pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: l.cq, RecvCQ: l.cq,
		Caps: verbs.QPCaps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		b.Fatal(err)
	}
	l.mr, _ = pd.RegMR(arena.Bytes(), verbs.AccessAllRemote)
	gid, _ := c.QueryGID(1, 1)
	if err := verbs.Connect(l.qp, verbs.ConnectSpec{GIDIndex: 1}, verbs.PeerInfo{QPN: l.qp.QPN(), GID: gid}); err != nil {
		b.Fatal(err)
	}
	p, err := cqpoller.New(cqpoller.Config{Policy: cqpoller.Adaptive, Channel: ch})
	if err != nil {
		b.Fatal(err)
	}
	p.Start()
	bp := &benchPoller{p: p, active: l}
	bp.newCQ = func() verbs.CQ {
		cq, err := c.CreateCQ(verbs.CQSpec{CQE: 16, Channel: ch})
		if err != nil {
			b.Fatal(err)
		}
		return cq
	}
	b.Cleanup(p.Close) // before the provider closes
	for range idle {
		if err := p.Add(&cqpoller.Target{CQ: bp.newCQ(), Recv: func(*verbs.WC) {}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Add(&cqpoller.Target{CQ: l.cq, Recv: func(*verbs.WC) { bp.got.Add(1) }}); err != nil {
		b.Fatal(err)
	}
	bp.waitAsleep(b)
	return bp
}

// waitAsleep waits until the poller sleeps after what it has been given.
func (bp *benchPoller) waitAsleep(b *testing.B) {
	b.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s := bp.p.Stats().Sleeps.Load()
		time.Sleep(2 * time.Millisecond)
		if bp.p.Stats().Sleeps.Load() == s && s > 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the poller never settled")
		}
	}
}

// once writes on the active loop and waits until the poller handled the
// completion.
func (bp *benchPoller) once(i uint64) {
	want := bp.got.Load() + 1
	bp.active.write(wrid.RecvBit | i)
	for bp.got.Load() < want {
		runtime.Gosched()
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleTargets: one target completes WRITEs, one at a time, beside
// idle ones on the same poller. back-to-back: the next WRITE as soon as
// the last completion is handled, so the poller stays in its spin window
// (ns/op is the completion's latency). after-sleep: each WRITE after
// idleGap, past the window, so the poller sleeps and the completion's
// event wakes it (lat-ns/op is the WRITE's latency, the gap excluded).
// cpu-ns/op is the process's CPU time per WRITE, the poller's spin window
// after each included.
func BenchmarkIdleTargets(b *testing.B) {
	const idleGap = time.Millisecond
	for _, idle := range benchIdleCounts {
		b.Run(fmt.Sprintf("back-to-back/idle=%d", idle), func(b *testing.B) {
			bp := newBenchPoller(b, idle)
			cpu0 := cpuTime()
			i := uint64(0)
			for b.Loop() {
				i++
				bp.once(i)
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
		b.Run(fmt.Sprintf("after-sleep/idle=%d", idle), func(b *testing.B) {
			bp := newBenchPoller(b, idle)
			var lat time.Duration
			cpu0 := cpuTime()
			i := uint64(0)
			for b.Loop() {
				time.Sleep(idleGap)
				i++
				t0 := time.Now()
				bp.once(i)
				lat += time.Since(t0)
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(lat.Nanoseconds())/float64(b.N), "lat-ns/op")
		})
	}
}

// BenchmarkAddRemove: the cost of setting a target up and tearing it down
// on a poller that has n-1 others: Add, until the poller sleeps again with
// the new CQ armed, then Remove. ns/op and cpu-ns/op should not grow with
// n.
func BenchmarkAddRemove(b *testing.B) {
	for _, n := range benchIdleCounts {
		b.Run(fmt.Sprintf("nth=%d", n), func(b *testing.B) {
			bp := newBenchPoller(b, n-1)
			cqs := make([]verbs.CQ, 64)
			for i := range cqs {
				cqs[i] = bp.newCQ()
			}
			cpu0 := cpuTime()
			i := 0
			for b.Loop() {
				cq := cqs[i%len(cqs)]
				i++
				sleeps := bp.p.Stats().Sleeps.Load()
				if err := bp.p.Add(&cqpoller.Target{CQ: cq, Recv: func(*verbs.WC) {}}); err != nil {
					b.Fatal(err)
				}
				for bp.p.Stats().Sleeps.Load() == sleeps {
					runtime.Gosched()
				}
				bp.p.Remove(cq)
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
