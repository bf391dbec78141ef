package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs the test binary as the probe's child when the parent, run
// by a test, starts it again (os.Executable is the test binary then), and
// otherwise fails the package when a goroutine outlives the tests.
func TestMain(m *testing.M) {
	if slices.Contains(os.Args[1:], "-child") {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// quick keeps a child short: few samples, a short idle window.
var quick = []string{"-ops", "50", "-warmup", "10", "-idlecpu", "100ms", "-pause", "10ms", "-timeout", "2m"}

// TestRunTable: every N gets a row of figures, and the first N is the
// baseline of the latency ratios.
func TestRunTable(t *testing.T) {
	var out, log bytes.Buffer
	if err := run(context.Background(), append([]string{"-pairs", "1,3"}, quick...), &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	rows := tableRows(out.String())
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2:\n%s\n%s", len(rows), out.String(), log.String())
	}
	num := `-?\d+\.\d+ (KiB|MiB)`
	dur := `\d+\.\d+ (µs|ms|s)`
	for i, want := range []string{"1", "3"} {
		cells := rows[i]
		if len(cells) != len(columns) {
			t.Fatalf("row %d has %d cells, want %d: %q", i, len(cells), len(columns), cells)
		}
		checks := map[string]string{"pairs": "^" + want + "$", "heap/ep": num, "stack/ep": num, "reg/ep": num,
			"threads": `^\d+$`, "idle CPU": `^\d+\.\d\d%$`, "WRITE p50": dur + ` \(\d+\.\d\dx\)$`,
			"SEND/Recv p99": dur + ` \(\d+\.\d\dx\)$`, "setup last 10%": dur, "close/pair": dur}
		for col, re := range checks {
			cell := cells[slices.Index(columns, col)]
			if !regexp.MustCompile(re).MatchString(cell) {
				t.Errorf("%s pairs: %s is %q, want %s", want, col, cell, re)
			}
		}
	}
	if cell := rows[0][slices.Index(columns, "WRITE p50")]; !strings.HasSuffix(cell, "(1.00x)") {
		t.Errorf("the baseline's WRITE p50 is %q, want its ratio to itself, 1.00x", cell)
	}
}

// TestRunReportsADeadChild: a child that fails takes only its own row
// down, which says why; the next N still runs. 300 pairs need about 4 MiB
// of scratch and receive buffers per runtime (3 buffers of 4 KiB and 2 KiB
// of scratch an endpoint), more than the 2 MiB allowed here.
func TestRunReportsADeadChild(t *testing.T) {
	var out, log bytes.Buffer
	args := append([]string{"-pairs", "300,1", "-memlimit", "2MiB"}, quick...)
	if err := run(context.Background(), args, &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	rows := tableRows(out.String())
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2:\n%s\n%s", len(rows), out.String(), log.String())
	}
	died := rows[0][1]
	if m := regexp.MustCompile(`^died after connecting (\d+) pairs: .*WithMemoryLimit`).FindStringSubmatch(died); m == nil || m[1] == "0" {
		t.Errorf("the 300-pair row says %q, want how many pairs it connected and that it died of the memory limit", died)
	}
	if !strings.HasSuffix(rows[1][slices.Index(columns, "WRITE p50")], "s") {
		t.Errorf("the 1-pair row after it has no figures: %q", rows[1])
	}
}

// TestRunRounds: -rounds runs the whole list again, each round's first N
// the baseline of its rows, and ends with each N's medians over the
// rounds, against the baseline's medians.
func TestRunRounds(t *testing.T) {
	var out, log bytes.Buffer
	if err := run(context.Background(), append([]string{"-pairs", "1,2", "-rounds", "3"}, quick...), &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	table, medians, ok := strings.Cut(out.String(), "Medians over 3 rounds")
	if !ok {
		t.Fatalf("no medians after 3 rounds:\n%s", out.String())
	}
	rows := tableRows(table)
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6 (2 N x 3 rounds):\n%s", len(rows), out.String())
	}
	for i, row := range rows {
		if want := []string{"1", "2"}[i%2]; row[0] != want {
			t.Errorf("row %d is of %s pairs, want %s (the list, round after round)", i, row[0], want)
		}
		if i%2 == 0 && !strings.HasSuffix(row[slices.Index(columns, "SEND/Recv p50")], "(1.00x)") {
			t.Errorf("row %d, the first of its round, is not its own baseline: %q", i, row)
		}
	}
	med := tableRows(medians)
	if len(med) != 2 || med[0][0] != "1" || med[1][0] != "2" || med[0][1] != "3" {
		t.Fatalf("medians %q, want a row for 1 and for 2 pairs, of 3 rounds each", med)
	}
	if !strings.HasSuffix(med[0][4], "(1.00x)") {
		t.Errorf("the baseline's median SEND/Recv p50 is %q, want its ratio to itself", med[0][4])
	}
	if ratios := strings.Fields(med[1][6]); len(ratios) != 3 {
		t.Errorf("2 pairs: SEND/Recv ratios to each round's baseline %q, want 3", med[1][6])
	}
	if _, err := parse([]string{"-rounds", "0"}, &log); err == nil {
		t.Error("-rounds 0 accepted")
	}
}

// TestRunInterleaved: with -interleave the children of a round are alive
// together and take turns, one block each; every N's blocks are set
// against the baseline's beside them, an N listed twice is named by its
// place, and a child that dies before it is ready leaves the others to
// their blocks.
func TestRunInterleaved(t *testing.T) {
	var out, log bytes.Buffer
	if err := run(context.Background(), append([]string{"-pairs", "1,2,1", "-interleave", "3"}, quick...), &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	table, blocks, ok := strings.Cut(out.String(), "Block by block")
	if !ok {
		t.Fatalf("no block-by-block table:\n%s\n%s", out.String(), log.String())
	}
	if rows := tableRows(table); len(rows) != 3 {
		t.Fatalf("%d rows, want 3:\n%s", len(rows), out.String())
	}
	rows := tableRows(blocks)
	want := []string{"1 (#1)", "2", "1 (#3)"}
	if len(rows) != len(want) {
		t.Fatalf("block rows %q, want %q", rows, want)
	}
	ratio := regexp.MustCompile(`^\d+\.\d\dx \(\d+\.\d\d-\d+\.\d\d\)$`)
	for i, row := range rows {
		if row[0] != want[i] || row[1] != "3" {
			t.Errorf("block row %q, want %s with 3 blocks", row, want[i])
		}
		for _, cell := range row[2:] {
			if !ratio.MatchString(cell) {
				t.Errorf("%s: ratio %q, want a median and its spread", want[i], cell)
			}
		}
	}
	if got := strings.Count(log.String(), blockTag); got != 9 {
		t.Errorf("the children answered %d blocks, want 3 each:\n%s", got, log.String())
	}

	out.Reset()
	log.Reset()
	args := append([]string{"-pairs", "300,1", "-memlimit", "2MiB", "-interleave", "2"}, quick...)
	if err := run(context.Background(), args, &out, &log); err != nil {
		t.Fatalf("run with a dying child: %v\n%s", err, log.String())
	}
	table, _, _ = strings.Cut(out.String(), "Block by block")
	rows = tableRows(table)
	if len(rows) != 2 || !strings.HasPrefix(rows[0][1], "died after connecting") || !strings.HasSuffix(rows[1][slices.Index(columns, "WRITE p50")], "s") {
		t.Errorf("want the 300-pair child dead and the 1-pair child measured:\n%s\n%s", out.String(), log.String())
	}
	if _, err := parse([]string{"-interleave", "-1"}, &log); err == nil {
		t.Error("-interleave -1 accepted")
	}
}

func tableRows(out string) [][]string {
	var rows [][]string
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| pairs") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		rows = append(rows, cells)
	}
	return rows
}

func TestDeathReason(t *testing.T) {
	for _, tc := range []struct {
		name, stderr string
		want         string
	}{
		{"thread exhaustion",
			"runtime: program exceeds 10000-thread limit\nfatal error: thread exhaustion\n\ngoroutine 1 [running]:\n...",
			"fatal error: thread exhaustion (runtime: program exceeds 10000-thread limit)"},
		{"panic", "panic: runtime error: index out of range\n\ngoroutine 7 [running]:", "panic: runtime error: index out of range"},
		{"the probe's own error", "scale: connecting pair 129 of 5000: registered arena exhausted\n", "connecting pair 129 of 5000: registered arena exhausted"},
		{"killed", "", "signal: killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := deathReason(tc.stderr, errors.New("signal: killed")); got != tc.want {
				t.Errorf("deathReason = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHeadWriterKeepsTheHead(t *testing.T) {
	w := &headWriter{max: 8}
	for _, s := range []string{"fatal", " error", ": more than fits"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v: a full write must be reported, or the child blocks", s, n, err)
		}
	}
	if got := w.String(); got != "fatal er" {
		t.Errorf("kept %q, want the first 8 bytes", got)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int{"3GiB": 3 << 30, "512MiB": 512 << 20, "64K": 64 << 10, "1.5G": 3 << 29, "4096": 4096} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1MiB", "lots"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) succeeded", in)
		}
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	if p50, p99 := percentile(ds, 0.5), percentile(ds, 0.99); p50 != 50 || p99 != 99 {
		t.Errorf("p50, p99 of 1..100 = %d, %d; want 50, 99", p50, p99)
	}
	if p := percentile([]time.Duration{7}, 0.99); p != 7 {
		t.Errorf("p99 of one sample = %d, want it", p)
	}
}

func TestProfileName(t *testing.T) {
	if got := profileName(profileName("prof/cpu.out", "5000"), "idle"); got != "prof/cpu.5000.idle.out" {
		t.Errorf("profileName = %q", got)
	}
	if got := profileName("", "5"); got != "" {
		t.Errorf("no profile asked for, got %q", got)
	}
}
