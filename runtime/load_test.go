package runtime_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
)

// stressOps is operations per goroutine in TestExactlyOnceUnderLoad:
// 20000 as the runtime's acceptance asks, fewer with -short or
// VERBSRT_STRESS_OPS.
func stressOps(t *testing.T) int {
	if s := os.Getenv("VERBSRT_STRESS_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if testing.Short() {
		return 500
	}
	return 20000
}

// TestExactlyOnceUnderLoad: 256 goroutines issue mixed operations (write
// then read back, send, CAS, FAA) on one connection; see mixedLoad for what
// is checked.
func TestExactlyOnceUnderLoad(t *testing.T) {
	rt, cli, srv := pair(t, runtime.WithRecvDepth(128), runtime.WithSendQueueDepth(512))
	// No deadline: a hang is the bug this test looks for.
	mixedLoad(t, context.Background(), rt, rt, cli, srv, 256, stressOps(t))
}
