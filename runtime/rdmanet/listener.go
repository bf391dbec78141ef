package rdmanet

import (
	"context"
	"errors"
	"net"

	"github.com/verbsrt/verbsrt/runtime"
)

// Listener accepts Conns on a TCP address: each connection's handshake
// (runtime.Runtime.Listen) makes an endpoint, and the endpoint a Conn.
type Listener struct {
	ln *runtime.Listener
}

// Listen listens on the TCP address addr ("host:port"; port 0 picks one).
func Listen(rt *runtime.Runtime, addr string) (*Listener, error) {
	ln, err := rt.Listen(addr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	return &Listener{ln: ln}, nil
}

// Accept waits for the next connection. A client whose handshake fails (a
// wrong protocol, a peer that hung up, a timeout) never reaches it: the
// runtime's listener handshakes with many clients at once and hands on
// only the connections made (runtime.Listener.Accept), as a TCP listener
// never returns a failed handshake. It fails only after Close, with an
// error matching net.ErrClosed, on which servers such as net/http and
// gRPC stop serving.
func (l *Listener) Accept() (net.Conn, error) {
	ep, err := l.ln.Accept(context.Background())
	if err != nil {
		return nil, &net.OpError{Op: "accept", Net: network, Addr: l.ln.Addr(), Err: net.ErrClosed}
	}
	return NewConn(ep), nil
}

// Close stops listening; a blocked Accept returns. Conns already accepted
// stay open; connections still in their handshake are closed.
func (l *Listener) Close() error {
	// The runtime's listener closes its socket before its Accept returns
	// and before a second Close does.
	err := l.ln.Close()
	if errors.Is(err, runtime.ErrClosed) {
		return &net.OpError{Op: "close", Net: network, Addr: l.ln.Addr(), Err: net.ErrClosed}
	}
	return err
}

// Addr returns the TCP address Dial connects to.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }
