//go:build linux && cgo

package ibv

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// maxChain bounds the WR arrays of a queue: a batch longer than this is
// posted in chunks of maxChain, one ibv_post_send each. Past a few hundred
// WRs the doorbell and the crossing a longer chain would save are a
// negligible share of the chain's own cost, and a QP granted a huge
// max_send_wr should not cost megabytes of arrays.
const maxChain = 1024

// Go views of the union members of struct ibv_send_wr, written in place
// into the C array (cgo renders the unions as byte arrays).
type (
	wrRDMA struct {
		remoteAddr uint64
		rkey       uint32
	}
	wrAtomic struct {
		remoteAddr uint64
		compareAdd uint64
		swap       uint64
		rkey       uint32
	}
	wrUD struct {
		ah         *C.struct_ibv_ah
		remoteQPN  uint32
		remoteQKey uint32
	}
)

// Compile-time checks of those views against verbs.h: each index is 0 only
// when the Go offset equals the C one (a non-zero constant index into a
// one-element array does not compile).
var (
	_ = [1]int{}[unsafe.Sizeof(C.struct_ibv_send_wr{})-C.VRT_SEND_WR_SIZE]
	_ = [1]int{}[unsafe.Offsetof(C.struct_ibv_send_wr{}.wr)-C.VRT_OFF_WR]
	_ = [1]int{}[unsafe.Offsetof(C.struct_ibv_send_wr{}.anon0)-C.VRT_OFF_IMM]
	_ = [1]int{}[C.VRT_OFF_WR+unsafe.Offsetof(wrRDMA{}.rkey)-C.VRT_OFF_RDMA_RKEY]
	_ = [1]int{}[C.VRT_OFF_WR+unsafe.Offsetof(wrAtomic{}.compareAdd)-C.VRT_OFF_ATOMIC_COMPARE]
	_ = [1]int{}[C.VRT_OFF_WR+unsafe.Offsetof(wrAtomic{}.swap)-C.VRT_OFF_ATOMIC_SWAP]
	_ = [1]int{}[C.VRT_OFF_WR+unsafe.Offsetof(wrAtomic{}.rkey)-C.VRT_OFF_ATOMIC_RKEY]
	_ = [1]int{}[C.VRT_OFF_WR+unsafe.Offsetof(wrUD{}.remoteQPN)-C.VRT_OFF_UD_QPN]
	_ = [1]int{}[C.VRT_OFF_WR+unsafe.Offsetof(wrUD{}.remoteQKey)-C.VRT_OFF_UD_QKEY]
	_ = [1]int{}[unsafe.Offsetof(C.struct_ibv_send_wr{}.qp_type)-C.VRT_OFF_XRC_SRQN]
)

// sendQueue is the C memory a QP posts sends from, allocated once: n
// struct ibv_send_wr, maxSGE struct ibv_sge per WR, maxInline bytes of
// inline scratch per WR and the bad_wr index, in one malloc'd block. The
// QP's send lock guards it.
type sendQueue struct {
	mem       unsafe.Pointer
	wrs       []C.struct_ibv_send_wr
	sges      []C.struct_ibv_sge
	scratch   *C.char // nil when maxInline is 0
	bad       *C.int
	maxSGE    int
	maxInline int
	// held[i] is the AH whose use slot i's WR holds until the chunk's
	// ibv_post_send returns (nil: none, or the same AH as the WR before,
	// whose use covers it); last is the latest AH acquired in the chunk.
	held []*ah
	last *ah
}

func newSendQueue(n, maxSGE, maxInline int) (*sendQueue, error) {
	maxSGE = max(maxSGE, 1)
	wrBytes := n * C.sizeof_struct_ibv_send_wr
	sgeBytes := n * maxSGE * C.sizeof_struct_ibv_sge
	size := wrBytes + sgeBytes + n*maxInline + C.sizeof_int
	mem := C.calloc(1, C.size_t(size))
	if mem == nil {
		return nil, verbs.FromErrno("ibv_post_send", syscall.ENOMEM, "send arrays")
	}
	s := &sendQueue{mem: mem, maxSGE: maxSGE, maxInline: maxInline, held: make([]*ah, n)}
	s.wrs = unsafe.Slice((*C.struct_ibv_send_wr)(mem), n)
	s.sges = unsafe.Slice((*C.struct_ibv_sge)(unsafe.Add(mem, wrBytes)), n*maxSGE)
	if maxInline > 0 {
		s.scratch = (*C.char)(unsafe.Add(mem, wrBytes+sgeBytes))
	}
	s.bad = (*C.int)(unsafe.Add(mem, size-C.sizeof_int))
	return s, nil
}

