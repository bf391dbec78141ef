package rtbench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/internal/provider"
	vrt "github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// The bench across two processes, as perftest runs: a server (-server, or
// -p without an address) waits for one client on a TCP control port; the
// client (an address argument) sends its parameters, the server adopts
// them, and the client runs the test from Pair.runSizes over the
// runtime connections the server accepts. The control protocol, version
// ProtoVersion, is one JSON object (Msg) per line:
//
//	client -> server  {"type":"config","config":{test, lat, size, ...}}
//	server -> client  {"type":"accept","listen":"host:port","device":"rxe1","remote":{addr,rkey,len}}
//	                  or {"type":"reject","error":"..."} at any step
//	client dials the server's runtime listener -q times (runtime Dial/Accept)
//	server -> client  {"type":"ready"}     (all accepted; for send it is receiving)
//	client -> server  {"type":"result","result":{...}}   one per size
//	client -> server  {"type":"done"}      ("error" set if the run failed)
//	server -> client  {"type":"done"}
//
// The client dials the port of "listen" on the host it reached the server
// at. "remote" is the server's registered buffer, the target of write,
// read and atomic.

// Port is perftest's default TCP port.
const Port = 18515

// ProtoVersion is the control protocol's version; both ends must
// speak the same.
const ProtoVersion = 1

// DefaultTimeout bounds connecting and each step of the set-up when
// Config.Timeout is 0. The run itself is not bounded.
const DefaultTimeout = 30 * time.Second

// Msg is one line of the control protocol.
type Msg struct {
	Version int              `json:"version"`
	Type    string           `json:"type"` // config, accept, reject, ready, result, done
	Config  *Wire            `json:"config,omitempty"`
	Listen  string           `json:"listen,omitempty"`
	Device  string           `json:"device,omitempty"`
	Remote  *Ref             `json:"remote,omitempty"`
	Result  *benchkit.Result `json:"result,omitempty"`
	Error   string           `json:"error,omitempty"`
}

// Wire is the client's configuration as the server receives it.
type Wire struct {
	Test       string `json:"test"`
	Lat        bool   `json:"lat"`
	PingPong   bool   `json:"pingpong,omitempty"`
	Provider   string `json:"provider"`
	Device     string `json:"device"`
	Size       int    `json:"size"`
	All        bool   `json:"all"`
	Iters      int    `json:"iters"`
	DurationNS int64  `json:"duration_ns"`
	QPs        int    `json:"qps"`
	Callers    int    `json:"callers"`
	TxDepth    int    `json:"tx_depth"`
}

// Ref is a runtime.RemoteRef on the wire.
type Ref struct {
	Addr uint64 `json:"addr"`
	RKey uint32 `json:"rkey"`
	Len  uint64 `json:"len"`
}

// CheckNetProvider refuses the soft provider (name) for an end whose peer
// is in another process: prov, the provider both ends share, is nil then.
func CheckNetProvider(name string, prov verbs.Provider) error {
	if prov == nil && name == "soft" {
		return errors.New("the soft provider connects only runtimes in the same process: " +
			"run the server and the client with -provider rocev2 (RoCE v2 over UDP: no NIC, no root) or -provider ibv (rdma-core), " +
			"or run verbsrt bench without -server and without an address for both ends in this process")
	}
	return nil
}

// ctl is the control connection.
type ctl struct {
	c  net.Conn
	sc *bufio.Scanner
}

func newCtl(c net.Conn) *ctl {
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	return &ctl{c: c, sc: sc}
}

func (c *ctl) send(m Msg) error {
	m.Version = ProtoVersion
	b, err := json.Marshal(m)
	if err == nil {
		_, err = c.c.Write(append(b, '\n'))
	}
	return err
}

// reject tells the peer why the run cannot go on; the peer may be gone.
func (c *ctl) reject(err error) {
	c.send(Msg{Type: "reject", Error: err.Error()})
}

