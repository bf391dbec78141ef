package ibv

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// fakeSysfs writes the sysfs files of one port of device dev under root:
// gids[i] is the GID text of entry i, types[i] and ndevs[i] its attribute
// files ("-" for a file whose read fails, as the kernel's do for an empty
// slot).
func fakeSysfs(t *testing.T, root, dev string, port int, gids, types, ndevs []string) {
	t.Helper()
	dir := filepath.Join(root, dev, "ports", itoa(port))
	for _, sub := range []string{"gids", "gid_attrs/types", "gid_attrs/ndevs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(sub string, i int, v string) {
		p := filepath.Join(dir, sub, itoa(i))
		if v == "-" {
			// A directory in the file's place: reading it fails, as
			// reading an empty slot's attributes does on Linux (EINVAL).
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range gids {
		write("gids", i, gids[i])
		write("gid_attrs/types", i, types[i])
		write("gid_attrs/ndevs", i, ndevs[i])
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestReadGIDTable reads an mlx5-like table laid out as the kernel shows
// it (an empty slot, whose attribute files fail to read, in the middle),
// an InfiniBand port, and a device sysfs does not have.
func TestReadGIDTable(t *testing.T) {
	root := t.TempDir()
	const zero = "0000:0000:0000:0000:0000:0000:0000:0000"
	fakeSysfs(t, root, "mlx5_0", 1,
		[]string{"fe80:0000:0000:0000:0a00:27ff:fe00:0001", "fe80:0000:0000:0000:0a00:27ff:fe00:0001",
			"0000:0000:0000:0000:0000:ffff:0a00:0001", "0000:0000:0000:0000:0000:ffff:0a00:0001", zero,
			"2001:0db8:0000:0000:0000:0000:0000:0001"},
		[]string{"IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2", "-", "RoCE v2"},
		[]string{"eth1", "eth1", "eth1", "eth1", "-", "eth2"})
	fakeSysfs(t, root, "mlx5_1", 1, []string{"fe80:0000:0000:0000:0002:c903:0000:0001"}, []string{"IB/RoCE v1"}, []string{"-"})
	g := func(s string) verbs.GID { return verbs.GID(netip.MustParseAddr(s).As16()) }
	got, err := readGIDTable(root, "mlx5_0", 1, verbs.LinkLayerEthernet)
	want := []verbs.GIDEntry{
		ge(0, g("fe80::a00:27ff:fe00:1"), verbs.GIDTypeRoCEv1, "eth1"), ge(1, g("fe80::a00:27ff:fe00:1"), verbs.GIDTypeRoCEv2, "eth1"),
		ge(2, g("::ffff:10.0.0.1"), verbs.GIDTypeRoCEv1, "eth1"), ge(3, g("::ffff:10.0.0.1"), verbs.GIDTypeRoCEv2, "eth1"),
		ge(5, g("2001:db8::1"), verbs.GIDTypeRoCEv2, "eth2"),
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("mlx5_0: %v, %v; want %v", got, err, want)
	}
	got, err = readGIDTable(root, "mlx5_1", 1, verbs.LinkLayerInfiniBand)
	if want := []verbs.GIDEntry{ge(0, g("fe80::2:c903:0:1"), verbs.GIDTypeIB, "")}; err != nil || !slices.Equal(got, want) {
		t.Errorf("mlx5_1: %v, %v; want %v", got, err, want)
	}
	if _, err := readGIDTable(root, "mlx5_9", 1, verbs.LinkLayerEthernet); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("absent device: %v, want ErrNotSupported (the caller falls back)", err)
	}
}

func TestReadPCIAddress(t *testing.T) {
	root := t.TempDir()
	pci := filepath.Join(root, "devices", "pci0000:3a", "0000:3b:00.0")
	if err := os.MkdirAll(pci, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"mlx5_0", "rxe0"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(pci, filepath.Join(root, "mlx5_0", "device")); err != nil {
		t.Fatal(err)
	}
	if got := readPCIAddress(root, "mlx5_0"); got != "0000:3b:00.0" {
		t.Errorf("mlx5_0: %q", got)
	}
	if got := readPCIAddress(root, "rxe0"); got != "" {
		t.Errorf("rxe0 (no device link): %q", got)
	}
}

func ge(i int, g verbs.GID, t verbs.GIDType, netdev string) verbs.GIDEntry {
	return verbs.GIDEntry{Index: i, GID: g, Type: t, Netdev: netdev}
}
