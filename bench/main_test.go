package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests or the
// benchmarks: every variant closes its provider or runtime when it ends.
// ants starts a default pool of its own when it is imported; IgnoreCurrent
// leaves those goroutines, which exist before anything runs, out.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
