package runtime

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/verbsrt/verbsrt/internal/future"
)

// hello returns what every hello of this runtime says, whichever way it
// travels: the version, the receive credits, the largest message, the
// port's MTU and the read/atomic depths its QPs connect with.
func (rt *Runtime) hello() hello {
	s := rt.connectSpec()
	return hello{Version: helloVersion, RecvDepth: rt.cfg.recvDepth, Window: initialWindow, MsgSize: rt.cfg.msgSize,
		MTU: s.PathMTU.Bytes(), MaxRdAtomic: int(s.MaxRdAtomic), MaxDestRdAtomic: int(s.MaxDestRdAtomic),
		Provider: rt.prov.Name(), Transport: rt.transport()}
}

// rdAtomicDepths returns the read/atomic depths of the runtime's QPs: what
// its device allows as initiator (max_qp_init_rd_atom) and as responder
// (max_qp_rd_atom), at most maxRdAtomic, and at least the 1 a peer's
// hello must say (a device that reports 0 takes no READ or atomic at all,
// and its QP's move to RTR fails as it would with any depth).
func (rt *Runtime) rdAtomicDepths() (initiator, responder uint8) {
	clamp := func(n int) uint8 { return uint8(min(max(n, 1), maxRdAtomic)) }
	return clamp(rt.devAttr.MaxQPInitRdAtom), clamp(rt.devAttr.MaxQPRdAtom)
}

// transport is what the runtime's QPs speak (transportOf).
func (rt *Runtime) transport() string { return transportOf(rt.prov.Name(), rt.sel.attr.LinkLayer) }

// helloOf returns the hello of ep, for the TCP handshake.
func (rt *Runtime) helloOf(ep *Endpoint) hello {
	h := rt.hello()
	h.QPN, h.PSN, h.GID = ep.qp.QPN(), ep.psn, netip.AddrFrom16(rt.gid).String()
	// The port's LID: the destination of an InfiniBand path, and where a
	// provider that announces a transport port of its own in it (rocev2)
	// takes it from; RoCE devices report 0.
	h.LID = rt.sel.attr.LID
	return h
}

// handshakeTimeout bounds Dial's handshake when the caller's context does
// not.
const handshakeTimeout = 30 * time.Second

// Dial connects to a Listener at the TCP address addr; ctx bounds the
// connection and its handshake (30 s when it has no deadline). A listener
// that cannot take the connection (out of registered memory or of file
// descriptors, or given a hello it cannot honour) says so at once: Dial
// then returns an error matching ErrRefused, and the cause the listener
// named (ErrNoMemory, syscall.EMFILE, ...). A peer whose hello names the
// endpoint itself (a runtime on another fabric that numbers alike, such as
// a second soft provider) is refused with ErrProtocol, and so is a peer
// whose QPs speak another transport (a soft runtime's against a rocev2
// one's), with an error that names both providers.
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
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(handshakeTimeout)
	}
	hs := rt.beginHandshake(ctx, c, deadline)
	ep, err := rt.newEndpoint()
	if err != nil {
		hs.abort()
		return nil, err
	}
	ep.watch.link = &tcpLink{c: c} // released with the endpoint from now on
	hs.keepAlive()
	err = writeLine(c, marshalLine(rt.helloOf(ep)))
	var peer hello
	if err == nil {
		var line []byte
		if line, err = readLine(hs.br, "hello"); err == nil {
			peer, err = parseHello(line)
		}
	}
	if err == nil {
		err = hs.connect(ep, peer)
	}
	return hs.finish(ep, err)
}

