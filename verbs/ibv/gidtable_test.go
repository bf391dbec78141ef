//go:build linux && cgo

package ibv_test

import (
	"slices"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

// TestGIDTableSources reads every port's GID table of every device twice,
// once from libibverbs alone (ibv_query_gid_table through the kernel's
// ioctl, netdevs by ifindex in this namespace) and once from sysfs alone,
// and requires the same entries: indexes, GIDs, types and netdevs. What
// QueryGIDTable returns is that table too. In the rxevm guest (rxe0 on
// veth0, rxe1 on veth1, all in this namespace) each table also holds the
// link-local, IPv4-mapped and IPv6 GIDs, all RoCE v2 on the device's veth.
func TestGIDTableSources(t *testing.T) {
	for _, dev := range devices(t) {
		ctx, err := dev.Open()
		if err != nil {
			t.Fatalf("Open(%s): %v", dev.Name(), err)
		}
		defer ctx.Close()
		da, err := ctx.QueryDevice()
		if err != nil {
			t.Fatal(err)
		}
		for p := 1; p <= da.PhysPortCnt; p++ {
			port := uint8(p)
			fromVerbs, err := ibv.GIDTableFromVerbs(ctx, port)
			if err != nil {
				t.Fatalf("%s port %d: ibv_query_gid_table: %v", dev.Name(), port, err)
			}
			fromSysfs, err := ibv.GIDTableFromSysfs(ctx, port)
			if err != nil {
				t.Fatalf("%s port %d: sysfs: %v", dev.Name(), port, err)
			}
			if len(fromVerbs) == 0 || !slices.Equal(fromVerbs, fromSysfs) {
				t.Errorf("%s port %d:\nlibibverbs %v\n     sysfs %v", dev.Name(), port, fromVerbs, fromSysfs)
			}
			got, typed, err := verbs.QueryGIDTable(ctx, port)
			if err != nil || !typed || !slices.Equal(got, fromVerbs) {
				t.Errorf("%s port %d: QueryGIDTable = %v, typed %t, %v; want %v", dev.Name(), port, got, typed, err, fromVerbs)
			}
			for _, e := range fromVerbs {
				t.Logf("%s port %d: %v", dev.Name(), port, e)
			}
			netdev := map[string]string{"rxe0": "veth0", "rxe1": "veth1"}[dev.Name()]
			if netdev == "" {
				continue
			}
			classes := map[string]bool{}
			for _, e := range fromVerbs {
				if e.Type != verbs.GIDTypeRoCEv2 || e.Netdev != netdev {
					t.Errorf("%s port %d: entry %v, want RoCE v2 on %s", dev.Name(), port, e, netdev)
				}
				switch a := e.Addr(); {
				case a.Is4():
					classes["IPv4"] = true
				case a.IsLinkLocalUnicast():
					classes["link-local"] = true
				default:
					classes["IPv6"] = true
				}
			}
			if len(classes) != 3 {
				t.Errorf("%s port %d: GIDs of %v, want link-local, IPv4 and IPv6", dev.Name(), port, classes)
			}
		}
	}
}
