package runtime

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
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
//
// A killed peer and a live one that refused an operation look alike on the
// QP (REM_ACCESS_ERR when the dying kernel tore the peer's memory regions
// down first, RETRY_EXC_ERR when its QP went first) and on the link (it
// ends), and the two signals come in either order. What tells them apart
// is the link's last words: an endpoint that ends its link itself (Close,
// or a failure it saw) first writes the line "bye" (linkBye) on a TCP
// link; a link that ends without it was closed by the peer's kernel (its
// process died) or by keepalive (its host is gone): ErrPeerLost. So:
//
//   - the link ends without "bye": the endpoint ends with ErrPeerLost at
//     once, whatever its QP says or said (a failed operation that was
//     waiting for this verdict included);
//   - an operation fails with a status a dead peer can cause (peerStatus)
//     while the link is open: the endpoint stops taking work, moves its QP
//     to ERR and says "bye" (half-closing the link), then waits for the
//     peer's end of the link: with "bye" (a live peer answers when it sees
//     this side's, at once) it ends with ErrConnFailed, without it with
//     ErrPeerLost. A peer that says nothing within verdictWait (its host
//     unreachable) leaves ErrConnFailed;
//   - the link ends with "bye": the peer's endpoint is over; as before, a
//     failed operation of this side whose answer the hang-up overtook
//     decides (ErrConnFailed), else ErrPeerLost.
//
// An access the peer refused (REM_ACCESS_ERR: a key it revoked) says more
// in those last words: the side whose operation failed names the key it
// used before its "bye", and the peer, when it revoked that key, answers
// why (its lease ended, or Close) before its own; the failure then matches
// ErrLeaseExpired or ErrKeyRevoked (lastWords). A peer whose device
// reported the refusal at once (an access error event) keeps its link
// open for those words (failHearingPeer).
//
// Through rdma_cm a disconnect carries no such word: there the first
// signal decides.

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
	// it, and says how it ended, whether the peer said "bye" first
	// (always true for a link that cannot tell) and what else it said
	// before (nothing on a link that cannot tell).
	awaitEnd() (how string, bye bool, heard lastWords)
	// tell gives what this side says before its "bye", on a link that
	// can: the words go with the "bye" (sayBye, hangUp), unless it went
	// already.
	tell(w lastWords)
	// sayBye tells the peer that this side's endpoint is over, on a link
	// that can, and leaves the connection open for the peer's answer
	// (awaitEnd returns once it comes). It reports whether it could.
	sayBye() bool
	// hangUp ends the connection from this side: the endpoint is closing,
	// its goodbye acknowledged (or given up on) and its QP in ERR. It is
	// called once; awaitEnd then returns.
	hangUp() error
	// release frees what is left of the connection, once the QP is gone.
	release()
}

// linkBye is the line an endpoint writes on its TCP link before it ends
// the link itself.
const linkBye = "bye\n"

// lastWords is what an endpoint that ends its link says before its
// "bye", each a line of its own: the key of the peer's memory that its
// operation failed on ("rkey 0x1f"), so that the peer, the memory's owner,
// can say why it refused the access ("cause lease_expired", a name of
// keyCauses). Neither carries data of the application.
type lastWords struct {
	rkey   uint32
	hasKey bool   // rkey is set
	cause  string // a name of keyCauses, or ""
}

// lines returns the words as the link carries them, "" for none.
func (w lastWords) lines() string {
	var s string
	if w.hasKey {
		s += fmt.Sprintf("rkey %#x\n", w.rkey)
	}
	if w.cause != "" {
		s += "cause " + w.cause + "\n"
	}
	return s
}

// maxLinkLine bounds a line of the link's last words that is read: longer
// ones, of no kind this side knows, are skipped.
const maxLinkLine = 64

// hear reads one line of the link's last words (without its newline)
// into w; a line of another kind, or out of form, is skipped.
func (w *lastWords) hear(line string) {
	if v, ok := strings.CutPrefix(line, "rkey "); ok {
		if k, err := strconv.ParseUint(v, 0, 32); err == nil {
			w.rkey, w.hasKey = uint32(k), true
		}
		return
	}
	if v, ok := strings.CutPrefix(line, "cause "); ok && keyCauseErr(v) != nil {
		w.cause = v
	}
}

// verdictWait bounds how long an endpoint whose operation failed with a
// status a dead peer can cause waits for the link to say whether the peer
// is alive (see above): a live peer answers within its linkEndGrace and a
// round trip.
const verdictWait = time.Second

