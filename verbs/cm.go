package verbs

import (
	"context"
	"net/netip"
)

// ConnManager is the connection-manager extension of a Provider (librdmacm):
// it resolves an IP address to a device, port and path, carries the QP
// numbers and a little private data between the two sides, moves each QP
// to RTS with the attributes it negotiated, and tells each side when the
// other disconnects. A provider without it connects through an exchange of
// QP numbers and GIDs out of band (Connect).
type ConnManager interface {
	// ListenRC listens for RC connection requests on addr ("ip:port",
	// ":port"; port 0 picks one).
	ListenRC(addr string) (RCListener, error)
	// DialRC resolves remote ("ip:port") to a device and a route; the
	// returned RCConn is then bound to that device: create the QP there and
	// Connect.
	DialRC(ctx context.Context, remote string) (RCConn, error)
}

// RCListener is a listening connection manager. Safe for concurrent use.
type RCListener interface {
	// Addr returns the address and port the listener is bound to.
	Addr() netip.AddrPort
	// Accept waits until ctx ends for the next connection request, whose
	// RCConn must then be accepted or rejected.
	Accept(ctx context.Context) (RCConn, error)
	// Close stops listening; requests already returned are not affected.
	Close() error
}

// RCConn is one connection of a connection manager, from a connection
// request (passive) or from DialRC (active). Safe for concurrent use;
// Close releases it (not the QP, which stays the caller's).
type RCConn interface {
	// Device names the device the connection is bound to: the QP must be
	// created on a context of it.
	Device() string
	LocalAddr() netip.AddrPort
	RemoteAddr() netip.AddrPort
	// PeerData returns the private data of the peer's request (passive side)
	// or accept (active side), padded with zeros to what the transport
	// carried.
	PeerData() []byte
	// Accept accepts a request with qp (RESET or INIT; moved to RTS) and the
	// private data given, and waits until ctx ends for the connection to be
	// established. Of spec, the connection manager takes what the two sides
	// negotiate (RetryCnt, RNRRetry, MaxRdAtomic, with their defaults); the
	// path (port, GID, MTU, timeout) is its own.
	Accept(ctx context.Context, qp QP, spec ConnectSpec, private []byte) error
	// Reject refuses a request; the peer's Connect fails.
	Reject(private []byte) error
	// Connect sends the request for qp (RESET or INIT) with spec (as for
	// Accept) and the private data given, waits until ctx ends for the
	// accept and moves qp to RTS.
	Connect(ctx context.Context, qp QP, spec ConnectSpec, private []byte) error
	// Disconnected is closed once the connection is over: the peer
	// disconnected, the device went away, or Close was called.
	Disconnected() <-chan struct{}
	// Disconnect moves the QP to ERR, flushing its work, and tells the peer.
	Disconnect() error
	Close() error
}
