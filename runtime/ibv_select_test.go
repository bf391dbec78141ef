//go:build linux && cgo

package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

// selWireEnd is one end of the rxevm guest's wire (verbs/ibv/rxevm/init): an
// rxe device, the veth it runs on and that veth's two addresses. rxe adds
// a RoCE v2 GID for each address of its netdev, so each device's table
// holds an IPv4-mapped and a global IPv6 entry besides the link-local one.
type selWireEnd struct {
	device, netdev string
	ipv4, ipv6     netip.Addr
}

var rxevmWire = [2]selWireEnd{
	{"rxe0", "veth0", netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("fd00:18::1")},
	{"rxe1", "veth1", netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("fd00:18::2")},
}

// needRxevmWire returns the ibv provider when it has the devices of
// rxevmWire and their netdevs are in this network namespace, and skips
// otherwise. Where they are, each netdev must hold both its addresses.
func needRxevmWire(t *testing.T) verbs.Provider {
	t.Helper()
	p := ibv.New()
	devs, err := p.Devices()
	if err != nil {
		t.Skipf("no RDMA device (%v): the runtime's ibv tests run in the rxevm guest, verbs/ibv/rxevm/test-rxe", err)
	}
	have := map[string]bool{}
	for _, d := range devs {
		have[d.Name()] = true
	}
	for _, w := range rxevmWire {
		if !have[w.device] {
			t.Skipf("no device %s: this test runs on the rxevm guest's wire, verbs/ibv/rxevm/test-rxe", w.device)
		}
		ifc, err := net.InterfaceByName(w.netdev)
		if err != nil {
			t.Skipf("no netdev %s (%v): this test runs on the rxevm guest's wire, verbs/ibv/rxevm/test-rxe", w.netdev, err)
		}
		as, err := ifc.Addrs()
		if err != nil {
			t.Fatalf("addresses of %s: %v", w.netdev, err)
		}
		for _, want := range []netip.Addr{w.ipv4, w.ipv6} {
			found := false
			for _, a := range as {
				if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Unmap() == want {
					found = true
				}
			}
			if !found {
				t.Fatalf("%s lacks %s (it has %v): verbs/ibv/rxevm/init gives it", w.netdev, want, as)
			}
		}
	}
	return p
}

// selRuntime returns a runtime on p pointed at spec (WithDevice) that
// the test's cleanup closes. The selection environment is cleared: the
// test checks what the option chooses.
func selRuntime(t *testing.T, p verbs.Provider, spec string) *runtime.Runtime {
	t.Helper()
	for _, k := range []string{"VERBSRT_DEVICE", "VERBSRT_PORT", "VERBSRT_GID_INDEX"} {
		t.Setenv(k, "")
	}
	opts := append([]runtime.Option{runtime.WithProvider(p), runtime.WithDevice(spec),
		runtime.WithMemoryLimit(8 << 20)}, actorOnlyOpts()...)
	rt, err := runtime.New(opts...)
	if err != nil {
		t.Fatalf("runtime.New(WithDevice(%q)): %v", spec, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("Close of the runtime on %q: %v", spec, err)
		}
	})
	return rt
}

