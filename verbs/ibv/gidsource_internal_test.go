package ibv

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

func gidOf(s string) verbs.GID { return verbs.GID(netip.MustParseAddr(s).As16()) }

// TestGIDTableFallbackOrder: libibverbs' table is used whenever the call
// succeeds, sysfs is not read then; every failure of libibverbs (no
// _ibv_query_gid_table in the library, a kernel without the ioctl, the
// library's own sysfs fallback failing in a container) leads to sysfs;
// when both fail, the error matches verbs.ErrNotSupported (so that
// verbs.QueryGIDTable reads the untyped GIDs) and names both causes.
func TestGIDTableFallbackOrder(t *testing.T) {
	fromVerbs := []ibvGIDEntry{{GID: gidOf("::ffff:10.0.0.1"), Index: 1, Port: 1, Type: 2, Ifindex: 3}}
	wantVerbs := []verbs.GIDEntry{{Index: 1, GID: gidOf("::ffff:10.0.0.1"), Type: verbs.GIDTypeRoCEv2, Netdev: "if3"}}
	fromSysfs := []verbs.GIDEntry{{Index: 0, GID: gidOf("fe80::1"), Type: verbs.GIDTypeRoCEv1, Netdev: "eth9"}}
	sysfsMissing := verbs.Errorf("ibv_query_gid_table", verbs.ErrNotSupported, "open /sys/class/infiniband/x: no such file")
	sysfsBroken := errors.New("sysfs: permission denied")
	for _, tc := range []struct {
		name       string
		verbsErr   error
		sysfsErr   error
		want       []verbs.GIDEntry
		wantSysfs  bool // sysfs read
		wantErrIs  error
		wantErrHas []string
	}{
		{name: "libibverbs answers", want: wantVerbs},
		{name: "no symbol", verbsErr: errNoGIDTable, want: fromSysfs, wantSysfs: true},
		{name: "EOPNOTSUPP", verbsErr: verbs.FromErrno("ibv_query_gid_table", syscall.EOPNOTSUPP, ""), want: fromSysfs, wantSysfs: true},
		{name: "ENOSYS", verbsErr: verbs.FromErrno("ibv_query_gid_table", syscall.ENOSYS, ""), want: fromSysfs, wantSysfs: true},
		{name: "library's sysfs fallback EINVAL", verbsErr: verbs.FromErrno("ibv_query_gid_table", syscall.EINVAL, ""), want: fromSysfs, wantSysfs: true},
		{name: "library's ifindex lookup ENODEV", verbsErr: verbs.FromErrno("ibv_query_gid_table", syscall.ENODEV, ""), want: fromSysfs, wantSysfs: true},
		{name: "both unreadable", verbsErr: errNoGIDTable, sysfsErr: sysfsMissing, wantSysfs: true,
			wantErrIs: verbs.ErrNotSupported, wantErrHas: []string{"_ibv_query_gid_table", "no such file"}},
		{name: "sysfs broken", verbsErr: errNoGIDTable, sysfsErr: sysfsBroken, wantSysfs: true, wantErrIs: sysfsBroken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readSysfs := false
			got, err := gidTable(1, gidSources{
				verbs: func() ([]ibvGIDEntry, error) {
					if tc.verbsErr != nil {
						return nil, tc.verbsErr
					}
					return fromVerbs, nil
				},
				sysfs: func() ([]verbs.GIDEntry, error) {
					readSysfs = true
					if tc.sysfsErr != nil {
						return nil, tc.sysfsErr
					}
					return fromSysfs, nil
				},
				netdev: func(_ int, ifindex uint32) string { return "if" + itoa(int(ifindex)) },
			})
			if readSysfs != tc.wantSysfs {
				t.Errorf("sysfs read: %t, want %t", readSysfs, tc.wantSysfs)
			}
			if tc.wantErrIs != nil {
				if !errors.Is(err, tc.wantErrIs) {
					t.Fatalf("error %v, want one matching %v", err, tc.wantErrIs)
				}
				for _, s := range tc.wantErrHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestFromIBVEntries converts a device's whole table as
// ibv_query_gid_table returns it (every port, valid entries only) into one
// port's entries in index order: libibverbs' type values kept, a type
// outside uint8 never mistaken for a known one, zero GIDs and other ports
// left out, the netdev asked for by index and ifindex only where the
// ifindex is not 0 (an InfiniBand entry has none).
func TestFromIBVEntries(t *testing.T) {
	raw := []ibvGIDEntry{
		{GID: gidOf("::ffff:10.0.0.1"), Index: 3, Port: 1, Type: 2, Ifindex: 5},
		{GID: gidOf("::ffff:10.0.0.1"), Index: 2, Port: 1, Type: 1, Ifindex: 5},
		{GID: gidOf("fe80::2:c903:0:1"), Index: 0, Port: 2, Type: 0, Ifindex: 0},
		{GID: gidOf("::"), Index: 4, Port: 1, Type: 2, Ifindex: 5},
		{GID: gidOf("2001:db8::1"), Index: 5, Port: 1, Type: 2, Ifindex: 9},
		{GID: gidOf("2001:db8::2"), Index: 6, Port: 1, Type: 7, Ifindex: 9},
		{GID: gidOf("2001:db8::3"), Index: 7, Port: 1, Type: 258, Ifindex: 9},
	}
	type call struct {
		index   int
		ifindex uint32
	}
	var calls []call
	netdev := func(index int, ifindex uint32) string {
		calls = append(calls, call{index, ifindex})
		return map[uint32]string{5: "eth1", 9: "eth2"}[ifindex]
	}
	got := fromIBVEntries(raw, 1, netdev)
	want := []verbs.GIDEntry{
		{Index: 2, GID: gidOf("::ffff:10.0.0.1"), Type: verbs.GIDTypeRoCEv1, Netdev: "eth1"},
		{Index: 3, GID: gidOf("::ffff:10.0.0.1"), Type: verbs.GIDTypeRoCEv2, Netdev: "eth1"},
		{Index: 5, GID: gidOf("2001:db8::1"), Type: verbs.GIDTypeRoCEv2, Netdev: "eth2"},
		{Index: 6, GID: gidOf("2001:db8::2"), Type: verbs.GIDType(7), Netdev: "eth2"},
		{Index: 7, GID: gidOf("2001:db8::3"), Type: verbs.GIDType(255), Netdev: "eth2"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("port 1:\n got %v\nwant %v", got, want)
	}
	calls = nil
	got = fromIBVEntries(raw, 2, netdev)
	if want := []verbs.GIDEntry{{Index: 0, GID: gidOf("fe80::2:c903:0:1"), Type: verbs.GIDTypeIB}}; !slices.Equal(got, want) || len(calls) != 0 {
		t.Errorf("port 2 (InfiniBand): %v, netdev asked %v; want %v, not asked", got, calls, want)
	}
	if got := fromIBVEntries(raw, 3, netdev); len(got) != 0 {
		t.Errorf("port 3: %v, want none", got)
	}
}

// TestNetdevName: sysfs' name wins (an ifindex names a device only within
// its namespace, and here the same number is another device); without it
// the ifindex is looked up in this namespace, and one that is not here
// gives "".
func TestNetdevName(t *testing.T) {
	defer func(f func(int) (*net.Interface, error)) { interfaceByIndex = f }(interfaceByIndex)
	interfaceByIndex = func(i int) (*net.Interface, error) {
		if i == 2 {
			return &net.Interface{Index: 2, Name: "eth0"}, nil
		}
		return nil, errors.New("no such network interface")
	}
	for _, tc := range []struct {
		ifindex uint32
		sysfs   string
		want    string
	}{
		{2, "ens1f0", "ens1f0"},
		{2, "", "eth0"},
		{7, "", ""},
		{7, "net1", "net1"},
	} {
		if got := netdevName(tc.ifindex, tc.sysfs); got != tc.want {
			t.Errorf("netdevName(%d, %q) = %q, want %q", tc.ifindex, tc.sysfs, got, tc.want)
		}
	}
}

// TestReadNetdev reads gid_attrs/ndevs/N, "" where the file fails to read.
func TestReadNetdev(t *testing.T) {
	root := t.TempDir()
	fakeSysfs(t, root, "mlx5_0", 1, []string{"fe80:0000:0000:0000:0a00:27ff:fe00:0001", "fe80:0000:0000:0000:0a00:27ff:fe00:0001"},
		[]string{"IB/RoCE v1", "-"}, []string{"eth1", "-"})
	for _, tc := range []struct {
		dev   string
		index int
		want  string
	}{{"mlx5_0", 0, "eth1"}, {"mlx5_0", 1, ""}, {"mlx5_0", 2, ""}, {"mlx5_9", 0, ""}} {
		if got := readNetdev(root, tc.dev, 1, tc.index); got != tc.want {
			t.Errorf("readNetdev(%s, 1, %d) = %q, want %q", tc.dev, tc.index, got, tc.want)
		}
	}
}
