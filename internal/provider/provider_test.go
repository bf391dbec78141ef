package provider

import (
	"net"
	"strings"
	"testing"
)

// TestRocev2Reach: an end whose rocev2 device is bound to ::1 refuses a
// peer that connected from another host, which could not reach it; a
// peer on this host, or a device on another address, passes.
func TestRocev2Reach(t *testing.T) {
	far := &net.TCPAddr{IP: net.ParseIP("2001:db8::7"), Port: 18515} // documentation prefix: on no host
	lo := Spec{Name: "rocev2", Addr: "::1"}
	if err := CheckRocev2Reach(lo, far); err == nil || !strings.Contains(err.Error(), "-rocev2-addr") {
		t.Errorf("bound to ::1, a peer at %v: %v", far, err)
	}
	for _, tc := range []struct {
		spec Spec
		peer net.Addr
	}{
		{lo, &net.TCPAddr{IP: net.IPv6loopback}},
		{lo, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}},
		{Spec{Name: "rocev2", Addr: "2001:db8::1"}, far},
		{Spec{Name: "ibv", Addr: "::1"}, far},
	} {
		if err := CheckRocev2Reach(tc.spec, tc.peer); err != nil {
			t.Errorf("%+v, a peer at %v: %v", tc.spec, tc.peer, err)
		}
	}
}
