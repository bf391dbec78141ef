package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestReportsAsRstream: both ends in one process, over rdmanet on soft and
// over TCP, print rstream's header and one line with the bytes moved both
// ways.
func TestReportsAsRstream(t *testing.T) {
	for _, sockets := range []bool{false, true} {
		var out bytes.Buffer
		cfg := config{size: 1000, count: 10, iters: 20, sockets: sockets, provider: "soft"}
		if err := run(context.Background(), &out, cfg); err != nil {
			t.Fatalf("sockets=%v: %v", sockets, err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "name      bytes   xfers   iters   total") {
			t.Fatalf("sockets=%v: report %q, want rstream's header and one line", sockets, out.String())
		}
		f := strings.Fields(lines[1])
		want := []string{"rdmanet", "1000", "10", "20", "400000"}
		if sockets {
			want[0] = "tcp"
		}
		if len(f) != 8 || strings.Join(f[:5], " ") != strings.Join(want, " ") {
			t.Errorf("sockets=%v: line %q, want it to begin %v and have 8 fields", sockets, lines[1], want)
		}
	}
}
