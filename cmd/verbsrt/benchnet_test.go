package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs/soft"
)

// netRun is one client/server run in this process.
type netRun struct {
	srvOut, cliOut bytes.Buffer
	srvErr, cliErr error
}

// runBenchNet runs a server with srvArgs and a client with cliArgs, two
// runtimes of one soft provider in this process, over loopback TCP. Each
// side gets "-provider soft" and its device; the server "-server".
func runBenchNet(t *testing.T, srvArgs, cliArgs []string) *netRun {
	t.Helper()
	srvCfg, err := parseBench(append([]string{"-server", "-provider", "soft", "-d", "soft1"}, srvArgs...), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cliCfg, err := parseBench(append([]string{"-provider", "soft", "-d", "soft0", "-progress", "0"}, cliArgs...), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srvCfg.timeout, cliCfg.timeout = 10*time.Second, 10*time.Second
	prov := soft.New(soft.Config{Devices: 2})
	defer prov.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &netRun{}
	served := make(chan error, 1)
	go func() { served <- benchServe(ctx, &r.srvOut, io.Discard, srvCfg, ln, prov) }()
	r.cliErr = benchClient(ctx, &r.cliOut, nil, cliCfg, ln.Addr().String(), prov)
	select {
	case r.srvErr = <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not return")
	}
	return r
}

// TestBenchNetSoft runs every test, bandwidth and latency, with the
// server and the client as two ends of the control protocol, and checks
// the client's report and that the server prints the same.
func TestBenchNetSoft(t *testing.T) {
	bwLine := regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) *$`)
	latLine := regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) *$`)
	for _, test := range []string{"write", "read", "send", "atomic"} {
		for _, lat := range []bool{false, true} {
			name, size := test, "64"
			args := []string{test, "-n", "1000", "-q", "2", "-callers", "2", "-t", "16"}
			line := bwLine
			if lat {
				name, args, line = test+"-lat", []string{test, "-lat", "-n", "300"}, latLine
			}
			if test == "atomic" {
				size = "8"
			} else {
				args = append(args, "-s", size)
			}
			t.Run(name, func(t *testing.T) {
				// The server names its test, as ib_write_bw does on both
				// ends; everything else it takes from the client.
				r := runBenchNet(t, []string{test}, args)
				if r.cliErr != nil || r.srvErr != nil {
					t.Fatalf("client: %v\nserver: %v\n%s", r.cliErr, r.srvErr, r.srvOut.String())
				}
				m := line.FindStringSubmatch(r.cliOut.String())
				want := "1000"
				if lat {
					want = "300"
				}
				if m == nil || m[1] != size || m[2] != want {
					t.Fatalf("no result line for %s bytes, %s iterations:\n%s", size, want, r.cliOut.String())
				}
				if !strings.Contains(r.cliOut.String(), "Device         : soft0 -> soft1\n") {
					t.Errorf("header:\n%s", r.cliOut.String())
				}
				if r.srvOut.String() != r.cliOut.String() {
					t.Errorf("the server printed\n%s\nthe client\n%s", r.srvOut.String(), r.cliOut.String())
				}
			})
		}
	}
}

// TestBenchNetPingPong: -pingpong across the control connection: the
// server adopts it and answers every message, or the client's Recv would
// wait for ever.
func TestBenchNetPingPong(t *testing.T) {
	r := runBenchNet(t, []string{"send"}, []string{"send", "-lat", "-pingpong", "-s", "64", "-n", "200", "--json"})
	if r.cliErr != nil || r.srvErr != nil {
		t.Fatalf("client: %v\nserver: %v\n%s", r.cliErr, r.srvErr, r.srvOut.String())
	}
	var res benchResult
	if err := json.Unmarshal(r.cliOut.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, r.cliOut.String())
	}
	if res.Mode != "pingpong" || res.Iterations != 200 || res.TMin <= 0 {
		t.Errorf("client's result: %+v", res)
	}
}

