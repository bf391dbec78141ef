package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/internal/udpfloor"
)

// TestUDPFloorSelfTest runs udpfloor with both ends in this process and
// checks each JSON result moved its datagrams; no figure is asserted.
func TestUDPFloorSelfTest(t *testing.T) {
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback (::1): %v", err)
	} else {
		c.Close()
	}
	code, stdout, stderr := runArgs("udpfloor", "-json", "-n", "20", "-tests", "rr:64,stream:65536:64")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want a JSON result for each of 2 tests:\n%s", len(lines), stdout)
	}
	for i, want := range []uint64{20, 20 * 16} {
		var r udpfloor.Result
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatalf("line %d: %v\n%s", i, err, lines[i])
		}
		if r.Datagrams != want || r.Received != want || r.Lost != 0 {
			t.Errorf("line %d: %d datagrams sent, %d received, %d lost: want %d, none lost", i, r.Datagrams, r.Received, r.Lost, want)
		}
	}
}

// TestUDPFloorRefuses: command lines that cannot run exit 2.
func TestUDPFloorRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"udpfloor", "-tests", "rr:2"},
		{"udpfloor", "-tests", "udp:64"},
		{"udpfloor", "-server", "::1"},
		{"udpfloor", "-p", "0", "::1"},
		{"udpfloor", "-window", "0"},
		{"udpfloor", "-addr", "nowhere"},
		{"udpfloor", "a", "b"},
	} {
		if code, _, stderr := runArgs(args...); code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", args, code, stderr)
		}
	}
}
