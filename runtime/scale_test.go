package runtime_test

import (
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
)

// osThreads returns the process's OS threads (Linux), or skips.
func osThreads(t *testing.T) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Threads:")); ok {
			n, _ := strconv.Atoi(string(bytes.TrimSpace(v)))
			return n
		}
	}
	t.Skip("no Threads line in /proc/self/status")
	return 0
}

// TestIdleEndpointsHoldNoThreads: 400 idle endpoints hold no OS thread of
// their own (before, each actor kept one for its whole life: 400 more
// threads), and each still works when used again.
func TestIdleEndpointsHoldNoThreads(t *testing.T) {
	const pairs = 200
	rt := newRuntime(t)
	ctx := ctxT(t)
	before := osThreads(t)
	eps := make([]*runtime.Endpoint, 0, 2*pairs)
	for range pairs {
		cli, srv := connect(t, rt)
		eps = append(eps, cli, srv)
	}
	buf := alloc(t, rt, 64)
	ref := refOf(t, alloc(t, rt, 64))
	for i := 0; i < len(eps); i += 2 {
		if _, err := eps[i].Write(ctx, buf.Local(), ref).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // past every spin window
	if n := osThreads(t) - before; n > 40 {
		t.Errorf("%d more OS threads with %d idle endpoints, want a few", n, len(eps))
	} else {
		t.Logf("%d more OS threads with %d idle endpoints", n, len(eps))
	}
	if _, err := eps[len(eps)-2].Write(ctx, buf.Local(), ref).Wait(ctx); err != nil {
		t.Fatalf("an idle endpoint, used again: %v", err)
	}
}
