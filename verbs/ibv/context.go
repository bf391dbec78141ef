//go:build linux && cgo

package ibv

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// kind orders the objects of a context for Context.Close: each is destroyed
// before what it depends on (QPs before their SRQs and CQs, MRs and AHs before
// their PD, XRC SRQs before their XRCD).
type kind uint8

const (
	kindQP kind = iota
	kindSRQ
	kindAH
	kindMR
	kindCQ
	kindChannel
	kindPD
	kindXRCD
	numKinds
)

// resource is an object of a context. destroy frees its C object; it is
// idempotent and leaves the object open when libibverbs refuses (EBUSY).
type resource interface {
	destroy() error
}

// devContext is an open device (struct ibv_context): the verbs.Context of
// this provider. Safe for concurrent use; Close must not race with calls on
// it or on its objects.
type devContext struct {
	dev  *device
	c    *C.struct_ibv_context
	attr verbs.DeviceAttr // queried at open: limits and capability flags
	// ipCsum is the checksum offload that SendLimits.IPCsum reports.
	ipCsum bool

	async *asyncReader

	mu     sync.Mutex
	closed bool
	objs   [numKinds]map[resource]struct{}
}

func newContext(d *device, c *C.struct_ibv_context) (*devContext, error) {
	x := &devContext{dev: d, c: c}
	attr, err := x.queryDevice()
	if err != nil {
		return nil, err
	}
	x.attr = attr
	x.ipCsum = attr.DeviceCapFlags&(verbs.DeviceUDIPCsum|verbs.DeviceRawIPCsum) != 0
	for k := range x.objs {
		x.objs[k] = make(map[resource]struct{})
	}
	x.async, err = startAsync(x)
	if err != nil {
		return nil, err
	}
	return x, nil
}

// track records r as an object of the context so that Close destroys it; it
// fails with ErrClosed once the context is closed.
func (x *devContext) track(k kind, r resource) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return errClosed
	}
	x.objs[k][r] = struct{}{}
	return nil
}

func (x *devContext) untrack(k kind, r resource) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.closed {
		delete(x.objs[k], r)
	}
}

// closeObj is the Close of every object: destroy it, then forget it.
func (x *devContext) closeObj(k kind, r resource) error {
	if err := r.destroy(); err != nil {
		return err
	}
	x.untrack(k, r)
	return nil
}

func (x *devContext) Device() verbs.Device { return x.dev }

func (x *devContext) QueryDevice() (verbs.DeviceAttr, error) {
	if x.isClosed() {
		return verbs.DeviceAttr{}, errClosed
	}
	return x.attr, nil
}

func (x *devContext) isClosed() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.closed
}

func (x *devContext) queryDevice() (verbs.DeviceAttr, error) {
	var a C.struct_ibv_device_attr
	if rc := C.vrt_query_device(x.c, &a); rc != 0 {
		return verbs.DeviceAttr{}, verbs.FromErrno("ibv_query_device", syscall.Errno(rc), x.dev.name)
	}
	return verbs.DeviceAttr{
		FWVer:           C.GoString(&a.fw_ver[0]),
		NodeGUID:        be64(uint64(a.node_guid)),
		SysImageGUID:    be64(uint64(a.sys_image_guid)),
		MaxMRSize:       uint64(a.max_mr_size),
		PageSizeCap:     uint64(a.page_size_cap),
		VendorID:        uint32(a.vendor_id),
		VendorPartID:    uint32(a.vendor_part_id),
		HWVer:           uint32(a.hw_ver),
		MaxQP:           int(a.max_qp),
		MaxQPWR:         int(a.max_qp_wr),
		DeviceCapFlags:  verbs.DeviceCap(a.device_cap_flags),
		MaxSGE:          int(a.max_sge),
		MaxSGERd:        int(a.max_sge_rd),
		MaxCQ:           int(a.max_cq),
		MaxCQE:          int(a.max_cqe),
		MaxMR:           int(a.max_mr),
		MaxPD:           int(a.max_pd),
		MaxQPRdAtom:     int(a.max_qp_rd_atom),
		MaxQPInitRdAtom: int(a.max_qp_init_rd_atom),
		MaxSRQ:          int(a.max_srq),
		MaxSRQWR:        int(a.max_srq_wr),
		MaxSRQSGE:       int(a.max_srq_sge),
		MaxAH:           int(a.max_ah),
		AtomicCap:       verbs.AtomicCap(a.atomic_cap),
		PhysPortCnt:     int(a.phys_port_cnt),
	}, nil
}

