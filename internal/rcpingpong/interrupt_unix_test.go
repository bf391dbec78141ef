//go:build unix

package rcpingpong

import (
	"bytes"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/provider"
)

// TestInterruptReports sends this process SIGTERM while a pingpong's
// interrupt handler is set, as a harness's watchdog does to a stalled
// one: its context ends, and once it returned the packet counts of its
// rocev2 device are written; without a signal nothing is.
func TestInterruptReports(t *testing.T) {
	p, release, err := provider.Open(provider.Spec{Name: "rocev2", Addr: "::1"}, 1)
	if err != nil {
		t.Skipf("no rocev2 device on ::1: %v", err)
	}
	defer release()

	var quiet bytes.Buffer
	ctx, done := OnInterrupt(&quiet, p)
	done()
	if ctx.Err() == nil {
		t.Error("the context outlives the pingpong")
	}
	if quiet.Len() != 0 {
		t.Errorf("no signal came, yet: %q", quiet.String())
	}

	var out bytes.Buffer
	ctx, done = OnInterrupt(&out, p)
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not end the pingpong's context")
	}
	done()
	want := regexp.MustCompile(`(?m)^pingpong: terminated\nrocev2 rocev2_0: sent 0 packets, received 0; dropped runt 0, `)
	if !want.MatchString(out.String()) {
		t.Errorf("report %q, want it to match %s", out.String(), want)
	}
}
