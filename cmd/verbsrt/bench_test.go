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
		{[]string{"-s", "64", "send", "-q", "2", "-c", "8"}, true, func(c benchConfig) bool {
			return c.test == "send" && c.size == 64 && c.qps == 2 && c.callers == 8
		}},
		{[]string{"atomic"}, true, func(c benchConfig) bool { return c.size == 8 }},
		{[]string{"-D", "3"}, true, func(c benchConfig) bool { return c.duration == 3*time.Second }},
		{[]string{"-D", "250ms"}, true, func(c benchConfig) bool { return c.duration == 250*time.Millisecond }},
		{[]string{"atomic", "-s", "64"}, false, nil},
		{[]string{"send", "-s", "2097152"}, false, nil},
		// An argument that is not a test is the server's address.
		{[]string{"fly"}, true, func(c benchConfig) bool { return c.host == "fly" && !c.server && c.provider == "ibv" }},
		{[]string{"-s", "64", "10.0.0.2"}, true, func(c benchConfig) bool {
			return c.host == "10.0.0.2" && c.port == 18515 && c.size == 64 && c.provider == "ibv"
		}},
		{[]string{"read", "10.0.0.2:9000", "-lat"}, true, func(c benchConfig) bool {
			return c.host == "10.0.0.2" && c.port == 9000 && c.test == "read" && c.lat
		}},
		{[]string{"-p", "9000", "[fe80::1]"}, true, func(c benchConfig) bool { return c.host == "fe80::1" && c.port == 9000 }},
		{[]string{"-provider", "soft", "h"}, true, func(c benchConfig) bool { return c.provider == "soft" && c.host == "h" }},
		{[]string{"-server"}, true, func(c benchConfig) bool { return c.server && c.host == "" && c.port == 18515 && c.provider == "ibv" }},
		{[]string{"send", "-p", "19000"}, true, func(c benchConfig) bool { return c.server && c.port == 19000 && c.set["test"] && c.set["p"] }},
		{[]string{"-s", "64"}, true, func(c benchConfig) bool { return !c.server && c.host == "" && c.provider == "soft" }},
		{[]string{"a.example", "b.example"}, false, nil},
		{[]string{"-server", "h"}, false, nil},
		{[]string{"--peer-d", "soft1", "h"}, false, nil},
		{[]string{"-p", "70000", "h"}, false, nil},
		{[]string{"-p", "0", "-server"}, false, nil},
		{[]string{"-p", "x"}, false, nil},
		{[]string{"h:99999"}, false, nil},
		{[]string{"h:9000", "-p", "9001"}, false, nil},
		{[]string{"--provider", "rdma"}, false, nil},
		{[]string{"-q", "0"}, false, nil},
		{[]string{"send", "-r", "512"}, true, func(c benchConfig) bool { return c.rxDepth == 512 }},
		{[]string{"send", "-rx-depth", "-1"}, false, nil},
		{[]string{"send", "-lat", "-pingpong"}, true, func(c benchConfig) bool { return c.pingpong && c.lat && c.test == "send" }},
		{[]string{"send", "-pingpong"}, false, nil},          // a ping-pong is a latency test
		{[]string{"write", "-lat", "-pingpong"}, false, nil}, // of SEND and Recv only
	} {
		cfg, err := parseBench(c.args, io.Discard, io.Discard)
		if (err == nil) != c.ok || (c.ok && !c.want(cfg)) {
			t.Errorf("%q: %+v %v", c.args, cfg, err)
		}
	}
}

// TestBenchSoft runs every test briefly on the soft provider and checks
// perftest's columns.
func TestBenchSoft(t *testing.T) {
	bwLine := regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$`)
	for _, test := range []string{"write", "read", "send", "atomic"} {
		t.Run(test, func(t *testing.T) {
			var out, progress bytes.Buffer
			cfg, err := parseBench([]string{test, "-s", "64", "-n", "2000", "-c", "2", "-q", "2", "-t", "16"}, io.Discard, io.Discard)
			if err != nil && test != "atomic" {
				t.Fatal(err)
			}
			if test == "atomic" {
				cfg, _ = parseBench([]string{test, "-n", "2000", "-c", "2", "-q", "2", "-t", "16"}, io.Discard, io.Discard)
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

// TestPeakRate: the peak is the best qualifying window; a burst shorter
// than the minimum counts does not make one.
func TestPeakRate(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int, n uint64) point { return point{t0.Add(time.Duration(ms) * time.Millisecond), n} }
	// 1000 ops/s, then a burst of 500 ops in 20 ms, then 1000 ops/s.
	hist := []point{at(0, 0), at(100, 100), at(200, 200), at(220, 700), at(300, 780), at(400, 880), at(500, 980)}
	if got := peakRate(hist, 100*time.Millisecond, 1); got < 5000 || got > 6000 {
		t.Errorf("peak over 100 ms windows of 1+ ops: %.0f/s, want the burst's window, about 5000-6000", got)
	}
	if got := peakRate(hist, 100*time.Millisecond, 900); got < 1900 || got > 2000 {
		t.Errorf("peak over windows of 900+ ops: %.0f/s, want 1960 (980 ops in 500 ms)", got)
	}
	if got := peakRate(hist[:2], time.Second, 1); got != 0 {
		t.Errorf("no window qualifies: %.0f, want 0", got)
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
