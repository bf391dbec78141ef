package main

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

func TestDevices(t *testing.T) {
	p, closeProv, err := openProvider(providerSpec{name: "soft"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer closeProv()
	var out bytes.Buffer
	if err := devices(&out, p, "", 16); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"hca_id:\tsoft0\n", "hca_id:\tsoft1\n", "node_guid:              0200:5e00:0000:0001",
		"max_qp_wr:", "atomic_cap:             ATOMIC_HCA (1)", "\t\tport:\t1\n", "state:                  PORT_ACTIVE (4)",
		"active_mtu:             4096 (5)", "link_layer:             Ethernet", "GID[  0]:               fe80::",
		"GID[  1]:               ::ffff:10.77.0.2, RoCE v2\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := devices(&out, p, "soft1", 1); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "soft0") || strings.Contains(out.String(), "GID[  1]") {
		t.Errorf("-d soft1 with one GID:\n%s", out.String())
	}
	if err := devices(&out, p, "mlx5_0", 16); !errors.Is(err, verbs.ErrNotFound) {
		t.Errorf("unknown device: %v, want ErrNotFound", err)
	}
	if _, _, err := openProvider(providerSpec{name: "nope"}, 2); err == nil {
		t.Error("unknown provider accepted")
	}
}

// TestDevicesGIDTypes lists a device modelled on mlx5 (two ports, RoCE
// v1/v2 pairs per address, an empty slot): each GID with its type and
// netdev, on both ports.
func TestDevicesGIDTypes(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	tbl := append(soft.RoCEPairs("eth1", a("fe80::1"), a("10.0.0.1")), verbs.GIDEntry{})
	tbl = append(tbl, soft.RoCEPairs("eth2", a("2001:db8::1"))...)
	p := soft.New(soft.Config{Models: []soft.DeviceModel{{Ports: []soft.PortModel{
		{GIDs: tbl},
		{LinkLayer: verbs.LinkLayerInfiniBand, LID: 9, ActiveMTU: 2048,
			GIDs: []verbs.GIDEntry{{GID: verbs.GID{0xfe, 0x80, 15: 9}, Type: verbs.GIDTypeIB}}},
	}}}})
	defer p.Close()
	var out bytes.Buffer
	if err := devices(&out, p, "", 16); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"phys_port_cnt:          2\n",
		"GID[  0]:               fe80::1, RoCE v1, eth1\n", "GID[  1]:               fe80::1, RoCE v2, eth1\n",
		"GID[  2]:               ::ffff:10.0.0.1, RoCE v1, eth1\n", "GID[  3]:               ::ffff:10.0.0.1, RoCE v2, eth1\n",
		"GID[  6]:               2001:db8::1, RoCE v2, eth2\n",
		"\t\tport:\t2\n", "link_layer:             InfiniBand", "port_lid:               9", "active_mtu:             2048 (4)",
		"GID[  0]:               fe80::9, IB\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "GID[  4]") {
		t.Errorf("the empty slot is shown:\n%s", out.String())
	}
}

// TestDevicesIBV lists the ibv provider's devices where it has some (the
// rxevm guest), and checks that a host without any says so.
func TestDevicesIBV(t *testing.T) {
	p, closeProv, err := openProvider(providerSpec{name: "ibv"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer closeProv()
	var out bytes.Buffer
	err = devices(&out, p, "", 4)
	if errors.Is(err, verbs.ErrNotSupported) || (err == nil && strings.HasPrefix(out.String(), "No IB devices")) {
		t.Skipf("no RDMA device: %v %s", err, out.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if !strings.Contains(out.String(), "hca_id:\t") || !strings.Contains(out.String(), "GID[") {
		t.Errorf("output:\n%s", out.String())
	}
}
