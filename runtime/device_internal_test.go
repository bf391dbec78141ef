package runtime

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

func gidOf(s string) verbs.GID { return verbs.GIDFromAddr(netip.MustParseAddr(s)) }

// table numbers entries by position, leaving zero ones out as empty slots.
func table(es ...verbs.GIDEntry) []verbs.GIDEntry {
	var out []verbs.GIDEntry
	for i, e := range es {
		if !e.GID.IsZero() {
			e.Index = i
			out = append(out, e)
		}
	}
	return out
}

func ent(addr string, t verbs.GIDType, netdev string) verbs.GIDEntry {
	return verbs.GIDEntry{GID: gidOf(addr), Type: t, Netdev: netdev}
}

const v1, v2 = verbs.GIDTypeRoCEv1, verbs.GIDTypeRoCEv2

// present says which netdevs the tests' network namespace has.
func present(nd string) bool { return nd == "eth1" || nd == "eth2" }

// permutations calls f with every order of es.
func permutations(es []verbs.GIDEntry, f func([]verbs.GIDEntry)) {
	var rec func(k int)
	rec = func(k int) {
		if k == len(es) {
			f(es)
			return
		}
		for i := k; i < len(es); i++ {
			es[k], es[i] = es[i], es[k]
			rec(k + 1)
			es[k], es[i] = es[i], es[k]
		}
	}
	rec(0)
}

// TestPickGIDEveryPosition checks the default rule on an mlx5-like table
// (a RoCE v1 and a RoCE v2 entry per address: link-local, IPv4, IPv6, and
// an IPv4 address of a netdev outside the namespace) in every order, with
// an empty slot at every place: the IPv4 RoCE v2 entry of the present
// netdev is chosen each time, never its RoCE v1 twin, never the absent
// netdev's entry.
func TestPickGIDEveryPosition(t *testing.T) {
	base := []verbs.GIDEntry{
		ent("fe80::1", v1, "eth1"), ent("fe80::1", v2, "eth1"),
		ent("10.0.0.1", v1, "eth1"), ent("10.0.0.1", v2, "eth1"),
		ent("2001:db8::1", v1, "eth1"), ent("2001:db8::1", v2, "eth1"),
		ent("10.9.9.9", v2, "eth-other-pod"),
	}
	want := gidOf("10.0.0.1")
	n := 0
	permutations(base, func(order []verbs.GIDEntry) {
		for hole := 0; hole <= len(order); hole += 3 { // empty slots at a few places per order
			es := append(append(append([]verbs.GIDEntry{}, order[:hole]...), verbs.GIDEntry{}), order[hole:]...)
			tbl := table(es...)
			e, _, err := pickGID(tbl, true, verbs.LinkLayerEthernet, deviceSpec{}, -1, "", gidView{}, present)
			n++
			if err != nil || e.GID != want || e.Type != v2 || e.Netdev != "eth1" {
				t.Fatalf("table %s: chose %v, %v; want the RoCE v2 entry of 10.0.0.1", tableString(gidView{}, tbl, true, nil), e, err)
			}
		}
	})
	if n < 5040 {
		t.Fatalf("only %d tables tried", n)
	}
}

