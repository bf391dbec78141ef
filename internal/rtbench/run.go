package rtbench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	vrt "github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// counter is a caller's count of completed operations, on a cache line of
// its own: each caller stores to its line only.
type counter struct {
	n atomic.Uint64
	_ [56]byte
}

// run runs one size: callers spread over the QPs, each keeping txDepth
// operations in flight, for cfg.Iters operations in all or cfg.Duration.
func (p *Pair) run(ctx context.Context, cfg Config, size int, progress io.Writer) (benchkit.Result, error) {
	r := benchkit.Result{Test: cfg.Test, Mode: benchkit.Mode(cfg.Lat, cfg.PingPong), Provider: cfg.Provider.Name, Device: p.cliDev,
		PeerDevice: p.srvDev, QPs: cfg.QPs, Callers: cfg.Callers, TxDepth: cfg.TxDepth, PostList: cfg.PostList, Bytes: size}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Duration > 0 {
		var c context.CancelFunc
		ctx, c = context.WithTimeout(ctx, cfg.Duration)
		defer c()
	}
	counts := make([]counter, cfg.Callers)
	lats := make([][]time.Duration, cfg.Callers)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	start, cpuStart := time.Now(), benchkit.CPUTime()
	for c := range cfg.Callers {
		n := uint64(math.MaxUint64)
		if cfg.Duration == 0 {
			n = uint64(cfg.Iters / cfg.Callers)
			if c < cfg.Iters%cfg.Callers {
				n++
			}
		}
		if cfg.Lat && cfg.Duration == 0 {
			lats[c] = make([]time.Duration, 0, n)
		}
		op := p.op(cfg.Test, c%cfg.QPs, size)
		issue := func(int) vrt.Future { return op() }
		if cfg.PostList > 0 {
			issue = p.batch(cfg.Test, c%cfg.QPs, size, cfg.PostList)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			switch {
			case cfg.PingPong:
				// Half of each round trip, as ib_send_lat reports.
				lats[c], err = runLatency(ctx, p.pingPong(ctx, c%cfg.QPs, size), 2, n, &counts[c], lats[c])
			case cfg.Lat:
				once := func() error { _, err := op().Wait(context.Background()); return err }
				lats[c], err = runLatency(ctx, once, 1, n, &counts[c], lats[c])
			default:
				err = runWindow(ctx, issue, n, cfg.TxDepth, max(1, cfg.PostList), &counts[c])
			}
			if err != nil {
				errOnce.Do(func() { firstErr = err; cancel() })
			}
		}()
	}
	done := make(chan struct{})
	var hist []point
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		hist = sample(done, counts, start, cfg, size, progress)
	}()
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	sampler.Wait()
	if firstErr != nil {
		return r, firstErr
	}
	for i := range counts {
		r.Iterations += counts[i].n.Load()
	}
	r.Seconds = elapsed.Seconds()
	r.CPUNsPerOp, _ = benchkit.CPUPerOp(cpuStart, r.Iterations)
	rate := float64(r.Iterations) / r.Seconds
	if cfg.Lat {
		var all []time.Duration
		for _, l := range lats {
			all = append(all, l...)
		}
		benchkit.LatencyStats(&r, all)
		return r, nil
	}
	r.BWAvgMBps = rate * float64(size) / (1 << 20)
	r.MsgRateMpps = rate / 1e6
	hist = append(hist, point{start.Add(elapsed), r.Iterations})
	// Completions come in bursts (one signaled WR retires many), so a
	// window must hold several windows' worth of operations in flight.
	peak := peakRate(hist, 100*time.Millisecond, min(uint64(8*cfg.Callers*cfg.TxDepth), r.Iterations/2))
	r.BWPeakMBps = max(peak, rate) * float64(size) / (1 << 20)
	return r, nil
}

// point is the count of completed operations at a time.
type point struct {
	t time.Time
	n uint64
}

// sample reads the callers' counts every 20 ms until done closes, prints
// a progress line every cfg.Progress and returns what it read.
func sample(done <-chan struct{}, counts []counter, start time.Time, cfg Config, size int, progress io.Writer) []point {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	hist := []point{{start, 0}}
	lastPrint := start
	for {
		select {
		case <-done:
			return hist
		case now := <-tick.C:
			var n uint64
			for i := range counts {
				n += counts[i].n.Load()
			}
			hist = append(hist, point{now, n})
			if cfg.Progress > 0 && progress != nil && now.Sub(lastPrint) >= cfg.Progress {
				lastPrint = now
				el := now.Sub(start).Seconds()
				fmt.Fprintf(progress, "verbsrt bench: %s %d B: %.1f s, %d ops, %.3f Mops/s, %.2f MB/s\n",
					cfg.Test, size, el, n, float64(n)/el/1e6, float64(n)*float64(size)/el/(1<<20))
			}
		}
	}
}

