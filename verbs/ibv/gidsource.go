package ibv

import (
	"errors"
	"net"
	"slices"
	"syscall"

	"github.com/verbsrt/verbsrt/verbs"
)

// ibvGIDEntry is struct ibv_gid_entry as Go reads it from
// ibv_query_gid_table: one valid entry of one port of a device.
type ibvGIDEntry struct {
	GID     verbs.GID
	Index   uint32
	Port    uint32
	Type    uint32 // enum ibv_gid_type, the values of verbs.GIDType
	Ifindex uint32 // the netdev's, in its own network namespace; 0 for none
}

// gidSources are where gidTable reads one port's GID table: verbs is
// libibverbs' ibv_query_gid_table for the whole device, sysfs the kernel's
// files for the port (readGIDTable), and netdev the name of an entry's
// network device.
type gidSources struct {
	verbs  func() ([]ibvGIDEntry, error)
	sysfs  func() ([]verbs.GIDEntry, error)
	netdev func(index int, ifindex uint32) string
}

// gidTable returns port's GID table from libibverbs, and from sysfs where
// libibverbs cannot give it. libibverbs answers through the kernel's
// ioctl (Linux 5.10 and later), which needs no sysfs: it works in a
// container whose /sys does not show the device. It fails with ENOSYS
// where the library predates ibv_query_gid_table (rdma-core 32) and with
// EOPNOTSUPP where the kernel lacks the ioctl and flags were asked; on
// such a kernel libibverbs reads sysfs itself and fails with EINVAL where
// it cannot, or with ENODEV where an entry's netdev is not in this network
// namespace (it turns each netdev name into an ifindex here). Every error
// is therefore a reason to read sysfs, which names netdevs wherever they
// are; where sysfs fails too, the error matches verbs.ErrNotSupported
// and says both, so that verbs.QueryGIDTable reads the GIDs without
// types.
func gidTable(port uint8, s gidSources) ([]verbs.GIDEntry, error) {
	raw, verr := s.verbs()
	if verr == nil {
		return fromIBVEntries(raw, port, s.netdev), nil
	}
	out, serr := s.sysfs()
	if serr == nil {
		return out, nil
	}
	if errors.Is(serr, verbs.ErrNotSupported) {
		return nil, verbs.Errorf("ibv_query_gid_table", verbs.ErrNotSupported, "libibverbs: %v; sysfs: %v", verr, serr)
	}
	return nil, serr
}

// errNoGIDTable is the error of a library without _ibv_query_gid_table
// (vrt_query_gid_table's ENOSYS).
var errNoGIDTable = verbs.Errorf("ibv_query_gid_table", verbs.ErrNotSupported,
	"%v: libibverbs has no _ibv_query_gid_table (rdma-core 32 and later)", syscall.ENOSYS)

// fromIBVEntries converts the entries of port among raw, a device's whole
// table, into verbs.GIDEntry in index order, leaving out zero GIDs as the
// sysfs reader does. A type keeps libibverbs' value (verbs.GIDType has the
// same), and one this package does not know, which the runtime's
// selection never takes for RoCE v2, stays unknown. netdev names the
// network device of an entry whose ifindex is not 0.
func fromIBVEntries(raw []ibvGIDEntry, port uint8, netdev func(index int, ifindex uint32) string) []verbs.GIDEntry {
	var out []verbs.GIDEntry
	for _, r := range raw {
		if r.Port != uint32(port) || r.GID.IsZero() {
			continue
		}
		e := verbs.GIDEntry{Index: int(r.Index), GID: r.GID, Type: verbs.GIDType(min(r.Type, 255))}
		if r.Ifindex != 0 {
			e.Netdev = netdev(e.Index, r.Ifindex)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b verbs.GIDEntry) int { return a.Index - b.Index })
	return out
}

// interfaceByIndex is net.InterfaceByIndex; tests replace it.
var interfaceByIndex = net.InterfaceByIndex

// netdevName names the network device of GID entry index, whose ifindex
// libibverbs gave. sysfsName is the kernel's name for it (gid_attrs/ndevs),
// "" where sysfs cannot be read. That name is preferred: an ifindex is
// unique only within a network namespace, and the entry's netdev may be
// in another one (another pod's, on an RDMA device shared between
// namespaces), where the same number can be a different device of this
// one. Without sysfs the ifindex is looked up here: the name of the
// device it is here, or "" when no device here has it, which means the
// netdev is in another namespace; the runtime's selection then sees no
// netdev reported and does not rule the entry out as absent.
func netdevName(ifindex uint32, sysfsName string) string {
	if sysfsName != "" {
		return sysfsName
	}
	ifi, err := interfaceByIndex(int(ifindex))
	if err != nil {
		return ""
	}
	return ifi.Name
}