func TestPickGID(t *testing.T) {
	mlx := table(ent("fe80::1", v1, "eth1"), ent("fe80::1", v2, "eth1"),
		ent("10.0.0.1", v1, "eth1"), ent("10.0.0.1", v2, "eth1"),
		verbs.GIDEntry{},
		ent("2001:db8::1", v1, "eth2"), ent("2001:db8::1", v2, "eth2"),
		ent("10.1.0.1", v1, "eth2"), ent("10.1.0.1", v2, "eth2"),
		ent("192.0.2.1", v1, "eth9"), ent("192.0.2.1", v2, "eth9"))
	v1only := table(ent("fe80::1", v1, "eth1"), ent("10.0.0.1", v1, "eth1"))
	elsewhere := table(ent("10.0.0.1", v1, "eth9"), ent("10.0.0.1", v2, "eth9"))
	ib := table(verbs.GIDEntry{GID: verbs.GID{0xfe, 0x80, 15: 7}, Type: verbs.GIDTypeIB})
	untyped := table(verbs.GIDEntry{GID: gidOf("fe80::1")}, verbs.GIDEntry{GID: gidOf("10.0.0.1")}, verbs.GIDEntry{GID: gidOf("10.1.0.1")})
	untypedV6 := table(verbs.GIDEntry{GID: gidOf("fe80::1")}, verbs.GIDEntry{GID: gidOf("2001:db8::1")})
	spec := func(s string) deviceSpec {
		d, err := parseDeviceSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		name    string
		tbl     []verbs.GIDEntry
		typed   bool
		ll      verbs.LinkLayer
		spec    string
		index   int
		want    int      // index chosen; -1: an error
		errHas  []string // what the error says
		whyHas  string
		present func(string) bool
	}{
		{name: "mlx5 default: IPv4 v2", tbl: mlx, typed: true, spec: "", index: -1, want: 3, whyHas: "RoCE v2, netdev eth1"},
		{name: "by netdev", tbl: mlx, typed: true, spec: "eth2", index: -1, want: 8},
		{name: "by IPv6 address", tbl: mlx, typed: true, spec: "2001:db8::1", index: -1, want: 6},
		{name: "by link-local with zone", tbl: mlx, typed: true, spec: "fe80::1%eth1", index: -1, want: 1},
		{name: "by subnet", tbl: mlx, typed: true, spec: "10.1.0.0/16", index: -1, want: 8},
		{name: "by IPv6 subnet", tbl: mlx, typed: true, spec: "2001:db8::/32", index: -1, want: 6},
		{name: "address of an absent netdev", tbl: mlx, typed: true, spec: "192.0.2.1", index: -1, want: -1,
			errHas: []string{"not in this network namespace", "[10 ::ffff:192.0.2.1 RoCE v2 eth9*]"}},
		{name: "address not in the table", tbl: mlx, typed: true, spec: "10.7.7.7", index: -1, want: -1,
			errHas: []string{"no GID of 10.7.7.7"}},
		{name: "v1-only refused", tbl: v1only, typed: true, index: -1, want: -1,
			errHas: []string{"only RoCE v1", "WithGIDIndex", "VERBSRT_GID_INDEX", "[0 fe80::1 RoCE v1 eth1], [1 ::ffff:10.0.0.1 RoCE v1 eth1]"}},
		{name: "v1 asked for", tbl: v1only, typed: true, index: 1, want: 1, whyHas: "asked for"},
		{name: "index asked for is empty", tbl: mlx, typed: true, index: 4, want: -1, errHas: []string{"GID index 4", "empty"}},
		{name: "index outside the netdev asked for", tbl: mlx, typed: true, spec: "eth2", index: 3, want: -1, errHas: []string{"not eth2"}},
		{name: "only an absent netdev", tbl: elsewhere, typed: true, index: -1, want: -1, errHas: []string{"eth9*"}},
		{name: "absent netdev asked for by index", tbl: elsewhere, typed: true, index: 1, want: 1},
		{name: "no netdev reported counts as present", tbl: table(ent("10.0.0.1", v2, "")), typed: true, index: -1, want: 0},
		{name: "InfiniBand: index 0", tbl: ib, typed: true, ll: verbs.LinkLayerInfiniBand, index: -1, want: 0, whyHas: "LID"},
		{name: "untyped: first IPv4-mapped", tbl: untyped, index: -1, want: 1},
		{name: "untyped: subnet", tbl: untyped, spec: "10.1.0.0/24", index: -1, want: 2},
		{name: "untyped: no IPv4, index 0", tbl: untypedV6, index: -1, want: 0},
		{name: "untyped: netdev cannot be told", tbl: untyped, spec: "eth1", index: -1, want: -1, errHas: []string{"netdevs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ll := cmpOr(tc.ll, verbs.LinkLayerEthernet)
			e, why, err := pickGID(tc.tbl, tc.typed, ll, spec(tc.spec), tc.index, "WithGIDIndex", gidView{}, present)
			if tc.want < 0 {
				if err == nil {
					t.Fatalf("chose %v, want an error", e)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil || e.Index != tc.want {
				t.Fatalf("chose %v (%v), want index %d", e, err, tc.want)
			}
			if !strings.Contains(why, tc.whyHas) {
				t.Errorf("why %q lacks %q", why, tc.whyHas)
			}
		})
	}
}

func cmpOr[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

func TestParseDeviceSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // fmt of the fields that matter, or "error"
	}{
		{"", "name= port=0 pci= addr=invalid IP prefix=invalid Prefix netdev="},
		{"mlx5_0", "name=mlx5_0 port=0 pci= addr=invalid IP prefix=invalid Prefix netdev="},
		{"mlx5_0:2", "name=mlx5_0 port=2 pci= addr=invalid IP prefix=invalid Prefix netdev="},
		{"eth1", "name=eth1 port=0 pci= addr=invalid IP prefix=invalid Prefix netdev="},
		{"10.0.0.1", "name= port=0 pci= addr=10.0.0.1 prefix=invalid Prefix netdev="},
		{"::ffff:10.0.0.1", "name= port=0 pci= addr=10.0.0.1 prefix=invalid Prefix netdev="},
		{"fe80::1", "name= port=0 pci= addr=fe80::1 prefix=invalid Prefix netdev="},
		{"fe80::1%eth1", "name= port=0 pci= addr=fe80::1 prefix=invalid Prefix netdev=eth1"},
		{"10.0.0.7/24", "name= port=0 pci= addr=invalid IP prefix=10.0.0.0/24 netdev="},
		{"0000:3B:00.0", "name= port=0 pci=0000:3b:00.0 addr=invalid IP prefix=invalid Prefix netdev="},
		{"3b:00.1", "name= port=0 pci=0000:3b:00.1 addr=invalid IP prefix=invalid Prefix netdev="},
		{"mlx5_0:0", "error"},
		{"mlx5_0:256", "error"},
		{"mlx5_0:x", "error"},
		{":2", "error"},
		{"a b", "error"},
		{"10.0.0.0/33", "error"},
	} {
		d, err := parseDeviceSpec(tc.in)
		got := "error"
		if err == nil {
			got = fmt.Sprintf("name=%s port=%d pci=%s addr=%v prefix=%v netdev=%s", d.name, d.port, d.pci, d.addr, d.prefix, d.netdev)
		}
		if got != tc.want {
			t.Errorf("parseDeviceSpec(%q) = %s (%v), want %s", tc.in, got, err, tc.want)
		}
	}
}

// TestResolveWant checks that the environment wins over the options and
// that a bad value is refused with an error naming where it came from.
func TestResolveWant(t *testing.T) {
	for _, tc := range []struct {
		name     string
		device   string
		gidIndex int
		env      map[string]string
		want     string // "spec port index", or an error's text
	}{
		{name: "options", device: "mlx5_0:2", gidIndex: 3, want: "mlx5_0 2 3"},
		{name: "env device wins", device: "mlx5_0:2", gidIndex: -1, env: map[string]string{envDevice: "mlx5_1"}, want: "mlx5_1 0 -1"},
		{name: "env port wins", device: "mlx5_0:2", gidIndex: -1, env: map[string]string{envPort: "1"}, want: "mlx5_0 1 -1"},
		{name: "env index wins", device: "", gidIndex: 3, env: map[string]string{envGIDIndex: "0"}, want: " 0 0"},
		{name: "bad option device", device: "a b", gidIndex: -1, want: "WithDevice"},
		{name: "bad env device", device: "", gidIndex: -1, env: map[string]string{envDevice: "mlx5_0:99999"}, want: envDevice},
		{name: "bad env port", gidIndex: -1, env: map[string]string{envPort: "0"}, want: envPort},
		{name: "bad env port word", gidIndex: -1, env: map[string]string{envPort: "two"}, want: envPort},
		{name: "bad env index", gidIndex: -1, env: map[string]string{envGIDIndex: "256"}, want: envGIDIndex},
		{name: "negative env index", gidIndex: -1, env: map[string]string{envGIDIndex: "-1"}, want: envGIDIndex},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaults()
			cfg.device, cfg.gidIndex = tc.device, tc.gidIndex
			w, err := resolveWant(cfg, func(k string) string { return tc.env[k] })
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) || !errors.Is(err, verbs.ErrInvalidArgument) {
					t.Fatalf("error %v, want one naming %s", err, tc.want)
				}
				return
			}
			if got := fmt.Sprintf("%s %d %d", w.spec.name, w.port, w.gidIndex); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
