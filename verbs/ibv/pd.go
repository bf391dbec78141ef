//go:build linux && cgo

package ibv

/*
#include "shim.h"
*/
import "C"

import (
	"sync"
	"syscall"
	"unsafe"

	"github.com/verbsrt/verbsrt/internal/uses"
	"github.com/verbsrt/verbsrt/verbs"
)

// pd is a protection domain (struct ibv_pd). Safe for concurrent use.
type pd struct {
	ctx *devContext
	mu  sync.Mutex
	c   *C.struct_ibv_pd // nil once destroyed
}

// ptr returns the C object, or ErrClosed.
func (p *pd) ptr() (*C.struct_ibv_pd, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return nil, errClosed
	}
	return p.c, nil
}

func (p *pd) Context() verbs.Context { return p.ctx }

// RegMR registers buf (ibv_reg_mr). Go memory is refused with
// verbs.ErrGoMemory (verbs.CheckRegistrable): the device reads and writes
// buf after RegMR returns, and libibverbs keeps its address, which the
// kernel would pin and accept. An empty buf is ErrInvalidArgument, as on
// every provider (the kernel's answer would vary by driver).
func (p *pd) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	c, err := p.ptr()
	if err != nil {
		return nil, err
	}
	if err := verbs.CheckRegistrable(buf); err != nil {
		return nil, err
	}
	m, errno := C.vrt_reg_mr(c, unsafe.Pointer(&buf[0]), C.size_t(len(buf)), C.int(access))
	if m == nil {
		return nil, verbs.FromErrno("ibv_reg_mr", errnoOf(errno, syscall.EINVAL),
			"access "+access.String())
	}
	r := &mr{pd: p, c: m, buf: buf, access: access,
		addr: uint64(uintptr(m.addr)), lkey: uint32(m.lkey), rkey: uint32(m.rkey)}
	if err := p.ctx.track(kindMR, r); err != nil {
		C.vrt_dereg_mr(m)
		return nil, err
	}
	return r, nil
}

func (p *pd) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	c, err := p.ptr()
	if err != nil {
		return nil, err
	}
	var a C.struct_ibv_ah_attr
	fillAHAttr(&a, &attr)
	h, errno := C.vrt_create_ah(c, &a)
	if h == nil {
		return nil, verbs.FromErrno("ibv_create_ah", errnoOf(errno, syscall.EINVAL), "")
	}
	r := newAH(p, h)
	if err := p.ctx.track(kindAH, r); err != nil {
		C.vrt_destroy_ah(h)
		return nil, err
	}
	return r, nil
}

// Close deallocates the PD (ibv_dealloc_pd): ErrBusy while MRs, QPs, AHs or
// SRQs of it are open.
func (p *pd) Close() error { return p.ctx.closeObj(kindPD, p) }

func (p *pd) destroy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return nil
	}
	if rc := C.vrt_dealloc_pd(p.c); rc != 0 {
		return verbs.FromErrno("ibv_dealloc_pd", syscall.Errno(rc), "")
	}
	p.c = nil
	return nil
}

// mr is a memory region (struct ibv_mr). Safe for concurrent use; its keys
// and address are fixed at registration.
type mr struct {
	pd     *pd
	buf    []byte
	access verbs.Access
	addr   uint64
	lkey   uint32
	rkey   uint32

	mu sync.Mutex
	c  *C.struct_ibv_mr
}

func (m *mr) Addr() uint64         { return m.addr }
func (m *mr) Len() int             { return len(m.buf) }
func (m *mr) LKey() uint32         { return m.lkey }
func (m *mr) RKey() uint32         { return m.rkey }
func (m *mr) Access() verbs.Access { return m.access }
func (m *mr) Bytes() []byte        { return m.buf }
func (m *mr) Close() error         { return m.pd.ctx.closeObj(kindMR, m) }

func (m *mr) destroy() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c == nil {
		return nil
	}
	if rc := C.vrt_dereg_mr(m.c); rc != 0 {
		return verbs.FromErrno("ibv_dereg_mr", syscall.Errno(rc), "")
	}
	m.c = nil
	return nil
}

