package main

import (
	"fmt"
	"io"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
)

// table prints one markdown row per child as it ends; the first child's
// latencies are the baseline of the ratios beside the others'.
type table struct {
	w        io.Writer
	cfg      config
	baseline *result
	first    bool
}

func newTable(w io.Writer, cfg config) *table { return &table{w: w, cfg: cfg, first: true} }

var columns = []string{"pairs", "heap/ep", "stack/ep", "reg/ep", "threads", "goroutines", "idle CPU",
	"WRITE p50", "WRITE p99", "SEND/Recv p50", "SEND/Recv p99",
	"1st pair WRITE p50, alone -> now", "1st pair SEND/Recv p50, alone -> now",
	"setup first 10%", "setup last 10%", "last/first", "close/pair", "load"}

func (t *table) header() {
	limit := "the runtime's default"
	if t.cfg.memLimit > 0 {
		limit = fmt.Sprintf("%d MiB", t.cfg.memLimit>>20)
	}
	actors := ""
	if t.cfg.parked {
		actors = "; parked actors (WithParkedActors)"
	}
	fmt.Fprintf(t.w, "%s, GOMAXPROCS %d, %d cores, load average %s; %d samples of %d B after %d warm-up; memory limit %s%s\n\n",
		goruntime.Version(), goruntime.GOMAXPROCS(0), goruntime.NumCPU(), benchkit.LoadAverage(), t.cfg.ops, t.cfg.size, t.cfg.warmup, limit, actors)
	fmt.Fprintf(t.w, "| %s |\n", strings.Join(columns, " | "))
	fmt.Fprintf(t.w, "|%s\n", strings.Repeat("---|", len(columns)))
}

func (t *table) row(o outcome) {
	if t.first {
		t.first = false
		t.baseline = o.res
	}
	r := o.res
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
	}
	if o.died != "" {
		cells[len(cells)-2] += "; then died: " + o.died
	}
	fmt.Fprintf(t.w, "| %s |\n", strings.Join(cells, " | "))
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
