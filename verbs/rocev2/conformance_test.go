package rocev2_test

import (
	"net/netip"
	"testing"

	"github.com/verbsrt/verbsrt/verbs/rocev2"
	"github.com/verbsrt/verbsrt/verbs/verbstest"
)

// newProvider returns a provider with two devices on ::1, each its own
// socket and port, or skips the test where the host has no IPv6
// loopback.
func newProvider(t *testing.T) *rocev2.Provider {
	t.Helper()
	lo := netip.IPv6Loopback()
	p, err := rocev2.New(rocev2.Config{Addrs: []netip.Addr{lo, lo}})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestConformance runs the provider-neutral conformance suite with the
// requester on rocev2_0 and the responder on rocev2_1: every packet
// between them crosses the loopback as RoCE v2, ICRC included.
func TestConformance(t *testing.T) {
	verbstest.Run(t, newProvider(t))
}
