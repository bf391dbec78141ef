package rtbench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verbsrt/verbsrt/internal/provider"
	"github.com/verbsrt/verbsrt/internal/sched"
	vrt "github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// Pair is the two ends of a bench, client and server, and Config.QPs
// connections between them, with the memory the operations use. In one
// process both ends are here; a client (net.go) has only its own end and
// the server's remote and device name, a server only its own end.
type Pair struct {
	prov           verbs.Provider
	closeProv      func()
	cliRT, srvRT   *vrt.Runtime
	cli, srv       []*vrt.Endpoint
	src, dst       *vrt.Buffer   // client's local memory, server's target
	remote         vrt.RemoteRef // dst, as the client's operations name it
	cliDev, srvDev string
	recvDone       sync.WaitGroup
	// What serveRecv took: the messages and their bytes, and a signal
	// after each, for a server that checks them against the client's
	// count (received).
	recvMsgs, recvBytes atomic.Uint64
	recvSignal          chan struct{}
	recvCancel          context.CancelFunc
	statsTo             io.Writer // Config.Stats: where Close prints the runtimes' counters
}

// newPair returns a pair with no runtime yet on prov, or on a new
// provider of cfg.Provider.Name (with devices devices if soft or rocev2) when
// prov is nil.
func newPair(cfg Config, prov verbs.Provider, devices int) (*Pair, []verbs.Device, error) {
	p := &Pair{prov: prov, closeProv: func() {}, statsTo: cfg.Stats}
	if prov == nil {
		var err error
		if p.prov, p.closeProv, err = provider.Open(cfg.Provider, devices); err != nil {
			return nil, nil, err
		}
	}
	devs, err := p.prov.Devices()
	if err == nil && len(devs) == 0 {
		err = fmt.Errorf("no devices on provider %s: %w", cfg.Provider.Name, verbs.ErrNotFound)
	}
	if err != nil {
		p.Close()
		return nil, nil, provider.WithHint(cfg.Provider.Name, err)
	}
	return p, devs, nil
}

// openRuntime opens a runtime on dev for cfg's test at sizes up to maxSize.
func (p *Pair) openRuntime(cfg Config, dev string, maxSize int) (*vrt.Runtime, error) {
	msg := 4096 // receive buffers: as large as a message only for send
	if cfg.Test == "send" {
		msg = max(msg, maxSize)
	}
	recvDepth := max(4, min(RecvDepth, RecvBytes/msg))
	if cfg.RxDepth > 0 {
		recvDepth = cfg.RxDepth
	}
	arena := 2*maxSize + 2*cfg.QPs*(2*recvDepth*msg+qpScratch) + 8<<20
	tuning := vrt.Tuning{Pollers: 1, Spin: cfg.Spin, WaitPoll: cfg.WaitPoll,
		NoWaitPoll: cfg.WaitPoll == 0, NoInlinePost: !cfg.InlinePost}
	opts := []vrt.Option{vrt.WithProvider(p.prov), vrt.WithDevice(dev), vrt.WithTuning(tuning),
		vrt.WithSendQueueDepth(SQDepth), vrt.WithMessageSize(msg), vrt.WithRecvDepth(recvDepth),
		vrt.WithMemoryLimit(arena)}
	if cfg.GIDIndex >= 0 {
		opts = append(opts, vrt.WithGIDIndex(cfg.GIDIndex))
	}
	return vrt.New(opts...)
}

// openEnd opens a runtime on dev and the buffer the operations use there.
// It returns the runtime even with an error, for close.
func (p *Pair) openEnd(cfg Config, dev string, maxSize int) (*vrt.Runtime, *vrt.Buffer, error) {
	rt, err := p.openRuntime(cfg, dev, maxSize)
	if err != nil {
		return nil, nil, err
	}
	buf, err := rt.Alloc(max(maxSize, 64))
	return rt, buf, err
}

// exposeTarget grants the client what the benchmarks do to the server's
// buffer: READ, WRITE and atomics (revoked when the buffer is freed).
func exposeTarget(dst *vrt.Buffer) (vrt.RemoteRef, error) {
	exp, err := dst.Expose(vrt.RemoteRead | vrt.RemoteWrite | vrt.RemoteAtomic)
	if err != nil {
		return vrt.RemoteRef{}, err
	}
	return exp.RemoteRef(), nil
}

