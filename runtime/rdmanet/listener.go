package rdmanet

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
)

// Listener accepts Conns on a TCP address: each connection's handshake
// (runtime.Runtime.Listen) makes an endpoint, and the endpoint a Conn.
type Listener struct {
	ln     *runtime.Listener
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

// Listen listens on the TCP address addr ("host:port"; port 0 picks one).
func Listen(rt *runtime.Runtime, addr string) (*Listener, error) {
	ln, err := rt.Listen(addr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Listener{ln: ln, ctx: ctx, cancel: cancel}, nil
}

// Accept waits for the next connection. A client whose handshake fails (a
// wrong protocol, a peer that hung up, a timeout) is dropped and Accept
// waits for the next, as a TCP listener never returns a failed handshake:
// servers such as net/http and gRPC stop serving on Accept's first error
// that is not temporary. After Close it returns an error matching
// net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		ep, err := l.ln.Accept(l.ctx)
		if err == nil {
			return NewConn(ep), nil
		}
		if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) || errors.Is(err, runtime.ErrClosed) {
			return nil, &net.OpError{Op: "accept", Net: network, Addr: l.ln.Addr(), Err: net.ErrClosed}
		}
		// A failure that repeats (out of file descriptors, the arena
		// full) must not spin: back off as net/http does on a
		// temporary error, 1 ms doubling to 100 ms, reset by a success.
		backoff = min(max(2*backoff, time.Millisecond), 100*time.Millisecond)
		select {
		case <-time.After(backoff):
		case <-l.ctx.Done():
		}
	}
}

// Close stops listening; a blocked Accept returns. Conns already accepted
// stay open.
func (l *Listener) Close() error {
	first := false
	l.once.Do(func() {
		first = true
		l.cancel()
	})
	if !first {
		return &net.OpError{Op: "close", Net: network, Addr: l.ln.Addr(), Err: net.ErrClosed}
	}
	return l.ln.Close()
}

// Addr returns the TCP address Dial connects to.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }
