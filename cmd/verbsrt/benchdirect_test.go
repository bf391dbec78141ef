package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// directResult is the result line of the table -direct prints, and
// directLatency that of -direct -lat: size, iterations, then t_min,
// t_max, t_typical, t_avg, t_stdev, 99% and 99.9%.
var (
	directResult  = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +([0-9.]+) +([0-9.]+)\s+([0-9.]+)$`)
	directLatency = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) *$`)
)

// TestBenchDirectSoft runs each test of -direct with both ends in this
// process on the soft provider, over perftest's protocol on the
// loopback: the client reports every operation, and each end's check of
// the data holds (the bytes a SEND, WRITE or READ moved are the sender's
// pattern; the fetch-and-adds fetched consecutive values and left
// counters that add up to their number).
func TestBenchDirectSoft(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		checks []string
	}{
		{[]string{"write", "-s", "100", "-n", "3000"}, []string{"the bytes written are the client's pattern"}},
		{[]string{"read", "-s", "4096", "-n", "500", "-l", "8"}, []string{"the bytes READ are the server's pattern"}},
		{[]string{"send", "-s", "64", "-n", "3000", "-r", "64"}, []string{"3000 messages of 64 bytes, each the peer's pattern"}},
		{[]string{"atomic", "-n", "3000", "-Q", "7"}, []string{"3000 fetch-and-adds fetched consecutive values from each of 64 lines",
			"the counters add up to 3000, one per fetch-and-add"}},
		// A window smaller than -Q: every WR of it is signalled.
		{[]string{"write", "-s", "8", "-n", "50", "-t", "4"}, nil},
		// The latency floor: one WR at a time.
		{[]string{"write", "-lat", "-s", "100", "-n", "500"}, []string{"the bytes written are the client's pattern"}},
		{[]string{"read", "-lat", "-s", "64", "-n", "500"}, []string{"the bytes READ are the server's pattern"}},
		{[]string{"atomic", "-lat", "-n", "500"}, []string{"500 fetch-and-adds fetched consecutive values", "the counters add up to 500"}},
		{[]string{"send", "-lat", "-s", "64", "-n", "500"}, []string{"500 messages of 64 bytes, each the peer's pattern"}},
		// Both ends check the other's messages.
		{[]string{"send", "-lat", "-pingpong", "-s", "200", "-n", "500", "-r", "16"}, []string{"500 messages of 200 bytes, each the peer's pattern"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cfg, err := parseBench(append(tc.args, "-direct"), io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a way out, not a measurement
			defer cancel()
			var out, progress bytes.Buffer
			if err := benchDirect(ctx, &out, &progress, cfg); err != nil {
				t.Fatalf("%v\n%s%s", err, out.String(), progress.String())
			}
			line := directResult
			if cfg.lat {
				line = directLatency
			}
			m := line.FindStringSubmatch(out.String())
			if m == nil || m[1] != fmt.Sprint(cfg.size) || m[2] != fmt.Sprint(cfg.iters) {
				t.Errorf("no result line of %d bytes x %d in:\n%s", cfg.size, cfg.iters, out.String())
			}
			for _, c := range tc.checks {
				if n := strings.Count(progress.String(), " check: "+c); n == 0 || (cfg.pingpong && n != 2) {
					t.Errorf("%q is in the ends' output %d times:\n%s", c, n, progress.String())
				}
			}
		})
	}
}

// TestBenchDirectFlags: -direct is one QP's test by iterations; its own
// flags need it (-l is the runtime's too, TestParseBench), and its
// latency test posts one signalled WR at a time.
func TestBenchDirectFlags(t *testing.T) {
	for _, args := range [][]string{{"-direct", "-lat", "-Q", "4"}, {"-direct", "-lat", "-l", "2"}, {"-direct", "-pingpong"}, {"-direct", "-a"}, {"-direct", "-D", "2"}, {"-direct", "-q", "2"},
		{"-direct", "-callers", "2"}, {"-direct", "-Q", "0"}, {"-direct", "-l", "-1"}, {"-Q", "10"}, {"-peer-pattern"}} {
		if _, err := parseBench(args, io.Discard, io.Discard); err == nil {
			t.Errorf("parseBench(%q) accepted", args)
		}
	}
	cfg, err := parseBench([]string{"send", "-direct", "--cq-mod", "16", "--post_list", "4", "-server"}, io.Discard, io.Discard)
	if err != nil || !cfg.direct || cfg.cqMod != 16 || cfg.postList != 4 || !cfg.server || cfg.provider != "ibv" {
		t.Errorf("parseBench: %+v, %v", cfg, err)
	}
}