// TestBenchNetAdopts: a server given no test parameters runs the client's,
// -a, -D and --json included.
func TestBenchNetAdopts(t *testing.T) {
	r := runBenchNet(t, []string{"--json"}, []string{"send", "-a", "-n", "20", "--json"})
	if r.cliErr != nil || r.srvErr != nil {
		t.Fatalf("client: %v\nserver: %v", r.cliErr, r.srvErr)
	}
	var sizes []int
	dec := json.NewDecoder(&r.srvOut)
	for {
		var res benchResult
		if err := dec.Decode(&res); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if res.Test != "send" || res.Iterations != 20 || res.Device != "soft0" || res.PeerDevice != "soft1" {
			t.Errorf("server's line: %+v", res)
		}
		sizes = append(sizes, res.Bytes)
	}
	if len(sizes) != 20 || sizes[0] != 2 || sizes[19] != 1<<20 {
		t.Errorf("server printed sizes %v, want 2 to 1 MiB", sizes)
	}

	r = runBenchNet(t, nil, []string{"-D", "300ms", "-s", "4096"})
	if r.cliErr != nil || r.srvErr != nil {
		t.Fatalf("-D: client: %v\nserver: %v", r.cliErr, r.srvErr)
	}
	if !strings.Contains(r.srvOut.String(), "RDMA_Write BW Test") || !strings.Contains(r.srvOut.String(), "\n 4096 ") {
		t.Errorf("-D: server printed\n%s", r.srvOut.String())
	}
}