// OpenPair opens both ends of a bench in this process, on a new provider
// of cfg.Provider, and connects cfg.QPs endpoints between them, for sizes
// up to maxSize.
func OpenPair(cfg Config, maxSize int) (*Pair, error) {
	p, devs, err := newPair(cfg, nil, 2)
	if err != nil {
		return nil, err
	}
	// p, not the result, is what a failure closes: the result is nil then.
	if err := p.connectInProcess(cfg, devs, maxSize); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// connectInProcess opens both ends on devs (Dev and PeerDev, by default
// the first device and another one) and connects them. On an error p holds
// what it opened, for close.
func (p *Pair) connectInProcess(cfg Config, devs []verbs.Device, maxSize int) error {
	cliDev, srvDev := cfg.Dev, cfg.PeerDev
	if cliDev == "" {
		cliDev = devs[0].Name()
	} else if err := checkDevice(cfg, "-d", cliDev, devs); err != nil {
		return err
	}
	if srvDev == "" {
		srvDev = cliDev
		for _, d := range devs {
			if d.Name() != cliDev {
				srvDev = d.Name()
				break
			}
		}
	} else if err := checkDevice(cfg, "-peer-d", srvDev, devs); err != nil {
		return err
	}
	var err error
	if p.cliRT, p.src, err = p.openEnd(cfg, cliDev, maxSize); err != nil {
		return err
	}
	if p.srvRT, p.dst, err = p.openEnd(cfg, srvDev, maxSize); err != nil {
		return err
	}
	if p.remote, err = exposeTarget(p.dst); err != nil {
		return err
	}
	p.cliDev, p.srvDev = p.cliRT.Stats().Device, p.srvRT.Stats().Device
	ln, err := p.srvRT.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() { accepted <- p.accept(ctx, ln, cfg.QPs) }()
	if err = p.dial(ctx, ln.Addr().String(), cfg.QPs); err != nil {
		cancel() // the accepts wait no longer
	}
	if aerr := <-accepted; err == nil {
		err = aerr
	}
	if err != nil {
		return err
	}
	p.serveRecv(cfg.PingPong)
	return nil
}

// checkDevice returns an error naming the flag, the device and the
// provider's devices if none of devs is called name.
func checkDevice(cfg Config, flagName, name string, devs []verbs.Device) error {
	for _, d := range devs {
		if d.Name() == name {
			return nil
		}
	}
	return provider.NoSuchDevice(flagName, name, cfg.Provider.Name, devs)
}

// accept accepts n connections on ln as the server's endpoints.
func (p *Pair) accept(ctx context.Context, ln *vrt.Listener, n int) error {
	for range n {
		ep, err := ln.Accept(ctx)
		if err != nil {
			return fmt.Errorf("accepting the client's connections: %w", err)
		}
		p.srv = append(p.srv, ep)
	}
	return nil
}

// dial makes n connections to the server's runtime listener at addr as the
// client's endpoints.
func (p *Pair) dial(ctx context.Context, addr string, n int) error {
	for range n {
		ep, err := p.cliRT.Dial(ctx, addr)
		if err != nil {
			return fmt.Errorf("connecting to the server's runtime at %s: %w", addr, err)
		}
		p.cli = append(p.cli, ep)
	}
	return nil
}

// serveRecv is the server side of a send test: take every message and
// give its buffer back at once, as ib_send_bw's server re-posts its
// receives, until close.
func (p *Pair) serveRecv(pingpong bool) {
	rctx, rcancel := context.WithCancel(context.Background())
	p.recvCancel = rcancel
	p.recvSignal = make(chan struct{}, 1)
	for _, ep := range p.srv {
		p.recvDone.Add(1)
		go func() {
			defer p.recvDone.Done()
			for {
				m, err := ep.Recv(rctx)
				if err != nil {
					return
				}
				n := m.Len()
				m.Release()
				p.recvBytes.Add(uint64(n))
				p.recvMsgs.Add(1)
				select {
				case p.recvSignal <- struct{}{}:
				default:
				}
				if !pingpong {
					continue
				}
				// The reply, of the same size, from the server's memory.
				if _, err := ep.Send(rctx, p.dst.Slice(0, n)).Wait(rctx); err != nil {
					return
				}
			}
		}()
	}
}

// received waits until serveRecv has taken msgs messages of bytes bytes
// in all, what the client reports its SENDs completed: an RC SEND
// completes once the server's device acknowledged it, and the message
// reaches serveRecv's goroutine after that. It returns an error if more
// came, or if fewer came before ctx ended.
func (p *Pair) received(ctx context.Context, msgs, bytes uint64) error {
	for {
		gotMsgs, gotBytes := p.recvMsgs.Load(), p.recvBytes.Load()
		switch {
		case gotMsgs == msgs && gotBytes == bytes:
			return nil
		case gotMsgs > msgs || gotBytes > bytes:
			return fmt.Errorf("the server received %d messages (%d bytes), more than the client's %d SENDs completed (%d bytes)", gotMsgs, gotBytes, msgs, bytes)
		}
		select {
		case <-p.recvSignal:
		case <-ctx.Done():
			return fmt.Errorf("the server received %d messages (%d bytes) of the client's %d SENDs completed (%d bytes)", gotMsgs, gotBytes, msgs, bytes)
		}
	}
}

// pingPong returns one iteration of -pingpong on QP q: a SEND of size
// bytes, and the server's reply received.
func (p *Pair) pingPong(ctx context.Context, q, size int) func() error {
	ep, local := p.cli[q], p.src.Slice(0, size)
	return func() error {
		if _, err := ep.Send(ctx, local).Wait(ctx); err != nil {
			return err
		}
		m, err := ep.Recv(ctx)
		if err != nil {
			return fmt.Errorf("the reply: %w", err)
		}
		m.Release()
		return nil
	}
}

// qpScratch is what an endpoint takes from the arena besides its receive
// buffers (atomic results), rounded up.
const qpScratch = 64 << 10

// Close closes the pair's runtimes and its provider, if it opened one.
func (p *Pair) Close() {
	if p.recvCancel != nil {
		p.recvCancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, rt := range []*vrt.Runtime{p.cliRT, p.srvRT} {
		if rt != nil && p.statsTo != nil {
			s := rt.Stats()
			wakeUp, measured := sched.WakeUpCost()
			fmt.Fprintf(p.statsTo, "verbsrt bench: runtime on %s: %d actor runs, %d inline posts, %d PostSend calls, %d credit-only SENDs, %d waits parked, %d poller sleeps, %d polls hit, %d empty; a parked waiter's wake-up %v (the process's median of %d)\n",
				s.Device, s.ActorRuns, s.InlineRuns, s.PostCalls, s.CreditOnly, s.WaitsParked, s.Sleeps, s.PollsHit, s.PollsEmpty, wakeUp.Round(time.Microsecond), measured)
		}
		if rt != nil {
			rt.Close(ctx)
		}
	}
	p.recvDone.Wait()
	p.closeProv()
}

// Runtimes returns the pair's runtimes: the client's and the server's.
func (p *Pair) Runtimes() (cli, srv *vrt.Runtime) { return p.cliRT, p.srvRT }
