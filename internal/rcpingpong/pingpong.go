package rcpingpong

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/verbsrt/verbsrt/internal/provider"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// Config is one end's options, ibv_rc_pingpong's.
type Config struct {
	Dev      string // "": the first device
	IBPort   int
	Size     int
	MTU      int
	RxDepth  int
	Iters    int
	SL       int
	Events   bool   // -e: sleep on the completion channel
	GIDIndex int    // < 0: no GID (InfiniBand without a GRH)
	Port     int    // TCP port of the exchange
	Validate bool   // -c: check the bytes received
	Host     string // "": the server
}

// The wr_ids ibv_rc_pingpong uses; pending is a set of them.
const (
	recvWRID = 1
	sendWRID = 2
)

// end is the state of one end of a ping-pong: what pp_init_ctx sets up.
type end struct {
	cfg    Config
	ctx    verbs.Context
	ch     verbs.CompChannel // with -e
	cq     verbs.CQ
	qp     verbs.QP
	arena  *verbs.Arena
	mr     verbs.MR
	buf    []byte
	send   []verbs.SendWR // one WR, reused
	recvs  []verbs.RecvWR // rx_depth identical WRs
	routs  int            // receives posted
	events int            // CQ events to acknowledge
}

func (e *end) close() {
	if e.ctx != nil {
		e.ctx.Close() // and the QP, CQ, MR, channel and PD with it
	}
	if e.arena != nil {
		e.arena.Close()
	}
}

// Run runs one end of ibv_rc_pingpong's protocol on p: the client when
// cfg.Host is set, the server otherwise, taking one connection from ln.
// It prints what ibv_rc_pingpong prints.
func Run(ctx context.Context, w io.Writer, p verbs.Provider, cfg Config, ln net.Listener) error {
	e := &end{cfg: cfg}
	defer e.close()
	if err := e.init(p); err != nil {
		return err
	}
	// The first rx_depth receives before anything can arrive.
	if n, err := e.qp.PostRecv(e.recvs); n < len(e.recvs) {
		return fmt.Errorf("couldn't post receive (%d): %w", n, err)
	}
	e.routs = len(e.recvs)
	if cfg.Events {
		if err := e.cq.ReqNotify(false); err != nil {
			return fmt.Errorf("couldn't request CQ notification: %w", err)
		}
	}
	port, err := e.ctx.QueryPort(uint8(cfg.IBPort))
	if err != nil {
		return fmt.Errorf("couldn't get port info: %w", err)
	}
	my := verbs.PeerInfo{LID: port.LID, QPN: e.qp.QPN(), PSN: verbs.RandomPSN()}
	if port.LinkLayer != verbs.LinkLayerEthernet && my.LID == 0 {
		return errors.New("couldn't get local LID")
	}
	if cfg.GIDIndex >= 0 {
		if my.GID, err = e.ctx.QueryGID(uint8(cfg.IBPort), cfg.GIDIndex); err != nil {
			return fmt.Errorf("can't read sgid of index %d: %w", cfg.GIDIndex, err)
		}
	}
	printDest(w, "local address: ", my)

	var rem verbs.PeerInfo
	if cfg.Host != "" {
		c, err := net.Dial("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
		if err != nil {
			return fmt.Errorf("couldn't connect to %s:%d: %w", cfg.Host, cfg.Port, err)
		}
		rem, err = ibv.ClientExchangeDest(ctx, c, my)
		c.Close()
		if err != nil {
			return err
		}
	} else {
		c, err := ln.Accept()
		ln.Close() // one connection, as the C server
		if err != nil {
			return fmt.Errorf("accept() failed: %w", err)
		}
		rem, err = ibv.ServerExchangeDest(ctx, c, my, func(d verbs.PeerInfo) error {
			return e.connect(my.PSN, d)
		})
		c.Close()
		if err != nil {
			return err
		}
	}
	printDest(w, "remote address:", rem)
	if cfg.Host != "" {
		if err := e.connect(my.PSN, rem); err != nil {
			return err
		}
	}
	return e.run(ctx, w)
}

func printDest(w io.Writer, what string, d verbs.PeerInfo) {
	fmt.Fprintf(w, "  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", what, d.LID, d.QPN, d.PSN, d.GID)
}

// init opens the device and makes what pp_init_ctx makes: a buffer of size
// bytes filled with 0x7b, a CQ of rx_depth+1 (on a completion channel with
// -e), an RC QP with one send and rx_depth receive WRs in INIT, its send
// inline when the QP takes that much.
func (e *end) init(p verbs.Provider) error {
	cfg := e.cfg
	dev, err := provider.FindDevice(p, cfg.Dev)
	if err != nil {
		return err
	}
	if e.ctx, err = dev.Open(); err != nil {
		return fmt.Errorf("couldn't get context for %s: %w", dev.Name(), err)
	}
	if cfg.Events {
		if e.ch, err = e.ctx.CreateCompChannel(); err != nil {
			return fmt.Errorf("couldn't create completion channel: %w", err)
		}
	}
	pd, err := e.ctx.AllocPD()
	if err != nil {
		return fmt.Errorf("couldn't allocate PD: %w", err)
	}
	if e.arena, err = verbs.NewArena(cfg.Size); err != nil {
		return fmt.Errorf("couldn't allocate work buf: %w", err)
	}
	e.buf = e.arena.Bytes()[:cfg.Size]
	for i := range e.buf {
		e.buf[i] = 0x7b
	}
	if e.mr, err = pd.RegMR(e.buf, verbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("couldn't register MR: %w", err)
	}
	if e.cq, err = e.ctx.CreateCQ(verbs.CQSpec{CQE: cfg.RxDepth + 1, Channel: e.ch}); err != nil {
		return fmt.Errorf("couldn't create CQ: %w", err)
	}
	if e.qp, err = pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
		Caps: verbs.QPCaps{MaxSendWR: 1, MaxRecvWR: cfg.RxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return fmt.Errorf("couldn't create QP: %w", err)
	}
	attr, err := e.qp.Query()
	if err != nil {
		return fmt.Errorf("couldn't query QP: %w", err)
	}
	sgl := []verbs.SGE{{Addr: e.mr.Addr(), Length: uint32(cfg.Size), LKey: e.mr.LKey()}}
	flags := verbs.SendSignaled
	if attr.Cap.MaxInlineData >= cfg.Size {
		flags |= verbs.SendInline
	}
	e.send = []verbs.SendWR{{ID: sendWRID, SGL: sgl, Opcode: verbs.OpSend, Flags: flags}}
	e.recvs = make([]verbs.RecvWR, cfg.RxDepth)
	for i := range e.recvs {
		e.recvs[i] = verbs.RecvWR{ID: recvWRID, SGL: sgl}
	}
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: uint8(cfg.IBPort)},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return fmt.Errorf("failed to modify QP to INIT: %w", err)
	}
	return nil
}