// TestIBVSelect points two runtimes at the two ends of the rxevm wire the
// ways a deployment names a device (a netdev, an IPv4 address, an IPv6
// address) and checks, on the kernel's own GID tables:
//   - Stats names the device of that netdev, the netdev, RoCE v2, and the
//     GID of the address (for a netdev, its IPv4 address: IPv4 before
//     IPv6), at an index where libibverbs (ibv_query_gid) finds that GID
//     and sysfs says RoCE v2 of that netdev;
//   - the connected QPs use that index as their source GID and the peer's
//     chosen GID as destination (ibv_query_qp), and each endpoint's
//     RemoteAddr is the peer's choice;
//   - SENDs and a 64 KiB WRITE each way arrive whole, a READ brings the
//     peer's bytes back, and they crossed the veth wire as the chosen IP
//     version: each netdev received at least the WRITE's bytes, as IPv6
//     packets (its Ip6InOctets) exactly when the GID is IPv6.
func TestIBVSelect(t *testing.T) {
	p := needRxevmWire(t)
	for _, tc := range []struct {
		name string
		spec func(selWireEnd) string     // what WithDevice is given
		gid  func(selWireEnd) netip.Addr // the address whose GID must be chosen
	}{
		{"netdev", func(w selWireEnd) string { return w.netdev }, func(w selWireEnd) netip.Addr { return w.ipv4 }},
		{"IPv4", func(w selWireEnd) string { return w.ipv4.String() }, func(w selWireEnd) netip.Addr { return w.ipv4 }},
		{"IPv6", func(w selWireEnd) string { return w.ipv6.String() }, func(w selWireEnd) netip.Addr { return w.ipv6 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ibvCtx(t)
			var rts [2]*runtime.Runtime
			var gids [2]verbs.GID
			for i, w := range rxevmWire {
				rts[i] = selRuntime(t, p, tc.spec(w))
				gids[i] = verbs.GIDFromAddr(tc.gid(w))
				selCheckChoice(t, p, rts[i], w, gids[i])
			}
			// The TCP handshake goes to the server's chosen address, as
			// a deployment that names its device by address would do.
			cli, srv := selDialAt(t, ctx, rts[0], rts[1], tc.gid(rxevmWire[1]))
			eps := [2]*runtime.Endpoint{cli, srv}
			for i, ep := range eps {
				selCheckRoute(t, rts[i], ep, gids[1-i])
			}

			const n = 64 << 10
			var before [2]selNetdevCount
			for i, w := range rxevmWire {
				before[i] = selReadNetdevCount(t, w.netdev)
			}
			selExchange(t, ctx, rts, eps, n)
			v6 := !tc.gid(rxevmWire[0]).Is4()
			for i, w := range rxevmWire {
				after := selReadNetdevCount(t, w.netdev)
				rx, rx6 := after.rxBytes-before[i].rxBytes, after.ip6InOctets-before[i].ip6InOctets
				t.Logf("%s received %d bytes, %d of them in IPv6 packets", w.netdev, rx, rx6)
				if rx < n {
					t.Errorf("%s received %d bytes during the exchange, want at least the %d of the WRITE to it", w.netdev, rx, n)
				}
				if v6 && rx6 < n {
					t.Errorf("%s received %d bytes of IPv6 during the exchange, want at least the %d of the WRITE to it: the RoCE traffic was not IPv6", w.netdev, rx6, n)
				}
				if !v6 && rx6 >= n {
					t.Errorf("%s received %d bytes of IPv6 during the exchange over IPv4 GIDs", w.netdev, rx6)
				}
			}
		})
	}
}

// selCheckChoice checks what rt says it chose against the device, netdev and
// GID of w, and the index against the kernel's table: libibverbs'
// ibv_query_gid and the entry's sysfs attributes.
func selCheckChoice(t *testing.T, p verbs.Provider, rt *runtime.Runtime, w selWireEnd, gid verbs.GID) {
	t.Helper()
	s := rt.Stats()
	t.Logf("%s: device %s port %d GID[%d] %s, %s, netdev %s", w.device, s.Device, s.Port, s.GIDIndex,
		netip.AddrFrom16(s.GID).Unmap(), s.GIDType, s.Netdev)
	if s.Device != w.device || s.Netdev != w.netdev || s.GIDType != "RoCE v2" || s.GID != gid {
		t.Fatalf("chose device %s netdev %s %q GID %s, want %s %s \"RoCE v2\" %s", s.Device, s.Netdev, s.GIDType,
			netip.AddrFrom16(s.GID).Unmap(), w.device, w.netdev, netip.AddrFrom16(gid).Unmap())
	}
	devs, err := p.Devices()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Name() != w.device {
			continue
		}
		vctx, err := d.Open()
		if err != nil {
			t.Fatal(err)
		}
		g, err := vctx.QueryGID(s.Port, s.GIDIndex)
		vctx.Close()
		if err != nil || g != gid {
			t.Errorf("ibv_query_gid(%s, port %d, index %d) = %s, %v; want the chosen GID %s", w.device, s.Port, s.GIDIndex,
				netip.AddrFrom16(g).Unmap(), err, netip.AddrFrom16(gid).Unmap())
		}
	}
	attrs := filepath.Join("/sys/class/infiniband", w.device, "ports", strconv.Itoa(int(s.Port)), "gid_attrs")
	for file, want := range map[string]string{"types": "RoCE v2", "ndevs": w.netdev} {
		b, err := os.ReadFile(filepath.Join(attrs, file, strconv.Itoa(s.GIDIndex)))
		if got := strings.TrimSpace(string(b)); err != nil || got != want {
			t.Errorf("sysfs %s/%d of %s: %q, %v; want %q", file, s.GIDIndex, w.device, got, err, want)
		}
	}
}

// selDialAt listens on srvRT at addr (a free port) and dials it from cliRT:
// the client's and the server's endpoints.
func selDialAt(t *testing.T, ctx context.Context, cliRT, srvRT *runtime.Runtime, addr netip.Addr) (cli, srv *runtime.Endpoint) {
	t.Helper()
	ln, err := srvRT.Listen(net.JoinHostPort(addr.String(), "0"))
	if err != nil {
		t.Fatalf("Listen on %s: %v", addr, err)
	}
	defer ln.Close()
	cli, srv, err = benchkit.Connect(ctx, cliRT, ln)
	if err != nil {
		t.Fatalf("connecting to %s: %v", ln.Addr(), err)
	}
	return cli, srv
}