func (s *sendQueue) free() {
	C.free(s.mem)
	*s = sendQueue{}
}

// fill writes wr into slot i of the arrays. It fails only for an address
// handle this provider did not create, or one closed (or closing). For a UD
// WR it takes a use of the AH, which release ends after the post.
func (s *sendQueue) fill(i int, wr *verbs.SendWR, index int, t verbs.QPType) error {
	w := &s.wrs[i]
	w.wr_id = C.uint64_t(wr.ID)
	w.opcode = C.enum_ibv_wr_opcode(wr.Opcode)
	w.send_flags = C.uint(wr.Flags)
	w.num_sge = C.int(len(wr.SGL))
	sg := s.sges[i*s.maxSGE : i*s.maxSGE+s.maxSGE]
	w.sg_list = &sg[0]
	for j := range wr.SGL {
		sg[j] = C.struct_ibv_sge{addr: C.uint64_t(wr.SGL[j].Addr),
			length: C.uint32_t(wr.SGL[j].Length), lkey: C.uint32_t(wr.SGL[j].LKey)}
	}
	imm := (*uint32)(unsafe.Pointer(&w.anon0))
	switch wr.Opcode {
	case verbs.OpSendImm, verbs.OpWriteImm:
		*imm = wr.Imm // __be32 in verbs.h, carried bit for bit
	case verbs.OpSendInv, verbs.OpLocalInv:
		*imm = wr.InvalidateRKey
	default:
		*imm = 0
	}
	switch wr.Opcode {
	case verbs.OpWrite, verbs.OpWriteImm, verbs.OpRead:
		*(*wrRDMA)(unsafe.Pointer(&w.wr)) = wrRDMA{remoteAddr: wr.RDMA.RemoteAddr, rkey: wr.RDMA.RKey}
	case verbs.OpAtomicCmpSwp, verbs.OpAtomicFetchAdd:
		*(*wrAtomic)(unsafe.Pointer(&w.wr)) = wrAtomic{remoteAddr: wr.Atomic.RemoteAddr,
			compareAdd: wr.Atomic.CompareAdd, swap: wr.Atomic.Swap, rkey: wr.Atomic.RKey}
	}
	switch t {
	case verbs.QPTypeUD:
		a, _ := wr.UD.AH.(*ah)
		if a == nil {
			return &verbs.WRError{Index: index, WRID: wr.ID, Err: verbs.ErrInvalidWR,
				Rule: "the address handle is not of the ibv provider"}
		}
		if a != s.last {
			if !a.uses.Acquire() {
				return &verbs.WRError{Index: index, WRID: wr.ID, Err: verbs.ErrInvalidWR,
					Rule: "the address handle is closed"}
			}
			s.held[i], s.last = a, a
		}
		*(*wrUD)(unsafe.Pointer(&w.wr)) = wrUD{ah: a.c, remoteQPN: wr.UD.RemoteQPN, remoteQKey: wr.UD.RemoteQKey}
	case verbs.QPTypeXRCSend:
		*(*uint32)(unsafe.Pointer(&w.qp_type)) = wr.RemoteSRQN
	}
	return nil
}

// release ends the uses of AHs that the first n slots took: their WRs have
// been handed to ibv_post_send, or were never posted.
func (s *sendQueue) release(n int) {
	if s.last == nil {
		return
	}
	for i, a := range s.held[:n] {
		if a != nil {
			a.uses.Release()
			s.held[i] = nil
		}
	}
	s.last = nil
}

// postError maps a failed ibv_post_send or ibv_post_recv to the verbs
// errors. bad is the index of bad_wr in the chunk, or -1 when libibverbs
// left it NULL: then the device refused the whole chain, which rxe does
// (EINVAL) for a QP in the wrong state.
func postError(op string, rc syscall.Errno, bad, index int, id uint64) error {
	switch {
	case bad < 0 && rc == syscall.EINVAL:
		return verbs.NewError(op, verbs.ErrQPState, "the device refused the chain (QP state)")
	case bad < 0:
		return verbs.FromErrno(op, rc, "the device refused the chain")
	case rc == syscall.ENOMEM:
		return verbs.Errorf(op, verbs.ErrNoMemory, "wr %d (id %#x): the queue is full", index, id)
	case rc == syscall.EINVAL:
		return &verbs.WRError{Index: index, WRID: id, Err: verbs.ErrInvalidWR,
			Rule: "rejected by the device (EINVAL)"}
	}
	return verbs.FromErrno(op, rc, fmt.Sprintf("wr %d (id %#x)", index, id))
}

