package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/runtime"
)

// result is what a child measured; per-endpoint figures are over the 2N
// endpoints, in bytes.
type result struct {
	Pairs         int
	GOMAXPROCS    int
	HeapPerEP     float64
	StackPerEP    float64
	ArenaPerEP    float64
	ThreadsBefore int     // before the first pair; -1 where unknown
	Threads       int     // with the pairs idle
	Goroutines    int     // with the pairs idle
	IdleCPU       float64 // CPU time over wall time while idle: 1 is one core
	WriteP50      time.Duration
	WriteP99      time.Duration
	RoundTripP50  time.Duration
	RoundTripP99  time.Duration
	// The first pair's p50s in this process: alone, right after it
	// connected, and again with the other N-1 pairs idle. The same pair
	// and the same process, so that only the idle endpoints differ.
	FirstAlone, FirstNow latencies
	SetupFirst           time.Duration // mean of the first tenth of the pairs
	SetupLast            time.Duration // mean of the last tenth
	SetupTotal           time.Duration
	LoadAverage          string // the machine's, over the minute before the latencies
	// A cache line's round trip between two threads (benchkit.CoreToCore)
	// before the latencies and after them: the machine's mode while they
	// ran.
	CoreToCore [2]time.Duration
	// With -interleave, each block's p50s, in order; the p50s and p99s
	// above are then over every block's samples.
	Blocks []latencies
}

// coreToCoreTrips is the round trips of each of CoreToCore's batches.
const coreToCoreTrips = 2000

// latencies are one pair's p50s of WRITE+Wait and of a SEND/Recv round
// trip.
type latencies struct{ Write, RoundTrip time.Duration }

// latencies measures pr's p50s.
func (p *probe) latencies(ctx context.Context, pr pair) (latencies, error) {
	writes, err := p.writes(ctx, pr)
	if err != nil {
		return latencies{}, err
	}
	trips, err := p.roundTrips(ctx, pr)
	if err != nil {
		return latencies{}, err
	}
	return latencies{Write: percentile(writes, 0.50), RoundTrip: percentile(trips, 0.50)}, nil
}

// runChild measures cfg.child pairs and reports on out (parent.go says
// how); the runtimes close after the result is out, so a closing that
// hangs costs only the closing's figure.
func runChild(ctx context.Context, cfg config, commands io.Reader, out io.Writer) error {
	progress := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }
	prof := &phaseProfiler{name: cfg.cpuProfile, traceName: cfg.trace}
	defer prof.stop()
	if err := prof.start("setup"); err != nil {
		return err
	}
	p, err := newProbe(cfg)
	if err != nil {
		return err
	}
	p.commands = commands
	res, err := p.measure(ctx, cfg.child, prof, progress)
	if err == nil {
		var line []byte
		if line, err = json.Marshal(res); err == nil {
			fmt.Fprintf(out, "%s%s\n", resultTag, line)
			progress("closing both runtimes") // only now: a failure's last progress line says how far it got
		}
	}
	if perr := prof.start("close"); err == nil {
		err = perr
	}
	start := time.Now()
	closeErr := p.close()
	c := closing{Took: time.Since(start)}
	if closeErr != nil {
		c.Err = closeErr.Error()
	}
	line, _ := json.Marshal(c)
	fmt.Fprintf(out, "%s%s\n", closedTag, line)
	return err
}

// phaseProfiler writes a CPU profile and an execution trace per phase of
// a child, so that what setup costs, what idleness costs and what the
// active pair costs are seen apart. The traces show what the CPU profiles
// cannot: where a round trip waits (a goroutine runnable but not running,
// a thread woken late).
type phaseProfiler struct {
	name      string // "": no CPU profiles
	traceName string // "": no traces
	cur       *benchkit.Profiles
}

// start ends the current phase's profile and trace and starts the next
// one's.
func (pp *phaseProfiler) start(phase string) error {
	if err := pp.stop(); err != nil {
		return err
	}
	var err error
	pp.cur, err = benchkit.StartProfiles(profileName(pp.name, phase), profileName(pp.traceName, phase))
	return err
}

func (pp *phaseProfiler) stop() error {
	err := pp.cur.Stop()
	pp.cur = nil
	return err
}

// probe is two runtimes, the endpoint pairs between them and the memory
// the active pair's operations use.
type probe struct {
	cfg    config
	cliRT  *runtime.Runtime // Dials
	srvRT  *runtime.Runtime // Listens
	cliBuf *runtime.Buffer  // what the active client writes and sends
	srvBuf *runtime.Buffer  // what the active server sends back
	target runtime.RemoteRef
	pairs  []pair
	// With -interleave, the parent's commands (blockCommand), one a line.
	commands io.Reader
}

type pair struct{ cli, srv *runtime.Endpoint }

