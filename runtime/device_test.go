package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// presentNetdev is a netdev every Linux network namespace has; goneNetdev
// one no namespace of the test machine has.
const presentNetdev, goneNetdev = "lo", "verbsrt-gone0"

func needLoopback(t *testing.T) {
	t.Helper()
	if _, err := net.InterfaceByName(presentNetdev); err != nil {
		t.Skipf("no %s netdev: %v", presentNetdev, err)
	}
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// deploymentFabric is a soft fabric of the devices deployments meet:
//
//	soft0 (0000:3b:00.0), port 1: an IPv4 pair of another pod's netdev
//	      first, then link-local, IPv4 and IPv6 pairs of lo, an empty slot;
//	      port 2 (MTU 1024): an IPv4 pair of lo
//	soft1: RoCE v1 entries only
//	soft2: InfiniBand, LID 3
func deploymentFabric(t *testing.T) *soft.Provider {
	t.Helper()
	p0 := soft.RoCEPairs(goneNetdev, addrs("192.0.2.1")...)
	p0 = append(p0, soft.RoCEPairs(presentNetdev, addrs("fe80::1", "198.51.100.1", "2001:db8::1")...)...)
	p0 = append(p0, verbs.GIDEntry{})
	v1 := soft.RoCEPairs(presentNetdev, addrs("192.0.2.77")...)[:1]
	fabric := soft.New(soft.Config{Models: []soft.DeviceModel{
		{PCIAddress: "0000:3b:00.0", Ports: []soft.PortModel{
			{GIDs: p0},
			{GIDs: soft.RoCEPairs(presentNetdev, addrs("203.0.113.1")...), ActiveMTU: 1024},
		}},
		{Ports: []soft.PortModel{{GIDs: v1}}},
		{Ports: []soft.PortModel{{LinkLayer: verbs.LinkLayerInfiniBand, LID: 3,
			GIDs: []verbs.GIDEntry{{GID: verbs.GID{0xfe, 0x80, 15: 3}, Type: verbs.GIDTypeIB}}}}},
	}})
	t.Cleanup(func() { fabric.Close() })
	return fabric
}

// TestDeviceSelection opens runtimes on the devices of deploymentFabric
// with each form of WithDevice, WithGIDIndex and the environment, and
// checks what Stats says was chosen, or the error.
func TestDeviceSelection(t *testing.T) {
	needLoopback(t)
	fabric := deploymentFabric(t)
	type chosen struct {
		device    string
		port      uint8
		gidIndex  int
		gidType   string
		netdev    string
		linkLayer verbs.LinkLayer
		mtu       int
	}
	eth := func(dev string, port uint8, idx int, typ string, mtu int) chosen {
		return chosen{dev, port, idx, typ, presentNetdev, verbs.LinkLayerEthernet, mtu}
	}
	for _, tc := range []struct {
		name   string
		opts   []runtime.Option
		env    map[string]string
		want   chosen
		errHas []string // an error is wanted, saying these
	}{
		{name: "default: skips the absent netdev, IPv4 v2", want: eth("soft0", 1, 5, "RoCE v2", 4096)},
		{name: "device and port", opts: []runtime.Option{runtime.WithDevice("soft0:2")}, want: eth("soft0", 2, 1, "RoCE v2", 1024)},
		{name: "netdev", opts: []runtime.Option{runtime.WithDevice(presentNetdev)}, want: eth("soft0", 1, 5, "RoCE v2", 4096)},
		{name: "IPv6 address", opts: []runtime.Option{runtime.WithDevice("2001:db8::1")}, want: eth("soft0", 1, 7, "RoCE v2", 4096)},
		{name: "link-local address", opts: []runtime.Option{runtime.WithDevice("fe80::1%" + presentNetdev)}, want: eth("soft0", 1, 3, "RoCE v2", 4096)},
		{name: "subnet on port 2", opts: []runtime.Option{runtime.WithDevice("203.0.113.0/24")}, want: eth("soft0", 2, 1, "RoCE v2", 1024)},
		{name: "PCI address", opts: []runtime.Option{runtime.WithDevice("0000:3b:00.0")}, want: eth("soft0", 1, 5, "RoCE v2", 4096)},
		{name: "short PCI address", opts: []runtime.Option{runtime.WithDevice("3b:00.0")}, want: eth("soft0", 1, 5, "RoCE v2", 4096)},
		{name: "v1-only refused", opts: []runtime.Option{runtime.WithDevice("soft1")},
			errHas: []string{"soft1 port 1", "only RoCE v1", "VERBSRT_GID_INDEX", "[0 ::ffff:192.0.2.77 RoCE v1 lo]"}},
		{name: "v1 asked for", opts: []runtime.Option{runtime.WithDevice("soft1"), runtime.WithGIDIndex(0)},
			want: eth("soft1", 1, 0, "RoCE v1", 4096)},
		{name: "address of an absent netdev", opts: []runtime.Option{runtime.WithDevice("192.0.2.1")},
			errHas: []string{"not in this network namespace", "[1 ::ffff:192.0.2.1 RoCE v2 " + goneNetdev + "*]"}},
		{name: "InfiniBand", opts: []runtime.Option{runtime.WithDevice("soft2")},
			want: chosen{"soft2", 1, 0, "IB", "", verbs.LinkLayerInfiniBand, 4096}},
		{name: "no such port", opts: []runtime.Option{runtime.WithDevice("soft0:3")}, errHas: []string{"soft0 has no port 3"}},
		{name: "no such device", opts: []runtime.Option{runtime.WithDevice("mlx5_0")},
			errHas: []string{`WithDevice "mlx5_0"`, "soft0 (0000:3b:00.0), soft1, soft2"}},
		{name: "no such PCI address", opts: []runtime.Option{runtime.WithDevice("0000:af:00.0")}, errHas: []string{"no device"}},
		{name: "env device wins", opts: []runtime.Option{runtime.WithDevice("soft1")},
			env: map[string]string{"VERBSRT_DEVICE": "soft0:2"}, want: eth("soft0", 2, 1, "RoCE v2", 1024)},
		{name: "env port", opts: []runtime.Option{runtime.WithDevice("soft0")},
			env: map[string]string{"VERBSRT_PORT": "2"}, want: eth("soft0", 2, 1, "RoCE v2", 1024)},
		{name: "env GID index", opts: []runtime.Option{runtime.WithDevice("soft1")},
			env: map[string]string{"VERBSRT_GID_INDEX": "0"}, want: eth("soft1", 1, 0, "RoCE v1", 4096)},
		{name: "env bad port", env: map[string]string{"VERBSRT_PORT": "0"}, errHas: []string{"VERBSRT_PORT"}},
		{name: "env bad index", env: map[string]string{"VERBSRT_GID_INDEX": "x"}, errHas: []string{"VERBSRT_GID_INDEX"}},
		{name: "env bad device", env: map[string]string{"VERBSRT_DEVICE": "soft0:0"}, errHas: []string{"VERBSRT_DEVICE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"VERBSRT_DEVICE", "VERBSRT_PORT", "VERBSRT_GID_INDEX"} {
				t.Setenv(k, tc.env[k])
			}
			rt, err := runtime.New(append([]runtime.Option{runtime.WithProvider(fabric)}, tc.opts...)...)
			if tc.errHas != nil {
				if err == nil {
					rt.Close(context.Background())
					t.Fatalf("New succeeded, want an error saying %q", tc.errHas)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				if !errors.Is(err, verbs.ErrNotFound) && !errors.Is(err, verbs.ErrInvalidArgument) {
					t.Errorf("error %v matches neither verbs.ErrNotFound nor verbs.ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close(context.Background())
			s := rt.Stats()
			got := chosen{s.Device, s.Port, s.GIDIndex, s.GIDType, s.Netdev, s.LinkLayer, s.MTU}
			if got != tc.want {
				t.Errorf("chose %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPort2 connects two runtimes through port 2 of two-port devices and
// carries a SEND each way and a WRITE. Port 2's GID table is longer than
// port 1's and its RoCE v2 entry lies past port 1's end, so a QP that
// used port 1 with the chosen index would be refused its address vector.
func TestPort2(t *testing.T) {
	needLoopback(t)
	model := func(last byte) soft.DeviceModel {
		a := func(p string) netip.Addr { return netip.MustParseAddr(p + string('0'+rune(last))) }
		return soft.DeviceModel{Ports: []soft.PortModel{
			{GIDs: soft.RoCEPairs(presentNetdev, a("192.0.2."))},
			{GIDs: soft.RoCEPairs(presentNetdev, a("fe80::"), a("fe80::1:"), a("198.51.100."))},
		}}
	}
	fabric := soft.New(soft.Config{Models: []soft.DeviceModel{model(1), model(2)}})
	t.Cleanup(func() { fabric.Close() })
	rtA := newRuntime(t, runtime.WithProvider(fabric), runtime.WithDevice("soft0:2"))
	rtB := newRuntime(t, runtime.WithProvider(fabric), runtime.WithDevice("soft1:2"))
	for _, rt := range []*runtime.Runtime{rtA, rtB} {
		if s := rt.Stats(); s.Port != 2 || s.GIDIndex != 5 {
			t.Fatalf("%s: port %d GID index %d, want port 2 index 5", s.Device, s.Port, s.GIDIndex)
		}
	}
	ctx := ctxT(t)
	a, b := connectRuntimes(t, rtA, rtB)
	if got := a.RemoteAddr().(runtime.Addr).GID; got != verbs.GIDFromAddr(netip.MustParseAddr("198.51.100.2")) {
		t.Errorf("peer GID %s, want soft1's port 2 address", got)
	}
	for _, dir := range [][2]*runtime.Endpoint{{a, b}, {b, a}} {
		if _, err := dir[0].SendBytes(ctx, []byte("over port 2")).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		m, err := dir[1].Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(m.Bytes()); got != "over port 2" {
			t.Errorf("received %q", got)
		}
		m.Release()
	}
	src, dst := alloc(t, rtA, 64<<10), alloc(t, rtB, 64<<10)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i)
	}
	if _, err := a.Write(ctx, src.Local(), refOf(t, dst)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.Bytes(), src.Bytes()) {
		t.Error("WRITE over port 2: the remote bytes differ")
	}
}

// TestStartupLog checks the one Info line a runtime logs at start: what
// it chose and why.
func TestStartupLog(t *testing.T) {
	needLoopback(t)
	fabric := deploymentFabric(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rt := newRuntime(t, runtime.WithProvider(fabric), runtime.WithDevice("soft0:2"), runtime.WithLogger(log))
	_ = rt
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var up []string
	for _, l := range lines {
		if strings.Contains(l, "runtime up") {
			up = append(up, l)
		}
	}
	if len(up) != 1 {
		t.Fatalf("%d start-up lines, want 1:\n%s", len(up), buf.String())
	}
	for _, want := range []string{"level=INFO", "provider=soft", "device=soft0", "port=2", "gid_index=1",
		"gid=203.0.113.1", `gid_type="RoCE v2"`, "netdev=lo", "link_layer=Ethernet", "mtu=1024", `why="RoCE v2, netdev lo`} {
		if !strings.Contains(up[0], want) {
			t.Errorf("start-up line lacks %s:\n%s", want, up[0])
		}
	}
}