// be64 converts a __be64 (the GUIDs) to host order, the number ibv_devinfo
// prints.
func be64(v uint64) uint64 {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

// checkPort returns ErrNotFound for a port the device does not have: the
// kernel would say EINVAL, which does not tell a bad port from a bad call.
func (x *devContext) checkPort(op string, port uint8) error {
	if port < 1 || int(port) > x.attr.PhysPortCnt {
		return verbs.Errorf(op, verbs.ErrNotFound, "port %d (the device has %d)", port, x.attr.PhysPortCnt)
	}
	return nil
}

func (x *devContext) QueryPort(port uint8) (verbs.PortAttr, error) {
	if x.isClosed() {
		return verbs.PortAttr{}, errClosed
	}
	if err := x.checkPort("ibv_query_port", port); err != nil {
		return verbs.PortAttr{}, err
	}
	var a C.struct_ibv_port_attr
	if rc := C.vrt_query_port(x.c, C.uint8_t(port), &a); rc != 0 {
		return verbs.PortAttr{}, verbs.FromErrno("ibv_query_port", syscall.Errno(rc), "")
	}
	return verbs.PortAttr{
		State:        verbs.PortState(a.state),
		MaxMTU:       verbs.MTU(a.max_mtu),
		ActiveMTU:    verbs.MTU(a.active_mtu),
		GIDTblLen:    int(a.gid_tbl_len),
		PortCapFlags: uint32(a.port_cap_flags),
		MaxMsgSz:     uint32(a.max_msg_sz),
		LID:          uint16(a.lid),
		SMLID:        uint16(a.sm_lid),
		LMC:          uint8(a.lmc),
		ActiveWidth:  uint8(a.active_width),
		ActiveSpeed:  uint8(a.active_speed),
		PhysState:    uint8(a.phys_state),
		LinkLayer:    verbs.LinkLayer(a.link_layer),
		PKeyTblLen:   int(a.pkey_tbl_len),
	}, nil
}

// QueryGID returns GID index of port; an empty table slot is the zero GID,
// an index outside the table ErrNotFound.
func (x *devContext) QueryGID(port uint8, index int) (verbs.GID, error) {
	if x.isClosed() {
		return verbs.GID{}, errClosed
	}
	if err := x.checkPort("ibv_query_gid", port); err != nil {
		return verbs.GID{}, err
	}
	var g C.union_ibv_gid
	switch rc := C.vrt_query_gid(x.c, C.uint8_t(port), C.int(index), &g); rc {
	case 0:
	case C.ENOENT:
		return verbs.GID{}, verbs.Errorf("ibv_query_gid", verbs.ErrNotFound, "GID index %d of port %d", index, port)
	default:
		return verbs.GID{}, verbs.FromErrno("ibv_query_gid", syscall.Errno(rc), "")
	}
	return *(*verbs.GID)(unsafe.Pointer(&g)), nil
}

func (x *devContext) AllocPD() (verbs.PD, error) {
	if x.isClosed() {
		return nil, errClosed
	}
	c, err := C.vrt_alloc_pd(x.c)
	if c == nil {
		return nil, verbs.FromErrno("ibv_alloc_pd", errnoOf(err, syscall.ENOMEM), "")
	}
	p := &pd{ctx: x, c: c}
	if err := x.track(kindPD, p); err != nil {
		C.vrt_dealloc_pd(c)
		return nil, err
	}
	return p, nil
}

func (x *devContext) OpenXRCD() (verbs.XRCD, error) {
	if x.isClosed() {
		return nil, errClosed
	}
	c, err := C.vrt_open_xrcd(x.c)
	if c == nil {
		return nil, verbs.FromErrno("ibv_open_xrcd", errnoOf(err, syscall.EOPNOTSUPP), x.dev.name)
	}
	d := &xrcd{ctx: x, c: c}
	if err := x.track(kindXRCD, d); err != nil {
		C.vrt_close_xrcd(c)
		return nil, err
	}
	return d, nil
}

func (x *devContext) AsyncEvents() <-chan verbs.AsyncEvent { return x.async.ch }

// AsyncErr is why the event reader ended before Close (an error matching
// verbs.ErrEventsLost), once AsyncEvents is closed; nil before and after
// Close.
func (x *devContext) AsyncErr() error {
	select {
	case <-x.async.done:
		return x.async.err
	default:
		return nil
	}
}

// Close stops the asynchronous event goroutine, destroys every object of the
// context still open (in dependency order) and closes the device. Closing
// twice is a no-op.
func (x *devContext) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	objs := x.objs
	x.mu.Unlock()

	// Stop the readers first: no goroutine may be inside a C call on an
	// object being destroyed.
	x.async.stop()
	for r := range objs[kindChannel] {
		r.(*compChannel).shutdown()
	}
	var errs []error
	for k := range objs {
		for r := range objs[k] {
			if err := r.destroy(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if rc := C.vrt_close_device(x.c); rc != 0 {
		errs = append(errs, verbs.FromErrno("ibv_close_device", errnoOf(syscall.Errno(rc), syscall.EIO), x.dev.name))
	}
	return errors.Join(errs...)
}

// newPollFile wraps a non-blocking duplicate of fd (see vrt_pollable_dup) in
// an os.File registered with the netpoller.
func newPollFile(fd C.int, name string) (*os.File, syscall.RawConn, error) {
	d := C.vrt_pollable_dup(fd)
	if d < 0 {
		return nil, nil, verbs.FromErrno("fcntl", syscall.Errno(-d), name)
	}
	f := os.NewFile(uintptr(d), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil, verbs.FromErrno("fcntl", errnoOf(err, syscall.EBADF), name)
	}
	return f, rc, nil
}

var _ verbs.Context = (*devContext)(nil)