// connect is pp_connect_ctx: RTR towards dest, then RTS with our PSN, with
// ibv_rc_pingpong's attributes (a GRH with hop limit 1 only when the
// peer's GID has an interface ID, one outstanding READ each way).
func (e *end) connect(myPSN uint32, dest verbs.PeerInfo) error {
	cfg := e.cfg
	rtr := verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: verbs.MTUFromBytes(cfg.MTU), DestQPN: dest.QPN,
		RQPSN: dest.PSN, MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AH: verbs.AHAttr{DLID: dest.LID, SL: uint8(cfg.SL), PortNum: uint8(cfg.IBPort)}}
	if !bytes.Equal(dest.GID[8:], make([]byte, 8)) {
		rtr.AH.IsGlobal = true
		rtr.AH.GRH = verbs.GlobalRoute{DGID: dest.GID, HopLimit: 1, SGIDIndex: uint8(cfg.GIDIndex)}
	}
	if err := e.qp.Modify(&rtr, verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
		verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		return fmt.Errorf("failed to modify QP to RTR: %w", err)
	}
	rts := verbs.QPAttr{State: verbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: myPSN, MaxRdAtomic: 1}
	if err := e.qp.Modify(&rts, verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
		verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("failed to modify QP to RTS: %w", err)
	}
	return nil
}

