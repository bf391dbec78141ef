package udpfloor

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: RunPair
// waits for its server, and a run's context ends its watchers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func loopbackOrSkip(t *testing.T) {
	t.Helper()
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback (::1): %v", err)
	}
	c.Close()
}

// TestRunPair runs every kind of test briefly with both ends in this
// process and checks that the server received every datagram the client
// sent, with the bytes the messages carry, and that each figure is one a
// run that moved them can have: no rate or duration is asserted.
func TestRunPair(t *testing.T) {
	loopbackOrSkip(t)
	tests, err := ParseTests("rr:64,rr:4096,stream:64:1,stream:64:64,stream:4096:64,stream:65536:1,stream:65536:64,stream:5000:3", 40)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a way out, not a measurement
	defer cancel()
	var got []Result
	// A generous stall timeout: a slow machine must not make the test
	// give up on datagrams that are merely late.
	cfg := Config{Tests: tests, StallTimeout: 10 * time.Second}
	if err := RunPair(ctx, cfg, func(r Result) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(tests) {
		t.Fatalf("%d results for %d tests", len(got), len(tests))
	}
	for i, r := range got {
		tt := tests[i]
		n, _ := chunks(tt.Size)
		want := uint64(tt.Count)
		if tt.Kind == Stream {
			want *= uint64(n)
		}
		if r.Test != tt || r.Datagrams != want || r.Received != want || r.Lost != 0 || r.Stalls != 0 {
			t.Errorf("%v: %d datagrams sent, %d received, %d lost, %d stalls: want %d each, none lost", tt, r.Datagrams, r.Received, r.Lost, r.Stalls, want)
		}
		if wantBytes := uint64(tt.Count * tt.Size); r.Bytes != wantBytes {
			t.Errorf("%v: the server received %d payload bytes, want %d", tt, r.Bytes, wantBytes)
		}
		if r.Elapsed <= 0 || r.MsgRateMpps <= 0 || r.MBps <= 0 || r.UsecPerOp < 0 {
			t.Errorf("%v: elapsed %v, %.6f Mpps, %.2f MB/s, %.2f usec/op: a run that moved its datagrams takes time and has a rate", tt, r.Elapsed, r.MsgRateMpps, r.MBps, r.UsecPerOp)
		}
		if r.ClientCPU < 0 || r.ServerCPU < 0 || r.ClientCPUNsPerOp < 0 || r.ServerCPUNsPerOp < 0 {
			t.Errorf("%v: CPU client %v, server %v: unknown", tt, r.ClientCPU, r.ServerCPU)
		}
		if tt.Kind == Stream && r.Window != DefaultWindow {
			t.Errorf("%v: window %d, want %d", tt, r.Window, DefaultWindow)
		}
	}
}

// TestStreamGivesUpOnLostDatagrams runs a client against a socket that
// never acknowledges: every full window is given up on after the stall
// timeout, and the stream ends.
func TestStreamGivesUpOnLostDatagrams(t *testing.T) {
	loopbackOrSkip(t)
	sink, err := listenUDP(netip.Addr{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	s, err := listenUDP(netip.Addr{}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var r Result
	tt := Test{Kind: Stream, Size: 64, Batch: 4, Count: 10}
	if err := s.streamSend(sink.addr(), tt, 4, time.Millisecond, &r); err != nil {
		t.Fatal(err)
	}
	if r.Datagrams != 10 || r.Stalls != 3 {
		t.Errorf("%d datagrams sent, %d stalls: want 10 sent in windows of 4, each window given up on (3)", r.Datagrams, r.Stalls)
	}
}

func TestParseTests(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Test
		bad  bool
	}{
		{in: "rr:64", want: []Test{{RoundTrip, 64, 1, 7}}},
		{in: "stream:65536:64, stream:4096", want: []Test{{Stream, 65536, 64, 7}, {Stream, 4096, 1, 7}}},
		{in: "rr", bad: true},
		{in: "udp:64", bad: true},
		{in: "rr:4", bad: true},
		{in: "rr:8192", bad: true},
		{in: "stream:64:0", bad: true},
		{in: "stream:x:1", bad: true},
	} {
		got, err := ParseTests(c.in, 7)
		if (err != nil) != c.bad {
			t.Errorf("ParseTests(%q): %v, want an error: %v", c.in, err, c.bad)
			continue
		}
		if !c.bad && len(got) != len(c.want) {
			t.Errorf("ParseTests(%q) = %v, want %v", c.in, got, c.want)
			continue
		}
		for i := range c.want {
			if got[i] != c.want[i] {
				t.Errorf("ParseTests(%q)[%d] = %v, want %v", c.in, i, got[i], c.want[i])
			}
		}
	}
	if ts, err := ParseTests(DefaultTests, 0); err != nil || len(ts) != 8 {
		t.Errorf("the default tests: %v, %v", ts, err)
	}
}

func TestDatagramLen(t *testing.T) {
	for _, c := range []struct {
		seq  uint64
		size int
		want int
	}{
		{0, 64, 64 + Overhead},
		{5, 64, 64 + Overhead},
		{0, 65536, DefaultChunk + Overhead},
		{15, 65536, DefaultChunk + Overhead},
		{0, 5000, DefaultChunk + Overhead},
		{1, 5000, 904 + Overhead},
		{2, 5000, DefaultChunk + Overhead},
	} {
		if got := datagramLen(c.seq, c.size); got != c.want {
			t.Errorf("datagramLen(%d, %d) = %d, want %d", c.seq, c.size, got, c.want)
		}
	}
}
