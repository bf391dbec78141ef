//go:build linux && cgo

package ibv

/*
#include <stdlib.h>
#include "cm_shim.h"
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// The Go event types carry the C enum's values.
var _ = [1]int{}[C.RDMA_CM_EVENT_TIMEWAIT_EXIT-int(CMTimewaitExit)]

const (
	// resolveTimeoutMS is what rping gives rdma_resolve_addr and
	// rdma_resolve_route.
	resolveTimeoutMS = 2000
	// listenBacklog is rdma_listen's backlog.
	listenBacklog = 16
)

// cmChannel is a non-blocking rdma_cm event channel whose fd Go's netpoller
// waits on. One goroutine reads it at a time.
type cmChannel struct {
	c  *C.struct_rdma_event_channel
	f  *os.File
	rc syscall.RawConn
}

func newCMChannel(c *C.struct_rdma_event_channel) (*cmChannel, error) {
	f, rc, err := newPollFile(c.fd, "rdma-cm")
	if err != nil {
		return nil, err
	}
	return &cmChannel{c: c, f: f, rc: rc}, nil
}

// cmEvent is an event read (and acknowledged) from a channel.
type cmEvent struct {
	typ    CMEvent
	status int
	id     *C.struct_rdma_cm_id
	param  ConnParam
	dev    string
	port   uint8
	src    netip.AddrPort
	dst    netip.AddrPort
}

// next waits for the next event until ctx ends; ErrClosed once the channel
// is shut.
func (ch *cmChannel) next(ctx context.Context) (cmEvent, error) {
	if err := ctx.Err(); err != nil {
		return cmEvent{}, err
	}
	deadline, _ := ctx.Deadline()
	ch.f.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { ch.f.SetReadDeadline(aLongTimeAgo) })
	defer stop()
	var ev C.struct_vrt_cm_event
	for {
		var errno C.int
		err := ch.rc.Read(func(uintptr) bool {
			errno = C.vrt_cm_get_event(ch.c, &ev)
			return errno != C.EAGAIN
		})
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			if e := ctx.Err(); e != nil {
				return cmEvent{}, e
			}
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				return cmEvent{}, context.DeadlineExceeded
			}
			ch.f.SetReadDeadline(deadline) // an earlier call's cancel fired late
			continue
		case err != nil:
			return cmEvent{}, errClosed
		case errno != 0:
			return cmEvent{}, verbs.FromErrno("rdma_get_cm_event", syscall.Errno(errno), "")
		}
		return cmEvent{
			typ: CMEvent(ev.event), status: int(ev.status), id: ev.id,
			param: ConnParam{
				PrivateData:        C.GoBytes(unsafe.Pointer(&ev.param.private_data[0]), C.int(ev.param.private_data_len)),
				ResponderResources: uint8(ev.param.responder_resources),
				InitiatorDepth:     uint8(ev.param.initiator_depth),
				RetryCount:         uint8(ev.param.retry_count),
				RNRRetryCount:      uint8(ev.param.rnr_retry_count),
			},
			dev: C.GoString(&ev.dev_name[0]), port: uint8(ev.port_num),
			src: addrPortOf(&ev.src), dst: addrPortOf(&ev.dst),
		}, nil
	}
}

// await reads events until one of type want arrives; any other event but
// those in skip is an error (a *CMEventError naming op).
func (ch *cmChannel) await(ctx context.Context, op string, want CMEvent, skip ...CMEvent) (cmEvent, error) {
	for {
		ev, err := ch.next(ctx)
		if err != nil {
			return ev, fmt.Errorf("ibv: %s: waiting for %v: %w", op, want, err)
		}
		if ev.typ == want {
			return ev, nil
		}
		skipped := false
		for _, s := range skip {
			skipped = skipped || ev.typ == s
		}
		if !skipped {
			return ev, &CMEventError{Op: op, Event: ev.typ, Status: ev.status}
		}
	}
}

// shut closes the fd: a reader returns ErrClosed, and os.File.Close waits
// until none is inside rdma_get_cm_event.
func (ch *cmChannel) shut() { ch.f.Close() }

func addrPortOf(a *C.struct_vrt_cm_addr) netip.AddrPort {
	var ip netip.Addr
	switch a.family {
	case 4:
		ip = netip.AddrFrom4(*(*[4]byte)(unsafe.Pointer(&a.ip[0])))
	case 6:
		ip = netip.AddrFrom16(*(*[16]byte)(unsafe.Pointer(&a.ip[0])))
	default:
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ip, uint16(a.port))
}

func cAddr(ap netip.AddrPort) C.struct_vrt_cm_addr {
	var a C.struct_vrt_cm_addr
	if !ap.Addr().IsValid() {
		return a
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		a.family = 4
		b := ip.As4()
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&a.ip[0])), 4), b[:])
	} else {
		a.family = 6
		b := ip.As16()
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&a.ip[0])), 16), b[:])
	}
	a.port = C.uint16_t(ap.Port())
	return a
}

// parseCMAddr parses "host:port", ":port" (any IPv4 address) or, with
// portOptional, a bare IP address.
func parseCMAddr(s string, portOptional bool) (netip.AddrPort, error) {
	if portOptional {
		if ip, err := netip.ParseAddr(s); err == nil {
			return netip.AddrPortFrom(ip, 0), nil
		}
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, verbs.Errorf("rdma_cm", verbs.ErrInvalidArgument, "address %q: %v", s, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, verbs.Errorf("rdma_cm", verbs.ErrInvalidArgument, "port %q", port)
	}
	ip := netip.IPv4Unspecified()
	if host != "" {
		if ip, err = netip.ParseAddr(host); err != nil {
			return netip.AddrPort{}, verbs.Errorf("rdma_cm", verbs.ErrInvalidArgument, "address %q: not an IP address", host)
		}
	}
	return netip.AddrPortFrom(ip, uint16(p)), nil
}

func cParam(p ConnParam, qpn uint32) (C.struct_vrt_cm_param, error) {
	var c C.struct_vrt_cm_param
	if len(p.PrivateData) > C.VRT_CM_PRIVATE_MAX {
		return c, verbs.Errorf("rdma_cm", verbs.ErrInvalidArgument, "%d bytes of private data (at most %d)",
			len(p.PrivateData), C.VRT_CM_PRIVATE_MAX)
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&c.private_data[0])), C.VRT_CM_PRIVATE_MAX), p.PrivateData)
	c.private_data_len = C.uint8_t(len(p.PrivateData))
	c.responder_resources = C.uint8_t(p.ResponderResources)
	c.initiator_depth = C.uint8_t(p.InitiatorDepth)
	c.retry_count = C.uint8_t(p.RetryCount)
	c.rnr_retry_count = C.uint8_t(p.RNRRetryCount)
	c.qp_num = C.uint32_t(qpn)
	return c, nil
}

// CMListener listens for rdma_cm connection requests (RC, RDMA_PS_TCP) on
// an IP address of an RDMA device. Safe for concurrent use: GetRequest
// calls take turns; Close wakes them.
type CMListener struct {
	ch      *cmChannel
	id      *C.struct_rdma_cm_id
	addr    netip.AddrPort
	closing atomic.Bool
	mu      sync.Mutex // held by GetRequest while it reads, and by Close to destroy
}

// ListenCM listens for connection requests on addr, "ip:port" or ":port"
// (every IPv4 address); port 0 picks one (Addr tells which). rdma_cm needs
// an address of an RDMA device (or the unspecified address): on Soft-RoCE,
// the address of the netdev the rxe device sits on, not 127.0.0.1.
func ListenCM(addr string) (*CMListener, error) {
	if err := loadRDMACM(); err != nil {
		return nil, err
	}
	ap, err := parseCMAddr(addr, false)
	if err != nil {
		return nil, err
	}
	ca := cAddr(ap)
	var (
		ch   *C.struct_rdma_event_channel
		id   *C.struct_rdma_cm_id
		port C.uint16_t
	)
	if rc := C.vrt_cm_listen(&ca, listenBacklog, &ch, &id, &port); rc != 0 {
		return nil, verbs.FromErrno("rdma_listen", syscall.Errno(rc), addr)
	}
	c, err := newCMChannel(ch)
	if err != nil {
		C.vrt_cm_destroy(id, ch)
		return nil, err
	}
	return &CMListener{ch: c, id: id, addr: netip.AddrPortFrom(ap.Addr(), uint16(port))}, nil
}

// Addr returns the address and port the listener is bound to.
func (l *CMListener) Addr() netip.AddrPort { return l.addr }

// GetRequest waits for the next connection request until ctx ends and
// returns it as a CMConn to Accept (or Reject) after creating a QP on its
// device (CMConn.Device, CMConn.OpenContext). The request's private data
// is in its PeerParam.
func (l *CMListener) GetRequest(ctx context.Context) (*CMConn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing.Load() {
		return nil, errClosed
	}
	ev, err := l.ch.await(ctx, "rdma_listen", CMConnectRequest, CMAddrChange, CMTimewaitExit)
	if err != nil {
		return nil, err
	}
	// The request's id delivers its events on our channel until it has
	// one of its own.
	var ch *C.struct_rdma_event_channel
	if rc := C.vrt_cm_migrate(ev.id, &ch); rc != 0 {
		C.vrt_cm_reject(ev.id, nil, 0)
		C.vrt_cm_destroy(ev.id, nil)
		return nil, verbs.FromErrno("rdma_migrate_id", syscall.Errno(rc), "")
	}
	cch, err := newCMChannel(ch)
	if err != nil {
		C.vrt_cm_reject(ev.id, nil, 0)
		C.vrt_cm_destroy(ev.id, ch)
		return nil, err
	}
	return newCMConn(cch, ev, true), nil
}

// Close stops listening. Requests already returned by GetRequest are not
// affected.
func (l *CMListener) Close() error {
	if !l.closing.CompareAndSwap(false, true) {
		return nil
	}
	l.ch.shut()
	l.mu.Lock()
	defer l.mu.Unlock()
	C.vrt_cm_destroy(l.id, l.ch.c)
	return nil
}

type cmState uint8

const (
	cmResolved  cmState = iota // active: address and route resolved
	cmRequested                // passive: a connection request not yet answered
	cmConnected
	cmDone // rejected, failed or disconnected
)

// CMConn is one rdma_cm connection (an rdma_cm_id with an event channel of
// its own): on the active side from DialCM, then Connect; on the passive
// side from CMListener.GetRequest, then Accept or Reject. The QP is the
// caller's, a verbs.QP of this provider created on the connection's device;
// the connection moves it through INIT, RTR and RTS with the attributes the
// connection manager negotiated, and the QP keeps working through the
// provider's PostSend, PostRecv and Poll as any other.
//
// Safe for concurrent use. Close releases the rdma_cm_id, not the QP.
type CMConn struct {
	ch     *cmChannel
	id     *C.struct_rdma_cm_id
	dev    string
	port   uint8
	local  netip.AddrPort
	remote netip.AddrPort
	peer   atomic.Pointer[ConnParam]

	closing atomic.Bool // Close has begun: the channel is shut
	mu      sync.Mutex  // held by Accept, Connect and Reject, and by Close to wait them out
	state   cmState
	q       *qp

	disc     chan struct{} // closed when the connection is gone
	discOnce sync.Once
	watching bool
	watched  chan struct{} // closed when the event goroutine ends
}

func newCMConn(ch *cmChannel, ev cmEvent, passive bool) *CMConn {
	c := &CMConn{ch: ch, id: ev.id, dev: ev.dev, port: ev.port, local: ev.src, remote: ev.dst,
		state: cmResolved, disc: make(chan struct{}), watched: make(chan struct{})}
	if passive {
		c.state = cmRequested
		c.peer.Store(&ev.param)
	}
	return c
}

// DialCM resolves the address and route to remote ("ip:port") from local
// (an IP address, "ip:port", or "" for any) through the connection
// manager. The connection is then bound to an RDMA device and port
// (Device, Port): create the QP there and Connect. rdma_cm fails on
// 127.0.0.1 under Soft-RoCE: use the addresses of the rxe netdevs.
func DialCM(ctx context.Context, local, remote string) (*CMConn, error) {
	if err := loadRDMACM(); err != nil {
		return nil, err
	}
	dst, err := parseCMAddr(remote, false)
	if err != nil {
		return nil, err
	}
	var src netip.AddrPort
	if local != "" {
		if src, err = parseCMAddr(local, true); err != nil {
			return nil, err
		}
	}
	cs, cd := cAddr(src), cAddr(dst)
	var (
		ch *C.struct_rdma_event_channel
		id *C.struct_rdma_cm_id
	)
	if rc := C.vrt_cm_resolve(&cs, &cd, resolveTimeoutMS, &ch, &id); rc != 0 {
		return nil, verbs.FromErrno("rdma_resolve_addr", syscall.Errno(rc), remote)
	}
	cch, err := newCMChannel(ch)
	if err != nil {
		C.vrt_cm_destroy(id, ch)
		return nil, err
	}
	fail := func(err error) (*CMConn, error) {
		cch.shut()
		C.vrt_cm_destroy(id, ch)
		return nil, err
	}
	if _, err := cch.await(ctx, "rdma_resolve_addr", CMAddrResolved); err != nil {
		return fail(err)
	}
	if rc := C.vrt_cm_resolve_route(id, resolveTimeoutMS); rc != 0 {
		return fail(verbs.FromErrno("rdma_resolve_route", syscall.Errno(rc), remote))
	}
	ev, err := cch.await(ctx, "rdma_resolve_route", CMRouteResolved)
	if err != nil {
		return fail(err)
	}
	return newCMConn(cch, ev, false), nil
}

// Device returns the name of the RDMA device the connection is bound to.
func (c *CMConn) Device() string { return c.dev }

// Port returns the device port the connection uses.
func (c *CMConn) Port() uint8 { return c.port }

// LocalAddr returns our IP address and port.
func (c *CMConn) LocalAddr() netip.AddrPort { return c.local }

// RemoteAddr returns the peer's address and port.
func (c *CMConn) RemoteAddr() netip.AddrPort { return c.remote }

// PeerParam returns what the peer sent: its connection request on the
// passive side, its accept once Connect returned on the active side. The
// private data comes padded to what the transport carried.
func (c *CMConn) PeerParam() ConnParam {
	if p := c.peer.Load(); p != nil {
		return *p
	}
	return ConnParam{}
}

// OpenContext opens a context on the connection's device, for the PD, CQ
// and QP of the connection.
func (c *CMConn) OpenContext() (verbs.Context, error) {
	devs, err := New().Devices()
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		if d.Name() == c.dev {
			return d.Open()
		}
	}
	return nil, verbs.Errorf("ibv_open_device", verbs.ErrNotFound, "device %q of the rdma_cm connection", c.dev)
}

// attach checks that vq is an RC QP of this provider on the connection's
// device.
func (c *CMConn) attach(op string, vq verbs.QP) (*qp, error) {
	q, ok := vq.(*qp)
	if !ok {
		return nil, verbs.NewError(op, verbs.ErrInvalidArgument, "the QP is not of the ibv provider")
	}
	if q.typ != verbs.QPTypeRC {
		return nil, verbs.Errorf(op, verbs.ErrInvalidArgument, "%s QP: rdma_cm connections here are RC", q.typ)
	}
	if q.ctx.dev.name != c.dev {
		return nil, verbs.Errorf(op, verbs.ErrInvalidArgument, "the QP is on %s, the connection on %s", q.ctx.dev.name, c.dev)
	}
	if q.closed.Load() {
		return nil, errClosed
	}
	return q, nil
}

// modifyQP runs fn (a helper that moves q's C QP) under q's modify lock and
// records the state q reached: to on success, what ibv_query_qp says after
// a failure.
func modifyQP(q *qp, op string, to verbs.QPState, fn func(*C.struct_ibv_qp, *C.int) C.int) error {
	q.modMu.Lock()
	if q.closed.Load() {
		q.modMu.Unlock()
		return errClosed
	}
	var failed C.int = -1
	rc := fn(q.c, &failed)
	if rc == 0 {
		q.state.Store(uint32(to))
	}
	q.modMu.Unlock()
	if rc == 0 {
		return nil
	}
	q.Query() // records the state the QP was left in
	if failed >= 0 {
		return verbs.FromErrno("ibv_modify_qp", syscall.Errno(rc),
			fmt.Sprintf("%s: to %v with rdma_init_qp_attr's attributes", op, verbs.QPState(failed)))
	}
	return verbs.FromErrno(op, syscall.Errno(rc), "")
}

// InitQP moves qp from RESET to INIT with the connection manager's port,
// P_Key index and access flags, so that receives can be posted before
// Connect or Accept (which otherwise do it themselves).
func (c *CMConn) InitQP(vq verbs.QP) error {
	q, err := c.attach("rdma_init_qp_attr", vq)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing.Load() {
		return errClosed
	}
	return modifyQP(q, "rdma_init_qp_attr", verbs.QPStateInit, func(qc *C.struct_ibv_qp, failed *C.int) C.int {
		return C.vrt_cm_modify_qp(c.id, qc, C.IBV_QPS_INIT, failed)
	})
}

// Accept accepts the connection request with qp (in RESET or INIT; moved to
// RTS before the accept goes out, as librdmacm does for a QP it manages)
// and waits until the connection is established or ctx ends.
func (c *CMConn) Accept(ctx context.Context, vq verbs.QP, param ConnParam) error {
	q, err := c.attach("rdma_accept", vq)
	if err != nil {
		return err
	}
	cp, err := cParam(param, q.qpn)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing.Load() || c.state != cmRequested {
		return verbs.NewError("rdma_accept", verbs.ErrInvalidArgument, "not a pending connection request")
	}
	c.state = cmDone
	if err := modifyQP(q, "rdma_accept", verbs.QPStateRTS, func(qc *C.struct_ibv_qp, failed *C.int) C.int {
		return C.vrt_cm_accept(c.id, qc, &cp, failed)
	}); err != nil {
		return err
	}
	if _, err := c.ch.await(ctx, "rdma_accept", CMEstablished); err != nil {
		return err
	}
	c.connected(q)
	return nil
}

// Reject refuses the connection request; the peer's Connect fails with
// a *CMEventError for CMRejected. privateData (at most 148 bytes on IB)
// goes with it. Close the connection afterwards.
func (c *CMConn) Reject(privateData []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing.Load() || c.state != cmRequested {
		return verbs.NewError("rdma_reject", verbs.ErrInvalidArgument, "not a pending connection request")
	}
	if len(privateData) > C.VRT_CM_PRIVATE_MAX {
		return verbs.Errorf("rdma_reject", verbs.ErrInvalidArgument, "%d bytes of private data", len(privateData))
	}
	c.state = cmDone
	var p *C.uint8_t
	if len(privateData) > 0 {
		p = (*C.uint8_t)(C.CBytes(privateData))
		defer C.free(unsafe.Pointer(p))
	}
	if rc := C.vrt_cm_reject(c.id, p, C.uint8_t(len(privateData))); rc != 0 {
		return verbs.FromErrno("rdma_reject", syscall.Errno(rc), "")
	}
	return nil
}

// Connect sends the connection request for qp (in RESET or INIT) with
// param, waits for the peer's accept until ctx ends, then moves qp to RTS
// and completes the connection (rdma_establish). A rejection or an
// unanswered request is a *CMEventError.
func (c *CMConn) Connect(ctx context.Context, vq verbs.QP, param ConnParam) error {
	q, err := c.attach("rdma_connect", vq)
	if err != nil {
		return err
	}
	cp, err := cParam(param, q.qpn)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing.Load() || c.state != cmResolved {
		return verbs.NewError("rdma_connect", verbs.ErrInvalidArgument, "not a resolved, unconnected rdma_cm_id")
	}
	c.state = cmDone
	if err := modifyQP(q, "rdma_connect", verbs.QPStateInit, func(qc *C.struct_ibv_qp, failed *C.int) C.int {
		if q.curState() != verbs.QPStateReset {
			qc = nil // in INIT already: InitQP did it
		}
		return C.vrt_cm_connect(c.id, qc, &cp, failed)
	}); err != nil {
		return err
	}
	ev, err := c.ch.await(ctx, "rdma_connect", CMConnectResponse)
	if err != nil {
		return err
	}
	c.peer.Store(&ev.param)
	if err := modifyQP(q, "rdma_establish", verbs.QPStateRTS, func(qc *C.struct_ibv_qp, failed *C.int) C.int {
		return C.vrt_cm_establish(c.id, qc, failed)
	}); err != nil {
		return err
	}
	c.connected(q)
	return nil
}

// connected starts the goroutine that reads the connection's events from
// now on. The caller holds c.mu.
func (c *CMConn) connected(q *qp) {
	c.state, c.q, c.watching = cmConnected, q, true
	go c.watch()
}

// watch acknowledges the events of an established connection, closing
// Disconnected at the first DISCONNECTED (or DEVICE_REMOVAL), until Close
// shuts the channel.
func (c *CMConn) watch() {
	defer close(c.watched)
	defer c.markDisconnected()
	for {
		ev, err := c.ch.next(context.Background())
		if err != nil {
			return
		}
		if ev.typ == CMDisconnected || ev.typ == CMDeviceRemoval {
			c.markDisconnected()
		}
	}
}

func (c *CMConn) markDisconnected() { c.discOnce.Do(func() { close(c.disc) }) }

// Disconnected is closed once the connection is gone: the peer asked to
// disconnect or replied to our Disconnect, the device went away, or the
// connection was closed. The QP does not notice by itself
// (a receive posted there just never completes): watch this.
func (c *CMConn) Disconnected() <-chan struct{} { return c.disc }

// Disconnect moves the QP to ERR, so that its outstanding work requests
// complete with WR_FLUSH_ERR, and tells the peer (rdma_disconnect: a
// disconnect request, or the reply to the peer's). It does not wait:
// Disconnected closes when the peer has replied, which its application
// does with a Disconnect of its own (or after the request times out).
func (c *CMConn) Disconnect() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing.Load() || c.state != cmConnected {
		return verbs.NewError("rdma_disconnect", verbs.ErrInvalidArgument, "not connected")
	}
	c.state = cmDone
	q := c.q
	q.modMu.Lock()
	var qc *C.struct_ibv_qp
	if !q.closed.Load() {
		qc = q.c
	}
	rc := C.vrt_cm_disconnect(c.id, qc)
	if qc != nil {
		q.state.Store(uint32(verbs.QPStateErr))
	}
	q.modMu.Unlock()
	if rc != 0 {
		return verbs.FromErrno("rdma_disconnect", syscall.Errno(rc), "")
	}
	return nil
}

// Close releases the rdma_cm_id and its event channel (destroying a
// connected id disconnects it). The QP is the caller's to close, before or
// after. Closing twice is a no-op.
func (c *CMConn) Close() error {
	if !c.closing.CompareAndSwap(false, true) {
		return nil
	}
	c.ch.shut() // wakes an Accept or Connect waiting for an event
	c.mu.Lock()
	watching := c.watching
	c.mu.Unlock()
	if watching {
		<-c.watched
	} else {
		c.markDisconnected()
	}
	C.vrt_cm_destroy(c.id, c.ch.c)
	return nil
}

// cmInit makes librdmacm open its context on every RDMA device, which it
// keeps for the life of the process (as it would at the first address
// resolution): tests that count file descriptors call it before counting.
func cmInit() {
	if loadRDMACM() != nil {
		return
	}
	var n C.int
	if l := C.vrt_rdma_get_devices(&n); l != nil {
		C.vrt_rdma_free_devices(l)
	}
}