// peakRate returns the best rate, in operations per second, over the
// windows of hist that last at least minDur and hold at least minOps
// operations: perftest's peak, made robust to completions that arrive in
// bursts. It returns 0 when no window qualifies.
func peakRate(hist []point, minDur time.Duration, minOps uint64) float64 {
	var peak float64
	i := 0
	for j := range hist {
		// The latest start that still makes a window qualify.
		for i+1 < j && hist[j].t.Sub(hist[i+1].t) >= minDur && hist[j].n-hist[i+1].n >= minOps {
			i++
		}
		if d := hist[j].t.Sub(hist[i].t); i < j && d >= minDur && hist[j].n-hist[i].n >= minOps {
			peak = max(peak, float64(hist[j].n-hist[i].n)/d.Seconds())
		}
	}
	return peak
}

// op returns the operation a caller on QP q issues.
func (p *Pair) op(test string, q, size int) func() vrt.Future {
	ep := p.cli[q]
	local := p.src.Slice(0, size)
	remote := p.remote
	switch test {
	case "read":
		return func() vrt.Future { return ep.Read(context.Background(), local, remote) }
	case "send":
		return func() vrt.Future { return ep.Send(context.Background(), local) }
	case "atomic":
		return func() vrt.Future { return ep.FetchAdd(context.Background(), remote, 1) }
	}
	return func() vrt.Future { return ep.Write(context.Background(), local, remote) }
}

// batch returns what a caller on QP q issues with -l: k of test's
// operations, at most most, as one Endpoint.Post.
func (p *Pair) batch(test string, q, size, most int) func(int) vrt.Future {
	ep := p.cli[q]
	one := vrt.Op{Opcode: verbs.OpWrite, Local: []vrt.Local{p.src.Slice(0, size)}, Remote: p.remote}
	switch test {
	case "read":
		one.Opcode = verbs.OpRead
	case "send":
		one.Opcode, one.Remote = verbs.OpSend, vrt.RemoteRef{}
	case "atomic":
		one = vrt.Op{Opcode: verbs.OpAtomicFetchAdd, Remote: p.remote, CompareAdd: 1}
	}
	ops := make([]vrt.Op, most)
	for i := range ops {
		ops[i] = one
	}
	return func(k int) vrt.Future { return ep.Post(context.Background(), ops[:k]) }
}

// runWindow issues n operations, per at a time through issue, keeping depth
// in flight (at least one call), and counts each one that completes.
// Once ctx ends it issues no more and waits for those in flight: every
// future resolves (the runtime sees to it), and the next size starts on
// an idle QP.
func runWindow(ctx context.Context, issue func(int) vrt.Future, n uint64, depth, per int, done *counter) error {
	win := make([]vrt.Future, max(1, depth/per))
	sizes := make([]uint64, len(win))
	var issued, completed uint64
	refill := func(k int) {
		sizes[k] = min(uint64(per), n-issued)
		win[k] = issue(int(sizes[k]))
		issued += sizes[k]
	}
	for k := 0; k < len(win) && issued < n; k++ {
		refill(k)
	}
	for k := 0; completed < issued; k = (k + 1) % len(win) {
		if _, err := win[k].Wait(context.Background()); err != nil {
			for j := range win { // the rest resolve on their own
				win[j].Release()
			}
			return err
		}
		completed += sizes[k]
		done.n.Store(completed)
		if issued < n && ctx.Err() == nil {
			refill(k)
		}
	}
	return nil
}

// runLatency runs once n times, one at a time, and records how long each
// took, divided by div: 1 for an operation from submit to completion, 2
// for half a ping-pong.
func runLatency(ctx context.Context, once func() error, div time.Duration, n uint64, done *counter, lats []time.Duration) ([]time.Duration, error) {
	for i := uint64(0); i < n && ctx.Err() == nil; i++ {
		t0 := time.Now()
		if err := once(); err != nil {
			return lats, err
		}
		lats = append(lats, time.Since(t0)/div)
		done.n.Store(i + 1)
	}
	return lats, nil
}

// Run runs cfg's test at each of cfg.Sizes with both ends in this
// process, on a new provider of cfg.Provider, reporting to rep and
// progress lines to progress (nil: none).
func Run(ctx context.Context, cfg Config, rep Reporter, progress io.Writer) error {
	pair, err := OpenPair(cfg, slices.Max(cfg.Sizes))
	if err != nil {
		return err
	}
	defer pair.Close()
	return pair.runSizes(ctx, cfg, rep, progress, nil)
}

// runSizes runs cfg's test at each size from p's client side, reports
// the header and each result to rep, and hands each result to send, if
// not nil.
func (p *Pair) runSizes(ctx context.Context, cfg Config, rep Reporter, progress io.Writer, send func(benchkit.Result) error) error {
	rep.Header(p.cliDev, p.srvDev)
	for _, size := range cfg.Sizes {
		if ctx.Err() != nil {
			break
		}
		r, err := p.run(ctx, cfg, size, progress)
		if err != nil {
			return err
		}
		rep.Result(r)
		if send != nil {
			if err := send(r); err != nil {
				return err
			}
		}
	}
	rep.End()
	return nil
}
