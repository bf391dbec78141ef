//go:build linux && cgo

package ibv

/*
#include "shim.h"
*/
import "C"

import (
	"runtime/cgo"
	"sync"
	"syscall"

	"github.com/verbsrt/verbsrt/verbs"
)

// srq is a shared receive queue (struct ibv_srq), basic or XRC. Safe for
// concurrent use: PostRecv calls serialize on its lock.
type srq struct {
	ctx *devContext
	h   cgo.Handle
	typ verbs.SRQType

	mu sync.Mutex
	c  *C.struct_ibv_srq // nil once destroyed
	rq *recvQueue
}

// CreateSRQ creates a shared receive queue (ibv_create_srq_ex) and queries
// what the device granted (rxe rounds max_wr up to 2^n - 1). An XRC SRQ
// needs spec.XRCD and spec.CQ.
func (p *pd) CreateSRQ(spec verbs.SRQSpec) (verbs.SRQ, error) {
	pc, err := p.ptr()
	if err != nil {
		return nil, err
	}
	x := p.ctx
	var a C.struct_ibv_srq_init_attr_ex
	a.attr = C.struct_ibv_srq_attr{max_wr: C.uint32_t(spec.MaxWR), max_sge: C.uint32_t(spec.MaxSGE),
		srq_limit: C.uint32_t(spec.Limit)}
	a.comp_mask = C.IBV_SRQ_INIT_ATTR_TYPE | C.IBV_SRQ_INIT_ATTR_PD
	a.pd = pc
	switch spec.Type {
	case verbs.SRQTypeBasic:
		a.srq_type = C.IBV_SRQT_BASIC
	case verbs.SRQTypeXRC:
		a.srq_type = C.IBV_SRQT_XRC
		d, ok := spec.XRCD.(*xrcd)
		q, ok2 := spec.CQ.(*cq)
		if !ok || !ok2 || d.ctx != x || q.ctx != x {
			return nil, verbs.NewError("ibv_create_srq_ex", verbs.ErrInvalidArgument,
				"an XRC SRQ needs an XRC domain and a CQ of this context")
		}
		if a.xrcd, err = d.ptr(); err != nil {
			return nil, err
		}
		if a.cq, err = q.ptr(); err != nil {
			return nil, err
		}
		a.comp_mask |= C.IBV_SRQ_INIT_ATTR_XRCD | C.IBV_SRQ_INIT_ATTR_CQ
	default:
		return nil, verbs.Errorf("ibv_create_srq_ex", verbs.ErrInvalidArgument, "unknown SRQ type %d", spec.Type)
	}
	s := &srq{ctx: x, typ: spec.Type}
	s.h = cgo.NewHandle(s)
	var got C.struct_ibv_srq_attr
	c, errno := C.vrt_create_srq(x.c, &a, C.uintptr_t(s.h), &got)
	if c == nil {
		s.h.Delete()
		return nil, verbs.FromErrno("ibv_create_srq_ex", errnoOf(errno, syscall.EINVAL), "")
	}
	s.c = c
	if s.rq, err = newRecvQueue(int(got.max_wr), int(got.max_sge)); err != nil {
		s.destroy()
		return nil, err
	}
	if err := x.track(kindSRQ, s); err != nil {
		s.destroy()
		return nil, err
	}
	return s, nil
}

func (s *srq) ptr() (*C.struct_ibv_srq, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return nil, errClosed
	}
	return s.c, nil
}

// PostRecv posts receive WRs with one ibv_post_srq_recv per chunk.
func (s *srq) PostRecv(wrs []verbs.RecvWR) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return 0, errClosed
	}
	if len(wrs) == 0 {
		return 0, nil
	}
	return s.rq.post("ibv_post_srq_recv", nil, s.c, wrs)
}

func (s *srq) Modify(attr verbs.SRQAttr, mask verbs.SRQAttrMask) error {
	c, err := s.ptr()
	if err != nil {
		return err
	}
	a := C.struct_ibv_srq_attr{max_wr: C.uint32_t(attr.MaxWR), max_sge: C.uint32_t(attr.MaxSGE),
		srq_limit: C.uint32_t(attr.Limit)}
	if rc := C.vrt_modify_srq(c, &a, C.int(mask)); rc != 0 {
		return verbs.FromErrno("ibv_modify_srq", syscall.Errno(rc), "")
	}
	return nil
}

func (s *srq) Query() (verbs.SRQAttr, error) {
	c, err := s.ptr()
	if err != nil {
		return verbs.SRQAttr{}, err
	}
	var a C.struct_ibv_srq_attr
	if rc := C.vrt_query_srq(c, &a); rc != 0 {
		return verbs.SRQAttr{}, verbs.FromErrno("ibv_query_srq", syscall.Errno(rc), "")
	}
	return verbs.SRQAttr{MaxWR: int(a.max_wr), MaxSGE: int(a.max_sge), Limit: int(a.srq_limit)}, nil
}

// SRQN returns the number XRC senders address the SRQ by; ErrNotSupported
// for a basic SRQ.
func (s *srq) SRQN() (uint32, error) {
	c, err := s.ptr()
	if err != nil {
		return 0, err
	}
	if s.typ != verbs.SRQTypeXRC {
		return 0, verbs.NewError("ibv_get_srq_num", verbs.ErrNotSupported, "a basic SRQ has no number")
	}
	var n C.uint32_t
	if rc := C.vrt_get_srq_num(c, &n); rc != 0 {
		return 0, verbs.FromErrno("ibv_get_srq_num", syscall.Errno(rc), "")
	}
	return uint32(n), nil
}

// Close destroys the SRQ (ibv_destroy_srq): ErrBusy while QPs use it.
func (s *srq) Close() error { return s.ctx.closeObj(kindSRQ, s) }

func (s *srq) destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return nil
	}
	if rc := C.vrt_destroy_srq(s.c); rc != 0 {
		return verbs.FromErrno("ibv_destroy_srq", syscall.Errno(rc), "")
	}
	s.c = nil
	if s.rq != nil {
		s.rq.free()
	}
	s.h.Delete()
	return nil
}

var _ verbs.SRQ = (*srq)(nil)
