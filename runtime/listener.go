package runtime

import (
	"container/list"
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/testhook"
	"github.com/verbsrt/verbsrt/verbs"
)

// The listener of Listen.
//
// One goroutine per Listener accepts TCP connections (serve) and starts a
// goroutine per connection for its handshake; Accept takes the endpoints
// whose handshake completed from a queue. Nothing a client does holds up
// another client, and every stage is bounded:
//
//	accept loop --admit--> reading the hello --slot--> handshake --> ready queue --> Accept
//	  (stops when          (at most listenAdmitted      (at most      (at most
//	   admission is full)   connections in all stages)   listenSlots)  listenBacklog)
//
// Stage by stage:
//
//   - A connection is admitted before it is accepted: at most
//     listenAdmitted connections have a goroutine at once. When that many
//     are in, the loop stops accepting (clients wait in the kernel's
//     backlog) until one leaves, or until the oldest connection still
//     silent has had listenEvictAfter to send its hello: that one is cut
//     off to make room, so clients that connect and say nothing cannot
//     lock the listener for the handshake's timeout.
//   - Reading the hello costs a goroutine and a buffer of maxHelloLine
//     bytes, nothing of the device: the hello is read and checked before
//     an endpoint is made, within listenHandshakeTimeout.
//   - Making the endpoint and the rest of the handshake take one of
//     listenSlots slots, and a fresh listenHandshakeTimeout.
//   - The endpoint then waits in the ready queue (listenBacklog) with its
//     slot held: when nobody calls Accept the queue fills, then the slots,
//     then admission, and the loop stops accepting, as a TCP listener's
//     backlog does. At most listenSlots+listenBacklog endpoints exist that
//     Accept has not returned.
//
// A handshake that fails is counted (Stats.FailedHandshakes), logged at debug
// level, and told to the client where it can be (a refusal line), never
// returned by Accept. When accept itself fails for want of resources (file
// descriptors, most likely), the loop backs off, listenBackoffMin doubling
// to listenBackoffMax, and keeps going; a descriptor kept in reserve lets
// it accept the waiting client anyway and tell it why (listener_spare*.go),
// so that the dialer fails at once with an error that says so.
const (
	listenAdmitted         = 1024
	listenSlots            = 64
	listenBacklog          = 64
	listenHandshakeTimeout = 5 * time.Second
	listenEvictAfter       = 100 * time.Millisecond
	listenBackoffMin       = 5 * time.Millisecond
	listenBackoffMax       = time.Second
)

// Listener accepts connections on a TCP address (Listen) or through the
// provider's connection manager (ListenCM); each becomes an Endpoint. Its
// methods are safe for concurrent use, Accept by any number of goroutines
// with any contexts.
type Listener struct {
	rt *Runtime
	ln net.Listener     // Listen
	cm verbs.RCListener // ListenCM

	ctx    context.Context // ends at Close: ends every handshake
	cancel context.CancelFunc

	closeOnce sync.Once
	closed    chan struct{} // closed by Close (both kinds)
	failed    atomic.Uint64 // handshakes failed (Stats.FailedHandshakes sums them)

	// Listen's only.
	ready    chan *Endpoint // handshakes completed, for Accept
	slots    chan struct{}  // a token per handshake past its hello
	loopDone chan struct{}  // closed when serve returns
	wg       sync.WaitGroup // the handshakes' goroutines
	spare    spareFD        // a descriptor in reserve (listener_spare*.go)
	// handshakeTimeout is listenHandshakeTimeout, unless a test set
	// another (testhook).
	handshakeTimeout time.Duration

	mu          sync.Mutex
	maxAdmitted int       // listenAdmitted (tests lower it); guarded by mu
	admitted    int       // connections with a goroutine; guarded by mu
	silent      list.List // of *pendingConn still reading their hello, oldest first; guarded by mu
	left        chan struct{}
}

// pendingConn is an accepted connection whose handshake runs.
type pendingConn struct {
	c       net.Conn
	since   time.Time
	elem    *list.Element // in Listener.silent while its hello is awaited; guarded by mu
	evicted bool          // cut off to make room; guarded by mu
}

// listenerClosed is the error of Accept after Close.
type listenerClosed struct{}

func (listenerClosed) Error() string { return "verbsrt: the listener is closed" }

// Unwrap matches ErrClosed and net.ErrClosed.
func (listenerClosed) Unwrap() []error { return []error{ErrClosed, net.ErrClosed} }

// errEvicted fails a connection cut off before it sent its hello.
var errEvicted = errors.New("verbsrt: no hello before the listener needed the room for other clients")

