//go:build linux && cgo

package ibv

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"syscall"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// Provider is the libibverbs provider. Safe for concurrent use; it holds no
// state, each Devices call reads the device list afresh.
type Provider struct{}

// New returns the provider.
func New() *Provider { return &Provider{} }

// Name returns "ibv".
func (*Provider) Name() string { return "ibv" }

// maxDevices bounds one listing; a host with more RDMA devices than this is
// listed in a second, larger call.
const maxDevices = 64

// Devices lists the RDMA devices libibverbs sees (ibv_get_device_list).
// Where libibverbs.so.1 cannot be loaded, it returns an error matching
// verbs.ErrNotSupported that names the packages to install. On a
// kernel without RDMA support (no uverbs) it returns an error matching
// verbs.ErrNotSupported and syscall.ENOSYS; with support but no device, an
// empty list.
func (*Provider) Devices() ([]verbs.Device, error) {
	if err := loadVerbs(); err != nil {
		return nil, err
	}
	n := maxDevices
	for {
		buf := (*C.struct_vrt_devinfo)(C.calloc(C.size_t(n), C.sizeof_struct_vrt_devinfo))
		if buf == nil {
			return nil, verbs.FromErrno("ibv_get_device_list", syscall.ENOMEM, "")
		}
		got := int(C.vrt_list_devices(buf, C.int(n)))
		if got < 0 {
			C.free(unsafe.Pointer(buf))
			errno := syscall.Errno(-got)
			detail := ""
			if errno == syscall.ENOSYS {
				detail = "no kernel RDMA support (is ib_uverbs loaded?)"
			}
			return nil, verbs.FromErrno("ibv_get_device_list", errno, detail)
		}
		if got > n { // more devices than room: list again
			C.free(unsafe.Pointer(buf))
			n = got
			continue
		}
		infos := unsafe.Slice(buf, got)
		devs := make([]verbs.Device, got)
		for i := range infos {
			devs[i] = &device{
				name: C.GoString(&infos[i].name[0]),
				guid: uint64(infos[i].guid),
			}
		}
		C.free(unsafe.Pointer(buf))
		return devs, nil
	}
}

// device is an RDMA device found by Devices. It is a name: Open finds the
// device by it again, so a device value stays usable however long it is kept.
// Safe for concurrent use (immutable).
type device struct {
	name string
	guid uint64
}

func (d *device) Name() string { return d.name }

// GUID returns the node GUID in host byte order, the number ibv_devices
// prints.
func (d *device) GUID() uint64 { return d.guid }

// Open opens a context on the device (ibv_open_device); verbs.ErrNotFound
// when the device has gone.
func (d *device) Open() (verbs.Context, error) {
	cname := C.CString(d.name)
	defer C.free(unsafe.Pointer(cname))
	c, err := C.vrt_open_device(cname)
	if c == nil {
		return nil, verbs.FromErrno("ibv_open_device", errnoOf(err, syscall.ENODEV), d.name)
	}
	ctx, oerr := newContext(d, c)
	if oerr != nil {
		C.vrt_close_device(c)
		return nil, oerr
	}
	return ctx, nil
}

var (
	_ verbs.Provider = (*Provider)(nil)
	_ verbs.Device   = (*device)(nil)
)
