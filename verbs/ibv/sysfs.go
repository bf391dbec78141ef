package ibv

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/verbsrt/verbsrt/verbs"
)

// sysfsRoot is where the kernel shows RDMA devices: for each device and
// port the GID table (ports/P/gids/N), each entry's type
// (gid_attrs/types/N) and network device (gid_attrs/ndevs/N), as rdma-core's
// show_gids reads them; libibverbs' own ibv_query_gid_table reads the same
// files where the kernel lacks the ioctl.
const sysfsRoot = "/sys/class/infiniband"

// readGIDTable reads the non-empty entries of port's GID table of device
// dev under root, with types and netdevs. ll is the port's link layer:
// sysfs calls a type "IB/RoCE v1", which is IB on an InfiniBand port and
// RoCE v1 on an Ethernet one. An entry the kernel has no attributes for
// (a read fails, as it does for empty slots) is left out.
func readGIDTable(root, dev string, port uint8, ll verbs.LinkLayer) ([]verbs.GIDEntry, error) {
	dir := filepath.Join(root, dev, "ports", strconv.Itoa(int(port)))
	names, err := os.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		// No sysfs (not mounted in this container) or no such device
		// there: the caller falls back to the GIDs without types.
		return nil, verbs.Errorf("ibv_query_gid_table", verbs.ErrNotSupported, "%v", err)
	}
	idx := make([]int, 0, len(names))
	for _, n := range names {
		if i, err := strconv.Atoi(n.Name()); err == nil {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	var out []verbs.GIDEntry
	for _, i := range idx {
		n := strconv.Itoa(i)
		raw, err := os.ReadFile(filepath.Join(dir, "gids", n))
		if err != nil {
			continue
		}
		a, err := netip.ParseAddr(strings.TrimSpace(string(raw)))
		if err != nil || !a.Is6() {
			continue
		}
		g := verbs.GID(a.As16())
		if g.IsZero() {
			continue
		}
		typ, err := os.ReadFile(filepath.Join(dir, "gid_attrs", "types", n))
		if err != nil {
			continue // no attributes: the kernel has no entry there
		}
		e := verbs.GIDEntry{Index: i, GID: g}
		switch t := strings.TrimSpace(string(typ)); {
		case t == "RoCE v2":
			e.Type = verbs.GIDTypeRoCEv2
		case ll == verbs.LinkLayerInfiniBand:
			e.Type = verbs.GIDTypeIB
		default:
			e.Type = verbs.GIDTypeRoCEv1
		}
		if nd, err := os.ReadFile(filepath.Join(dir, "gid_attrs", "ndevs", n)); err == nil {
			e.Netdev = strings.TrimSpace(string(nd))
		}
		out = append(out, e)
	}
	return out, nil
}

// readPCIAddress returns the PCI address of device dev under root: the
// name of the PCI device its "device" link points to, "" for a device
// that has none (rxe, siw).
func readPCIAddress(root, dev string) string {
	p, err := filepath.EvalSymlinks(filepath.Join(root, dev, "device"))
	if err != nil {
		return ""
	}
	base := filepath.Base(p)
	if !pciAddrRE(base) {
		return ""
	}
	return base
}

// pciAddrRE reports whether s is a long-form PCI address, 0000:3b:00.0.
func pciAddrRE(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i, c := range s {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// readNetdev returns the name sysfs gives the network device of GID entry
// index of port of device dev under root (gid_attrs/ndevs/N), "" where it
// cannot be read (no sysfs here, an InfiniBand entry).
func readNetdev(root, dev string, port uint8, index int) string {
	nd, err := os.ReadFile(filepath.Join(root, dev, "ports", strconv.Itoa(int(port)), "gid_attrs", "ndevs", strconv.Itoa(index)))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(nd))
}
