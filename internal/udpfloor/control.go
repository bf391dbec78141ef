package udpfloor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Version is the control protocol's version: a TCP connection carrying
// one JSON object per line. The server says "hello" with its UDP address;
// for each test the client sends "test" (the test and its window), the
// server answers "ready" once it is reading, runs its side and sends
// "counted" (what it received and its CPU time over the test), and the
// client sends the whole "result" back; "done" ends the run, "error" says
// why one end gave up.
const Version = 1

// controlTimeout bounds every wait for a control message.
const controlTimeout = 30 * time.Second

type message struct {
	Version  int     `json:"version"`
	Type     string  `json:"type"`
	UDP      string  `json:"udp,omitempty"`
	Test     *Test   `json:"test,omitempty"`
	Window   int     `json:"window,omitempty"`
	Received uint64  `json:"received,omitempty"`
	Bytes    uint64  `json:"bytes,omitempty"`
	CPU      int64   `json:"cpu_ns,omitempty"`
	Result   *Result `json:"result,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// control is one end of the control connection.
type control struct {
	c   net.Conn
	dec *json.Decoder
	enc *json.Encoder
}

func newControl(c net.Conn) *control {
	return &control{c: c, dec: json.NewDecoder(c), enc: json.NewEncoder(c)}
}

func (k *control) send(m message) error {
	m.Version = Version
	return k.enc.Encode(m)
}

// recv reads the next message, which must be of one of the types want.
func (k *control) recv(want ...string) (message, error) {
	k.c.SetReadDeadline(time.Now().Add(controlTimeout))
	var m message
	if err := k.dec.Decode(&m); err != nil {
		return m, fmt.Errorf("control connection: %w", err)
	}
	switch {
	case m.Version != Version:
		return m, fmt.Errorf("control protocol version %d, want %d", m.Version, Version)
	case m.Type == "error":
		return m, fmt.Errorf("the peer: %s", m.Error)
	}
	for _, w := range want {
		if m.Type == w {
			return m, nil
		}
	}
	return m, fmt.Errorf("control message %q, want one of %q", m.Type, want)
}

// fail tells the peer why this end gives up, and returns err.
func (k *control) fail(err error) error {
	k.send(message{Type: "error", Error: err.Error()})
	return err
}

// closeOnDone closes c and s when ctx ends, so that every wait on them
// returns; the returned function stops that.
func closeOnDone(ctx context.Context, c net.Conn, s *sock) func() bool {
	return context.AfterFunc(ctx, func() {
		c.Close()
		s.Close()
	})
}

// Serve is the server of one client on the control connection c: it binds
// a UDP socket on addr (the zero Addr: ::1), announces it, runs the
// server's side of each test the client asks for and calls report with
// each result, until the client says it is done. It closes neither c nor
// the listener c came from.
func Serve(ctx context.Context, c net.Conn, addr netip.Addr, report func(Result)) error {
	s, err := listenUDP(addr, 1)
	if err != nil {
		return err
	}
	defer s.Close()
	defer closeOnDone(ctx, c, s)()
	k := newControl(c)
	if err := k.send(message{Type: "hello", UDP: s.addr().String()}); err != nil {
		return err
	}
	for {
		m, err := k.recv("test", "done")
		if err != nil || m.Type == "done" {
			return err
		}
		if m.Test == nil {
			return k.fail(errors.New("a test message without its test"))
		}
		t := *m.Test
		if err := t.check(); err != nil {
			return k.fail(fmt.Errorf("test %v: %w", t, err))
		}
		s.grow(t.Batch)
		if err := k.send(message{Type: "ready"}); err != nil {
			return err
		}
		var r Result
		cpu0 := cpuTime()
		if t.Kind == RoundTrip {
			err = s.echo(t, &r)
		} else {
			err = s.streamRecv(t, max(1, m.Window), &r)
		}
		cpu := cpuTime() - cpu0
		if cpu0 < 0 {
			cpu = -1
		}
		if err != nil {
			return k.fail(fmt.Errorf("test %v: %w", t, err))
		}
		if err := k.send(message{Type: "counted", Received: r.Received, Bytes: r.Bytes, CPU: int64(cpu)}); err != nil {
			return err
		}
		m, err = k.recv("result")
		if err != nil {
			return err
		}
		if m.Result != nil && report != nil {
			report(*m.Result)
		}
	}
}

// Run is the client on the control connection c to a Serve: it runs
// cfg's tests one after the other and calls report with each result.
func Run(ctx context.Context, c net.Conn, cfg Config, report func(Result)) error {
	for _, t := range cfg.Tests {
		if err := t.check(); err != nil {
			return fmt.Errorf("test %v: %w", t, err)
		}
	}
	k := newControl(c)
	m, err := k.recv("hello")
	if err != nil {
		return err
	}
	to, err := netip.ParseAddrPort(m.UDP)
	if err != nil {
		return k.fail(fmt.Errorf("the server's UDP address %q: %w", m.UDP, err))
	}
	s, err := listenUDP(cfg.Addr, 2)
	if err != nil {
		return k.fail(err)
	}
	defer s.Close()
	defer closeOnDone(ctx, c, s)()
	for _, t := range cfg.Tests {
		s.grow(t.Batch)
		r := Result{Test: t}
		if t.Kind == Stream {
			r.Window = cfg.window()
		}
		if err := k.send(message{Type: "test", Test: &t, Window: r.Window}); err != nil {
			return err
		}
		if _, err := k.recv("ready"); err != nil {
			return err
		}
		cpu0, t0 := cpuTime(), time.Now()
		if t.Kind == RoundTrip {
			err = s.roundTrips(to, t, cfg.stall(), &r)
		} else {
			err = s.streamSend(to, t, r.Window, cfg.stall(), &r)
		}
		r.Elapsed, r.ClientCPU = time.Since(t0), cpuTime()-cpu0
		if cpu0 < 0 {
			r.ClientCPU = -1
		}
		if err != nil {
			return k.fail(fmt.Errorf("test %v: %w", t, err))
		}
		m, err := k.recv("counted")
		if err != nil {
			return err
		}
		r.Received, r.Bytes, r.ServerCPU = m.Received, m.Bytes, time.Duration(m.CPU)
		if t.Kind == Stream {
			r.Lost = r.Datagrams - min(r.Datagrams, r.Received)
		}
		r.finish()
		if err := k.send(message{Type: "result", Result: &r}); err != nil {
			return err
		}
		if report != nil {
			report(r)
		}
	}
	return k.send(message{Type: "done"})
}

// RunPair runs cfg with both ends in this process, over a control
// connection on the loopback: a self-test, not the two processes a
// measurement wants.
func RunPair(ctx context.Context, cfg Config, report func(Result)) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(loopback(cfg.Addr).String(), "0"))
	if err != nil {
		return err
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		srvErr <- Serve(ctx, c, cfg.Addr, nil)
	}()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		return errors.Join(err, <-srvErr)
	}
	defer c.Close()
	err = Run(ctx, c, cfg, report)
	if err != nil {
		c.Close() // a server waiting for the next test gives up
	}
	if e := <-srvErr; e != nil {
		err = errors.Join(err, fmt.Errorf("server: %w", e))
	}
	return err
}

// loopback returns a, or ::1 for the zero Addr.
func loopback(a netip.Addr) netip.Addr {
	if a.IsValid() {
		return a
	}
	return netip.IPv6Loopback()
}