// A handshake is one side's exchange over the TCP connection c, which
// stays open, silent, as the endpoint's link to its peer (peerlink.go): its
// end says the peer is gone.
//
// The dialer writes its hello and reads the listener's; the listener reads
// the dialer's first (listener.go), and only then makes an endpoint,
// connects its QP and answers with its own hello, or with a refusal. Each
// side then writes "ready" once its QP is in RTS and waits for the other's.
type handshake struct {
	rt      *Runtime
	ctx     context.Context
	c       net.Conn
	br      *bufio.Reader // bounded: a line longer than maxHelloLine fails
	stop    func() bool   // stops the AfterFunc that ends the exchange with ctx
	started bool          // the endpoint runs (Endpoint.start)

	// closeCtx bounds the close of an endpoint the handshake abandons:
	// the dialing caller's ctx, so that Dial returns within it. A
	// listener's handshakes use context.Background: their ctx ends with
	// Listener.Close, which owes the clients they connected a goodbye.
	closeCtx context.Context
}

// beginHandshake bounds the exchange over c by deadline and by ctx.
func (rt *Runtime) beginHandshake(ctx context.Context, c net.Conn, deadline time.Time) *handshake {
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return &handshake{rt: rt, ctx: ctx, c: c, br: bufio.NewReaderSize(c, maxHelloLine), stop: stop, closeCtx: ctx}
}

// keepAlive sets the keepalive of the connection that becomes the
// endpoint's link: once there is an endpoint, so that a client that never
// gets one costs the listener no system call for it.
func (hs *handshake) keepAlive() {
	if tc, ok := hs.c.(*net.TCPConn); ok {
		if err := tc.SetKeepAliveConfig(linkKeepAlive); err != nil {
			// Still connected; only a vanished host goes unnoticed longer.
			hs.rt.log.Warn("verbsrt: TCP keepalive for the link to the peer", "err", err)
		}
	}
}

// abort ends a handshake that has no endpoint yet.
func (hs *handshake) abort() {
	hs.stop()
	hs.c.Close()
}

// refuse tells the peer, as best it can, why this side will not connect.
func (hs *handshake) refuse(err error) {
	if !errors.Is(err, ErrRefused) { // the peer knows its own refusal
		writeLine(hs.c, refusal(err))
	}
}

// connect refuses a peer that is ep itself, then connects ep's QP to the
// peer and starts the endpoint.
func (hs *handshake) connect(ep *Endpoint, peer hello) error {
	if err := sameTransport(hs.rt.prov.Name(), hs.rt.transport(), peer); err != nil {
		return err
	}
	if err := notSelf(hs.rt.addr(hs.rt.gid, ep.qp.QPN()), hs.rt.sel.attr.LID, peer); err != nil {
		return err
	}
	if err := ep.start(peer); err != nil {
		return err
	}
	hs.started = true
	return nil
}

// finish exchanges the "ready" lines once err, what went before, is nil;
// then lifts the handshake's deadline and returns the running endpoint, or
// abandons it and says why.
func (hs *handshake) finish(ep *Endpoint, err error) (*Endpoint, error) {
	c, ctx := hs.c, hs.ctx
	if err == nil {
		if err = writeLine(c, []byte("ready\n")); err == nil {
			err = readReady(hs.br)
		}
	} else {
		hs.refuse(err)
	}
	// The handshake's deadline must not end the link: lift it, unless ctx
	// ended as the handshake finished and the deadline it set stands.
	if !hs.stop() && err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = c.SetDeadline(time.Time{})
	}
	if err != nil && hs.started && ctx.Err() == nil {
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
		hs.rt.abandon(hs.closeCtx, ep)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			// The connection's deadline, which is ctx's, fired before
			// ctx's own timer said so.
			return nil, context.DeadlineExceeded
		}
		return nil, err
	}
	ep.watchPeer()
	return ep, nil
}

// abandon undoes an endpoint whose connection failed: closed if it got as
// far as running, released otherwise. The close is bounded by ctx, the
// connecting call's: a goodbye to a peer that went silent after its hello
// would otherwise be waited for past it, while the device retries it.
// (Close still waits for the device to give back what it holds.)
func (rt *Runtime) abandon(ctx context.Context, ep *Endpoint) {
	if ep.actor != nil && rt.isRegistered(ep) {
		ep.Close(ctx)
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
