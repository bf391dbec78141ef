package runtime

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// Noticing a lost peer.
//
// An RC QP learns that its peer is gone only when one of its own work
// requests goes unanswered (RETRY_EXC_ERR after timeout x retry_cnt): an
// idle endpoint, or one only blocked in Recv, never would. So an endpoint
// keeps a second connection to its peer for its whole life, a peerLink,
// and a goroutine waits for that connection's end:
//
//   - through the connection manager (DialCM, ListenCM), the rdma_cm
//     connection: the kernel of a peer whose process dies disconnects for
//     it, and the DISCONNECTED event comes at once;
//   - through the TCP handshake (Dial, Listen), the handshake's TCP
//     connection: the kernel of a peer whose process dies closes its
//     socket, and the read sees EOF (or a reset) at once; a peer whose host
//     stops answering is caught by TCP keepalive (linkKeepAlive).
//
// A graceful Close sends its goodbye, waits for the peer to acknowledge it,
// and only then ends the link; on RC the goodbye's receive completion is in
// the peer's CQ by the time the acknowledgement comes back, so before the
// end of the link reaches the peer. The watcher handles what the CQ holds
// (Poller.Drain) before it takes the end for a lost peer: a goodbye found
// there makes the close the graceful one it was.

// The TCP keepalive of the handshake's connection, which carries nothing
// after the handshake: after keepAliveIdle without a segment from the
// peer, a probe every keepAliveInterval, and the connection ends when
// keepAliveCount probes in a row go unanswered. Short, because the
// connection is otherwise silent and an idle endpoint has no other way to
// learn that the peer's host is gone; a probe every few seconds costs
// nothing that counts, even for thousands of endpoints.
const (
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = time.Second
	keepAliveCount    = 5
	// peerSilenceBound is how long after its last sign of life a peer
	// whose host stopped answering is taken for lost: 10 s, as doc.go and
	// Endpoint.Done say.
	peerSilenceBound = keepAliveIdle + keepAliveCount*keepAliveInterval
)

var linkKeepAlive = net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount}

// A peerLink is an endpoint's connection to its peer beside the QP.
type peerLink interface {
	// awaitEnd blocks until the connection is over, whichever side ended
	// it, and says how it ended.
	awaitEnd() string
	// hangUp ends the connection from this side: the endpoint is closing,
	// its goodbye acknowledged (or given up on) and its QP in ERR. It is
	// called once; awaitEnd then returns.
	hangUp() error
	// release frees what is left of the connection, once the QP is gone.
	release()
}

// peerWatch is an endpoint's peerLink and the goroutine that watches it.
type peerWatch struct {
	link   peerLink // nil for an endpoint that never got one
	hungUp sync.Once
	mu     sync.Mutex
	// watched is closed when the watching goroutine has returned; nil when
	// none was started.
	watched chan struct{}
}

// watchPeer starts the goroutine that ends the endpoint with ErrPeerLost
// when its link ends without a goodbye, unless Close already began (the
// runtime closing its endpoints while this one was connecting): Close
// waits only for a goroutine started before it.
func (ep *Endpoint) watchPeer() {
	w := &ep.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if ep.closing.Load() {
		return
	}
	w.watched = make(chan struct{})
	go func() {
		defer close(w.watched)
		ep.linkEnded(w.link.awaitEnd())
	}()
}

