package runtime_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// peerEnv makes this test binary the server process of a two-process
// test (servePeer, in builds with cgo), with the value as its argument.
const peerEnv = "VERBSRT_RUNTIME_TEST_PEER"

var servePeer func(peer string) int

// childEnv makes this test binary run children[value] instead of the
// tests, for tests that watch a process end (touchChild).
const childEnv = "VERBSRT_RUNTIME_TEST_CHILD"

var children = map[string]func() int{}

// TestMain fails the package when a goroutine outlives the tests: closing a
// Runtime must stop every actor, poller and worker it started. ants starts
// a default pool of its own when it is imported; IgnoreCurrent leaves
// those goroutines, which exist before any test runs, out.
func TestMain(m *testing.M) {
	if child := children[os.Getenv(childEnv)]; child != nil {
		os.Exit(child())
	}
	if peer := os.Getenv(peerEnv); peer != "" && servePeer != nil {
		os.Exit(servePeer(peer)) // the server process of TestIBVTwoProcesses
	}
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