// peerWatch is an endpoint's peerLink and the goroutine that watches it.
type peerWatch struct {
	link   peerLink // nil for an endpoint that never got one
	hungUp sync.Once
	mu     sync.Mutex
	// watched is closed when the watching goroutine has returned; nil when
	// none was started.
	watched chan struct{}

	// vmu guards the verdict: what the link's end said, and the failure
	// of an operation waiting for it.
	vmu     sync.Mutex
	ended   linkEnd
	how     string      // how the link ended, once it did
	pending error       // a failed operation's ErrConnFailed, until the verdict
	timer   *time.Timer // ends the wait for the verdict after wait
	wait    time.Duration
	// hangUpLater hangs up an endpoint that waits for its peer's last
	// words (failHearingPeer), if they do not come.
	hangUpLater *time.Timer
}

// linkEnd is what the end of the link said.
type linkEnd int

const (
	linkOpen linkEnd = iota
	linkByed         // the peer said "bye": its endpoint is over, it is alive
	linkDied         // it ended without a word: the peer is gone
)

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

// peerStatus reports whether a failed completion's status is one the death
// of the peer can cause: its device refused (its memory regions or QP
// torn down) or did not answer. The others are this side's own.
func peerStatus(s verbs.WCStatus) bool {
	switch s {
	case verbs.WCRemAccessErr, verbs.WCRemInvReqErr, verbs.WCRemOpErr, verbs.WCRetryExcErr,
		verbs.WCRNRRetryExcErr, verbs.WCRemAbortErr:
		return true
	}
	return false
}

// connFailedFor ends the endpoint for a failed operation, err its
// ErrConnFailed: at once when its status is the endpoint's own or the
// link has spoken already; else once the link says whether the peer is
// alive (see above). words are what this side tells the peer before its
// "bye": the key an access the peer refused used, for the peer to say why
// (linkEnded).
func (ep *Endpoint) connFailedFor(status verbs.WCStatus, err error, words lastWords) {
	w := &ep.watch
	w.vmu.Lock()
	switch {
	case w.ended == linkDied:
		how := w.how
		w.vmu.Unlock()
		ep.fail(fmt.Errorf("%w: %s", ErrPeerLost, how), false)
		return
	case w.ended == linkByed || w.link == nil || !peerStatus(status) || w.pending != nil || ep.failErr.Load() != nil:
		w.vmu.Unlock()
		ep.fail(err, false)
		return
	}
	if !ep.failErr.CompareAndSwap(nil, err) {
		w.vmu.Unlock()
		return
	}
	w.pending = err
	wait := w.wait
	if wait == 0 {
		wait = verdictWait
	}
	w.timer = time.AfterFunc(wait, ep.verdictLate)
	w.vmu.Unlock()
	// The endpoint stops here as fail would have it, except for Done.
	ep.actor.Break(err)
	ep.toError()
	w.link.tell(words)
	if !w.link.sayBye() {
		ep.verdictLate()
	}
}

// pendingErr is the failure of an operation waiting for the link's
// verdict, or nil.
func (w *peerWatch) pendingErr() error {
	w.vmu.Lock()
	defer w.vmu.Unlock()
	return w.pending
}

// verdictLate ends an endpoint whose peer did not say in time whether it
// is alive: the failed operation's ErrConnFailed stands.
func (ep *Endpoint) verdictLate() {
	w := &ep.watch
	w.vmu.Lock()
	err := w.pending
	w.pending = nil
	w.vmu.Unlock()
	if err != nil {
		ep.finish(err)
		ep.hangUp()
	}
}