func newProbe(cfg config) (*probe, error) {
	var opts []runtime.Option
	if cfg.memLimit > 0 {
		opts = append(opts, runtime.WithMemoryLimit(cfg.memLimit))
	}
	p := &probe{cfg: cfg}
	var err error
	if p.srvRT, err = runtime.New(opts...); err != nil {
		return nil, err
	}
	if p.cliRT, err = runtime.New(opts...); err != nil {
		p.close()
		return nil, err
	}
	// Allocated before the baseline, so that the deltas are the endpoints'.
	if p.cliBuf, err = p.cliRT.Alloc(cfg.size); err != nil {
		p.close()
		return nil, err
	}
	if p.srvBuf, err = p.srvRT.Alloc(cfg.size); err != nil {
		p.close()
		return nil, err
	}
	target, err := p.srvRT.Alloc(cfg.size)
	if err != nil {
		p.close()
		return nil, err
	}
	exp, err := target.Expose(runtime.RemoteWrite)
	if err != nil {
		p.close()
		return nil, err
	}
	p.target = exp.RemoteRef()
	return p, nil
}

func (p *probe) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	for _, rt := range []*runtime.Runtime{p.cliRT, p.srvRT} {
		if rt != nil {
			if err := rt.Close(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// usage is what the process holds, for the deltas.
type usage struct {
	heap, stack uint64
	arena       int
}

func (p *probe) usage() usage {
	ms := benchkit.Settle()
	return usage{heap: ms.HeapInuse, stack: ms.StackInuse, arena: p.cliRT.Stats().ArenaBytes + p.srvRT.Stats().ArenaBytes}
}

func (p *probe) measure(ctx context.Context, n int, prof *phaseProfiler, progress func(string, ...any)) (result, error) {
	res := result{Pairs: n, GOMAXPROCS: goruntime.GOMAXPROCS(0)}
	ln, err := p.srvRT.Listen("127.0.0.1:0")
	if err != nil {
		return res, err
	}
	defer ln.Close()
	res.ThreadsBefore = benchkit.Threads()
	before := p.usage()

	setup := make([]time.Duration, n)
	step := max(1, n/10)
	start := time.Now()
	for i := range n {
		t := time.Now()
		pr, err := connect(ctx, p.cliRT, ln)
		if err != nil {
			return res, fmt.Errorf("connecting pair %d of %d: %w", i+1, n, err)
		}
		setup[i] = time.Since(t)
		p.pairs = append(p.pairs, pr)
		if i == 0 && n > 1 {
			progress("the first pair alone")
			t0 := time.Now()
			time.Sleep(p.cfg.pause)
			if res.FirstAlone, err = p.latencies(ctx, pr); err != nil {
				return res, fmt.Errorf("the first pair alone: %w", err)
			}
			start = start.Add(time.Since(t0)) // not setup
		}
		progress("%s%d", pairsTag, i+1)
		if (i+1)%step == 0 || i+1 == n {
			progress("connected %d/%d pairs; this one took %v, %d OS threads", i+1, n, setup[i].Round(time.Microsecond), benchkit.Threads())
		}
	}
	res.SetupTotal = time.Since(start)
	tenth := max(1, n/10)
	res.SetupFirst, res.SetupLast = mean(setup[:tenth]), mean(setup[n-tenth:])

	time.Sleep(p.cfg.pause)
	res.Threads = benchkit.Threads()
	res.Goroutines = goruntime.NumGoroutine()
	after := p.usage()
	eps := float64(2 * n)
	res.HeapPerEP = (float64(after.heap) - float64(before.heap)) / eps
	res.StackPerEP = (float64(after.stack) - float64(before.stack)) / eps
	res.ArenaPerEP = float64(after.arena-before.arena) / eps
	if p.cfg.memProfile != "" {
		if err := writeHeapProfile(p.cfg.memProfile); err != nil {
			return res, err
		}
	}

	progress("idle for %v", p.cfg.idleCPU)
	if err := prof.start("idle"); err != nil {
		return res, err
	}
	cpu0, t0 := benchkit.CPUTime(), time.Now()
	time.Sleep(p.cfg.idleCPU)
	if cpu0 >= 0 {
		res.IdleCPU = float64(benchkit.CPUTime()-cpu0) / float64(time.Since(t0))
	} else {
		res.IdleCPU = -1
	}

	res.LoadAverage = benchkit.LoadAverage()
	res.CoreToCore[0] = benchkit.CoreToCore(coreToCoreTrips)
	active := p.pairs[len(p.pairs)-1]
	if p.cfg.interleave > 0 {
		if err := p.serveBlocks(ctx, active, &res, prof, progress); err != nil {
			return res, err
		}
	} else {
		if err := prof.start("write"); err != nil {
			return res, err
		}
		progress("WRITE+Wait on one pair, %d idle", n-1)
		writes, err := p.writes(ctx, active)
		if err != nil {
			return res, err
		}
		res.WriteP50, res.WriteP99 = percentile(writes, 0.50), percentile(writes, 0.99)
		progress("SEND/Recv round trips on one pair, %d idle", n-1)
		if err := prof.start("roundtrip"); err != nil {
			return res, err
		}
		trips, err := p.roundTrips(ctx, active)
		if err != nil {
			return res, err
		}
		res.RoundTripP50, res.RoundTripP99 = percentile(trips, 0.50), percentile(trips, 0.99)
	}
	res.CoreToCore[1] = benchkit.CoreToCore(coreToCoreTrips)
	if n > 1 {
		progress("the first pair again, %d idle", n-1)
		if res.FirstNow, err = p.latencies(ctx, p.pairs[0]); err != nil {
			return res, fmt.Errorf("the first pair again: %w", err)
		}
	}
	return res, nil
}

// serveBlocks says readyTag and then, for each blockCommand the parent
// sends, measures one block of WRITE+Wait and SEND/Recv on the active pair
// (each -warmup and -ops long) and answers blockTag, until the commands
// end. The p50s and p99s of res are over all the blocks' samples.
func (p *probe) serveBlocks(ctx context.Context, active pair, res *result, prof *phaseProfiler, progress func(string, ...any)) error {
	if err := prof.start("blocks"); err != nil {
		return err
	}
	progress("%s%d", readyTag, res.Pairs)
	var writes, trips []time.Duration
	sc := bufio.NewScanner(p.commands)
	for sc.Scan() {
		if cmd := sc.Text(); cmd != blockCommand {
			return fmt.Errorf("unknown command %q from the parent, want %q", cmd, blockCommand)
		}
		w, err := p.writes(ctx, active)
		if err != nil {
			return fmt.Errorf("block %d: %w", len(res.Blocks)+1, err)
		}
		t, err := p.roundTrips(ctx, active)
		if err != nil {
			return fmt.Errorf("block %d: %w", len(res.Blocks)+1, err)
		}
		b := latencies{Write: percentile(w, 0.50), RoundTrip: percentile(t, 0.50)}
		res.Blocks = append(res.Blocks, b)
		writes, trips = append(writes, w...), append(trips, t...)
		progress("%s%d: WRITE p50 %v, SEND/Recv p50 %v", blockTag, len(res.Blocks), b.Write, b.RoundTrip)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the parent's commands: %w", err)
	}
	if len(res.Blocks) == 0 {
		return errors.New("the parent asked for no block")
	}
	res.WriteP50, res.WriteP99 = percentile(writes, 0.50), percentile(writes, 0.99)
	res.RoundTripP50, res.RoundTripP99 = percentile(trips, 0.50), percentile(trips, 0.99)
	return nil
}

// connect returns a pair connected through ln, as a server's Accept and a
// client's Dial make one.
func connect(ctx context.Context, cliRT *runtime.Runtime, ln *runtime.Listener) (pair, error) {
	cli, srv, err := benchkit.Connect(ctx, cliRT, ln)
	return pair{cli: cli, srv: srv}, err
}

// writes times WRITE+Wait of cfg.size bytes on pr, one at a time.
func (p *probe) writes(ctx context.Context, pr pair) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	samples := make([]time.Duration, 0, p.cfg.ops)
	local := p.cliBuf.Local()
	for i := range p.cfg.warmup + p.cfg.ops {
		t := time.Now()
		if _, err := pr.cli.Write(ctx, local, p.target).Wait(ctx); err != nil {
			return nil, fmt.Errorf("write %d: %w", i, err)
		}
		if i >= p.cfg.warmup {
			samples = append(samples, time.Since(t))
		}
	}
	return samples, nil
}

// roundTrips times a SEND of cfg.size bytes and its reply on pr: the
// client Sends and waits for its future, the server Recvs, Releases and
// Sends back, the client Recvs and Releases the reply.
func (p *probe) roundTrips(ctx context.Context, pr pair) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	echoed := make(chan error, 1)
	go func() { echoed <- p.echo(ctx, pr.srv) }()
	samples := make([]time.Duration, 0, p.cfg.ops)
	local := p.cliBuf.Local()
	var err error
	for i := range p.cfg.warmup + p.cfg.ops {
		t := time.Now()
		if _, err = pr.cli.Send(ctx, local).Wait(ctx); err != nil {
			err = fmt.Errorf("send %d: %w", i, err)
			break
		}
		var m runtime.Message
		if m, err = pr.cli.Recv(ctx); err != nil {
			err = fmt.Errorf("receiving reply %d: %w", i, err)
			break
		}
		m.Release()
		if i >= p.cfg.warmup {
			samples = append(samples, time.Since(t))
		}
	}
	cancel()
	if echoErr := <-echoed; err == nil && echoErr != nil && !errors.Is(echoErr, context.Canceled) {
		err = fmt.Errorf("echo: %w", echoErr)
	}
	return samples, err
}

// echo answers every message on ep with one of its own until ctx ends.
func (p *probe) echo(ctx context.Context, ep *runtime.Endpoint) error {
	local := p.srvBuf.Local()
	for {
		m, err := ep.Recv(ctx)
		if err != nil {
			return err
		}
		m.Release()
		if _, err := ep.Send(ctx, local).Wait(ctx); err != nil {
			return err
		}
	}
}

func writeHeapProfile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// percentile returns the q-quantile of ds (sorting it), nearest rank.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