// linkEnded decides what the end of the endpoint's link means: nothing when
// this side ended it (Close) or the endpoint was over already; a graceful
// close when the peer's goodbye is in the CQ; otherwise a lost peer.
func (ep *Endpoint) linkEnded(how string) {
	if ep.closing.Load() {
		return
	}
	ep.poller.Drain(ep.target)
	// The peer's hang-up can overtake the answer to a WR of this side that
	// failed the connection (a REM_ACCESS_ERR's NAK: the peer's QP went to
	// ERR as it refused the WR, and its endpoint hung up): give what is
	// outstanding a moment to complete with its own status, which then
	// says what happened, before calling the peer lost.
	for end := time.Now().Add(linkEndGrace); ep.actor.Outstanding() > 0 && ep.Err() == nil && !ep.closing.Load() && time.Now().Before(end); {
		time.Sleep(linkEndGrace / 20)
		ep.poller.Drain(ep.target)
	}
	if ep.closing.Load() || ep.Err() != nil {
		return
	}
	// A QP already in ERR failed with the connection: the peer's
	// operation failed (a REM_ACCESS_ERR puts both QPs in ERR) and its
	// end hung up. Its receives come from the shared queue, which is not
	// flushed, so nothing in the CQ said so.
	if attr, err := ep.qp.Query(); err == nil && attr.State == verbs.QPStateErr {
		if ep.closing.Load() {
			return // Close's own ERR (it sets closing first)
		}
		ep.fail(fmt.Errorf("%w: the QP is in the error state, and the peer hung up (%s)", ErrConnFailed, how), false)
		return
	}
	ep.fail(fmt.Errorf("%w: %s", ErrPeerLost, how), false)
}

// linkEndGrace bounds how long the end of a link waits for the endpoint's
// outstanding WRs to complete on their own before it calls the peer lost.
const linkEndGrace = 50 * time.Millisecond

// hangUp ends the endpoint's link from this side, once, with the QP in
// ERR: at Close, or as soon as the endpoint failed, so that the peer
// learns at once that this end is over (ErrPeerLost), whether or not it
// has traffic to find out by. The watcher then returns.
func (ep *Endpoint) hangUp() {
	if ep.watch.link == nil {
		return
	}
	ep.watch.hungUp.Do(func() {
		if err := ep.watch.link.hangUp(); err != nil {
			ep.rt.log.Debug("verbsrt: ending the link to the peer", "qpn", ep.qp.QPN(), "err", err)
		}
	})
}

// stopWatching waits until the watcher has returned (Close, after
// hangUp), so that nothing polls the CQ it is about to destroy.
func (ep *Endpoint) stopWatching() {
	ep.watch.mu.Lock()
	watched := ep.watch.watched
	ep.watch.mu.Unlock()
	if watched != nil {
		<-watched
	}
}

// releaseLink frees the endpoint's link, once its QP is gone.
func (ep *Endpoint) releaseLink() {
	if ep.watch.link != nil {
		ep.watch.link.release()
	}
}

// tcpLink is the TCP connection of the handshake, kept open.
type tcpLink struct{ c net.Conn }

func (l *tcpLink) awaitEnd() string {
	// The peer writes nothing after its "ready": a read returns only when
	// the connection ends. (Bytes a later version might send are skipped.)
	var b [64]byte
	for {
		if _, err := l.c.Read(b[:]); err != nil {
			if err == io.EOF {
				return "the peer closed the handshake's TCP connection without a goodbye"
			}
			return fmt.Sprintf("the handshake's TCP connection failed: %v", err)
		}
	}
}

func (l *tcpLink) hangUp() error { return l.c.Close() }

func (l *tcpLink) release() { l.c.Close() } // after hangUp, a no-op

// cmLink is the connection manager's connection.
type cmLink struct {
	conn   verbs.RCConn
	hungUp chan struct{}
}

func newCMLink(conn verbs.RCConn) *cmLink { return &cmLink{conn: conn, hungUp: make(chan struct{})} }

func (l *cmLink) awaitEnd() string {
	select {
	case <-l.conn.Disconnected():
		return "rdma_cm reported the connection gone"
	case <-l.hungUp:
		// Disconnected closes only once the peer answers the disconnect
		// request, or it times out: this side is done sooner.
		return "disconnected"
	}
}

func (l *cmLink) hangUp() error {
	close(l.hungUp)
	return l.conn.Disconnect()
}

func (l *cmLink) release() { l.conn.Close() }