// queueFull is the error of the WR at index that one post call could not
// have taken, the queue holding capacity WRs at most.
func queueFull(op string, index int, id uint64, capacity int) error {
	return verbs.Errorf(op, verbs.ErrNoMemory, "wr %d (id %#x): the queue holds %d WRs", index, id, capacity)
}

// recvQueue is sendQueue for receive WRs, of a QP or an SRQ.
type recvQueue struct {
	capacity int // granted max_recv_wr (max_wr of an SRQ)
	mem      unsafe.Pointer
	wrs      []C.struct_ibv_recv_wr
	sges     []C.struct_ibv_sge
	bad      *C.int
	maxSGE   int
	lim      verbs.RecvLimits
}

// newRecvQueue allocates the arrays for a queue of capacity WRs: chains of
// up to maxChain.
func newRecvQueue(capacity, maxSGE int) (*recvQueue, error) {
	n := min(capacity, maxChain)
	lim := verbs.RecvLimits{MaxRecvSGE: maxSGE}
	maxSGE = max(maxSGE, 1)
	wrBytes := n * C.sizeof_struct_ibv_recv_wr
	size := wrBytes + n*maxSGE*C.sizeof_struct_ibv_sge + C.sizeof_int
	mem := C.calloc(1, C.size_t(size))
	if mem == nil {
		return nil, verbs.FromErrno("ibv_post_recv", syscall.ENOMEM, "receive arrays")
	}
	r := &recvQueue{capacity: capacity, mem: mem, maxSGE: maxSGE, lim: lim}
	r.wrs = unsafe.Slice((*C.struct_ibv_recv_wr)(mem), n)
	r.sges = unsafe.Slice((*C.struct_ibv_sge)(unsafe.Add(mem, wrBytes)), n*maxSGE)
	r.bad = (*C.int)(unsafe.Add(mem, size-C.sizeof_int))
	return r, nil
}

func (r *recvQueue) free() {
	C.free(r.mem)
	*r = recvQueue{}
}

// post posts wrs on qp (srq nil) or srq (qp nil): every WR is checked first,
// the valid prefix goes down in chunks of len(r.wrs), one crossing each. The
// caller holds the queue's lock.
func (r *recvQueue) post(op string, qp *C.struct_ibv_qp, srq *C.struct_ibv_srq, wrs []verbs.RecvWR) (int, error) {
	all := wrs // as in PostSend: never more than one call could take
	wrs = wrs[:min(len(wrs), r.capacity)]
	posted := 0
	for posted < len(wrs) {
		chunk := wrs[posted:min(len(wrs), posted+len(r.wrs))]
		n := 0
		var verr error
		for i := range chunk {
			wr := &chunk[i]
			if verr = r.lim.Check(posted+i, wr); verr != nil {
				break
			}
			w := &r.wrs[i]
			w.wr_id = C.uint64_t(wr.ID)
			w.num_sge = C.int(len(wr.SGL))
			sg := r.sges[i*r.maxSGE : i*r.maxSGE+r.maxSGE]
			w.sg_list = &sg[0]
			for j := range wr.SGL {
				sg[j] = C.struct_ibv_sge{addr: C.uint64_t(wr.SGL[j].Addr),
					length: C.uint32_t(wr.SGL[j].Length), lkey: C.uint32_t(wr.SGL[j].LKey)}
			}
			n++
		}
		if n > 0 {
			if rc := C.vrt_post_recv(qp, srq, &r.wrs[0], C.int(n), r.bad); rc != 0 {
				bad := int(*r.bad)
				at := posted + max(bad, 0)
				return at, postError(op, syscall.Errno(rc), bad, at, wrs[at].ID)
			}
			posted += n
		}
		if verr != nil {
			return posted, verr
		}
	}
	if posted < len(all) {
		return posted, queueFull(op, posted, all[posted].ID, r.capacity)
	}
	return posted, nil
}
