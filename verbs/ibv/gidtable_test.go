//go:build linux && cgo

package ibv_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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

// TestOptionalSymbol loads, in a child process, a libibverbs that exports
// every function the package requires and not _ibv_query_gid_table, as
// rdma-core before 32 does: the library loads (Libraries reports no error)
// and the GID table's libibverbs path is off, so QueryGIDTable reads sysfs.
// The machine's own libibverbs, where it is rdma-core 32 or later, has the
// function. The stub is built from the required names in lib.c.
func TestOptionalSymbol(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build a stub libibverbs", cc)
	}
	src, err := os.ReadFile("lib.c")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(src), "verbs_syms[] = {")
	block, _, _ = strings.Cut(block, "};")
	var stub strings.Builder
	names := regexp.MustCompile(`SYM\(vrt_ibv, "(\w+)", (\w+)\)`).FindAllStringSubmatch(block, -1)
	for _, m := range names {
		fmt.Fprintf(&stub, "void *%s%s(void) { return 0; }\n", m[1], m[2])
	}
	if len(names) < 10 {
		t.Fatalf("found %d required symbols in lib.c", len(names))
	}
	dir := t.TempDir()
	so := filepath.Join(dir, "libverbsrt-stub-ibverbs.so.1")
	if err := os.WriteFile(filepath.Join(dir, "stub.c"), []byte(stub.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", so, filepath.Join(dir, "stub.c")).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	child := func(libs string) map[string]string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), missingLibsEnv+"="+libs)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		lines := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if k, v, ok := strings.Cut(l, ": "); ok {
				lines[k] = v
			}
		}
		return lines
	}
	lines := child(so + ",libverbsrt-absent-rdmacm.so.1")
	if l := lines["library libibverbs"]; !strings.HasPrefix(l, "<nil>") {
		t.Errorf("libibverbs without _ibv_query_gid_table: %q, want it loaded", l)
	}
	if l := lines["gid table"]; l != "false" {
		t.Errorf("libibverbs without _ibv_query_gid_table: gid table %q, want false", l)
	}
	lines = child("libibverbs.so.1,librdmacm.so.1")
	if !strings.HasPrefix(lines["library libibverbs"], "<nil>") {
		t.Skipf("no libibverbs on this machine: %s", lines["library libibverbs"])
	}
	if l := lines["gid table"]; l != "true" {
		t.Errorf("the machine's libibverbs (%s): gid table %q, want true (rdma-core 32 and later)", lines["library libibverbs"], l)
	}
}