// Listen listens for connections on the TCP address addr (e.g.
// "127.0.0.1:0"), which carries only the connection handshake. The
// listener handshakes with many clients at once, each within a few
// seconds, so no client holds up another; Accept returns the endpoints
// whose handshake completed.
func (rt *Runtime) Listen(addr string) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := rt.newListener()
	l.ln = ln
	l.ready = make(chan *Endpoint, listenBacklog)
	l.slots = make(chan struct{}, listenSlots)
	l.loopDone = make(chan struct{})
	l.left = make(chan struct{}, 1)
	l.maxAdmitted = listenAdmitted
	l.handshakeTimeout = testhook.ListenHandshakeTimeout(listenHandshakeTimeout)
	l.spare.reserve()
	return rt.addListener(l)
}

func (rt *Runtime) newListener() *Listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &Listener{rt: rt, ctx: ctx, cancel: cancel, closed: make(chan struct{})}
}

// addListener registers l with the runtime, and starts its accept loop,
// unless the runtime is closed.
func (rt *Runtime) addListener(l *Listener) (*Listener, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		l.cancel()
		if l.cm != nil {
			l.cm.Close()
		} else {
			l.ln.Close()
			l.spare.release()
		}
		return nil, ErrClosed
	}
	rt.listeners[l] = struct{}{}
	if l.ln != nil {
		go l.serve()
	}
	return l, nil
}

// Addr returns the listener's address, for Dial (or DialCM: the
// connection manager's port space is TCP's, so it is a *net.TCPAddr too).
func (l *Listener) Addr() net.Addr {
	if l == nil {
		return nil
	}
	if l.cm != nil {
		return net.TCPAddrFromAddrPort(l.cm.Addr())
	}
	return l.ln.Addr()
}

// Close stops listening: a blocked Accept returns an error matching
// ErrClosed and net.ErrClosed, and so does every later one. Connections
// still in their handshake, and endpoints whose handshake completed but
// that no Accept returned, are closed; endpoints already accepted are not
// affected. A second Close returns the same error as Accept.
func (l *Listener) Close() error {
	if l == nil {
		return errNilListener
	}
	first := false
	var err error
	// The socket closes inside the once: Accept returns ErrClosed, and a
	// second Close returns, only once no client can connect any more.
	l.closeOnce.Do(func() {
		first = true
		err = l.stopListening()
	})
	if !first {
		return listenerClosed{}
	}
	if l.cm != nil {
		return err
	}
	<-l.loopDone
	l.wg.Wait() // l.ctx ended every handshake's exchange
	l.spare.release()
	var wg sync.WaitGroup
	for drained := false; !drained; {
		select {
		case ep := <-l.ready:
			wg.Add(1)
			go func() {
				defer wg.Done()
				ep.Close(context.Background())
			}()
		default:
			drained = true
		}
	}
	wg.Wait()
	return err
}

// stopListening closes the listening socket (or the connection
// manager's listener), ends the handshakes' context, and then wakes every
// Accept. A ListenCM listener's Accepts are woken first: they learn of
// the close by their listener's failing, which they report as ErrClosed
// once l.closed is.
func (l *Listener) stopListening() error {
	l.rt.mu.Lock()
	delete(l.rt.listeners, l)
	l.rt.mu.Unlock()
	l.cancel()
	if l.cm != nil {
		close(l.closed)
		return l.cm.Close()
	}
	endBacklog(l.ln)
	err := l.ln.Close()
	close(l.closed)
	return err
}

// Accept waits for a peer to Dial (DialCM for a ListenCM listener) and
// returns the connected endpoint. It returns only endpoints whose
// handshake completed; it fails only when ctx ends (ctx.Err()) or the
// listener is closed (an error matching ErrClosed and net.ErrClosed). An
// Accept whose ctx ends takes nothing: the next connection goes to another
// Accept.
func (l *Listener) Accept(ctx context.Context) (*Endpoint, error) {
	if l == nil {
		return nil, errNilListener
	}
	if ctx == nil {
		return nil, future.ErrNilContext
	}
	if l.cm != nil {
		return l.acceptCMLoop(ctx)
	}
	select {
	case <-l.closed:
		return nil, listenerClosed{}
	default:
	}
	select {
	case ep := <-l.ready:
		return ep, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closed:
		return nil, listenerClosed{}
	}
}

