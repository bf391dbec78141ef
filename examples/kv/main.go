package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "kv:", err)
		os.Exit(1)
	}
}

type config struct {
	clients  int
	slots    int
	slotSize int
	rounds   int
	batch    int
	updates  int
	hot      int
}

func parse(args []string, out io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("kv", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&cfg.clients, "clients", 8, "client goroutines, each with its own connection")
	fs.IntVar(&cfg.slots, "slots", 1024, "slots in the server's region")
	fs.IntVar(&cfg.slotSize, "slotsize", 64, "bytes per slot: a multiple of 8, at least 32")
	fs.IntVar(&cfg.rounds, "rounds", 100, "rounds per client: a batch of reads, then the updates")
	fs.IntVar(&cfg.batch, "batch", 16, "RDMA READs in flight together per round")
	fs.IntVar(&cfg.updates, "updates", 4, "updates per round, of slots from the batch")
	fs.IntVar(&cfg.hot, "hot", 16, "updates go to the first hot slots, which clients contend for")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	case cfg.clients < 1, cfg.slots < 1, cfg.rounds < 1, cfg.batch < 1:
		return cfg, errors.New("-clients, -slots, -rounds and -batch must be at least 1")
	case cfg.slotSize < minSlotSize || cfg.slotSize%8 != 0 || cfg.slotSize > 1<<20:
		return cfg, fmt.Errorf("-slotsize %d: must be a multiple of 8 from %d to %d", cfg.slotSize, minSlotSize, 1<<20)
	case cfg.slots*cfg.slotSize > 16<<20:
		return cfg, fmt.Errorf("-slots %d x -slotsize %d: the region must fit 16 MiB", cfg.slots, cfg.slotSize)
	case cfg.updates < 0 || cfg.updates > cfg.batch:
		return cfg, fmt.Errorf("-updates %d: must be 0 to -batch (%d)", cfg.updates, cfg.batch)
	case cfg.hot < 1 || cfg.hot > cfg.slots:
		return cfg, fmt.Errorf("-hot %d: must be 1 to -slots (%d)", cfg.hot, cfg.slots)
	}
	return cfg, nil
}

// run starts a server and cfg.clients clients, lets the clients read and
// update the server's slots with one-sided operations, then checks the
// region against what the clients counted and writes a summary to out.
func run(ctx context.Context, args []string, out io.Writer) (err error) {
	cfg, err := parse(args, out)
	if err != nil {
		return err
	}
	// A soft fabric of two devices, one for the server's runtime and one
	// for the clients', as two hosts on one switch. Control messages are
	// small, and so are the receive pools.
	fabric := soft.New(soft.Config{Devices: 2})
	defer fabric.Close()
	opts := []runtime.Option{runtime.WithProvider(fabric), runtime.WithMessageSize(256), runtime.WithRecvDepth(8)}
	srt, err := runtime.New(append(opts, runtime.WithDevice("soft0"))...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeRuntime(ctx, srt)) }()
	crt, err := runtime.New(append(opts, runtime.WithDevice("soft1"))...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeRuntime(ctx, crt)) }()

	st, err := newStore(srt, cfg.slots, cfg.slotSize)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.close()) }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clients, err := connect(ctx, srt, crt, st.info(), cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "kv: %d slots x %d bytes (rkey %#x), %d clients x %d rounds of %d reads and %d updates\n",
		cfg.slots, cfg.slotSize, st.info().Ref.RKey, cfg.clients, cfg.rounds, cfg.batch, cfg.updates)

	start := time.Now()
	type result struct {
		st  stats
		err error
	}
	results := make(chan result, len(clients))
	for _, c := range clients {
		go func() {
			st, err := c.run(ctx)
			if err != nil {
				cancel() // the others stop too
			}
			results <- result{st, err}
		}()
	}
	var total stats
	var errs []error
	for range clients {
		r := <-results
		total.add(r.st)
		errs = append(errs, r.err)
	}
	elapsed := time.Since(start)
	if err := firstErr(errs...); err != nil {
		return err
	}

	sec := elapsed.Seconds()
	fmt.Fprintf(out, "ran %.2f s: %.0f reads/s, %.0f updates/s\n", sec, float64(total.reads)/sec, float64(total.committed)/sec)
	fmt.Fprintf(out, "reads:   %d: %d consistent, %d locked or torn (skipped)\n", total.reads, total.consistent, total.skipped)
	fmt.Fprintf(out, "updates: %d committed (CAS won), %d published (Then), %d CAS lost to contention, %d given up\n",
		total.committed, total.published, total.casLost, total.gaveUp)

	sum, verr := st.verify()
	if total.published != total.committed {
		verr = errors.Join(verr, fmt.Errorf("%d updates published, %d committed", total.published, total.committed))
	}
	if sum != total.committed {
		verr = errors.Join(verr, fmt.Errorf("sum of slot counters %d != committed updates %d", sum, total.committed))
	}
	if verr != nil {
		fmt.Fprintf(out, "verify:  FAILED\n")
		return fmt.Errorf("verify: %w", verr)
	}
	fmt.Fprintf(out, "verify:  %d slots consistent, sum of counters %d = committed updates %d: OK\n", cfg.slots, sum, total.committed)
	return nil
}

// connect connects cfg.clients clients to a server on srt that hands each
// the region info.
func connect(ctx context.Context, srt, crt *runtime.Runtime, info regionInfo, cfg config) ([]*client, error) {
	ln, err := srt.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serve(ctx, ln, info, cfg.clients) }()
	clients := make([]*client, cfg.clients)
	var dialErr error
	for i := range clients {
		if clients[i], dialErr = dialClient(ctx, crt, ln.Addr().String(), i, cfg); dialErr != nil {
			cancel() // stop the server's Accept
			break
		}
	}
	if err := firstErr(dialErr, <-served); err != nil {
		return nil, err
	}
	return clients, nil
}

// serve accepts n connections and sends each the region info: the server's
// only work. Its endpoints stay open, idle, until the runtime closes.
func serve(ctx context.Context, ln *runtime.Listener, info regionInfo, n int) error {
	defer ln.Close()
	b, err := info.AppendBinary(nil)
	if err != nil {
		return err
	}
	for i := range n {
		ep, err := ln.Accept(ctx)
		if err != nil {
			return fmt.Errorf("server: accept %d: %w", i, err)
		}
		// SendBytes copies the few bytes into registered memory of its own.
		if _, err := ep.SendBytes(ctx, b).Wait(ctx); err != nil {
			return fmt.Errorf("server: send region info: %w", err)
		}
	}
	return nil
}

func closeRuntime(ctx context.Context, rt *runtime.Runtime) error {
	// A context of its own: ctx may be what ended the run.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := rt.Close(ctx); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// firstErr prefers a real failure over the cancellations it caused.
func firstErr(errs ...error) error {
	var canceled error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled):
			canceled = err
		default:
			return err
		}
	}
	return canceled
}
