//go:build linux && cgo

package ibv

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"os"
	"runtime/cgo"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

const (
	// maxPollBatch bounds the per-CQ ibv_wc array: one Poll moves at most
	// this many completions (verbsrt's pollers ask for 16-64).
	maxPollBatch = 256
	// ackBatch is how many acknowledged CQ events AckEvents gathers before
	// calling ibv_ack_cq_events, which takes the CQ's mutex in libibverbs.
	ackBatch = 32
)

// CreateCQ creates a completion queue (ibv_create_cq). The device may grant
// more entries than spec.CQE (rxe rounds up to 2^n - 1); CQE reports them.
func (x *devContext) CreateCQ(spec verbs.CQSpec) (verbs.CQ, error) {
	if x.isClosed() {
		return nil, errClosed
	}
	if spec.CQE < 1 || (x.attr.MaxCQE > 0 && spec.CQE > x.attr.MaxCQE) {
		return nil, verbs.Errorf("ibv_create_cq", verbs.ErrInvalidArgument,
			"cqe %d outside 1..%d", spec.CQE, x.attr.MaxCQE)
	}
	var ch *compChannel
	var cch *C.struct_ibv_comp_channel
	if spec.Channel != nil {
		var ok bool
		if ch, ok = spec.Channel.(*compChannel); !ok || ch.ctx != x {
			return nil, verbs.NewError("ibv_create_cq", verbs.ErrInvalidArgument,
				"completion channel of another context or provider")
		}
		var err error
		if cch, err = ch.addCQ(); err != nil {
			return nil, err
		}
	}
	q := &cq{ctx: x, ch: ch}
	h := cgo.NewHandle(q)
	c, errno := C.vrt_create_cq(x.c, C.int(spec.CQE), C.uintptr_t(h), cch, C.int(spec.CompVector))
	if c == nil {
		h.Delete()
		if ch != nil {
			ch.removeCQ()
		}
		return nil, verbs.FromErrno("ibv_create_cq", errnoOf(errno, syscall.ENOMEM), "")
	}
	q.c, q.h, q.cqe = c, h, int(c.cqe)
	q.nwc = min(q.cqe, maxPollBatch)
	q.wcs = (*C.struct_ibv_wc)(C.calloc(C.size_t(q.nwc), C.sizeof_struct_ibv_wc))
	if q.wcs == nil {
		q.destroy()
		return nil, verbs.FromErrno("ibv_create_cq", syscall.ENOMEM, "poll array")
	}
	if err := x.track(kindCQ, q); err != nil {
		q.destroy()
		return nil, err
	}
	return q, nil
}

// cq is a completion queue (struct ibv_cq). Safe for concurrent use: Poll,
// ReqNotify and AckEvents take the CQ's lock.
type cq struct {
	ctx *devContext
	ch  *compChannel // nil without a channel
	h   cgo.Handle   // the cq_context events carry
	cqe int

	mu      sync.Mutex
	c       *C.struct_ibv_cq // nil once destroyed
	closing bool             // Close is destroying it: no new use
	wcs     *C.struct_ibv_wc // nwc entries, malloc'd
	nwc     int
	// events counts the completion events GetCQEvent returned that are
	// not yet passed to ibv_ack_cq_events; acked counts those of them the
	// user has acknowledged. ibv_destroy_cq waits until every event is
	// acknowledged, so Close acknowledges the rest.
	events, acked uint32
}

// Poll moves up to len(wcs) completions (at most maxPollBatch) into wcs with
// one ibv_poll_cq crossing.
func (q *cq) Poll(wcs []verbs.WC) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.c == nil || q.closing {
		return 0, errClosed
	}
	n := min(len(wcs), q.nwc)
	if n == 0 {
		return 0, nil
	}
	got := int(C.vrt_poll_cq(q.c, C.int(n), q.wcs))
	if got < 0 {
		return 0, pollError(got)
	}
	for i, c := range unsafe.Slice(q.wcs, got) {
		wcs[i] = verbs.WC{
			WRID:      uint64(c.wr_id),
			Status:    verbs.WCStatus(c.status),
			Opcode:    verbs.WCOpcode(c.opcode),
			VendorErr: uint32(c.vendor_err),
			ByteLen:   uint32(c.byte_len),
			// imm_data (or invalidated_rkey), bit for bit: no byte swap.
			Imm:          *(*uint32)(unsafe.Pointer(&c.anon0)),
			QPNum:        uint32(c.qp_num),
			SrcQP:        uint32(c.src_qp),
			Flags:        verbs.WCFlags(c.wc_flags),
			PKeyIndex:    uint16(c.pkey_index),
			SLID:         uint16(c.slid),
			SL:           uint8(c.sl),
			DLIDPathBits: uint8(c.dlid_path_bits),
		}
	}
	return got, nil
}

