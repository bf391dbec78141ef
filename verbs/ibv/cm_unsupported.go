//go:build !linux || !cgo

package ibv

import (
	"context"
	"net/netip"

	"github.com/verbsrt/verbsrt/verbs"
)

func errNoCM() error { return errNoCgo("rdma_cm") }

// CMListener listens for rdma_cm connection requests. In this build (no
// cgo, or not Linux) there is none: ListenCM fails.
type CMListener struct{}

// ListenCM returns an error matching verbs.ErrNotSupported in this build.
func ListenCM(addr string) (*CMListener, error) { return nil, errNoCM() }

// Addr returns the zero address.
func (l *CMListener) Addr() netip.AddrPort { return netip.AddrPort{} }

// GetRequest returns an error matching verbs.ErrNotSupported.
func (l *CMListener) GetRequest(ctx context.Context) (*CMConn, error) { return nil, errNoCM() }

// Close does nothing.
func (l *CMListener) Close() error { return nil }

// CMConn is one rdma_cm connection. In this build there is none: DialCM
// fails.
type CMConn struct{}

// DialCM returns an error matching verbs.ErrNotSupported in this build.
func DialCM(ctx context.Context, local, remote string) (*CMConn, error) { return nil, errNoCM() }

// Device returns "".
func (c *CMConn) Device() string { return "" }

// Port returns 0.
func (c *CMConn) Port() uint8 { return 0 }

// LocalAddr returns the zero address.
func (c *CMConn) LocalAddr() netip.AddrPort { return netip.AddrPort{} }

// RemoteAddr returns the zero address.
func (c *CMConn) RemoteAddr() netip.AddrPort { return netip.AddrPort{} }

// PeerParam returns the zero ConnParam.
func (c *CMConn) PeerParam() ConnParam { return ConnParam{} }

// OpenContext returns an error matching verbs.ErrNotSupported.
func (c *CMConn) OpenContext() (verbs.Context, error) { return nil, errNoCM() }

// InitQP returns an error matching verbs.ErrNotSupported.
func (c *CMConn) InitQP(qp verbs.QP) error { return errNoCM() }

// Accept returns an error matching verbs.ErrNotSupported.
func (c *CMConn) Accept(ctx context.Context, qp verbs.QP, param ConnParam) error { return errNoCM() }

// Reject returns an error matching verbs.ErrNotSupported.
func (c *CMConn) Reject(privateData []byte) error { return errNoCM() }

// Connect returns an error matching verbs.ErrNotSupported.
func (c *CMConn) Connect(ctx context.Context, qp verbs.QP, param ConnParam) error { return errNoCM() }

// Disconnected returns a closed channel: there is no connection.
func (c *CMConn) Disconnected() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// Disconnect returns an error matching verbs.ErrNotSupported.
func (c *CMConn) Disconnect() error { return errNoCM() }

// Close does nothing.
func (c *CMConn) Close() error { return nil }

func cmInit() {}
