package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/verbs"
)

func TestParseBench(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
		want func(benchConfig) bool
	}{
		{nil, true, func(c benchConfig) bool { return c.test == "write" && c.size == 65536 && !c.lat && c.txDepth == 128 }},
		{[]string{"read", "-lat"}, true, func(c benchConfig) bool { return c.test == "read" && c.size == 2 && c.txDepth == 1 }},
		{[]string{"-s", "64", "send", "-q", "2", "-callers", "8"}, true, func(c benchConfig) bool {
			return c.test == "send" && c.size == 64 && c.qps == 2 && c.callers == 8
		}},
		{[]string{"atomic"}, true, func(c benchConfig) bool { return c.size == 8 }},
		{[]string{"-D", "3"}, true, func(c benchConfig) bool { return c.duration == 3*time.Second }},
		{[]string{"-D", "250ms"}, true, func(c benchConfig) bool { return c.duration == 250*time.Millisecond }},
		{[]string{"atomic", "-s", "64"}, false, nil},
		{[]string{"send", "-s", "2097152"}, false, nil},
		// The server's address comes after the test, never in its place.
		{[]string{"write", "fly"}, true, func(c benchConfig) bool { return c.host == "fly" && !c.server && c.provider == "ibv" }},
		{[]string{"fly"}, false, nil},
		{[]string{"-s", "64", "10.0.0.2"}, false, nil},
		{[]string{"-s", "64", "write", "10.0.0.2"}, true, func(c benchConfig) bool {
			return c.host == "10.0.0.2" && c.port == 18515 && c.size == 64 && c.provider == "ibv"
		}},
		{[]string{"write", "read"}, false, nil},
		{[]string{"write", "h", "h2"}, false, nil},
		// -s 0 or less is refused, not taken for the default.
		{[]string{"-s", "0"}, false, nil},
		{[]string{"send", "-s", "-1"}, false, nil},
		{[]string{"atomic", "-s", "0"}, false, nil},
		// perftest's -c is the connection type: RC, the one the runtime has.
		{[]string{"-c", "RC"}, true, func(c benchConfig) bool { return c.connection == "RC" }},
		{[]string{"--connection", "rc"}, true, func(c benchConfig) bool { return c.callers == 1 }},
		{[]string{"-c", "UD"}, false, nil},
		{[]string{"-c", "4"}, false, nil},
		{[]string{"-callers", "4"}, true, func(c benchConfig) bool { return c.callers == 4 }},
		{[]string{"-i", "2"}, false, nil},
		{[]string{"-x", "3", "-F", "--report_gbits"}, true, func(c benchConfig) bool { return c.gidIndex == 3 && c.set["x"] && c.gbits }},
		{[]string{"-spin", "-1us"}, false, nil},
		{[]string{"-spin", "0"}, true, func(c benchConfig) bool { return c.spin == 0 }},
		{nil, true, func(c benchConfig) bool { return c.spin == benchSpin && c.connection == "RC" && c.gidIndex == -1 }},
		{[]string{"--duration", "2"}, true, func(c benchConfig) bool { return c.duration == 2*time.Second }},
		{[]string{"read", "10.0.0.2:9000", "-lat"}, true, func(c benchConfig) bool {
			return c.host == "10.0.0.2" && c.port == 9000 && c.test == "read" && c.lat
		}},
		{[]string{"-p", "9000", "read", "[fe80::1]"}, true, func(c benchConfig) bool { return c.host == "fe80::1" && c.port == 9000 }},
		{[]string{"-provider", "soft", "send", "h"}, true, func(c benchConfig) bool { return c.provider == "soft" && c.host == "h" }},
		{[]string{"-server"}, true, func(c benchConfig) bool { return c.server && c.host == "" && c.port == 18515 && c.provider == "ibv" }},
		{[]string{"send", "-p", "19000"}, true, func(c benchConfig) bool { return c.server && c.port == 19000 && c.set["test"] && c.set["p"] }},
		{[]string{"-s", "64"}, true, func(c benchConfig) bool { return !c.server && c.host == "" && c.provider == "soft" }},
		{[]string{"write", "a.example", "b.example"}, false, nil},
		{[]string{"write", "-server", "h"}, false, nil},
		{[]string{"--peer-d", "soft1", "write", "h"}, false, nil},
		{[]string{"write", "-p", "70000", "h"}, false, nil},
		{[]string{"-p", "0", "-server"}, true, func(c benchConfig) bool { return c.server && c.port == 0 }},
		{[]string{"write", "-p", "0", "h"}, false, nil},
		{[]string{"-p", "-1", "-server"}, false, nil},
		{[]string{"-provider", "rocev2"}, true, func(c benchConfig) bool { return c.provider == "rocev2" && c.rocev2Addr == "::1" && c.rocev2Port == 0 }},
		{[]string{"-provider", "rocev2", "-rocev2-addr", "[fd00::7]", "-rocev2-port", "4791", "-server"}, true, func(c benchConfig) bool {
			return c.provider == "rocev2" && c.server && c.rocev2Addr == "[fd00::7]" && c.rocev2Port == 4791
		}},
		{[]string{"-provider", "rocev2", "-rocev2-addr", "127.0.0.1"}, false, nil},
		{[]string{"-provider", "rocev2", "-rocev2-addr", "::"}, false, nil},
		{[]string{"-provider", "rocev2", "-rocev2-port", "65536"}, false, nil},
		{[]string{"-rocev2-port", "4791"}, false, nil}, // soft binds nothing
		{[]string{"-p", "x"}, false, nil},
		{[]string{"write", "h:99999"}, false, nil},
		{[]string{"write", "h:9000", "-p", "9001"}, false, nil},
		{[]string{"--provider", "rdma"}, false, nil},
		{[]string{"-q", "0"}, false, nil},
		{[]string{"send", "-r", "512"}, true, func(c benchConfig) bool { return c.rxDepth == 512 }},
		{[]string{"send", "-rx-depth", "-1"}, false, nil},
		{[]string{"send", "-lat", "-pingpong"}, true, func(c benchConfig) bool { return c.pingpong && c.lat && c.test == "send" }},
		{[]string{"send", "-pingpong"}, false, nil},          // a ping-pong is a latency test
		{[]string{"write", "-lat", "-pingpong"}, false, nil}, // of SEND and Recv only
		// -l: the runtime's Post batches, or -direct's chains.
		{[]string{"write", "-l", "16"}, true, func(c benchConfig) bool { return c.postList == 16 && !c.direct }},
		{[]string{"write", "-l", "16", "-direct"}, true, func(c benchConfig) bool { return c.postList == 16 && c.direct }},
		{[]string{"write", "-l", "129"}, false, nil}, // more than -t in flight
		{[]string{"write", "-l", "8", "-t", "4"}, false, nil},
		{[]string{"write", "-l", "-1"}, false, nil},
		{[]string{"write", "-lat", "-l", "4"}, false, nil},
		{[]string{"write", "-Q", "4"}, false, nil}, // -Q is -direct's
	} {
		cfg, err := parseBench(c.args, io.Discard, io.Discard)
		if (err == nil) != c.ok || (c.ok && !c.want(cfg)) {
			t.Errorf("%q: %+v %v", c.args, cfg, err)
		}
	}
}