// pollError is the error of ibv_poll_cq's negative return ret. That is no
// errno: ibv_poll_cq(3) says only that it failed, and providers return
// their own codes (mlx4 and mlx5 return -2, CQ_POLL_ERR, for a CQE they
// cannot parse; taken for an errno it would read ENOENT). Built when it
// happens: a CQ fails once, its owner stops polling it.
func pollError(ret int) error {
	return verbs.Errorf("ibv_poll_cq", verbs.ErrPollFailed, "returned %d (a provider failure, not an errno)", ret)
}

func (q *cq) ReqNotify(solicitedOnly bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.c == nil || q.closing {
		return errClosed
	}
	so := C.int(0)
	if solicitedOnly {
		so = 1
	}
	if rc := C.vrt_req_notify_cq(q.c, so); rc != 0 {
		return verbs.FromErrno("ibv_req_notify_cq", errnoOf(syscall.Errno(rc), syscall.EINVAL), "")
	}
	return nil
}

func (q *cq) CQE() int { return q.cqe }

// AckEvents acknowledges n events GetCQEvent returned for this CQ. The
// acknowledgements are passed to ibv_ack_cq_events ackBatch at a time; Close
// acknowledges whatever is left, acknowledged or not.
func (q *cq) AckEvents(n int) {
	if n <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.c == nil || q.closing {
		return
	}
	q.acked += uint32(min(n, int(q.events-q.acked)))
	if q.acked >= ackBatch {
		C.vrt_ack_cq_events(q.c, C.uint(q.acked))
		q.events -= q.acked
		q.acked = 0
	}
}

// gotEvent counts an event GetCQEvent read for q; false when q is being
// closed, in which case the event is acknowledged at once so that Close's
// ibv_destroy_cq does not wait for it.
func (q *cq) gotEvent() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		if q.c != nil {
			C.vrt_ack_cq_events(q.c, 1)
		}
		return false
	}
	q.events++
	return true
}

// Close destroys the CQ (ibv_destroy_cq): ErrBusy while QPs or SRQs use it.
func (q *cq) Close() error { return q.ctx.closeObj(kindCQ, q) }

func (q *cq) destroy() error {
	q.mu.Lock()
	if q.c == nil || q.closing {
		q.mu.Unlock()
		return nil
	}
	q.closing = true
	if q.events > 0 {
		C.vrt_ack_cq_events(q.c, C.uint(q.events))
		q.events, q.acked = 0, 0
	}
	c := q.c
	// Unlocked: ibv_destroy_cq waits for events a concurrent GetCQEvent may
	// have read, which gotEvent then acknowledges under the lock.
	q.mu.Unlock()
	rc := C.vrt_destroy_cq(c)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closing = false
	if rc != 0 {
		return verbs.FromErrno("ibv_destroy_cq", syscall.Errno(rc), "")
	}
	q.c = nil
	C.free(unsafe.Pointer(q.wcs))
	q.wcs = nil
	q.h.Delete()
	if q.ch != nil {
		q.ch.removeCQ()
	}
	return nil
}

// ptr returns the C object, or ErrClosed.
func (q *cq) ptr() (*C.struct_ibv_cq, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.c == nil || q.closing {
		return nil, errClosed
	}
	return q.c, nil
}

// CreateCompChannel creates a completion channel (ibv_create_comp_channel)
// whose fd is waited on through the netpoller.
func (x *devContext) CreateCompChannel() (verbs.CompChannel, error) {
	if x.isClosed() {
		return nil, errClosed
	}
	c, errno := C.vrt_create_comp_channel(x.c)
	if c == nil {
		return nil, verbs.FromErrno("ibv_create_comp_channel", errnoOf(errno, syscall.ENOMEM), "")
	}
	f, rc, err := newPollFile(c.fd, "ibv-comp-channel")
	if err != nil {
		C.vrt_destroy_comp_channel(c)
		return nil, err
	}
	ch := &compChannel{ctx: x, c: c, f: f, rc: rc, sem: make(chan struct{}, 1)}
	if err := x.track(kindChannel, ch); err != nil {
		ch.shutdown()
		ch.destroy()
		return nil, err
	}
	return ch, nil
}

