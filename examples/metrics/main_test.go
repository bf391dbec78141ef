package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/verbsrt/verbsrt/metrics"
)

// TestMain fails the package when a goroutine outlives the tests: serve
// must stop the workload, the HTTP server and the runtime when it returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// start runs serve on a loopback port and returns its address; the
// service stops when the test ends.
func start(t *testing.T, args ...string) string {
	t.Helper()
	cfg, err := parse(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, cfg, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestPrometheusScrapes starts a real Prometheus server on loopback with a
// temporary configuration that scrapes the service every 200 ms, and asks
// its HTTP API for the WRITEs the service posted.
func TestPrometheusScrapes(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("VERBSRT_REQUIRE_PROMETHEUS") != "" {
			t.Fatalf("prometheus not found: %v", err)
		}
		t.Skipf("prometheus not found (Debian package prometheus): %v", err)
	}
	target := start(t, "-rate", "1000")

	dir := t.TempDir()
	conf := fmt.Sprintf(`global:
  scrape_interval: 200ms
  scrape_timeout: 150ms
scrape_configs:
  - job_name: verbsrt
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freePort(t)
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", log.String())
		}
	}()

	query := "http://" + promAddr + "/api/v1/query?query=" +
		url.QueryEscape(`sum(verbsrt_wrs_posted_total{job="verbsrt",opcode="RDMA_WRITE",device="soft0",port="1"})`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, err := instant(query)
		if err == nil && v > 0 {
			t.Logf("Prometheus at %s scraped %s: %g RDMA WRITEs posted", promAddr, target, v)
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no WRITEs through the query API after 60 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The scrape target is healthy in Prometheus' eyes too.
	v, err := instant("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(`up{job="verbsrt"}`))
	if err != nil || v != 1 {
		t.Errorf("up = %v, %v", v, err)
	}
	// Every query of the dashboard is valid PromQL to this Prometheus.
	for _, expr := range dashboardExprs(t) {
		q := strings.NewReplacer("$__rate_interval", "2s", "$device", ".*").Replace(expr)
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("dashboard query %s: %s: %s", q, resp.Status, body)
		}
	}
}

// dashboardExprs returns the PromQL of every panel of dashboard.json.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// TestDashboardMetrics: the dashboard uses every metric the collector
// makes and no other.
func TestDashboardMetrics(t *testing.T) {
	known := map[string]bool{}
	descs := make(chan *prometheus.Desc, 64)
	metrics.New(nil).Describe(descs)
	close(descs)
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		known[fq.FindStringSubmatch(d.String())[1]] = true
	}
	used := map[string]bool{}
	name := regexp.MustCompile(`verbsrt_[a-z_]+`)
	for _, e := range dashboardExprs(t) {
		for _, n := range name.FindAllString(e, -1) {
			base := n
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suf); ok && known[b] {
					base = b
				}
			}
			if !known[base] {
				t.Errorf("dashboard uses %s, which the collector does not make", n)
			}
			used[base] = true
		}
	}
	for n := range known {
		if !used[n] {
			t.Errorf("dashboard does not use %s", n)
		}
	}
}

// instant runs an instant query that returns one sample and returns its
// value.
func instant(u string) (float64, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" || len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("query: status %q, %d series", r.Status, len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// freePort returns a loopback address no one listens on (for a moment).
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestParse(t *testing.T) {
	if _, err := parse([]string{"-rate", "0"}, io.Discard); err == nil {
		t.Error("-rate 0 accepted")
	}
	cfg, err := parse([]string{"-listen", ":0", "-workers", "8"}, io.Discard)
	if err != nil || cfg.listen != ":0" || cfg.workers != 8 {
		t.Errorf("%+v %v", cfg, err)
	}
}