// ah is an address handle (struct ibv_ah). Safe for concurrent use.
//
// libibverbs providers read the AH while ibv_post_send writes a WR naming
// it into the send queue, so the C object must outlive every post that
// names it, or a concurrent Close could free it between fill and the post.
// A post holds a use of the
// AH from before it writes the WR until ibv_post_send returns; Close marks
// the AH closing, which makes later posts fail, waits for the uses in
// flight to end (each lasts one C call) and only then destroys it.
//
// What becomes of WRs already posted when the AH is destroyed is the
// device's business (the conformance suite accepts an error completion for
// them).
type ah struct {
	pd   *pd
	c    *C.struct_ibv_ah // set at creation, nil once destroyed
	uses uses.Count       // posts in flight; closed by shut
	// idle is closed once the count is closed and the last post let go:
	// shut waits on it.
	idle chan struct{}
	mu   sync.Mutex // serializes destroy
}

func newAH(p *pd, c *C.struct_ibv_ah) *ah {
	a := &ah{pd: p, c: c, idle: make(chan struct{})}
	a.uses.Init(func() { close(a.idle) })
	return a
}

// shut closes the AH to new posts and waits until none uses it.
func (a *ah) shut() {
	a.uses.Close()
	<-a.idle
}

func (a *ah) Close() error { return a.pd.ctx.closeObj(kindAH, a) }

// destroy marks the AH closing, waits for the posts that use it (bounded by
// one ibv_post_send each) and destroys it. A destroy that failed leaves the
// AH closing, with no use in flight, for a later Close to retry.
func (a *ah) destroy() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.c == nil {
		return nil
	}
	a.shut()
	if rc := C.vrt_destroy_ah(a.c); rc != 0 {
		return verbs.FromErrno("ibv_destroy_ah", syscall.Errno(rc), "")
	}
	a.c = nil
	return nil
}

// xrcd is an XRC domain (struct ibv_xrcd). Safe for concurrent use.
type xrcd struct {
	ctx *devContext
	mu  sync.Mutex
	c   *C.struct_ibv_xrcd
}

func (d *xrcd) ptr() (*C.struct_ibv_xrcd, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		return nil, errClosed
	}
	return d.c, nil
}

func (d *xrcd) Close() error { return d.ctx.closeObj(kindXRCD, d) }

func (d *xrcd) destroy() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		return nil
	}
	if rc := C.vrt_close_xrcd(d.c); rc != 0 {
		return verbs.FromErrno("ibv_close_xrcd", syscall.Errno(rc), "")
	}
	d.c = nil
	return nil
}

// fillAHAttr writes an address vector into its C form.
func fillAHAttr(c *C.struct_ibv_ah_attr, a *verbs.AHAttr) {
	c.grh.dgid = *(*[16]byte)(unsafe.Pointer(&a.GRH.DGID))
	c.grh.flow_label = C.uint32_t(a.GRH.FlowLabel)
	c.grh.sgid_index = C.uint8_t(a.GRH.SGIDIndex)
	c.grh.hop_limit = C.uint8_t(a.GRH.HopLimit)
	c.grh.traffic_class = C.uint8_t(a.GRH.TrafficClass)
	c.dlid = C.uint16_t(a.DLID)
	c.sl = C.uint8_t(a.SL)
	c.src_path_bits = C.uint8_t(a.SrcPathBits)
	c.static_rate = C.uint8_t(a.StaticRate)
	c.is_global = 0
	if a.IsGlobal {
		c.is_global = 1
	}
	c.port_num = C.uint8_t(a.PortNum)
}

// ahAttrOf reads an address vector from its C form.
func ahAttrOf(c *C.struct_ibv_ah_attr) verbs.AHAttr {
	return verbs.AHAttr{
		GRH: verbs.GlobalRoute{
			DGID:         verbs.GID(c.grh.dgid),
			FlowLabel:    uint32(c.grh.flow_label),
			SGIDIndex:    uint8(c.grh.sgid_index),
			HopLimit:     uint8(c.grh.hop_limit),
			TrafficClass: uint8(c.grh.traffic_class),
		},
		DLID:        uint16(c.dlid),
		SL:          uint8(c.sl),
		SrcPathBits: uint8(c.src_path_bits),
		StaticRate:  uint8(c.static_rate),
		IsGlobal:    c.is_global != 0,
		PortNum:     uint8(c.port_num),
	}
}

var (
	_ verbs.PD   = (*pd)(nil)
	_ verbs.MR   = (*mr)(nil)
	_ verbs.AH   = (*ah)(nil)
	_ verbs.XRCD = (*xrcd)(nil)
)
