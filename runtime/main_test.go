package runtime_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: closing a
// Runtime must stop every actor, poller and worker it started. ants starts
// a default pool of its own when it is imported; IgnoreCurrent leaves
// those goroutines, which exist before any test runs, out.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
