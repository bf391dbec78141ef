package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParsePingpong(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want ppConfig
	}{
		{nil, ppConfig{provider: "ibv", ibPort: 1, size: 4096, mtu: 1024, rxDepth: 500, iters: 1000, gidx: -1, port: 18515}},
		{[]string{"-d", "rxe0", "-g", "1", "-n", "100", "198.18.0.2"},
			ppConfig{provider: "ibv", dev: "rxe0", ibPort: 1, size: 4096, mtu: 1024, rxDepth: 500, iters: 100, gidx: 1, port: 18515, host: "198.18.0.2"}},
		// getopt lets options follow the host; long names work too.
		{[]string{"198.18.0.2", "--ib-dev=rxe1", "--iters", "7", "-e", "-s", "64", "--mtu", "2048", "-p", "9000", "-c"},
			ppConfig{provider: "ibv", dev: "rxe1", ibPort: 1, size: 64, mtu: 2048, rxDepth: 500, iters: 7, gidx: -1, port: 9000,
				events: true, validate: true, host: "198.18.0.2"}},
		{[]string{"--provider", "soft", "-r", "16", "-l", "3", "-i", "2"},
			ppConfig{provider: "soft", ibPort: 2, size: 4096, mtu: 1024, rxDepth: 16, iters: 1000, sl: 3, gidx: -1, port: 18515}},
		// rocev2 routes by GID: its one GID, index 0, unless -g says.
		{[]string{"-provider", "rocev2", "-p", "0"},
			ppConfig{provider: "rocev2", ibPort: 1, size: 4096, mtu: 1024, rxDepth: 500, iters: 1000, gidx: 0}},
	} {
		got, err := parsePingpong(tc.args, io.Discard, io.Discard)
		if got.spec != (providerSpec{name: got.provider, addr: rocev2DefaultAddr}) {
			t.Errorf("parsePingpong(%q): provider flags %+v", tc.args, got.spec)
		}
		got.spec = providerSpec{}
		if err != nil || got != tc.want {
			t.Errorf("parsePingpong(%q) =\n %+v, %v; want\n %+v", tc.args, got, err, tc.want)
		}
	}
	for _, args := range [][]string{{"-m", "1000"}, {"-p", "70000"}, {"-i", "0"}, {"-s", "0"}, {"-r", "1"},
		{"a", "b"}, {"-x"}, {"-p", "0", "h"}, {"-provider", "rxe"}, {"-provider", "rocev2", "-rocev2-addr", "10.0.0.1"}} {
		if _, err := parsePingpong(args, io.Discard, io.Discard); err == nil {
			t.Errorf("parsePingpong(%q) accepted", args)
		}
	}
}

var (
	bwLine   = regexp.MustCompile(`(?m)^(\d+) bytes in \d+\.\d\d seconds = \d+\.\d\d Mbit/sec$`)
	iterLine = regexp.MustCompile(`(?m)^(\d+) iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter$`)
	addrLine = regexp.MustCompile(`(?m)^  (local address: |remote address:) LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:10\.77\.0\.[12]$`)
)

// TestPingpongSelfTest runs both ends of the protocol on the soft provider,
// polling and sleeping on CQ events, and checks the lines ibv_rc_pingpong
// prints.
func TestPingpongSelfTest(t *testing.T) {
	for _, events := range []bool{false, true} {
		cfg, err := parsePingpong([]string{"--provider", "soft", "-n", "300", "-s", "1000", "-r", "8"}, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		cfg.events = events
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out bytes.Buffer
		err = pingpongSelfTest(ctx, &out, cfg)
		cancel()
		if err != nil {
			t.Fatalf("events %v: %v\n%s", events, err, out.String())
		}
		t.Logf("events %v:\n%s", events, out.String())
		for _, m := range bwLine.FindAllStringSubmatch(out.String(), -1) {
			if m[1] != "600000" {
				t.Errorf("%s: want 600000 bytes (size x iters x 2)", m[0])
			}
		}
		if n := len(bwLine.FindAllString(out.String(), -1)); n != 2 {
			t.Errorf("%d bandwidth lines, want one per end", n)
		}
		if n := len(iterLine.FindAllString(out.String(), -1)); n != 2 {
			t.Errorf("%d iteration lines, want one per end", n)
		}
		if n := len(addrLine.FindAllString(out.String(), -1)); n != 4 {
			t.Errorf("%d address lines, want a local and a remote per end", n)
		}
	}
}

func TestPingpongSelfTestRefusesHost(t *testing.T) {
	if err := runPingpong([]string{"--provider", "soft", "198.18.0.2"}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "self-test") {
		t.Errorf("soft provider with a host: %v", err)
	}
}
