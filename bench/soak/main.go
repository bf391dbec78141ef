package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/runtime"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

type config struct {
	ops, callers, sendEvery, cycles, size int
	samples                               int
}

func parse(args []string, out io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&cfg.ops, "ops", 40_000_000, "operations of the ops phase (0: skip it)")
	fs.IntVar(&cfg.callers, "callers", 16, "goroutines submitting in the ops phase")
	fs.IntVar(&cfg.sendEvery, "sendevery", 8, "every n'th operation of a caller is a SEND, the others WRITEs")
	fs.IntVar(&cfg.cycles, "cycles", 5000, "connect/write/send/close cycles of the churn phase (0: skip it)")
	fs.IntVar(&cfg.size, "size", 64, "bytes of each WRITE and SEND")
	fs.IntVar(&cfg.samples, "samples", 20, "samples per phase")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.ops < 0 || cfg.cycles < 0 || cfg.callers < 1 || cfg.sendEvery < 1 || cfg.size < 1 || cfg.samples < 2 {
		return cfg, errors.New("-ops and -cycles at least 0; -callers, -sendevery and -size at least 1; -samples at least 2")
	}
	return cfg, nil
}

func run(args []string, out io.Writer) error {
	cfg, err := parse(args, out)
	if err != nil {
		return err
	}
	r, err := newRig(cfg)
	if err != nil {
		return err
	}
	defer r.close()
	fmt.Fprintf(out, "# soak: %s, GOMAXPROCS %d, load %s; %d ops from %d callers (a SEND every %d), %d churn cycles, %d B\n\n",
		goruntime.Version(), goruntime.GOMAXPROCS(0), benchkit.LoadAverage(), cfg.ops, cfg.callers, cfg.sendEvery, cfg.cycles, cfg.size)
	if cfg.ops > 0 {
		ss, err := r.soak(cfg)
		report(out, "ops", ss)
		if err != nil {
			return err
		}
	}
	if cfg.cycles > 0 {
		ss, err := r.churn(cfg)
		report(out, "cycles", ss)
		if err != nil {
			return err
		}
	}
	return nil
}

// rig is two runtimes, a listener on one, and the memory the operations
// use.
type rig struct {
	cli, srv *runtime.Runtime
	ln       *runtime.Listener
	local    *runtime.Buffer
	target   runtime.RemoteRef
}

func newRig(cfg config) (*rig, error) {
	r := &rig{}
	var err error
	if r.srv, err = runtime.New(); err != nil {
		return nil, err
	}
	if r.cli, err = runtime.New(); err != nil {
		r.close()
		return nil, err
	}
	if r.ln, err = r.srv.Listen("127.0.0.1:0"); err != nil {
		r.close()
		return nil, err
	}
	if r.local, err = r.cli.Alloc(cfg.size); err != nil {
		r.close()
		return nil, err
	}
	target, err := r.srv.Alloc(cfg.size)
	if err != nil {
		r.close()
		return nil, err
	}
	exp, err := target.Expose(runtime.RemoteWrite)
	if err != nil {
		r.close()
		return nil, err
	}
	r.target = exp.RemoteRef()
	return r, nil
}

func (r *rig) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r.ln != nil {
		r.ln.Close()
	}
	for _, rt := range []*runtime.Runtime{r.cli, r.srv} {
		if rt != nil {
			rt.Close(ctx)
		}
	}
}

// sample is what the process holds at one point of a phase.
type sample struct {
	done                       int // operations or cycles
	at                         time.Duration
	heap, objects              uint64
	goroutines, threads, fds   int
	arena, recvBufs, endpoints int
}

func (r *rig) sample(done int, start time.Time) sample {
	ms := benchkit.Settle()
	cs, ss := r.cli.Stats(), r.srv.Stats()
	return sample{done: done, at: time.Since(start), heap: ms.HeapInuse, objects: ms.HeapObjects,
		goroutines: goruntime.NumGoroutine(), threads: benchkit.Threads(), fds: benchkit.OpenFDs(),
		arena: cs.ArenaBytes + ss.ArenaBytes, recvBufs: cs.RecvBuffers + ss.RecvBuffers,
		endpoints: cs.Endpoints + ss.Endpoints}
}