// recv reads the next message, which must be of one of the types want; a
// rejection is an error carrying the peer's reason.
func (c *ctl) recv(want ...string) (Msg, error) {
	var m Msg
	if !c.sc.Scan() {
		err := cmp.Or(c.sc.Err(), io.ErrUnexpectedEOF)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return m, fmt.Errorf("no %s message in time", want[0])
		}
		return m, fmt.Errorf("waiting for the %s message: %w", want[0], err)
	}
	if err := json.Unmarshal(c.sc.Bytes(), &m); err != nil {
		return m, fmt.Errorf("not a verbsrt bench peer (it sent %.60q): %w", c.sc.Text(), err)
	}
	switch {
	case m.Version != ProtoVersion:
		return m, fmt.Errorf("the peer speaks version %d of the bench protocol, this verbsrt %d", m.Version, ProtoVersion)
	case m.Type == "reject":
		return m, fmt.Errorf("refused: %s", m.Error)
	case !slices.Contains(want, m.Type):
		return m, fmt.Errorf("protocol error: got a %q message, want %s", m.Type, strings.Join(want, " or "))
	}
	return m, nil
}

// untilPeerSpeaks runs f with a context that also ends if the peer closes
// the connection or sends anything, which it must not while f runs, and
// says so in f's error. It leaves no read deadline.
func (c *ctl) untilPeerSpeaks(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var b [1]byte
		if _, err := c.c.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
			cancel(errors.New("the peer hung up"))
		}
	}()
	err := f(ctx)
	c.c.SetReadDeadline(time.Unix(1, 0)) // stop the watcher
	<-watched
	c.c.SetReadDeadline(time.Time{})
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

// Wire returns cfg as the client sends it, from device dev.
func (cfg Config) Wire(dev string) Wire {
	return Wire{Test: cfg.Test, Lat: cfg.Lat, PingPong: cfg.PingPong, Provider: cfg.Provider.Name, Device: dev, Size: cfg.Size, All: cfg.All,
		Iters: cfg.Iters, DurationNS: int64(cfg.Duration), QPs: cfg.QPs, Callers: cfg.Callers, TxDepth: cfg.TxDepth}
}

// Args spells cfg's test parameters as flags.
func (cfg Config) Args() string {
	s := cfg.Test
	if cfg.Lat {
		s += " -lat"
	}
	if cfg.PingPong {
		s += " -pingpong"
	}
	if cfg.All {
		s += " -a"
	} else {
		s += fmt.Sprintf(" -s %d", cfg.Size)
	}
	if cfg.Duration > 0 {
		s += " -D " + cfg.Duration.String()
	} else {
		s += fmt.Sprintf(" -n %d", cfg.Iters)
	}
	return s + fmt.Sprintf(" -q %d -callers %d -t %d", cfg.QPs, cfg.Callers, cfg.TxDepth)
}

// Adopt returns what a server runs for the client's parameters c: the
// configuration, and the reporter that prints the header and each result
// the client reports; an error refuses the client.
type Adopt func(c *Wire) (Config, Reporter, error)

// Serve is the server: it takes one client from ln (and closes ln),
// adopts its parameters, accepts its runtime connections and reports the
// header and each result the client reports, as perftest's server prints
// them. cfg is the server's own (provider, device, timeout); prov is the
// provider when the client is in this process (tests), else nil.
func Serve(ctx context.Context, progress io.Writer, cfg Config, ln net.Listener, prov verbs.Provider, adopt Adopt) error {
	if err := CheckNetProvider(cfg.Provider.Name, prov); err != nil {
		ln.Close()
		return err
	}
	if progress == nil {
		progress = io.Discard
	}
	// The device first, as perftest's server: no client waits on a
	// server that cannot run.
	p, dev, err := openEndProvider(cfg, prov)
	if err != nil {
		ln.Close()
		return err
	}
	defer p.Close()
	fmt.Fprintf(progress, "verbsrt bench: waiting for a client on %s\n", ln.Addr())
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	conn, err := ln.Accept()
	stop()
	ln.Close() // one client, as perftest's server
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("waiting for a client: %w", err)
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	if err := p.serveClient(ctx, progress, cfg, dev, newCtl(conn), adopt); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("client %s: %w", conn.RemoteAddr(), err)
	}
	return nil
}

