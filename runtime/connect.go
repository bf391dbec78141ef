package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/verbs"
)

// hello is what the two ends exchange over TCP before their QPs connect:
// what ibv_rc_pingpong exchanges (LID, QPN, PSN, GID) plus the receive
// window and message size the credit scheme needs. One JSON line each way,
// then one "ready" line each way once both QPs are in RTS.
type hello struct {
	Version   int    `json:"version"`
	QPN       uint32 `json:"qpn"`
	PSN       uint32 `json:"psn"`
	LID       uint16 `json:"lid"`
	GID       string `json:"gid"`
	RecvDepth int    `json:"recv_depth"` // the largest window (WithRecvDepth)
	Window    int    `json:"window"`     // the initial window: the peer's first credits
	MsgSize   int    `json:"msg_size"`

	gid verbs.GID
}

// helloVersion is the version of the handshake and of what travels on the
// connection after it (doc.go, "Wire format"). Version 2 moved the credit
// reports from the immediate data of SENDs into a header in front of their
// data, giving the immediate data to the application. Version 3 shares
// receives: windows start at Window, grow to RecvDepth, and the header
// carries the backlog flag and the want field.
const helloVersion = 3

// hello returns what every hello of this runtime says, whichever way it
// travels: the version, the receive credits and the largest message.
func (rt *Runtime) hello() hello {
	return hello{Version: helloVersion, RecvDepth: rt.cfg.recvDepth, Window: initialWindow, MsgSize: rt.cfg.msgSize}
}

// handshakeTimeout bounds the exchange when the caller's context does not.
const handshakeTimeout = 30 * time.Second

// Listener accepts connections on a TCP address (Listen) or through the
// provider's connection manager (ListenCM); each becomes an Endpoint.
type Listener struct {
	rt *Runtime
	ln net.Listener     // Listen
	cm verbs.RCListener // ListenCM
}

// Listen listens for connections on the TCP address addr (e.g.
// "127.0.0.1:0"), which carries only the connection handshake.
func (rt *Runtime) Listen(addr string) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return rt.addListener(&Listener{rt: rt, ln: ln})
}

func (rt *Runtime) addListener(l *Listener) (*Listener, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		if l.cm != nil {
			l.cm.Close()
		} else {
			l.ln.Close()
		}
		return nil, ErrClosed
	}
	rt.listeners[l] = struct{}{}
	return l, nil
}

// Addr returns the listener's address, for Dial (or DialCM: the
// connection manager's port space is TCP's, so it is a *net.TCPAddr too).
func (l *Listener) Addr() net.Addr {
	if l.cm != nil {
		return net.TCPAddrFromAddrPort(l.cm.Addr())
	}
	return l.ln.Addr()
}

// Close stops listening. Endpoints already accepted are not affected.
func (l *Listener) Close() error {
	l.rt.mu.Lock()
	delete(l.rt.listeners, l)
	l.rt.mu.Unlock()
	if l.cm != nil {
		return l.cm.Close()
	}
	return l.ln.Close()
}

// Accept waits for a peer to Dial (DialCM for a ListenCM listener) and
// returns the connected endpoint.
func (l *Listener) Accept(ctx context.Context) (*Endpoint, error) {
	if ctx == nil {
		return nil, future.ErrNilContext
	}
	if l.cm != nil {
		return l.acceptCM(ctx)
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := l.ln.Accept()
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return l.rt.handshake(ctx, r.c)
	case <-ctx.Done():
		// Unblock the Accept goroutine without closing the listener: a
		// past deadline makes it return at once.
		if tl, ok := l.ln.(*net.TCPListener); ok {
			tl.SetDeadline(time.Unix(1, 0))
			r := <-ch
			tl.SetDeadline(time.Time{})
			if r.err == nil {
				r.c.Close()
			}
		}
		return nil, ctx.Err()
	}
}

