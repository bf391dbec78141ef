package main

import (
	"fmt"
	"io"
	goruntime "runtime"
	"slices"
	"strings"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
)

// table prints one markdown row per child as it ends; the first child's
// latencies of each round are the baseline of the ratios beside the
// others' in that round. With -rounds it ends with the medians.
type table struct {
	w        io.Writer
	cfg      config
	baseline *result
	pos      int                   // the next row's place in -pairs
	results  map[int][]roundResult // by place in -pairs, in round order
}

// roundResult is one child's result and the baseline of its round.
type roundResult struct{ res, baseline *result }

func newTable(w io.Writer, cfg config) *table {
	return &table{w: w, cfg: cfg, results: make(map[int][]roundResult)}
}

// startRound makes the next row the first of -pairs, the baseline.
func (t *table) startRound() { t.pos = 0 }

// label names the i'th N of -pairs in the summaries: its number, and its
// place when the list has it more than once (-pairs 1,5000,1 measures how
// far two runs of one N differ).
func (t *table) label(i int) string {
	n := t.cfg.pairs[i]
	if slices.Index(t.cfg.pairs, n) == i && slices.Index(t.cfg.pairs[i+1:], n) < 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (#%d)", n, i+1)
}

var columns = []string{"pairs", "heap/ep", "stack/ep", "reg/ep", "threads", "goroutines", "idle CPU",
	"WRITE p50", "WRITE p99", "SEND/Recv p50", "SEND/Recv p99",
	"1st pair WRITE p50, alone -> now", "1st pair SEND/Recv p50, alone -> now",
	"setup first 10%", "setup last 10%", "last/first", "close/pair", "load", "core-to-core"}

func (t *table) header() {
	limit := "the runtime's default"
	if t.cfg.memLimit > 0 {
		limit = fmt.Sprintf("%d MiB", t.cfg.memLimit>>20)
	}
	actors := ""
	blocks := ""
	if t.cfg.interleave > 0 {
		blocks = fmt.Sprintf(" in each of %d blocks, the children of a round taking turns", t.cfg.interleave)
	}
	fmt.Fprintf(t.w, "%s, GOMAXPROCS %d, %d cores, load average %s; %d samples of %d B after %d warm-up%s; memory limit %s%s\n\n",
		goruntime.Version(), goruntime.GOMAXPROCS(0), goruntime.NumCPU(), benchkit.LoadAverage(), t.cfg.ops, t.cfg.size, t.cfg.warmup, blocks, limit, actors)
	fmt.Fprintf(t.w, "| %s |\n", strings.Join(columns, " | "))
	fmt.Fprintf(t.w, "|%s\n", strings.Repeat("---|", len(columns)))
}

func (t *table) row(o outcome) {
	if t.pos == 0 {
		t.baseline = o.res
	}
	r := o.res
	if r != nil {
		t.results[t.pos] = append(t.results[t.pos], roundResult{res: r, baseline: t.baseline})
	}
	t.pos++
	if r == nil {
		cells := make([]string, len(columns))
		cells[0] = fmt.Sprint(o.pairs)
		cells[1] = fmt.Sprintf("died after connecting %d pairs: %s", o.connected, o.died)
		if o.progress != "" {
			cells[1] += "; last progress: " + o.progress
		}
		fmt.Fprintf(t.w, "| %s |\n", strings.Join(cells, " | "))
		return
	}
	closeCell := "did not close"
	if c := o.closed; c != nil {
		closeCell = fmtDur(c.Took / time.Duration(r.Pairs))
		if c.Err != "" {
			closeCell += " (error: " + c.Err + ")"
		}
	}
	var b result // zero: no ratios
	if t.baseline != nil {
		b = *t.baseline
	}
	cells := []string{
		fmt.Sprint(r.Pairs),
		fmtBytes(r.HeapPerEP),
		fmtBytes(r.StackPerEP),
		fmtBytes(r.ArenaPerEP),
		fmtCount(r.Threads),
		fmt.Sprint(r.Goroutines),
		fmtCPU(r.IdleCPU),
		withRatio(r.WriteP50, b.WriteP50),
		withRatio(r.WriteP99, b.WriteP99),
		withRatio(r.RoundTripP50, b.RoundTripP50),
		withRatio(r.RoundTripP99, b.RoundTripP99),
		beforeAfter(r.FirstAlone.Write, r.FirstNow.Write),
		beforeAfter(r.FirstAlone.RoundTrip, r.FirstNow.RoundTrip),
		fmtDur(r.SetupFirst),
		fmtDur(r.SetupLast),
		fmt.Sprintf("%.2fx", float64(r.SetupLast)/float64(r.SetupFirst)),
		closeCell,
		r.LoadAverage,
		fmtCoreToCore(r.CoreToCore),
	}
	if o.died != "" {
		cells[len(cells)-2] += "; then died: " + o.died
	}
	fmt.Fprintf(t.w, "| %s |\n", strings.Join(cells, " | "))
}

// medians prints, after several rounds, each N's latencies as the median
// over the rounds and its ratio to the median of the baseline's; then the
// ratios of every round, sorted, where one machine's noise shows: the
// baseline's own SEND/Recv p50 moves with the machine's core-to-core round
// trip (benchkit.CoreToCore), so the ratios of rounds whose two rows ran
// in one mode are listed apart.
func (t *table) medians() {
	if t.cfg.rounds < 2 || len(t.results) == 0 {
		return
	}
	base := t.results[0]
	fmt.Fprintf(t.w, "\nMedians over %d rounds (ratio: to the median of %d pairs); SEND/Recv p50 against its round's baseline, and the 1st pair's SEND/Recv p50 now/alone, every round sorted:\n\n", t.cfg.rounds, t.cfg.pairs[0])
	cols := []string{"pairs", "rounds", "WRITE p50", "WRITE p99", "SEND/Recv p50", "SEND/Recv p99",
		"SEND/Recv p50 / round's baseline", "the same, rounds in one core-to-core mode", "1st pair SEND/Recv p50 now/alone"}
	fmt.Fprintf(t.w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for i := range t.cfg.pairs {
		rs := t.results[i]
		if len(rs) == 0 {
			continue
		}
		figure := func(rs []roundResult, f func(*result) time.Duration) time.Duration {
			ds := make([]time.Duration, len(rs))
			for i, r := range rs {
				ds[i] = f(r.res)
			}
			return percentile(ds, 0.50)
		}
		cell := func(f func(*result) time.Duration) string {
			if len(base) == 0 {
				return fmtDur(figure(rs, f))
			}
			return withRatio(figure(rs, f), figure(base, f))
		}
		var vsRound, sameMode, firstPair []float64
		for _, r := range rs {
			if r.baseline != nil && r.baseline.RoundTripP50 > 0 {
				ratio := float64(r.res.RoundTripP50) / float64(r.baseline.RoundTripP50)
				vsRound = append(vsRound, ratio)
				if oneMode(r.res.CoreToCore[0], r.res.CoreToCore[1], r.baseline.CoreToCore[0], r.baseline.CoreToCore[1]) {
					sameMode = append(sameMode, ratio)
				}
			}
			if a, b := r.res.FirstAlone.RoundTrip, r.res.FirstNow.RoundTrip; a > 0 && b > 0 {
				firstPair = append(firstPair, float64(b)/float64(a))
			}
		}
		fmt.Fprintf(t.w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", t.label(i), len(rs),
			cell(func(r *result) time.Duration { return r.WriteP50 }),
			cell(func(r *result) time.Duration { return r.WriteP99 }),
			cell(func(r *result) time.Duration { return r.RoundTripP50 }),
			cell(func(r *result) time.Duration { return r.RoundTripP99 }),
			fmtRatios(vsRound), fmtRatios(sameMode), fmtRatios(firstPair))
	}
}

// blockRatios prints, with -interleave, each N's block-by-block ratios
// over all rounds: each block's p50 against the p50 of the baseline's
// block beside it in time, the median of those ratios and their 10th and
// 90th percentiles. Blocks side by side ran milliseconds apart, so the
// machine's drift, which moves the p50s of whole runs, cancels out.
func (t *table) blockRatios() {
	if t.cfg.interleave == 0 || len(t.results) == 0 {
		return
	}
	fmt.Fprintf(t.w, "\nBlock by block (-interleave %d, %d rounds): each block's p50 over its block of %d pairs beside it; median of the ratios (10th-90th percentile):\n\n", t.cfg.interleave, t.cfg.rounds, t.cfg.pairs[0])
	cols := []string{"pairs", "blocks", "WRITE p50 / baseline's", "SEND/Recv p50 / baseline's"}
	fmt.Fprintf(t.w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for i := range t.cfg.pairs {
		var writes, trips []float64
		for _, r := range t.results[i] {
			if r.baseline == nil {
				continue
			}
			for k := range min(len(r.res.Blocks), len(r.baseline.Blocks)) {
				b, base := r.res.Blocks[k], r.baseline.Blocks[k]
				if base.Write > 0 && base.RoundTrip > 0 {
					writes = append(writes, float64(b.Write)/float64(base.Write))
					trips = append(trips, float64(b.RoundTrip)/float64(base.RoundTrip))
				}
			}
		}
		fmt.Fprintf(t.w, "| %s | %d | %s | %s |\n", t.label(i), len(trips), fmtSpread(writes), fmtSpread(trips))
	}
}

// fmtSpread is the median of rs and its 10th and 90th percentiles, "-"
// for none.
func fmtSpread(rs []float64) string {
	if len(rs) == 0 {
		return "-"
	}
	slices.Sort(rs)
	at := func(q float64) float64 { return rs[min(len(rs)-1, int(q*float64(len(rs))))] }
	return fmt.Sprintf("%.2fx (%.2f-%.2f)", at(0.5), at(0.1), at(0.9))
}

// oneMode reports whether core-to-core round trips agree within 1.5x:
// the machine was in one mode for all of them (benchkit.CoreToCore).
func oneMode(ds ...time.Duration) bool {
	lo, hi := slices.Min(ds), slices.Max(ds)
	return lo > 0 && float64(hi) <= 1.5*float64(lo)
}

// fmtCoreToCore shows the core-to-core round trips before and after the
// latencies.
func fmtCoreToCore(d [2]time.Duration) string {
	if d[0] <= 0 || d[1] <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d -> %d ns", d[0].Nanoseconds(), d[1].Nanoseconds())
}

// fmtRatios lists ratios sorted, "-" for none.
func fmtRatios(rs []float64) string {
	if len(rs) == 0 {
		return "-"
	}
	slices.Sort(rs)
	cells := make([]string, len(rs))
	for i, r := range rs {
		cells[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(cells, " ")
}

func fmtBytes(b float64) string {
	if b >= 1<<20 || b <= -(1<<20) {
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", b/(1<<10))
}

func fmtCount(n int) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

func fmtCPU(f float64) string {
	if f < 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f%%", 100*f)
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// withRatio is d, and its ratio to the baseline's figure when there is one.
func withRatio(d, base time.Duration) string {
	if base <= 0 {
		return fmtDur(d)
	}
	return fmt.Sprintf("%s (%.2fx)", fmtDur(d), float64(d)/float64(base))
}

// beforeAfter shows one pair's figure before and after the other pairs
// connected, and their ratio; "-" for a single pair.
func beforeAfter(alone, now time.Duration) string {
	if alone <= 0 || now <= 0 {
		return "-"
	}
	return fmt.Sprintf("%s -> %s (%.2fx)", fmtDur(alone), fmtDur(now), float64(now)/float64(alone))
}
