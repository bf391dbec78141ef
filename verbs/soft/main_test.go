package soft_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when any goroutine outlives the tests: every
// test closes its provider, and closing must stop every engine.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
