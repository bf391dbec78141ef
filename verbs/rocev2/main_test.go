package rocev2

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every
// transport's receive goroutine must end with Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