// openEndProvider returns a pair with no runtime on prov, or on cfg's
// provider when prov is nil, and the device this end uses: -d or the
// first.
func openEndProvider(cfg Config, prov verbs.Provider) (*Pair, string, error) {
	p, devs, err := newPair(cfg, prov, 1)
	if err != nil {
		return nil, "", err
	}
	if cfg.Dev == "" {
		return p, devs[0].Name(), nil
	}
	if err := checkDevice(cfg, "-d", cfg.Dev, devs); err != nil {
		p.Close()
		return nil, "", err
	}
	return p, cfg.Dev, nil
}

// serveClient serves the client on ctl with p's provider and device dev.
func (p *Pair) serveClient(ctx context.Context, progress io.Writer, cfg Config, dev string, ctl *ctl, adopt Adopt) error {
	timeout := cmp.Or(cfg.Timeout, DefaultTimeout)
	ctl.c.SetDeadline(time.Now().Add(timeout))
	var rep Reporter
	m, err := ctl.recv("config")
	switch {
	case err == nil && m.Config == nil:
		err = errors.New("protocol error: a config message without a config")
	case err == nil:
		cfg, rep, err = adopt(m.Config)
	}
	if err == nil {
		err = provider.CheckRocev2Reach(cfg.Provider, ctl.c.RemoteAddr())
	}
	if err != nil {
		ctl.reject(err)
		return err
	}
	fmt.Fprintf(progress, "verbsrt bench: client %s (%s) runs %s: running with its parameters\n",
		ctl.c.RemoteAddr(), m.Config.Device, cfg.Args())
	p.srvRT, p.dst, err = p.openEnd(cfg, dev, slices.Max(cfg.Sizes))
	if err != nil {
		ctl.reject(err)
		return err
	}
	p.cliDev, p.srvDev = m.Config.Device, p.srvRT.Stats().Device
	// The runtime listener, on the address the client reached.
	host, _, _ := net.SplitHostPort(ctl.c.LocalAddr().String())
	rln, err := p.srvRT.Listen(net.JoinHostPort(host, "0"))
	if err != nil {
		ctl.reject(err)
		return err
	}
	defer rln.Close()
	remote, err := exposeTarget(p.dst)
	if err != nil {
		ctl.reject(err)
		return err
	}
	ref := Ref(remote)
	if err := ctl.send(Msg{Type: "accept", Listen: rln.Addr().String(), Device: p.srvDev, Remote: &ref}); err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	err = ctl.untilPeerSpeaks(actx, func(ctx context.Context) error { return p.accept(ctx, rln, cfg.QPs) })
	cancel()
	if err != nil {
		ctl.reject(err)
		return err
	}
	p.serveRecv(cfg.PingPong)
	if err := ctl.send(Msg{Type: "ready"}); err != nil {
		return err
	}
	ctl.c.SetDeadline(time.Time{}) // the run takes as long as the client says
	var sent, sentBytes uint64     // what the client's results count
	rep.Header(p.cliDev, p.srvDev)
	for {
		if m, err = ctl.recv("result", "done"); err != nil {
			return err
		}
		if m.Type == "done" {
			break
		}
		if m.Result == nil {
			return errors.New("protocol error: a result message without a result")
		}
		rep.Result(*m.Result)
		sent += m.Result.Iterations
		sentBytes += m.Result.Iterations * uint64(m.Result.Bytes)
	}
	if cfg.Test == "send" && m.Error == "" {
		// The messages themselves, counted where they arrived.
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err := p.received(rctx, sent, sentBytes)
		cancel()
		if err != nil {
			ctl.reject(err)
			return err
		}
		fmt.Fprintf(progress, "verbsrt bench: the server received %d messages, %d bytes: every SEND the client completed\n", sent, sentBytes)
	}
	ctl.c.SetDeadline(time.Now().Add(timeout))
	if err := ctl.send(Msg{Type: "done"}); err != nil {
		return err
	}
	rep.End()
	if m.Error != "" {
		return fmt.Errorf("the client's run failed: %s", m.Error)
	}
	return nil
}

