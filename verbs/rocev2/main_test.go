package rocev2

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every
// transport's receive goroutine must end with Close, and a runtime over
// the provider must stop all it started. ants, which the runtime imports,
// starts a default pool of its own at init; IgnoreCurrent leaves those
// goroutines, which exist before any test runs, out.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
