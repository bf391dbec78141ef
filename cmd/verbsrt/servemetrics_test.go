package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// requireTool returns the path of a tool the test needs, skipping the test
// without it unless VERBSRT_REQUIRE_PROMETHEUS is set (as CI sets it, after
// installing Debian's prometheus package).
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("VERBSRT_REQUIRE_PROMETHEUS") != "" {
			t.Fatalf("%s not found: %v", name, err)
		}
		t.Skipf("%s not found (Debian package prometheus): %v", name, err)
	}
	return p
}

// TestServeMetrics runs serve-metrics on a loopback port, scrapes it until
// WRITEs show, has promtool check the scrape and stops it as a signal
// would.
func TestServeMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseServeMetrics([]string{"-rate", "2000", "-callers", "2"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var log bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- serveMetrics(ctx, cfg, ln, &log) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve-metrics: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("serve-metrics did not stop")
		}
	}()
	url := "http://" + ln.Addr().String() + "/metrics"
	writes := regexp.MustCompile(`(?m)^verbsrt_wrs_posted_total\{device="soft0",opcode="RDMA_WRITE",port="1",role="client"\} (\S+)$`)
	var scrape []byte
	for deadline := time.Now().Add(15 * time.Second); ; {
		resp, err := http.Get(url)
		if err == nil {
			scrape, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			if m := writes.FindSubmatch(scrape); m != nil {
				// Enough that each QP has a WR sampled for latency.
				if v, _ := strconv.ParseFloat(string(m[1]), 64); v > 300 && bytes.Contains(scrape, []byte("verbsrt_op_latency_seconds_bucket{")) {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no WRITEs in the scrape (%v):\n%s", err, scrape)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"verbsrt_post_batch_size_bucket{", "verbsrt_op_latency_seconds_bucket{", "verbsrt_completions_total{",
		`verbsrt_cq_polls_total{device="soft0",port="1",result="hit",role="client"}`, "verbsrt_futures_pending{", "go_goroutines "} {
		if !bytes.Contains(scrape, []byte(want)) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	promtool := requireTool(t, "promtool")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestParseServeMetrics(t *testing.T) {
	cfg, err := parseServeMetrics([]string{"-listen", ":0", "--provider", "ibv", "-rate", "0"}, io.Discard, io.Discard)
	if err != nil || cfg.listen != ":0" || cfg.provider.name != "ibv" || cfg.rate != 0 {
		t.Errorf("%+v %v", cfg, err)
	}
	for _, bad := range [][]string{{"-rate", "-1"}, {"--provider", "x"}, {"-s", "1"}, {"extra"}} {
		if _, err := parseServeMetrics(bad, io.Discard, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