// Client is the client: it connects to the server at addr (host:port),
// sends cfg, connects cfg.QPs QPs to the server's runtime and runs the
// test, reporting each result to rep and to the server. prov is the
// provider when the server is in this process (tests), else nil.
func Client(ctx context.Context, progress io.Writer, cfg Config, addr string, prov verbs.Provider, rep Reporter) error {
	if err := CheckNetProvider(cfg.Provider.Name, prov); err != nil {
		return err
	}
	maxSize := slices.Max(cfg.Sizes)
	p, dev, err := openEndProvider(cfg, prov)
	if err != nil {
		return err
	}
	defer p.Close()
	if p.cliRT, p.src, err = p.openEnd(cfg, dev, maxSize); err != nil {
		return err
	}
	p.cliDev = p.cliRT.Stats().Device

	timeout := cmp.Or(cfg.Timeout, DefaultTimeout)
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(sctx, "tcp", addr)
	if err != nil {
		return dialError(addr, timeout, err)
	}
	defer conn.Close()
	ctl := newCtl(conn)
	deadline, _ := sctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(sctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	if err := p.connectServer(sctx, ctl, cfg); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("server %s: %w", addr, err)
	}
	if !stop() {
		return fmt.Errorf("server %s: %w", addr, cmp.Or(ctx.Err(), sctx.Err()))
	}
	conn.SetDeadline(time.Time{}) // the run is bounded by -n or -D

	runErr := p.runSizes(ctx, cfg, rep, progress, func(r benchkit.Result) error {
		return ctl.send(Msg{Type: "result", Result: &r})
	})
	done := Msg{Type: "done"}
	if runErr != nil {
		done.Error = runErr.Error()
	}
	conn.SetDeadline(time.Now().Add(timeout))
	err = ctl.send(done)
	if err == nil {
		_, err = ctl.recv("done")
	}
	switch {
	case runErr != nil:
		return runErr
	case err != nil:
		return fmt.Errorf("server %s at the end of the run: %w", addr, err)
	}
	return nil
}

// connectServer sends cfg, connects the QPs where the server says and
// waits until the server is ready.
func (p *Pair) connectServer(ctx context.Context, ctl *ctl, cfg Config) error {
	if err := provider.CheckRocev2Reach(cfg.Provider, ctl.c.RemoteAddr()); err != nil {
		return err
	}
	wire := cfg.Wire(p.cliDev)
	if err := ctl.send(Msg{Type: "config", Config: &wire}); err != nil {
		return err
	}
	m, err := ctl.recv("accept")
	if err != nil {
		return err
	}
	_, port, err := net.SplitHostPort(m.Listen)
	if err != nil || m.Remote == nil {
		return fmt.Errorf("protocol error: accept without a listener address or a remote buffer: %+v", m)
	}
	host, _, _ := net.SplitHostPort(ctl.c.RemoteAddr().String())
	p.remote, p.srvDev = vrt.RemoteRef(*m.Remote), m.Device
	if err := p.dial(ctx, net.JoinHostPort(host, port), cfg.QPs); err != nil {
		return err
	}
	_, err = ctl.recv("ready")
	return err
}

// dialError explains why the control connection failed.
func dialError(addr string, timeout time.Duration, err error) error {
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns):
		return fmt.Errorf("connecting to the bench server at %s: %w (the argument after the test is the server's host)", addr, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("connecting to the bench server at %s: no answer within %v", addr, timeout)
	}
	return fmt.Errorf("connecting to the bench server at %s: %w (is verbsrt bench -server running there, on this port?)", addr, err)
}
