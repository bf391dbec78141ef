package runtime

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/verbs"
)

// The hello of a connection through the connection manager rides in the
// private data of the connect request and of the accept (see doc.go, "Wire
// format"): 20 bytes, big-endian.
//
//	0       4         6        8            12         16    18     19        20
//	| "VRTH" | version | window | recv depth | msg size | mtu | rd_at | dest_rd |
//
// The QP numbers, PSNs and the path are the connection manager's business.
// The version comes first and is checked first, so that a peer of another
// version, whatever its layout, is told so.
const (
	cmHelloMagic = "VRTH"
	cmHelloLen   = 20
)

func (h hello) marshalCM() []byte {
	b := make([]byte, cmHelloLen)
	copy(b, cmHelloMagic)
	binary.BigEndian.PutUint16(b[4:], uint16(h.Version))
	binary.BigEndian.PutUint16(b[6:], uint16(h.Window))
	binary.BigEndian.PutUint32(b[8:], uint32(h.RecvDepth))
	binary.BigEndian.PutUint32(b[12:], uint32(h.MsgSize))
	binary.BigEndian.PutUint16(b[16:], uint16(h.MTU))
	b[18], b[19] = uint8(h.MaxRdAtomic), uint8(h.MaxDestRdAtomic)
	return b
}

// unmarshalCMHello reads a peer's hello from private data, which the
// transport pads with zeros.
func unmarshalCMHello(b []byte) (hello, error) {
	if len(b) < 6 || string(b[:4]) != cmHelloMagic {
		return hello{}, fmt.Errorf("%w: private data %x is not a verbsrt hello", ErrProtocol, b[:min(len(b), cmHelloLen)])
	}
	if v := int(binary.BigEndian.Uint16(b[4:])); v != helloVersion {
		return hello{}, versionError(v)
	}
	if len(b) < cmHelloLen {
		return hello{}, fmt.Errorf("%w: private data of %d bytes is shorter than a verbsrt hello's %d", ErrProtocol, len(b), cmHelloLen)
	}
	h := hello{Version: int(binary.BigEndian.Uint16(b[4:])), Window: int(binary.BigEndian.Uint16(b[6:])),
		RecvDepth: int(binary.BigEndian.Uint32(b[8:])), MsgSize: int(binary.BigEndian.Uint32(b[12:])),
		MTU: int(binary.BigEndian.Uint16(b[16:])), MaxRdAtomic: int(b[18]), MaxDestRdAtomic: int(b[19])}
	if err := h.check(); err != nil {
		return hello{}, err
	}
	return h, nil
}

// cmSpec is the spec a QP of the connection manager connects with, peer
// the other side's hello when this side has it (the listener's). The
// connection manager takes one read/atomic depth for both directions
// (verbs.ConnManager), so it is the smallest of the depths known: each
// side's own as initiator and as responder, and the peer's. The path MTU
// is the connection manager's, from the route it resolved.
func (rt *Runtime) cmSpec(peer *hello) verbs.ConnectSpec {
	s := rt.connectSpec()
	d := min(s.MaxRdAtomic, s.MaxDestRdAtomic)
	if peer != nil {
		d = min(d, uint8(peer.MaxRdAtomic), uint8(peer.MaxDestRdAtomic))
	}
	s.MaxRdAtomic, s.MaxDestRdAtomic = d, d
	return s
}

// connManager returns the provider's connection manager.
func (rt *Runtime) connManager(op string) (verbs.ConnManager, error) {
	cm, ok := rt.prov.(verbs.ConnManager)
	if !ok {
		return nil, verbs.Errorf(op, verbs.ErrNotSupported,
			"the %s provider has no connection manager: use Listen and Dial, which connect over TCP", rt.prov.Name())
	}
	return cm, nil
}

// ListenCM listens for connections through the provider's connection
// manager (rdma_cm on the ibv provider) on addr, "ip:port" or ":port": an
// address of the runtime's device (on Soft-RoCE, of the netdev its rxe
// device sits on). Unlike Listen, no TCP connection is made: the connection
// manager resolves the path and carries the hello, and each endpoint learns
// when its peer disconnects. Providers without one (soft) return an error
// matching verbs.ErrNotSupported.
func (rt *Runtime) ListenCM(addr string) (*Listener, error) {
	cm, err := rt.connManager("rdma_listen")
	if err != nil {
		return nil, err
	}
	l, err := cm.ListenRC(addr)
	if err != nil {
		return nil, err
	}
	ln := rt.newListener()
	ln.cm = l
	return rt.addListener(ln)
}

// DialCM connects to a ListenCM listener at addr ("ip:port") through the
// provider's connection manager, which picks the device and port the route
// to addr leaves by: it must be the runtime's device.
func (rt *Runtime) DialCM(ctx context.Context, addr string) (*Endpoint, error) {
	if ctx == nil {
		return nil, future.ErrNilContext
	}
	cm, err := rt.connManager("rdma_connect")
	if err != nil {
		return nil, err
	}
	conn, err := cm.DialRC(ctx, addr)
	if err != nil {
		return nil, err
	}
	if conn.Device() != rt.device() {
		conn.Close()
		return nil, verbs.Errorf("rdma_resolve_route", verbs.ErrInvalidArgument,
			"%s is reached through device %s; this runtime is on %s", addr, conn.Device(), rt.device())
	}
	ep, err := rt.newEndpoint()
	if err != nil {
		conn.Close()
		return nil, err
	}
	ep.watch.link = newCMLink(conn)
	if err = conn.Connect(ctx, ep.qp, rt.cmSpec(nil), rt.hello().marshalCM()); err == nil {
		var peer hello
		if peer, err = unmarshalCMHello(conn.PeerData()); err == nil {
			err = ep.run(peer)
		}
	}
	return rt.connectedCM(ctx, ep, err)
}

// connectedCM finishes an endpoint of the connection manager: abandoned
// within ctx when err is not nil, else watched for the connection's end.
func (rt *Runtime) connectedCM(ctx context.Context, ep *Endpoint, err error) (*Endpoint, error) {
	if err != nil {
		rt.abandon(ctx, ep)
		return nil, err
	}
	ep.watchPeer()
	return ep, nil
}

// acceptCM takes the next connection request and accepts it with a new
// endpoint; a request that is not a verbsrt hello, or that reached another
// device, is rejected. fatal says that the error is the listener's (closed,
// ctx ended), not one request's.
func (l *Listener) acceptCM(ctx context.Context) (ep *Endpoint, fatal bool, err error) {
	rt := l.rt
	conn, err := l.cm.Accept(ctx)
	if err != nil {
		return nil, true, err
	}
	peer, err := unmarshalCMHello(conn.PeerData())
	if err == nil && conn.Device() != rt.device() {
		err = verbs.Errorf("rdma_accept", verbs.ErrInvalidArgument,
			"the request arrived on device %s; this runtime is on %s", conn.Device(), rt.device())
	}
	if err == nil {
		ep, err = rt.newEndpoint()
	}
	if err != nil {
		conn.Reject(nil)
		conn.Close()
		return nil, false, err
	}
	ep.watch.link = newCMLink(conn)
	// The QP reaches RTS before the accept leaves, and the peer's only
	// after it, so the peer may send as soon as it is connected; Accept
	// returns once the peer's RTU (ESTABLISHED) arrived.
	if err = conn.Accept(ctx, ep.qp, rt.cmSpec(&peer), rt.hello().marshalCM()); err == nil {
		err = ep.run(peer)
	}
	ep, err = rt.connectedCM(ctx, ep, err)
	return ep, err != nil && ctx.Err() != nil, err
}
