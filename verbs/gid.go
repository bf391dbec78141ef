package verbs

import (
	"errors"
	"fmt"
	"net/netip"
)

// GIDType is the type of a GID table entry (enum ibv_gid_type): what
// encapsulation a QP using the entry speaks.
type GIDType uint8

// GID types, with libibverbs' values.
const (
	// GIDTypeIB is an entry of an InfiniBand port.
	GIDTypeIB GIDType = 0
	// GIDTypeRoCEv1 is RoCE v1: InfiniBand over Ethernet frames
	// (ethertype 0x8915), not routable across IP subnets and outside the
	// traffic class a RoCE v2 fabric's ECN and PFC are set up for.
	GIDTypeRoCEv1 GIDType = 1
	// GIDTypeRoCEv2 is RoCE v2: InfiniBand transport in UDP/IP to port
	// 4791, routable.
	GIDTypeRoCEv2 GIDType = 2
)

// String returns the type as sysfs' gid_attrs/types files and show_gids
// name it ("IB", "RoCE v1", "RoCE v2").
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint8(t))
}

// GIDEntry is one entry of a port's GID table (struct ibv_gid_entry, with
// the network device by name where libibverbs gives its ifindex: the name
// is what sysfs gives and what a deployment knows).
type GIDEntry struct {
	Index int
	GID   GID
	Type  GIDType
	// Netdev is the network device the entry belongs to ("eth1"), empty
	// when the entry has none (InfiniBand) or the provider cannot tell.
	// The device may be in another network namespace than the process.
	Netdev string
}

// Addr returns the entry's GID as an IP address, IPv4 for an IPv4-mapped
// GID.
func (e GIDEntry) Addr() netip.Addr { return netip.AddrFrom16(e.GID).Unmap() }

// String renders the entry as show_gids does: index, GID, type, netdev.
func (e GIDEntry) String() string {
	nd := e.Netdev
	if nd == "" {
		nd = "-"
	}
	return fmt.Sprintf("%d %s %s %s", e.Index, e.GID, e.Type, nd)
}

// GIDTabler is the ibv_query_gid_table extension of a Context: the GID
// table of a port with each entry's type and network device.
type GIDTabler interface {
	// QueryGIDTable returns the non-empty entries of port's GID table, in
	// index order.
	QueryGIDTable(port uint8) ([]GIDEntry, error)
}

// QueryGIDTable returns the non-empty entries of port's GID table. With
// the extension, typed is true and each entry has its type and network
// device. Without it, or when the extension's error matches
// ErrNotSupported (the attributes cannot be read here), the table is read
// with QueryGID and typed is false: Type and Netdev are unknown (zero), as
// libibverbs' compatibility path knows nothing but the GIDs either.
func QueryGIDTable(c Context, port uint8) (entries []GIDEntry, typed bool, err error) {
	if x, ok := c.(GIDTabler); ok {
		entries, err = x.QueryGIDTable(port)
		if !errors.Is(err, ErrNotSupported) {
			return entries, err == nil, err
		}
		entries = nil
	}
	pa, err := c.QueryPort(port)
	if err != nil {
		return nil, false, err
	}
	for i := range pa.GIDTblLen {
		g, err := c.QueryGID(port, i)
		if errors.Is(err, ErrNotFound) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		if !g.IsZero() {
			entries = append(entries, GIDEntry{Index: i, GID: g})
		}
	}
	return entries, false, nil
}

// PCIAddresser is implemented by devices that know their PCI address, the
// form a Kubernetes SR-IOV device plugin hands a pod
// (PCIDEVICE_<resource>=0000:3b:00.0).
type PCIAddresser interface {
	// PCIAddress returns the device's PCI address in the long form
	// (domain:bus:device.function, "0000:3b:00.0"), empty when it has
	// none.
	PCIAddress() string
}

// PCIAddress returns d's PCI address, empty when the provider cannot tell
// or the device has none.
func PCIAddress(d Device) string {
	if x, ok := d.(PCIAddresser); ok {
		return x.PCIAddress()
	}
	return ""
}