// acceptCMLoop is Accept of a ListenCM listener: a request that fails its
// handshake is counted and logged, and Accept takes the next.
func (l *Listener) acceptCMLoop(ctx context.Context) (*Endpoint, error) {
	for {
		ep, fatal, err := l.acceptCM(ctx)
		if err == nil {
			return ep, nil
		}
		if fatal {
			select {
			case <-l.closed:
				return nil, listenerClosed{}
			default:
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		l.handshakeFailed("(a connection request)", err)
	}
}

// handshakeFailed counts and logs a failed handshake.
func (l *Listener) handshakeFailed(client string, err error) {
	l.failed.Inc()
	l.rt.counters.handshakesFailed.Inc()
	l.rt.log.Debug("verbsrt: a client's handshake failed", "listener", l.Addr().String(), "client", client, "err", err)
}

// serve is the accept loop: it admits, accepts and starts a handshake,
// until Close.
func (l *Listener) serve() {
	defer close(l.loopDone)
	var backoff time.Duration
	for l.admit() {
		c, err := l.ln.Accept()
		if err != nil {
			l.leave()
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors (or of kernel memory): the client
			// waits in the backlog for a descriptor that may never come.
			// The one in reserve tells it at once.
			if isResourceErr(err) {
				l.spare.refuse(l.ln, err, l.rt.log)
			}
			backoff = min(max(2*backoff, listenBackoffMin), listenBackoffMax)
			l.rt.log.Warn("verbsrt: accept failed; retrying", "listener", l.Addr().String(), "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		pc := &pendingConn{c: c, since: time.Now()}
		l.mu.Lock()
		pc.elem = l.silent.PushBack(pc)
		l.mu.Unlock()
		l.wg.Add(1)
		go l.handshake(pc)
	}
}

// isResourceErr reports whether accept failed for want of a resource
// that may come back.
func isResourceErr(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// admit waits until a connection may be admitted and counts it; false
// once the listener is closing. When admission is full, it cuts off the
// oldest connection still silent once that one has had listenEvictAfter.
func (l *Listener) admit() bool {
	for {
		var wait time.Duration
		l.mu.Lock()
		if l.admitted < l.maxAdmitted {
			l.admitted++
			l.mu.Unlock()
			return true
		}
		if e := l.silent.Front(); e != nil {
			pc := e.Value.(*pendingConn)
			if age := time.Since(pc.since); age >= listenEvictAfter {
				l.silent.Remove(e)
				pc.elem, pc.evicted = nil, true
				pc.c.SetDeadline(time.Unix(1, 0)) // its read fails; its goroutine leaves
			} else {
				wait = listenEvictAfter - age
			}
		}
		l.mu.Unlock()
		var t *time.Timer
		var timeout <-chan time.Time
		if wait > 0 {
			t = time.NewTimer(wait)
			timeout = t.C
		}
		select {
		case <-l.left:
		case <-timeout:
		case <-l.ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		if l.ctx.Err() != nil {
			return false
		}
	}
}

// leave gives back an admission.
func (l *Listener) leave() {
	l.mu.Lock()
	l.admitted--
	l.mu.Unlock()
	select {
	case l.left <- struct{}{}:
	default:
	}
}

// heard takes pc off the silent list: its hello was read, or its read
// failed. It reports whether pc was cut off first.
func (l *Listener) heard(pc *pendingConn) (evicted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pc.elem != nil {
		l.silent.Remove(pc.elem)
		pc.elem = nil
	}
	return pc.evicted
}

// handshake is the listener's side of the handshake with one client
// (connect.go, "A handshake"), ending with its endpoint in the ready queue
// or its connection closed.
func (l *Listener) handshake(pc *pendingConn) {
	defer l.wg.Done()
	defer l.leave()
	c := pc.c
	rt := l.rt
	hs := rt.beginHandshake(l.ctx, c, pc.since.Add(l.handshakeTimeout))
	hs.closeCtx = context.Background()
	line, err := readLine(hs.br, "hello")
	var peer hello
	if err == nil {
		peer, err = parseHello(line)
	}
	if l.heard(pc) {
		err = errEvicted
	}
	if err != nil {
		if errors.Is(err, ErrProtocol) {
			hs.refuse(err)
		}
		hs.abort()
		l.handshakeFailed(c.RemoteAddr().String(), err)
		return
	}
	select {
	case l.slots <- struct{}{}:
	case <-l.ctx.Done():
		hs.abort()
		return
	}
	defer func() { <-l.slots }()
	// A fresh bound for the rest, which waited for its slot; then ctx,
	// which may have ended while it waited (its AfterFunc's deadline
	// could have been overwritten).
	c.SetDeadline(time.Now().Add(l.handshakeTimeout))
	if l.ctx.Err() != nil {
		hs.abort()
		return
	}
	ep, err := rt.newEndpoint()
	if err != nil {
		hs.refuse(err)
		hs.abort()
		l.handshakeFailed(c.RemoteAddr().String(), err)
		return
	}
	ep.watch.link = &tcpLink{c: c}
	hs.keepAlive()
	err = hs.connect(ep, peer)
	if err == nil || errors.Is(err, errTransportMismatch) {
		// A peer of another transport gets the hello all the same, and
		// names the mismatch from its side; the refusal follows.
		if werr := writeLine(c, marshalLine(rt.helloOf(ep))); err == nil {
			err = werr
		}
	}
	if ep, err = hs.finish(ep, err); err != nil {
		if l.ctx.Err() == nil {
			l.handshakeFailed(c.RemoteAddr().String(), err)
		}
		return
	}
	select {
	case l.ready <- ep:
	case <-l.ctx.Done():
		ep.Close(context.Background())
	}
}