// TestBenchNetMismatch: a flag given to the server that differs from the
// client's refuses the run at both ends, naming it.
func TestBenchNetMismatch(t *testing.T) {
	start := time.Now()
	r := runBenchNet(t, []string{"read", "-s", "64", "-q", "2"}, []string{"write", "-s", "128", "-q", "2"})
	for _, err := range []error{r.cliErr, r.srvErr} {
		if err == nil || !strings.Contains(err.Error(), "test: client write, server read") ||
			!strings.Contains(err.Error(), "-s: client 128, server 64") || strings.Contains(err.Error(), "-q") {
			t.Errorf("want a refusal naming test and -s: %v", err)
		}
	}
	if !strings.Contains(r.cliErr.Error(), "refused") {
		t.Errorf("client: %v", r.cliErr)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
}

// TestBenchNetSoftProcesses: without a provider shared in this process,
// the soft provider is refused at both ends, saying why.
func TestBenchNetSoftProcesses(t *testing.T) {
	cfg, _ := parseBench([]string{"-provider", "soft", "-server"}, io.Discard, io.Discard)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := benchServe(context.Background(), io.Discard, nil, cfg, ln, nil); err == nil || !strings.Contains(err.Error(), "same process") {
		t.Errorf("server: %v", err)
	}
	cfg, _ = parseBench([]string{"write", "-provider", "soft", "127.0.0.1"}, io.Discard, io.Discard)
	if err := benchClient(context.Background(), io.Discard, nil, cfg, ln.Addr().String(), nil); err == nil || !strings.Contains(err.Error(), "same process") {
		t.Errorf("client: %v", err)
	}
}

// clientCfg is a soft client's configuration for the tests of bad peers.
func clientCfg(t *testing.T, timeout time.Duration) benchConfig {
	cfg, err := parseBench([]string{"write", "-provider", "soft", "-progress", "0", "127.0.0.1"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.timeout = timeout
	return cfg
}

// TestBenchNetUnreachable: a client errs, and soon, when nothing listens
// and when the listener never answers.
func TestBenchNetUnreachable(t *testing.T) {
	prov := soft.New(soft.Config{Devices: 1})
	defer prov.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	start := time.Now()
	err = benchClient(context.Background(), io.Discard, nil, clientCfg(t, 5*time.Second), closed, prov)
	if err == nil || !strings.Contains(err.Error(), "connecting to the bench server at "+closed) {
		t.Errorf("nothing listening: %v", err)
	}

	// A listener that takes the connection and says nothing.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	err = benchClient(context.Background(), io.Discard, nil, clientCfg(t, 300*time.Millisecond), silent.Addr().String(), prov)
	if err == nil || !strings.Contains(err.Error(), "no accept message in time") {
		t.Errorf("silent server: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %v", el)
	}
}

// serveOnce starts a soft server with timeout and returns its address
// and its result.
func serveOnce(t *testing.T, ctx context.Context, timeout time.Duration) (string, <-chan error) {
	t.Helper()
	prov := soft.New(soft.Config{Devices: 1})
	t.Cleanup(func() { prov.Close() })
	cfg, err := parseBench([]string{"-server", "-provider", "soft"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.timeout = timeout
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- benchServe(ctx, io.Discard, nil, cfg, ln, prov) }()
	return ln.Addr().String(), served
}

func wait(t *testing.T, served <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-served:
		return err
	case <-time.After(within):
		t.Fatalf("the server did not return within %v", within)
		return nil
	}
}

// TestBenchNetBadClients: the server errs, and soon, on a peer that
// speaks something else, another version, hangs up in the middle or is
// silent, and returns when its context ends.
func TestBenchNetBadClients(t *testing.T) {
	for _, c := range []struct {
		name, send, want string
	}{
		{"http", "GET / HTTP/1.0\r\n\r\n", "not a verbsrt bench peer"},
		{"version", `{"version":2,"type":"config"}` + "\n", "version 2"},
		{"type", `{"version":1,"type":"done"}` + "\n", `got a "done" message`},
		{"silent", "", "no config message in time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, served := serveOnce(t, context.Background(), 300*time.Millisecond)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, c.send)
			if err := wait(t, served, 5*time.Second); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("want %q: %v", c.want, err)
			}
			if c.send != "" { // the server says why
				line, _ := bufio.NewReader(conn).ReadString('\n')
				if !strings.Contains(line, `"type":"reject"`) {
					t.Errorf("the server answered %q", line)
				}
			}
		})
	}

	t.Run("hangs-up", func(t *testing.T) {
		addr, served := serveOnce(t, context.Background(), 20*time.Second)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		wire := clientCfg(t, 0).wire("soft0")
		b, _ := json.Marshal(benchMsg{Version: benchProtoVersion, Type: "config", Config: &wire})
		conn.Write(append(b, '\n'))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		if !strings.Contains(line, `"type":"accept"`) {
			t.Fatalf("the server answered %q", line)
		}
		conn.Close() // instead of dialing its runtime
		if err := wait(t, served, 5*time.Second); err == nil || !strings.Contains(err.Error(), "hung up") {
			t.Errorf("want the peer hung up: %v", err)
		}
	})

	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		_, served := serveOnce(t, ctx, time.Minute)
		time.Sleep(50 * time.Millisecond)
		cancel()
		if err := wait(t, served, 5*time.Second); !errors.Is(err, context.Canceled) {
			t.Errorf("want context.Canceled: %v", err)
		}
	})
}

// TestBenchNetBadDevice: a server whose device does not exist says so
// before it waits for a client, and a client before it connects.
func TestBenchNetBadDevice(t *testing.T) {
	prov := soft.New(soft.Config{Devices: 1})
	defer prov.Close()
	cfg, err := parseBench([]string{"-server", "-provider", "soft", "-d", "soft7"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := benchServe(context.Background(), io.Discard, nil, cfg, ln, prov); err == nil || !strings.Contains(err.Error(), "-d soft7: no such device") {
		t.Errorf("server: %v", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the server still listens")
	}
	cfg = clientCfg(t, time.Second)
	cfg.dev = "soft7"
	if err := benchClient(context.Background(), io.Discard, nil, cfg, ln.Addr().String(), prov); err == nil || !strings.Contains(err.Error(), "-d soft7: no such device") {
		t.Errorf("client: %v", err)
	}
}