// Dial connects to a Listener at the TCP address addr.
func (rt *Runtime) Dial(ctx context.Context, addr string) (*Endpoint, error) {
	if ctx == nil {
		return nil, future.ErrNilContext
	}
	if rt.isClosed() {
		return nil, ErrClosed
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return rt.handshake(ctx, c)
}

// handshake creates an endpoint, exchanges hellos over c, connects the QP
// and waits until the peer is in RTS too. c stays open, silent, as the
// endpoint's link to its peer (peerlink.go): its end says the peer is gone.
func (rt *Runtime) handshake(ctx context.Context, c net.Conn) (*Endpoint, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(handshakeTimeout)
	}
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetKeepAliveConfig(linkKeepAlive); err != nil {
			// Still connected; only a vanished host goes unnoticed longer.
			rt.log.Warn("verbsrt: TCP keepalive for the link to the peer", "err", err)
		}
	}

	ep, err := rt.newEndpoint()
	if err != nil {
		stop()
		c.Close()
		return nil, err
	}
	ep.watch.link = &tcpLink{c: c} // released with the endpoint from now on
	mine := rt.hello()
	mine.QPN, mine.GID = ep.qp.QPN(), netip.AddrFrom16(rt.gid).String()
	br := bufio.NewReader(c)
	peer, err := exchange(c, br, mine)
	started := false
	if err == nil {
		err = ep.start(peer)
		started = err == nil
	}
	if err == nil {
		err = ready(c, br)
	}
	// The handshake's deadline must not end the link: lift it, unless ctx
	// ended as the handshake finished and the deadline it set stands.
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = c.SetDeadline(time.Time{})
	}
	if err != nil && started && ctx.Err() == nil {
		switch {
		case ep.Err() != nil:
			// The endpoint is over already, and ended its link itself:
			// a peer that closed as soon as it had its end (a server
			// that accepts and hangs up) had its goodbye arrive before
			// this side was done with the link. The connection was
			// made; the endpoint says how it ended, as a TCP conn
			// that the peer closed at once reads io.EOF.
			err = nil
		case ep.closing.Load():
			err = ErrClosed // the runtime closing its endpoints
		}
	}
	if err != nil {
		rt.abandon(ep)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	ep.watchPeer()
	return ep, nil
}

// abandon undoes an endpoint whose connection failed: closed if it got as
// far as running, released otherwise.
func (rt *Runtime) abandon(ep *Endpoint) {
	if ep.actor != nil && rt.isRegistered(ep) {
		ep.Close(context.Background())
	} else {
		ep.release()
	}
}

func (rt *Runtime) isRegistered(ep *Endpoint) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	_, ok := rt.endpoints[ep]
	return ok
}

func exchange(c net.Conn, br *bufio.Reader, mine hello) (hello, error) {
	enc := json.NewEncoder(c)
	if err := enc.Encode(mine); err != nil {
		return hello{}, err
	}
	var peer hello
	line, err := br.ReadBytes('\n')
	if err != nil {
		return hello{}, fmt.Errorf("%w: reading the peer's hello: %v", ErrProtocol, err)
	}
	if err := json.Unmarshal(line, &peer); err != nil {
		return hello{}, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	if peer.Version != helloVersion || peer.Window < 2 || peer.RecvDepth < peer.Window || peer.MsgSize < 1 {
		return hello{}, fmt.Errorf("%w: unexpected hello %+v", ErrProtocol, peer)
	}
	a, err := netip.ParseAddr(peer.GID)
	if err != nil {
		return hello{}, fmt.Errorf("%w: GID %q: %v", ErrProtocol, peer.GID, err)
	}
	peer.gid = verbs.GID(a.As16())
	return peer, nil
}

// ready tells the peer our QP is in RTS and waits for the same, so neither
// side sends to a QP that is not yet in RTR.
func ready(c net.Conn, br *bufio.Reader) error {
	if _, err := c.Write([]byte("ready\n")); err != nil {
		return err
	}
	line, err := br.ReadString('\n')
	if err != nil || line != "ready\n" {
		return fmt.Errorf("%w: peer not ready: %v", ErrProtocol, err)
	}
	return nil
}
