//go:build linux && cgo

package ibv

/*
#include "lib.h"
*/
import "C"

import (
	"syscall"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// QueryGIDTable implements verbs.GIDTabler: the entries with their types
// and netdevs from libibverbs' ibv_query_gid_table where it answers, and
// from sysfs where it does not (gidTable says when and why). Netdevs are
// named from sysfs where it can be read, else by looking the ifindex up
// in this network namespace (netdevName). Where neither source can be
// read the error matches verbs.ErrNotSupported, and verbs.QueryGIDTable
// falls back to QueryGID.
func (x *devContext) QueryGIDTable(port uint8) ([]verbs.GIDEntry, error) {
	if x.isClosed() {
		return nil, errClosed
	}
	pa, err := x.QueryPort(port)
	if err != nil {
		return nil, err
	}
	return gidTable(port, gidSources{
		verbs: x.queryGIDTableVerbs,
		sysfs: func() ([]verbs.GIDEntry, error) { return readGIDTable(sysfsRoot, x.dev.name, port, pa.LinkLayer) },
		netdev: func(index int, ifindex uint32) string {
			return netdevName(ifindex, readNetdev(sysfsRoot, x.dev.name, port, index))
		},
	})
}

// queryGIDTableVerbs reads the valid GID entries of every port of the
// device with ibv_query_gid_table, in one call. The buffer holds every
// port's whole table (gid_tbl_len entries each, the kernel's table size),
// so the call cannot run out of room.
func (x *devContext) queryGIDTableVerbs() ([]ibvGIDEntry, error) {
	n := 0
	for p := 1; p <= x.attr.PhysPortCnt; p++ {
		pa, err := x.QueryPort(uint8(p))
		if err != nil {
			return nil, err
		}
		n += pa.GIDTblLen
	}
	if n == 0 {
		return nil, nil
	}
	buf := make([]C.struct_ibv_gid_entry, n)
	got := C.vrt_query_gid_table(x.c, &buf[0], C.size_t(n))
	if got < 0 {
		if syscall.Errno(-got) == syscall.ENOSYS {
			return nil, errNoGIDTable
		}
		return nil, verbs.FromErrno("ibv_query_gid_table", syscall.Errno(-got), x.dev.name)
	}
	out := make([]ibvGIDEntry, min(int(got), n))
	for i := range out {
		e := &buf[i]
		out[i] = ibvGIDEntry{
			GID:     *(*verbs.GID)(unsafe.Pointer(&e.gid)),
			Index:   uint32(e.gid_index),
			Port:    uint32(e.port_num),
			Type:    uint32(e.gid_type),
			Ifindex: uint32(e.ndev_ifindex),
		}
	}
	return out, nil
}

// hasGIDTable reports whether the libibverbs loaded has
// ibv_query_gid_table (rdma-core 32 and later).
func hasGIDTable() bool { return C.vrt_has_query_gid_table() != 0 }

// PCIAddress implements verbs.PCIAddresser from sysfs: "" for a device
// without a PCI function (rxe, siw) or where sysfs cannot be read.
func (d *device) PCIAddress() string { return readPCIAddress(sysfsRoot, d.name) }

var (
	_ verbs.GIDTabler    = (*devContext)(nil)
	_ verbs.PCIAddresser = (*device)(nil)
)
