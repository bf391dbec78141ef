package runtime_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// rocev2Runtime returns a runtime on a rocev2 provider of its own over
// the loopback address; the test's cleanup closes both.
func rocev2Runtime(t *testing.T) *runtime.Runtime {
	t.Helper()
	prov, err := rocev2.New(rocev2.Config{Addrs: []netip.Addr{netip.IPv6Loopback()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prov.Close() }) // after the runtime's: cleanups run last first
	return newRuntime(t, runtime.WithProvider(prov))
}

// TestProviderMismatchIsNamed: a runtime that dials a listener on
// another transport (soft's in-process fabric against rocev2's RoCE v2,
// either way round) fails with ErrProtocol naming both providers, not
// with the device's error about the peer's address, and no address soft
// invents for its GIDs shows.
func TestProviderMismatchIsNamed(t *testing.T) {
	soft, roce := newRuntime(t), rocev2Runtime(t)
	for _, c := range []struct {
		name           string
		dialer, server *runtime.Runtime
		want           string
	}{
		{"rocev2 dials soft", roce, soft, "the peer runs provider soft (an in-process fabric), this runtime rocev2 (RoCE v2)"},
		{"soft dials rocev2", soft, roce, "the peer runs provider rocev2 (RoCE v2), this runtime soft (an in-process fabric)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := c.server.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ep, err := c.dialer.Dial(ctx, ln.Addr().String())
			if err == nil {
				ep.Close(ctx)
				t.Fatal("Dial connected two transports")
			}
			if !errors.Is(err, runtime.ErrProtocol) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Dial: %v; want ErrProtocol saying %q", err, c.want)
			}
			for _, noise := range []string{"ibv_modify_qp", "10.77."} {
				if strings.Contains(err.Error(), noise) {
					t.Errorf("Dial: %q says %q", err, noise)
				}
			}
		})
	}
}

// TestSoftAddressesAreNotShown: the ends of a soft endpoint, as net.Addrs
// (which net.OpErrors of rdmanet and the runtime's OpErrors print), are
// named by their QP numbers, without the addresses soft makes up for its
// GIDs; on another provider they carry the GID.
func TestSoftAddressesAreNotShown(t *testing.T) {
	_, cli, srv := pair(t)
	for _, a := range []net.Addr{cli.LocalAddr(), cli.RemoteAddr(), srv.LocalAddr()} {
		if s := a.String(); strings.Contains(s, "10.77.") || !strings.HasPrefix(s, "qp0x") {
			t.Errorf("a soft endpoint's address reads %q, want its QP number alone", s)
		}
	}
	roce := rocev2Runtime(t)
	rcli, _ := connectRuntimes(t, roce, roce)
	if s := rcli.LocalAddr().String(); !strings.HasPrefix(s, "::1/qp0x") {
		t.Errorf("a rocev2 endpoint's address reads %q, want its GID and QP number", s)
	}
}
