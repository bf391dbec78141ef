package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

type config struct {
	pairs      []int
	rounds     int // times the whole -pairs list runs, round-robin
	interleave int // > 0: latencies in this many blocks, the children of a round taking turns
	ops        int
	warmup     int
	size       int
	pause      time.Duration
	idleCPU    time.Duration
	memLimit   int // 0: the runtime's default
	cpuProfile string
	trace      string
	memProfile string
	timeout    time.Duration

	child int // > 0 in a child: the pairs it measures
}

func parse(args []string, out io.Writer) (config, error) {
	var cfg config
	var pairs, memLimit string
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&pairs, "pairs", "1,100,1000", "comma-separated numbers of endpoint pairs, one child process each; the first is the latency baseline")
	fs.IntVar(&cfg.rounds, "rounds", 1, "run the whole -pairs list this many times, one N after another, and end with the medians over the rounds")
	fs.IntVar(&cfg.interleave, "interleave", 0, "measure the latencies in this many blocks, the children of a round alive together and taking turns block by block, and end with each block's ratio to the baseline's block beside it")
	fs.IntVar(&cfg.ops, "ops", 2000, "latency samples of each kind on the active pair (with -interleave: in each block)")
	fs.IntVar(&cfg.warmup, "warmup", 200, "operations of each kind before the samples (with -interleave: before each block's)")
	fs.IntVar(&cfg.size, "size", 64, "bytes of each WRITE and SEND")
	fs.DurationVar(&cfg.pause, "pause", 50*time.Millisecond, "idleness before threads are counted, past every spin window")
	fs.DurationVar(&cfg.idleCPU, "idlecpu", 2*time.Second, "idleness over which CPU time is measured")
	fs.StringVar(&memLimit, "memlimit", "", "WithMemoryLimit of both runtimes, e.g. 3GiB (default: the runtime's, 1 GiB)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write CPU profiles to this file name, N and the phase (setup, idle, write, roundtrip, close) inserted before the extension")
	fs.StringVar(&cfg.trace, "trace", "", "write execution traces to this file name, N and the phase inserted before the extension (go tool trace reads them)")
	fs.StringVar(&cfg.memProfile, "memprofile", "", "write a heap profile per N, taken with the pairs idle, N inserted before the extension")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Minute, "bound on each child process")
	fs.IntVar(&cfg.child, "child", 0, "internal: run as the child process measuring this many pairs")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for f := range strings.SplitSeq(pairs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("-pairs %q: want positive numbers separated by commas", pairs)
		}
		cfg.pairs = append(cfg.pairs, n)
	}
	if memLimit != "" {
		n, err := parseBytes(memLimit)
		if err != nil {
			return cfg, fmt.Errorf("-memlimit: %w", err)
		}
		cfg.memLimit = n
	}
	if cfg.rounds < 1 {
		return cfg, fmt.Errorf("-rounds %d: want at least 1", cfg.rounds)
	}
	if cfg.interleave < 0 {
		return cfg, fmt.Errorf("-interleave %d: want a number of blocks, or 0 for none", cfg.interleave)
	}
	if cfg.ops < 1 || cfg.warmup < 0 || cfg.size < 1 || cfg.size > 4096 {
		return cfg, fmt.Errorf("-ops must be at least 1, -warmup at least 0, -size 1 to 4096 (the default largest message)")
	}
	return cfg, nil
}

// parseBytes reads a size such as 3GiB, 512MiB or 1073741824.
func parseBytes(s string) (int, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"G", 30}, {"M", 20}, {"K", 10}}
	num, shift := s, uint(0)
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = v, u.shift
			break
		}
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a positive size such as 3GiB, 512MiB or a number of bytes", s)
	}
	return int(n * float64(uint64(1)<<shift)), nil
}

// profileName inserts tag before the extension of a profile's file name:
// cpu.out becomes cpu.5000.out for the child of 5,000 pairs, which writes
// cpu.5000.setup.out and so on, one per phase.
func profileName(name, tag string) string {
	if name == "" {
		return ""
	}
	ext := filepath.Ext(name)
	return fmt.Sprintf("%s.%s%s", strings.TrimSuffix(name, ext), tag, ext)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if cfg.child > 0 {
		return runChild(ctx, cfg, os.Stdin, stdout)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to run it again: %w", err)
	}
	t := newTable(stdout, cfg)
	t.header()
	for round := 1; round <= cfg.rounds; round++ {
		t.startRound()
		if cfg.interleave > 0 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, o := range runInterleaved(ctx, self, cfg, round, stderr) {
				t.row(o)
			}
			continue
		}
		for _, n := range cfg.pairs {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			t.row(runOne(ctx, self, cfg, n, round, stderr))
		}
	}
	t.medians()
	t.blockRatios()
	return nil
}