// selCheckRoute checks that ep, of rt, connected from rt's chosen GID to
// peerGID: its QP's address vector (ibv_query_qp) and its RemoteAddr.
func selCheckRoute(t *testing.T, rt *runtime.Runtime, ep *runtime.Endpoint, peerGID verbs.GID) {
	t.Helper()
	s := rt.Stats()
	if got := ep.RemoteAddr().(runtime.Addr).GID; got != peerGID {
		t.Errorf("%s: RemoteAddr GID %s, want the peer's choice %s", s.Device, netip.AddrFrom16(got).Unmap(), netip.AddrFrom16(peerGID).Unmap())
	}
	attr, err := ep.QP().Query()
	if err != nil {
		t.Fatalf("%s: ibv_query_qp: %v", s.Device, err)
	}
	grh := attr.AH.GRH
	if !attr.AH.IsGlobal || int(grh.SGIDIndex) != s.GIDIndex || grh.DGID != peerGID {
		t.Errorf("%s: QP address vector global %v, source GID index %d, destination %s; want true, %d, %s", s.Device,
			attr.AH.IsGlobal, grh.SGIDIndex, netip.AddrFrom16(grh.DGID).Unmap(), s.GIDIndex, netip.AddrFrom16(peerGID).Unmap())
	}
}

// selExchange moves data both ways between eps[0] (of rts[0]) and eps[1]
// (of rts[1]) and checks its content: a SEND each way, an n-byte WRITE
// each way into the peer's memory, and a READ of what the peer wrote.
func selExchange(t *testing.T, ctx context.Context, rts [2]*runtime.Runtime, eps [2]*runtime.Endpoint, n int) {
	t.Helper()
	var bufs [2]*runtime.Buffer
	for i, rt := range rts {
		bufs[i] = alloc(t, rt, 2*n) // [0, n): written by the peer; [n, 2n): what this side writes
		for j := range n {
			bufs[i].Bytes()[n+j] = byte(j*7 + i*101 + 1)
		}
	}
	for i := range 2 {
		from, to := eps[i], eps[1-i]
		msg := fmt.Sprintf("from %s to %s", rts[i].Stats().Device, rts[1-i].Stats().Device)
		if _, err := from.SendBytes(ctx, []byte(msg)).Wait(ctx); err != nil {
			t.Fatalf("SEND %s: %v", msg, err)
		}
		m, err := to.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv of %s: %v", msg, err)
		}
		if got := string(m.Bytes()); got != msg {
			t.Errorf("received %q, want %q", got, msg)
		}
		m.Release()

		if _, err := from.Write(ctx, bufs[i].Slice(n, n), refOf(t, bufs[1-i])).Wait(ctx); err != nil {
			t.Fatalf("WRITE %s: %v", msg, err)
		}
		if !bytes.Equal(bufs[1-i].Bytes()[:n], bufs[i].Bytes()[n:]) {
			t.Errorf("WRITE %s: the %d bytes that arrived differ from those sent", msg, n)
		}
	}
	// READ into the memory eps[1] wrote, cleared first, the bytes eps[1]
	// wrote from.
	clear(bufs[0].Bytes()[:n])
	if _, err := eps[0].Read(ctx, bufs[0].Slice(0, n), refOf(t, bufs[1]).At(n)).Wait(ctx); err != nil {
		t.Fatalf("READ: %v", err)
	}
	if !bytes.Equal(bufs[0].Bytes()[:n], bufs[1].Bytes()[n:]) {
		t.Errorf("READ: the %d bytes read differ from the peer's", n)
	}
}

// selNetdevCount is what a netdev received: all bytes (sysfs statistics) and
// the bytes of IPv6 packets (its per-interface IPv6 MIB).
type selNetdevCount struct{ rxBytes, ip6InOctets uint64 }

func selReadNetdevCount(t *testing.T, netdev string) selNetdevCount {
	t.Helper()
	var c selNetdevCount
	b, err := os.ReadFile(filepath.Join("/sys/class/net", netdev, "statistics", "rx_bytes"))
	if err == nil {
		c.rxBytes, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	if err != nil {
		t.Fatalf("rx_bytes of %s: %v", netdev, err)
	}
	b, err = os.ReadFile(filepath.Join("/proc/net/dev_snmp6", netdev))
	if err != nil {
		t.Fatalf("IPv6 statistics of %s: %v", netdev, err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "Ip6InOctets" {
			if c.ip6InOctets, err = strconv.ParseUint(f[1], 10, 64); err != nil {
				t.Fatalf("Ip6InOctets of %s: %v", netdev, err)
			}
			return c
		}
	}
	t.Fatalf("no Ip6InOctets in /proc/net/dev_snmp6/%s", netdev)
	return c
}