// run is the ping-pong loop of ibv_rc_pingpong's main: the client sends
// first; each end sends again once its last send and a receive completed,
// until iters of each; receives are re-posted in one batch when one is left.
func (e *end) run(ctx context.Context, w io.Writer) error {
	cfg := e.cfg
	pending := recvWRID
	if cfg.Host != "" {
		if cfg.Validate {
			for i := 0; i < cfg.Size; i += os.Getpagesize() {
				e.buf[i] = 0 // i / page_size % sizeof(char), as the C code has it
			}
		}
		if err := e.postSend(); err != nil {
			return err
		}
		pending |= sendWRID
	}
	var wcs [2]verbs.WC
	rcnt, scnt := 0, 0
	start := time.Now()
	for rcnt < cfg.Iters || scnt < cfg.Iters {
		if cfg.Events {
			cq, err := e.ch.GetCQEvent(ctx)
			if err != nil {
				return fmt.Errorf("failed to get cq_event (%s): %w", progress(rcnt, scnt, cfg.Iters), err)
			}
			e.events++
			if cq != e.cq {
				return errors.New("CQ event for unknown CQ")
			}
			if err := e.cq.ReqNotify(false); err != nil {
				return fmt.Errorf("couldn't request CQ notification: %w", err)
			}
		}
		var n int
		for empty := 1; ; empty++ {
			var err error
			if n, err = e.cq.Poll(wcs[:]); err != nil {
				return fmt.Errorf("poll CQ failed: %w", err)
			}
			if cfg.Events || n > 0 {
				break
			}
			// Busy polling, as the C program does, but letting other
			// goroutines run (a soft provider's engine needs a P) and
			// giving up when ctx ends.
			runtime.Gosched()
			if empty%1024 == 0 && ctx.Err() != nil {
				return fmt.Errorf("poll CQ (%s): %w", progress(rcnt, scnt, cfg.Iters), ctx.Err())
			}
		}
		for i := range wcs[:n] {
			wc := &wcs[i]
			if wc.Status != verbs.WCSuccess {
				return fmt.Errorf("failed status %s (%d) for wr_id %d", wc.Status, wc.Status, wc.WRID)
			}
			switch wc.WRID {
			case sendWRID:
				scnt++
			case recvWRID:
				if e.routs--; e.routs <= 1 {
					n, err := e.qp.PostRecv(e.recvs[:cfg.RxDepth-e.routs])
					if e.routs += n; e.routs < cfg.RxDepth {
						return fmt.Errorf("couldn't post receive (%d): %w", e.routs, err)
					}
				}
				rcnt++
			default:
				return fmt.Errorf("completion for unknown wr_id %d", wc.WRID)
			}
			pending &^= int(wc.WRID)
			if scnt < cfg.Iters && pending == 0 {
				if err := e.postSend(); err != nil {
					return err
				}
				pending = recvWRID | sendWRID
			}
		}
	}
	usec := float64(time.Since(start).Microseconds())
	total := int64(cfg.Size) * int64(cfg.Iters) * 2
	fmt.Fprintf(w, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", total, usec/1e6, float64(total)*8/usec)
	fmt.Fprintf(w, "%d iters in %.2f seconds = %.2f usec/iter\n", cfg.Iters, usec/1e6, usec/float64(cfg.Iters))
	if cfg.Host == "" && cfg.Validate {
		for i := 0; i < cfg.Size; i += os.Getpagesize() {
			if e.buf[i] != 0 {
				fmt.Fprintf(w, "invalid data in page %d\n", i/os.Getpagesize())
			}
		}
	}
	if e.events > 0 {
		e.cq.AckEvents(e.events)
	}
	return nil
}

// progress says how far a run got, for the error that ends it early: the
// side of a stalled exchange that waits is the one whose count is behind.
func progress(rcnt, scnt, iters int) string {
	return fmt.Sprintf("%d of %d receives and %d of %d sends completed", rcnt, iters, scnt, iters)
}

func (e *end) postSend() error {
	if _, err := e.qp.PostSend(e.send); err != nil {
		return fmt.Errorf("couldn't post send: %w", err)
	}
	return nil
}

// SelfTest runs a server on the provider's second device and a
// client on its first, in this process, over TCP on the loopback (the
// soft provider reaches no other process), and prints each end's output.
// Without -g it uses GID index 1, which every soft device has.
func SelfTest(ctx context.Context, w io.Writer, cfg Config) error {
	p := soft.New(soft.Config{Devices: 2})
	defer p.Close()
	devs, err := p.Devices()
	if err != nil {
		return err
	}
	if cfg.GIDIndex < 0 {
		cfg.GIDIndex = 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	srvCfg, cliCfg := cfg, cfg
	srvCfg.Dev, cliCfg.Dev = devs[1].Name(), devs[0].Name()
	cliCfg.Host, cliCfg.Port = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	var srvOut, cliOut bytes.Buffer
	srvErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { srvErr <- Run(ctx, &srvOut, p, srvCfg, ln) }()
	cliErr := Run(ctx, &cliOut, p, cliCfg, nil)
	if cliErr != nil {
		ln.Close() // a server still waiting for the client gives up,
		cancel()   // and one waiting for completions
	}
	sErr := <-srvErr
	fmt.Fprintf(w, "server (%s, provider soft):\n%s", srvCfg.Dev, srvOut.Bytes())
	fmt.Fprintf(w, "client (%s, provider soft):\n%s", cliCfg.Dev, cliOut.Bytes())
	if sErr != nil {
		return fmt.Errorf("server: %w", sErr)
	}
	if cliErr != nil {
		return fmt.Errorf("client: %w", cliErr)
	}
	return nil
}