// soak runs the ops phase and returns its samples.
func (r *rig) soak(cfg config) ([]sample, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cli, srv, err := benchkit.Connect(ctx, r.cli, r.ln)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		cli.Close(cctx)
		srv.Close(cctx)
	}()
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := srv.Recv(ctx)
			if err != nil {
				recvErr <- err
				return
			}
			m.Release()
		}
	}()

	var (
		next    atomic.Int64 // operations handed out
		done    atomic.Int64 // operations completed
		errOnce sync.Once
		opErr   error
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { opErr = err; cancel() })
	}
	start := time.Now()
	samples := []sample{r.sample(0, start)}
	for range cfg.callers {
		wg.Go(func() {
			local := r.local.Local()
			for i := 0; ; i++ {
				if next.Add(1) > int64(cfg.ops) || ctx.Err() != nil {
					return
				}
				var err error
				if i%cfg.sendEvery == cfg.sendEvery-1 {
					_, err = cli.Send(ctx, local).Wait(ctx)
				} else {
					_, err = cli.Write(ctx, local, r.target).Wait(ctx)
				}
				if err != nil {
					fail(fmt.Errorf("operation %d: %w", done.Load(), err))
					return
				}
				done.Add(1)
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	step := max(1, cfg.ops/cfg.samples)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for mark := step; ; {
		select {
		case <-finished:
			samples = append(samples, r.sample(int(done.Load()), start))
			cancel()
			if err := <-recvErr; opErr == nil && !errors.Is(err, context.Canceled) {
				opErr = fmt.Errorf("recv: %w", err)
			}
			return samples, opErr
		case <-tick.C:
		}
		if n := int(done.Load()); n >= mark && n < cfg.ops {
			samples = append(samples, r.sample(n, start))
			mark = (n/step + 1) * step
		}
	}
}

// churn runs the churn phase and returns its samples.
func (r *rig) churn(cfg config) ([]sample, error) {
	ctx := context.Background()
	start := time.Now()
	samples := []sample{r.sample(0, start)}
	step := max(1, cfg.cycles/cfg.samples)
	for i := range cfg.cycles {
		if err := r.cycle(ctx); err != nil {
			return samples, fmt.Errorf("cycle %d: %w", i, err)
		}
		if (i+1)%step == 0 || i+1 == cfg.cycles {
			samples = append(samples, r.sample(i+1, start))
		}
	}
	return samples, nil
}

// cycle connects a pair, WRITEs and SENDs through it once and closes it.
func (r *rig) cycle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cli, srv, err := benchkit.Connect(ctx, r.cli, r.ln)
	if err != nil {
		return err
	}
	local := r.local.Local()
	_, werr := cli.Write(ctx, local, r.target).Wait(ctx)
	if werr == nil {
		_, werr = cli.Send(ctx, local).Wait(ctx)
	}
	if werr == nil {
		var m runtime.Message
		if m, werr = srv.Recv(ctx); werr == nil {
			m.Release()
		}
	}
	return errors.Join(werr, cli.Close(ctx), srv.Close(ctx))
}

// report prints a phase's samples and its verdict: each figure's last
// sample against the one a tenth of the way in.
func report(out io.Writer, unit string, ss []sample) {
	if len(ss) == 0 {
		return
	}
	fmt.Fprintf(out, "| %s | elapsed | HeapInuse | heap objects | goroutines | OS threads | fds | arena | recv buffers | endpoints |\n", unit)
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range ss {
		fmt.Fprintf(out, "| %d | %.1f s | %.2f MiB | %d | %d | %d | %d | %d MiB | %d | %d |\n",
			s.done, s.at.Seconds(), mib(s.heap), s.objects, s.goroutines, s.threads, s.fds, s.arena>>20, s.recvBufs, s.endpoints)
	}
	ref, last := ss[min(len(ss)-1, max(1, len(ss)/10))], ss[len(ss)-1]
	per := float64(last.done - ref.done)
	fmt.Fprintf(out, "\nfrom %d to %d %s: HeapInuse %+.2f MiB (%+.1f B per %s), heap objects %+d, goroutines %+d, OS threads %+d, fds %+d, arena %+d MiB\n\n",
		ref.done, last.done, unit, mib(last.heap)-mib(ref.heap), (float64(last.heap)-float64(ref.heap))/max(per, 1), unit[:len(unit)-1],
		int64(last.objects)-int64(ref.objects), last.goroutines-ref.goroutines, last.threads-ref.threads, last.fds-ref.fds, (last.arena-ref.arena)>>20)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