// compChannel is a completion event channel (struct ibv_comp_channel). Safe
// for concurrent use: GetCQEvent callers take turns (the first waits on the
// fd, the others for it, each within its own ctx).
type compChannel struct {
	ctx *devContext
	f   *os.File
	rc  syscall.RawConn
	sem chan struct{} // one waiter on the fd at a time

	mu   sync.Mutex
	c    *C.struct_ibv_comp_channel
	down bool // shutdown: the fd is closed, GetCQEvent fails
	ncq  int  // open CQs on the channel
}

func (ch *compChannel) addCQ() (*C.struct_ibv_comp_channel, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.c == nil || ch.down {
		return nil, errClosed
	}
	ch.ncq++
	return ch.c, nil
}

func (ch *compChannel) removeCQ() {
	ch.mu.Lock()
	ch.ncq--
	ch.mu.Unlock()
}

// aLongTimeAgo is a read deadline in the past: setting it wakes a waiter.
var aLongTimeAgo = time.Unix(1, 0)

// GetCQEvent waits for a completion event through the netpoller
// (ibv_get_cq_event on the non-blocking fd) until ctx ends. The event must
// be acknowledged with the CQ's AckEvents (or is, when the CQ is closed).
func (ch *compChannel) GetCQEvent(ctx context.Context) (verbs.CQ, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case ch.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-ch.sem }()
	ch.mu.Lock()
	c, down := ch.c, ch.down
	ch.mu.Unlock()
	if c == nil || down {
		return nil, errClosed
	}

	deadline, _ := ctx.Deadline() // zero: none
	ch.f.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { ch.f.SetReadDeadline(aLongTimeAgo) })
	defer stop()
	for {
		var (
			ccq   *C.struct_ibv_cq
			h     C.uintptr_t
			errno C.int
		)
		err := ch.rc.Read(func(uintptr) bool {
			errno = C.vrt_get_cq_event(c, &ccq, &h)
			return errno != C.EAGAIN
		})
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			if e := ctx.Err(); e != nil {
				return nil, e
			}
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				return nil, context.DeadlineExceeded
			}
			// A cancel func of an earlier call fired late: wait on.
			ch.f.SetReadDeadline(deadline)
			continue
		case err != nil:
			return nil, errClosed // the fd was closed under us
		case errno != 0:
			return nil, verbs.FromErrno("ibv_get_cq_event", syscall.Errno(errno), "")
		}
		q := cgo.Handle(h).Value().(*cq)
		if !q.gotEvent() {
			continue // its CQ is being closed; the event is acknowledged
		}
		return q, nil
	}
}

// Close destroys the channel (ibv_destroy_comp_channel): ErrBusy while CQs
// use it.
func (ch *compChannel) Close() error {
	ch.mu.Lock()
	busy := ch.ncq > 0
	ch.mu.Unlock()
	if busy {
		return verbs.NewError("ibv_destroy_comp_channel", verbs.ErrBusy, "CQs still use the channel")
	}
	return ch.ctx.closeObj(kindChannel, ch)
}

// shutdown closes the fd: a waiting GetCQEvent returns ErrClosed, and
// os.File.Close waits until none is inside ibv_get_cq_event.
func (ch *compChannel) shutdown() {
	ch.mu.Lock()
	ch.down = true
	ch.mu.Unlock()
	ch.f.Close()
}

func (ch *compChannel) destroy() error {
	ch.shutdown()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.c == nil {
		return nil
	}
	if rc := C.vrt_destroy_comp_channel(ch.c); rc != 0 {
		return verbs.FromErrno("ibv_destroy_comp_channel", syscall.Errno(rc), "")
	}
	ch.c = nil
	return nil
}

var (
	_ verbs.CQ          = (*cq)(nil)
	_ verbs.CompChannel = (*compChannel)(nil)
)
