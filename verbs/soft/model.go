package soft

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/verbsrt/verbsrt/verbs"
)

// DeviceModel is what a soft device shows of itself: its ports, their
// link layers, MTUs and GID tables. It lets the layers above be tested
// against the tables real NICs have (Config.Models).
type DeviceModel struct {
	// PCIAddress is what the device reports as its PCI address
	// (verbs.PCIAddress), e.g. "0000:3b:00.0"; empty for none.
	PCIAddress string
	// Ports are the device's ports, port 1 first (at most 255). None: one
	// port with the default GID table (Ports' doc).
	Ports []PortModel
	// MaxQPRdAtom is how many RDMA READs and atomics a QP of the device
	// takes at once as responder (max_qp_rd_atom, the bound of a QP's
	// max_dest_rd_atomic), and MaxQPInitRdAtom how many it may have
	// outstanding as initiator (max_qp_init_rd_atom, the bound of
	// max_rd_atomic): 1 to 16, 0 means 16. A modify past either fails with
	// EINVAL, as on hardware.
	MaxQPRdAtom     int
	MaxQPInitRdAtom int
}

// PortModel describes one port of a DeviceModel.
type PortModel struct {
	// LinkLayer is the port's link layer; zero means Ethernet (RoCE).
	LinkLayer verbs.LinkLayer
	// ActiveMTU is the port's active MTU in bytes, 256 to 4096; 0 means
	// Config.ActiveMTU.
	ActiveMTU int
	// LID is the port's local identifier on an InfiniBand link layer: a
	// QP on such a port whose address vector has no global route (is_global
	// 0) reaches the port of the fabric whose LID is the vector's DLID,
	// and nothing when there is none. The first port with a LID keeps it.
	LID uint16
	// GIDs is the GID table: entry i is at index i (its Index field is
	// ignored), a zero GID is an empty slot. Nil gives the default table:
	// a link-local GID derived from the device's GUID at index 0 and an
	// IPv4-mapped one (10.77.x.y) at index 1, both RoCE v2 with no netdev,
	// the table rxe shows on one address. Every GID of the fabric routes
	// to its device, whatever its type or netdev.
	GIDs []verbs.GIDEntry
}

// RoCEPairs returns the GID entries mlx5 shows for the addresses of
// netdev: for each address a RoCE v1 entry, then a RoCE v2 one (show_gids:
// index 0 v1, 1 v2, 2 v1, ...). Append the results for several netdevs to
// build a port's table.
func RoCEPairs(netdev string, addrs ...netip.Addr) []verbs.GIDEntry {
	out := make([]verbs.GIDEntry, 0, 2*len(addrs))
	for _, a := range addrs {
		g := verbs.GIDFromAddr(a)
		out = append(out, verbs.GIDEntry{GID: g, Type: verbs.GIDTypeRoCEv1, Netdev: netdev},
			verbs.GIDEntry{GID: g, Type: verbs.GIDTypeRoCEv2, Netdev: netdev})
	}
	return out
}

// port is a port of a device as built from its PortModel.
type port struct {
	linkLayer verbs.LinkLayer
	mtu       verbs.MTU
	lid       uint16
	gids      []verbs.GIDEntry // by index, zero GIDs included
	madeUp    bool             // gids is the default table (PortModel.GIDs nil)
}

// buildPorts makes device i's ports from m, with mtu where the model
// leaves the MTU to the provider.
func buildPorts(m DeviceModel, i int, guid uint64, mtu verbs.MTU) ([]port, error) {
	models := m.Ports
	if len(models) == 0 {
		models = []PortModel{{}}
	}
	if len(models) > 255 {
		return nil, fmt.Errorf("soft: device %d: %d ports, at most 255", i, len(models))
	}
	ports := make([]port, len(models))
	for n, pm := range models {
		pt := port{linkLayer: pm.LinkLayer, mtu: mtu, lid: pm.LID}
		if pt.linkLayer == verbs.LinkLayerUnspecified {
			pt.linkLayer = verbs.LinkLayerEthernet
		}
		if pm.ActiveMTU != 0 {
			if pt.mtu = verbs.MTUFromBytes(pm.ActiveMTU); pt.mtu == 0 {
				return nil, fmt.Errorf("soft: device %d port %d: ActiveMTU %d is not 256, 512, 1024, 2048 or 4096", i, n+1, pm.ActiveMTU)
			}
		}
		if pm.GIDs == nil {
			pt.gids, pt.madeUp = defaultGIDs(i, guid), true
		} else {
			pt.gids = make([]verbs.GIDEntry, len(pm.GIDs))
			copy(pt.gids, pm.GIDs)
		}
		for k := range pt.gids {
			pt.gids[k].Index = k
		}
		ports[n] = pt
	}
	return ports, nil
}

// defaultGIDs gives device i a link-local GID (index 0) derived from its
// GUID and an IPv4-mapped one (index 1), the table rxe shows on a RoCEv2
// port.
func defaultGIDs(i int, guid uint64) []verbs.GIDEntry {
	var ll verbs.GID
	ll[0], ll[1] = 0xfe, 0x80
	binary.BigEndian.PutUint64(ll[8:], guid)
	v4 := netip.AddrFrom4([4]byte{10, 77, byte(i >> 8), byte(i + 1)})
	return []verbs.GIDEntry{{GID: ll, Type: verbs.GIDTypeRoCEv2}, {GID: verbs.GIDFromAddr(v4), Type: verbs.GIDTypeRoCEv2}}
}

// rdAtomic is a depth of a model (MaxQPRdAtom, MaxQPInitRdAtom), checked:
// 0 means maxRdAtomic.
func rdAtomic(i int, what string, n int) (int, error) {
	switch {
	case n == 0:
		return maxRdAtomic, nil
	case n < 1 || n > maxRdAtomic:
		return 0, fmt.Errorf("soft: device %d: %s %d outside 1..%d", i, what, n, maxRdAtomic)
	}
	return n, nil
}

// port returns port n of d (numbered from 1), nil when there is none.
func (d *device) portN(n uint8) *port {
	if n == 0 || int(n) > len(d.ports) {
		return nil
	}
	return &d.ports[n-1]
}

// PCIAddress implements verbs.PCIAddresser.
func (d *device) PCIAddress() string { return d.pci }

// QueryGIDTable implements verbs.GIDTabler.
func (c *context) QueryGIDTable(port uint8) ([]verbs.GIDEntry, error) {
	if err := c.Registry().Check("ibv_query_gid_table"); err != nil {
		return nil, err
	}
	pt := c.dev.portN(port)
	if pt == nil {
		return nil, verbs.Errorf("ibv_query_gid_table", verbs.ErrNotFound, "port %d (the device has %d)", port, len(c.dev.ports))
	}
	out := make([]verbs.GIDEntry, 0, len(pt.gids))
	for _, e := range pt.gids {
		if !e.GID.IsZero() {
			out = append(out, e)
		}
	}
	return out, nil
}
