package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"os"
	"os/signal"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "pingpong:", err)
		os.Exit(1)
	}
}

const (
	// recvDepth is each endpoint's posted receives: one message is in
	// flight each way, so a small window is plenty and keeps the receive
	// pools (2*recvDepth buffers of the message size) small.
	recvDepth = 16
	maxSize   = 1 << 20
)

type config struct {
	iters int
	size  int
}

func parse(args []string, out io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&cfg.iters, "n", 1000, "number of exchanges")
	fs.IntVar(&cfg.size, "s", 4096, "size of each message in bytes")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.iters < 1 {
		return cfg, fmt.Errorf("-n %d: need at least one exchange", cfg.iters)
	}
	if cfg.size < 1 || cfg.size > maxSize {
		return cfg, fmt.Errorf("-s %d: size must be 1 to %d bytes", cfg.size, maxSize)
	}
	return cfg, nil
}

// run connects a client and a server endpoint on one runtime, plays
// ping-pong and writes the summary to out. It fails on any error and on any
// reply that is not exactly what was sent.
func run(ctx context.Context, args []string, out io.Writer) (err error) {
	cfg, err := parse(args, out)
	if err != nil {
		return err
	}
	msgSize := max(cfg.size, 4096)
	rt, err := runtime.New(runtime.WithMessageSize(msgSize), runtime.WithRecvDepth(recvDepth),
		runtime.WithMemoryLimit(arenaSize(msgSize)))
	if err != nil {
		return err
	}
	defer func() {
		// Close with a context of its own: ctx may be what ended the run.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if cerr := rt.Close(cctx); cerr != nil && err == nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()

	cli, srv, err := connect(ctx, rt)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  local address:  QPN 0x%06x (client)\n", cli.LocalAddr().(runtime.Addr).QPN)
	fmt.Fprintf(out, "  remote address: QPN 0x%06x (server)\n", srv.LocalAddr().(runtime.Addr).QPN)

	tx, err := rt.Alloc(cfg.size)
	if err != nil {
		return err
	}
	echo, err := rt.Alloc(cfg.size)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srvErr := make(chan error, 1)
	go func() {
		err := serve(ctx, srv, echo, cfg.iters)
		if err != nil {
			cancel() // unblock the client
		}
		srvErr <- err
	}()

	start := time.Now()
	cliErr := ping(ctx, cli, tx, cfg)
	elapsed := time.Since(start)
	if cliErr != nil {
		cancel() // unblock the server
	}
	if err := firstErr(cliErr, <-srvErr); err != nil {
		return err
	}

	usec := float64(elapsed.Nanoseconds()) / 1e3
	total := int64(cfg.size) * int64(cfg.iters) * 2 // both directions, as ibv_rc_pingpong counts
	fmt.Fprintf(out, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", total, usec/1e6, float64(total)*8/usec)
	fmt.Fprintf(out, "%d iters in %.2f seconds = %.2f usec/iter\n", cfg.iters, usec/1e6, usec/float64(cfg.iters))
	fmt.Fprintf(out, "verified %d replies of %d bytes: OK\n", cfg.iters, cfg.size)
	return nil
}

// firstErr prefers a real failure over the cancellation it caused on the
// other side.
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

// arenaSize is enough registered memory for two endpoints' receive pools
// (allocations round up to powers of two) plus the two message buffers.
func arenaSize(msgSize int) int {
	pow2 := func(n int) int { return 1 << bits.Len(uint(n-1)) }
	return max(64<<20, 2*pow2(2*recvDepth*msgSize)+4*pow2(msgSize)+4<<20)
}

// connect returns a connected client and server endpoint of rt.
func connect(ctx context.Context, rt *runtime.Runtime) (cli, srv *runtime.Endpoint, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return runtime.Pipe(ctx, rt, rt)
}

// serve echoes iters messages back to the sender.
func serve(ctx context.Context, ep *runtime.Endpoint, buf *runtime.Buffer, iters int) error {
	for i := range iters {
		m, err := ep.Recv(ctx)
		if err != nil {
			return fmt.Errorf("server: receive %d: %w", i, err)
		}
		if len(m.Bytes()) > buf.Len() {
			n := len(m.Bytes())
			m.Release()
			return fmt.Errorf("server: message %d has %d bytes, expected at most %d", i, n, buf.Len())
		}
		// A Message's bytes are only valid until Release, and Send takes
		// registered memory: copy, then give the receive buffer back before
		// replying, so it is free again when the next ping arrives.
		n := copy(buf.Bytes(), m.Bytes())
		m.Release()
		if _, err := ep.Send(ctx, buf.Slice(0, n)).Wait(ctx); err != nil {
			return fmt.Errorf("server: echo %d: %w", i, err)
		}
	}
	return nil
}

// ping sends cfg.iters messages and checks every byte of every reply.
func ping(ctx context.Context, ep *runtime.Endpoint, tx *runtime.Buffer, cfg config) error {
	for i := range cfg.iters {
		fill(tx.Bytes(), i)
		if _, err := ep.Send(ctx, tx.Local()).Wait(ctx); err != nil {
			return fmt.Errorf("client: send %d: %w", i, err)
		}
		m, err := ep.Recv(ctx)
		if err != nil {
			return fmt.Errorf("client: receive %d: %w", i, err)
		}
		err = check(m.Bytes(), tx.Bytes(), i)
		m.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// fill writes the pattern of iteration i: it differs from one iteration to
// the next, so a stale or duplicated reply does not pass.
func fill(b []byte, i int) {
	for j := range b {
		b[j] = byte(j*7 + i*13 + 1)
	}
}

func check(got, want []byte, i int) error {
	if len(got) != len(want) {
		return fmt.Errorf("client: reply %d has %d bytes, sent %d", i, len(got), len(want))
	}
	if bytes.Equal(got, want) {
		return nil
	}
	for j := range got {
		if got[j] != want[j] {
			return fmt.Errorf("client: reply %d differs at byte %d: got %#02x, want %#02x", i, j, got[j], want[j])
		}
	}
	return nil
}
