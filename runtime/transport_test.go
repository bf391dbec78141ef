package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
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

// softGIDNoise are texts of the GIDs the soft provider makes up: its
// IPv4-mapped 10.77.0.x and its link-local fe80::200:5e00:0:x.
var softGIDNoise = []string{"10.77.", "fe80::200:5e00"}

// TestSoftGIDsShownNowhere: besides the ends of endpoints, every place the
// runtime shows a GID of its own leaves soft's made-up ones out: New's
// errors about the device it could not pick (WithGIDIndex, WithDevice),
// Stats.GID (the runtime's and an endpoint's) and the start-up log line;
// on rocev2 Stats.GID and the log line carry the GID.
func TestSoftGIDsShownNowhere(t *testing.T) {
	shows := func(t *testing.T, what, text string) {
		t.Helper()
		for _, noise := range softGIDNoise {
			if strings.Contains(text, noise) {
				t.Errorf("%s shows a made-up GID (%q): %s", what, noise, text)
			}
		}
	}
	for _, opts := range []struct {
		name string
		opts []runtime.Option
	}{
		{"WithGIDIndex", []runtime.Option{runtime.WithGIDIndex(7)}},
		{"WithDevice address", []runtime.Option{runtime.WithDevice("10.1.2.3")}},
		{"WithDevice subnet", []runtime.Option{runtime.WithDevice("10.9.0.0/16")}},
		{"WithDevice and a GID index", []runtime.Option{runtime.WithDevice("192.0.2.0/24"), runtime.WithGIDIndex(1)}},
	} {
		rt, err := runtime.New(opts.opts...)
		if err == nil {
			rt.Close(context.Background())
			t.Fatalf("New with %s: no error", opts.name)
		}
		shows(t, "New's error with "+opts.name, err.Error())
	}

	var log strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &log}, nil))
	rt := newRuntime(t, runtime.WithLogger(logger))
	if g := rt.Stats().GID; !g.IsZero() {
		t.Errorf("Stats.GID on soft is %v, want zero", g)
	}
	cli, _ := connect(t, rt)
	if g := cli.Stats().GID; !g.IsZero() {
		t.Errorf("an endpoint's Stats.GID on soft is %v, want zero", g)
	}
	mu.Lock()
	up := log.String()
	mu.Unlock()
	if !strings.Contains(up, "runtime up") {
		t.Fatalf("no start-up line in %q", up)
	}
	shows(t, "the start-up log line", up)

	log.Reset()
	prov, err := rocev2.New(rocev2.Config{Addrs: []netip.Addr{netip.IPv6Loopback()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prov.Close() })
	roce := newRuntime(t, runtime.WithProvider(prov), runtime.WithLogger(logger))
	if g := roce.Stats().GID; netip.AddrFrom16(g) != netip.IPv6Loopback() {
		t.Errorf("Stats.GID on rocev2 is %v, want ::1", g)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(log.String(), "gid=::1") {
		t.Errorf("the start-up line on rocev2 does not name its GID: %q", log.String())
	}
}

// lockedWriter serializes a log's writes into w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