// TestBenchSoft runs every test briefly on the soft provider, one call an
// operation and in Post batches (-l) whose last one is short, and checks
// perftest's columns.
func TestBenchSoft(t *testing.T) {
	bwLine := regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$`)
	for _, test := range []string{"write", "read", "send", "atomic", "write -l 7", "send -l 7", "atomic -l 7"} {
		t.Run(test, func(t *testing.T) {
			var out, progress bytes.Buffer
			args := append(strings.Fields(test), "-n", "2000", "-callers", "2", "-q", "2", "-t", "16")
			if !strings.HasPrefix(test, "atomic") {
				args = append(args, "-s", "64")
			}
			cfg, err := parseBench(args, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if err := bench(context.Background(), &out, &progress, cfg); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n") {
				t.Fatalf("no perftest header:\n%s", out.String())
			}
			m := bwLine.FindStringSubmatch(out.String())
			if m == nil || m[2] != "2000" {
				t.Fatalf("no result line for 2000 iterations:\n%s", out.String())
			}
		})
	}
}

func TestBenchLatencyJSON(t *testing.T) {
	r := benchJSON(t, "write", "-lat", "-n", "500")
	if r.Mode != "lat" || r.Iterations != 500 || r.Bytes != 2 || r.TMin <= 0 || r.TMin > r.TTypical ||
		r.TTypical > r.T99 || r.T99 > r.T999 || r.T999 > r.TMax || r.TAvg <= 0 {
		t.Errorf("latency result: %+v", r)
	}
}

// benchJSON runs one size in one process with --json and returns its
// result.
func benchJSON(t *testing.T, args ...string) benchResult {
	t.Helper()
	var out bytes.Buffer
	cfg, err := parseBench(append(args, "--json", "-progress", "0"), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := bench(context.Background(), &out, nil, cfg); err != nil {
		t.Fatal(err)
	}
	var r benchResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return r
}

// TestBenchPingPong: -pingpong's samples are half of a SEND/Recv round
// trip: the server answers every message, or the client's Recv would wait
// for ever.
func TestBenchPingPong(t *testing.T) {
	r := benchJSON(t, "send", "-lat", "-pingpong", "-s", "64", "-n", "400")
	if r.Mode != "pingpong" || r.Iterations != 400 || r.Bytes != 64 || r.TMin <= 0 || r.TMin > r.TTypical || r.TTypical > r.TMax {
		t.Errorf("ping-pong result: %+v", r)
	}
}

// TestBenchDuration: -D runs for about that long, with
// progress lines on the progress writer.
func TestBenchDuration(t *testing.T) {
	var out, progress bytes.Buffer
	cfg, err := parseBench([]string{"-D", "1200ms", "-s", "4096", "-progress", "500ms"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := bench(context.Background(), &out, &progress, cfg); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el < time.Second || el > 10*time.Second {
		t.Errorf("-D 1.2s ran %v", el)
	}
	if !strings.Contains(progress.String(), "verbsrt bench: write 4096 B: ") {
		t.Errorf("progress: %q", progress.String())
	}
	if !strings.Contains(out.String(), " 4096 ") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestOpenBenchPairNoSuchDevice: a -d or --peer-d the provider does not
// have is an error naming it and the devices there are, and the pair
// opened so far is closed without a panic.
func TestOpenBenchPairNoSuchDevice(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"write", "-d", "rxe1", "-s", "64", "-n", "10"}, "-d rxe1: no such device on provider soft (it has soft0, soft1)"},
		{[]string{"read", "--peer-d", "rxe1", "-n", "10"}, "-peer-d rxe1: no such device on provider soft (it has soft0, soft1)"},
	} {
		cfg, err := parseBench(c.args, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		p, err := openBenchPair(cfg, cfg.size)
		if p != nil || err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, verbs.ErrNotFound) {
			t.Errorf("%q: %v, %v; want an error with %q", c.args, p, err, c.want)
		}
	}
}

// TestBenchScriptCommandLines: the command lines the repository's
// scripts run (bench/rxe-compare with its variants, bench/rxe-write-bw,
// verbs/ibv/rxevm/cross) parse, with the test and the server's address
// where the scripts put them.
func TestBenchScriptCommandLines(t *testing.T) {
	for _, c := range []struct {
		line       string
		test, host string
		server     bool
	}{
		{"send -lat -pingpong -inline-post=false -wait-poll 0 -provider ibv -d rxe1 -server -p 18600 -progress 0", "send", "", true},
		{"send -lat -pingpong -wait-poll 2ms -provider ibv -d rxe0 -s 64 -n 1000 -p 18600 -progress 0 198.18.0.2", "send", "198.18.0.2", false},
		{"write -lat -r 256 -provider ibv -d rxe1 -server -p 18600 -progress 0", "write", "", true},
		{"write -provider ibv -d rxe0 -s 65536 -n 2000 -p 18600 -progress 0 198.18.0.2", "write", "198.18.0.2", false},
		{"write --provider ibv -d rxe0 --peer-d rxe1 -s 64 -n 2000 -progress 0", "write", "", false},
		{"read -lat -provider ibv -d rxe0 -s 64 -n 50 -p 18600 -progress 0 198.18.1.2", "read", "198.18.1.2", false},
		{"atomic -provider ibv -d rxe0 -server -p 18600 -progress 0", "atomic", "", true},
		{"-n 200", "write", "", false},
	} {
		cfg, err := parseBench(strings.Fields(c.line), io.Discard, io.Discard)
		if err != nil || cfg.test != c.test || cfg.host != c.host || cfg.server != c.server {
			t.Errorf("%s: test %q host %q server %v, %v; want %q %q %v", c.line, cfg.test, cfg.host, cfg.server, err, c.test, c.host, c.server)
		}
	}
}

// TestBenchCPUPerOp: a run reports what its operations cost this
// process's CPU, runtime and Go floor alike, in JSON and in the table.
func TestBenchCPUPerOp(t *testing.T) {
	if benchkit.CPUTime() < 0 {
		t.Skip("no getrusage here")
	}
	if r := benchJSON(t, "write", "-s", "64", "-n", "2000"); r.CPUNsPerOp <= 0 {
		t.Errorf("runtime result without CPU per operation: %+v", r)
	}
	cfg, err := parseBench([]string{"send", "-s", "64", "-n", "2000", "-direct"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := benchDirect(context.Background(), &out, io.Discard, cfg); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ CPU per operation: [1-9]\d* ns \(this process, user\+sys\)$`).MatchString(out.String()) {
		t.Errorf("no CPU line in the Go floor's table:\n%s", out.String())
	}
}