// TestBenchDirectTwoProcessesRoCEv2: each end of -direct in a process of
// its own on the rocev2 provider, which is how a perftest program on
// another host meets it: the server prints the client's result (write,
// read, atomic) or its own (send), and the data checks hold; of the
// latency floor, the client prints the samples and the server what it
// served.
func TestBenchDirectTwoProcessesRoCEv2(t *testing.T) {
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback (::1), which the rocev2 provider binds: %v", err)
	} else {
		c.Close()
	}
	bin := buildVerbsrt(t)
	for _, tc := range []struct {
		test, size string
		check      string // on the server's side
	}{
		{"write", "4096", "the bytes written are the client's pattern"},
		{"read", "64", ""},
		{"send", "3000", "400 messages of 3000 bytes, each the peer's pattern"},
		{"atomic", "8", "the counters add up to 400, one per fetch-and-add"},
	} {
		t.Run(tc.test, func(t *testing.T) {
			args := []string{"bench", tc.test, "-direct", "-provider", "rocev2", "-n", "400", "-s", tc.size, "-progress", "0"}
			srvOut, _, cliOut := twoProcesses(t, bin, append(args, "-server", "-p", "0"), args, `waiting for a client on \[::\]:(\d+)`)
			for name, out := range map[string]string{"server": srvOut, "client": cliOut} {
				if m := directResult.FindStringSubmatch(out); m == nil || m[1] != tc.size || m[2] != "400" {
					t.Errorf("the %s printed no result of 400 x %s bytes:\n%s", name, tc.size, out)
				}
			}
			if tc.check != "" && !strings.Contains(srvOut, tc.check) {
				t.Errorf("the server's output lacks %q:\n%s", tc.check, srvOut)
			}
		})
	}
	// The latency floor: the client prints the samples, the server what
	// it served.
	args := []string{"bench", "send", "-direct", "-lat", "-pingpong", "-provider", "rocev2", "-n", "300", "-s", "64", "-progress", "0"}
	srvOut, _, cliOut := twoProcesses(t, bin, append(args, "-server", "-p", "0"), args, `waiting for a client on \[::\]:(\d+)`)
	if m := directLatency.FindStringSubmatch(cliOut); m == nil || m[1] != "64" || m[2] != "300" {
		t.Errorf("the ping-pong client printed no latency of 300 x 64 bytes:\n%s", cliOut)
	}
	if !strings.Contains(srvOut, " 300 operations of 64 bytes; the client measured their latency") ||
		!strings.Contains(srvOut, " check: 300 messages of 64 bytes, each the peer's pattern") {
		t.Errorf("the ping-pong server's output:\n%s", srvOut)
	}
	// -json: the client's stdout is its one result.
	args = []string{"bench", "write", "-direct", "-provider", "rocev2", "-n", "100", "-s", "64", "-progress", "0"}
	_, _, cliOut = twoProcesses(t, bin, append(args, "-server", "-p", "0"), append(args, "-json"), `waiting for a client on \[::\]:(\d+)`)
	var r benchResult
	if err := json.Unmarshal([]byte(cliOut), &r); err != nil || r.Iterations != 100 || r.Bytes != 64 || r.Provider != "rocev2" {
		t.Errorf("the -json client's output %q: %+v, %v", cliOut, r, err)
	}
}

// TestPeerPatternFlag: -peer-pattern is -direct's.
func TestPeerPatternFlag(t *testing.T) {
	if _, err := parseBench([]string{"-peer-pattern"}, io.Discard, io.Discard); err == nil {
		t.Error("-peer-pattern accepted without -direct")
	}
}
