package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// TestFaultsFlag: -rocev2-faults is for -provider rocev2 only, refused by
// bench and serve-metrics (which would not pass it on), and a bad spec is
// a usage error.
func TestFaultsFlag(t *testing.T) {
	if cfg, err := parsePingpong([]string{"-provider", "rocev2", "-rocev2-faults", "drop-in-ack:1"}, io.Discard, io.Discard); err != nil || cfg.spec.faults != "drop-in-ack:1" {
		t.Errorf("pingpong -rocev2-faults: %q, %v", cfg.spec.faults, err)
	}
	for _, args := range [][]string{
		{"-provider", "ibv", "-rocev2-faults", "drop-in-ack:1"},
		{"-provider", "rocev2", "-rocev2-faults", "drop-in-ack"},
	} {
		if _, err := parsePingpong(args, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "-rocev2-faults") {
			t.Errorf("pingpong %q: %v", args, err)
		}
	}
	if _, err := parseBench([]string{"-provider", "rocev2", "-rocev2-faults", "drop-in-ack:1", "-server"}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "not available to bench") {
		t.Errorf("bench -rocev2-faults: %v", err)
	}
	if _, err := parseServeMetrics([]string{"-provider", "rocev2", "-rocev2-faults", "drop-in-ack:1"}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "not available to serve-metrics") {
		t.Errorf("serve-metrics -rocev2-faults: %v", err)
	}
}

var faultLine = regexp.MustCompile(`(?m)^rocev2 fault (\S+): dropped (\d+) of (\d+) (sent|received) (data|ack) packets$`)

// TestPingpongFaults runs verbsrt pingpong's two ends on two rocev2
// providers on ::1, one of them with -rocev2-faults, once per kind of
// loss: the exchange completes with the data checked (-c), and the
// faulty side reports the packets it dropped. A lost request, out or in,
// is recovered by the responder's sequence NAK; a lost ACK, out or in,
// by the requester's timeout and resend. The providers' timers run on a
// manual clock that moves once, after the ACK is lost: a timeout fires
// exactly when the test says, however slow the machine.
func TestPingpongFaults(t *testing.T) {
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback (::1), which the rocev2 provider binds: %v", err)
	} else {
		c.Close()
	}
	for _, tc := range []struct {
		spec    string
		server  bool // the faults are the server's; else the client's
		timeout bool // recovery needs a requester's ACK timeout
	}{
		{"drop-out-ack:1", true, true},
		{"drop-out-data:2-3", false, false},
		{"drop-in-data:2", true, false},
		{"drop-in-ack:1", false, true},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			const n, size = 20, 5000 // five packets at -m 1024
			args := []string{"-provider", "rocev2", "-c", "-n", strconv.Itoa(n), "-s", strconv.Itoa(size), "-p", "0"}
			srvCfg, err := parsePingpong(args, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			cliCfg := srvCfg
			var log bytes.Buffer
			clock := rocev2.NewManualClock()
			srvSpec, cliSpec := srvCfg.spec, cliCfg.spec
			srvSpec.clock, cliSpec.clock = clock, clock
			if tc.server {
				srvSpec.faults, srvSpec.faultLog = tc.spec, &log
			} else {
				cliSpec.faults, cliSpec.faultLog = tc.spec, &log
			}
			srvProv, closeSrv, err := openProvider(srvSpec, 1)
			if err != nil {
				t.Fatal(err)
			}
			cliProv, closeCli, err := openProvider(cliSpec, 1)
			if err != nil {
				closeSrv()
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "[::1]:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			cliCfg.host, cliCfg.port = "::1", ln.Addr().(*net.TCPAddr).Port
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var srvOut, cliOut bytes.Buffer
			srvErr := make(chan error, 1)
			go func() { srvErr <- pingpong(ctx, &srvOut, srvProv, srvCfg, ln) }()
			cliErr := make(chan error, 1)
			go func() { cliErr <- pingpong(ctx, &cliOut, cliProv, cliCfg, nil) }()
			if tc.timeout {
				faulty := cliProv
				if tc.server {
					faulty = srvProv
				}
				waitFaulted(ctx, t, faulty.(*rocev2.Provider).Transport(0))
				// Every armed timer fires once (the clock has not moved
				// since they were armed, and pingpong's QPs all have
				// timeout 14): the requester whose ACK was lost resends,
				// and any other unacknowledged packet is resent too,
				// which its responder acknowledges again.
				clock.Advance(verbs.AckTimeoutDuration(14))
			}
			cErr := <-cliErr
			if cErr != nil {
				cancel()
			}
			sErr := <-srvErr
			closeCli()
			closeSrv()
			if sErr != nil || cErr != nil {
				t.Fatalf("server: %v\n%s\nclient: %v\n%s\nfaults:\n%s", sErr, srvOut.String(), cErr, cliOut.String(), log.String())
			}
			for name, out := range map[string]string{"server": srvOut.String(), "client": cliOut.String()} {
				if want := fmt.Sprintf("%d bytes in ", 2*n*size); !strings.Contains(out, want) || strings.Contains(out, "invalid data") {
					t.Errorf("the %s's output lacks %q or reports invalid data:\n%s", name, want, out)
				}
			}
			m := faultLine.FindStringSubmatch(log.String())
			if m == nil || m[1] != tc.spec || m[2] == "0" {
				t.Fatalf("the fault report lacks a rule %s that dropped packets:\n%s", tc.spec, log.String())
			}
			if !strings.Contains(log.String(), "rocev2 rocev2_0: sent ") {
				t.Errorf("the fault report lacks the transport's totals:\n%s", log.String())
			}
			t.Log(strings.TrimSpace(log.String()))
		})
	}
}

// waitFaulted returns once a fault rule of t has acted on a packet, or
// fails the test when ctx ends first (a way out, not a measurement).
func waitFaulted(ctx context.Context, t *testing.T, tr *rocev2.Transport) {
	t.Helper()
	for tr.Stats().Faulted == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("no packet was dropped")
		case <-time.After(time.Millisecond):
		}
	}
}
