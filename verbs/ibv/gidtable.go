//go:build linux && cgo

package ibv

import "github.com/verbsrt/verbsrt/verbs"

// QueryGIDTable implements verbs.GIDTabler from sysfs (sysfs.go): the
// kernel has exposed each GID's type and netdev there since 4.9, and
// reading it needs neither ibv_query_gid_ex (libibverbs 32 and later) nor
// a crossing into C. Where sysfs cannot be read the error matches
// verbs.ErrNotSupported, and verbs.QueryGIDTable falls back to QueryGID.
func (x *devContext) QueryGIDTable(port uint8) ([]verbs.GIDEntry, error) {
	if x.isClosed() {
		return nil, errClosed
	}
	pa, err := x.QueryPort(port)
	if err != nil {
		return nil, err
	}
	return readGIDTable(sysfsRoot, x.dev.name, port, pa.LinkLayer)
}

// PCIAddress implements verbs.PCIAddresser from sysfs: "" for a device
// without a PCI function (rxe, siw) or where sysfs cannot be read.
func (d *device) PCIAddress() string { return readPCIAddress(sysfsRoot, d.name) }

var (
	_ verbs.GIDTabler    = (*devContext)(nil)
	_ verbs.PCIAddresser = (*device)(nil)
)