// linkEnded decides what the end of the endpoint's link means: nothing when
// this side ended it (Close) or the endpoint was over already; the verdict
// a failed operation waited for; a lost peer when the peer said nothing;
// a graceful close when the peer's goodbye is in the CQ; a failed
// connection when this side's operation failed it; otherwise a lost peer.
// heard is what the peer said before its "bye": a key of this side's it
// accessed in vain, which this side answers with why it revoked the key
// (before its own "bye"), or that answer to this side's word.
func (ep *Endpoint) linkEnded(how string, bye bool, heard lastWords) {
	w := &ep.watch
	if heard.hasKey {
		if why := ep.rt.alloc.revoked.cause(heard.rkey); why != nil {
			w.link.tell(lastWords{cause: keyCauseName(why)})
		}
	}
	w.vmu.Lock()
	w.ended, w.how = linkDied, how
	if bye {
		w.ended = linkByed
	}
	pending := w.pending
	w.pending = nil
	if w.timer != nil {
		w.timer.Stop()
	}
	w.vmu.Unlock()
	if pending != nil {
		if !bye && !ep.closing.Load() { // not this side's own Close
			pending = fmt.Errorf("%w: %s", ErrPeerLost, how)
			ep.failErr.Store(pending)
		}
		if cf, ok := pending.(*connFailed); ok && bye && heard.cause != "" {
			pending = &connFailed{cause: cf.cause, peerSaid: keyCauseErr(heard.cause)}
			ep.failErr.Store(pending)
		}
		ep.finish(pending)
		ep.hangUp()
		return
	}
	if ep.closing.Load() {
		return
	}
	if ep.Err() != nil {
		ep.hangUp() // one that waited for the peer's words (failHearingPeer)
		return
	}
	ep.poller.Drain(ep.target) // a goodbye there makes it a graceful close
	if !bye {
		ep.fail(fmt.Errorf("%w: %s", ErrPeerLost, how), false)
		return
	}
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
		ep.watch.vmu.Lock()
		if t := ep.watch.hangUpLater; t != nil {
			t.Stop()
		}
		ep.watch.vmu.Unlock()
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
type tcpLink struct {
	c       net.Conn
	mu      sync.Mutex
	words   lastWords // said before the "bye"; guarded by mu
	said    bool      // the "bye" went; guarded by mu
	sayOnce sync.Once // the "bye"
	sayErr  error
}

func (l *tcpLink) awaitEnd() (string, bool, lastWords) {
	// The peer writes nothing after its "ready" but its last words and
	// its "bye" as it ends the connection: a read returns only then.
	// (Lines of other kinds a later version might send are skipped.)
	var b [64]byte
	var heard lastWords
	var line []byte // the line being read, up to maxLinkLine bytes
	long := false   // it is longer: skipped
	var last []byte // the end of what came, for the "bye"
	for {
		n, err := l.c.Read(b[:])
		for _, c := range b[:n] {
			switch {
			case c == '\n':
				if !long {
					heard.hear(string(line))
				}
				line, long = line[:0], false
			case len(line) < maxLinkLine:
				line = append(line, c)
			default:
				long = true
			}
		}
		last = append(last, b[:n]...)
		if len(last) > len(linkBye) {
			last = last[len(last)-len(linkBye):]
		}
		if err != nil {
			if string(last) == linkBye {
				return "the peer's endpoint ended and closed the handshake's TCP connection", true, heard
			}
			if err == io.EOF {
				return "the peer closed the handshake's TCP connection without a goodbye", false, heard
			}
			return fmt.Sprintf("the handshake's TCP connection failed: %v", err), false, heard
		}
	}
}

func (l *tcpLink) tell(w lastWords) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.said {
		l.words = w
	}
}

// sayBye writes the last words and "bye", and half-closes the connection,
// for the peer's answer.
func (l *tcpLink) sayBye() bool {
	cw, ok := l.c.(interface{ CloseWrite() error })
	if !ok || l.say() != nil {
		return false
	}
	return cw.CloseWrite() == nil
}

// say writes the last words and "bye", once.
func (l *tcpLink) say() error {
	l.sayOnce.Do(func() {
		l.mu.Lock()
		l.said = true
		words := l.words.lines()
		l.mu.Unlock()
		// The link carries nothing else: the lines go at once.
		l.c.SetWriteDeadline(time.Now().Add(time.Second))
		_, l.sayErr = io.WriteString(l.c, words+linkBye)
	})
	return l.sayErr
}

// hangUp says "bye", unless sayBye did, and closes the connection.
func (l *tcpLink) hangUp() error {
	l.say()
	return l.c.Close()
}

func (l *tcpLink) release() { l.c.Close() } // after hangUp, a no-op

// cmLink is the connection manager's connection.
type cmLink struct {
	conn   verbs.RCConn
	hungUp chan struct{}
}

func newCMLink(conn verbs.RCConn) *cmLink { return &cmLink{conn: conn, hungUp: make(chan struct{})} }

func (l *cmLink) awaitEnd() (string, bool, lastWords) {
	select {
	case <-l.conn.Disconnected():
		return "rdma_cm reported the connection gone", true, lastWords{}
	case <-l.hungUp:
		// Disconnected closes only once the peer answers the disconnect
		// request, or it times out: this side is done sooner.
		return "disconnected", true, lastWords{}
	}
}

// tell does nothing: a disconnect carries no words.
func (l *cmLink) tell(lastWords) {}

// sayBye: a disconnect carries no word.
func (l *cmLink) sayBye() bool { return false }

func (l *cmLink) hangUp() error {
	close(l.hungUp)
	return l.conn.Disconnect()
}

func (l *cmLink) release() { l.conn.Close() }
