package rdmanet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
)

const (
	// sendWindow is how many messages a conn has in flight at most: its
	// send buffers, allocated as the stream needs them (a request/response
	// conn uses one or two), and fewer when the runtime's memory limit is
	// reached. A Write that finds them all in flight waits for one to
	// complete, so a slow reader slows the writer and memory stays
	// bounded. A stream of 64 KiB writes on soft with 4 KiB messages: 474-533
	// MB/s at 32, 782-812 at 64, 998-1,042 at 128, 855-917 at 256; in the
	// rxevm guest 128 moved nothing. 64 keeps a streaming conn's buffers at
	// 256 KiB.
	sendWindow = 64
	// coalesceAt: while this many messages are in flight, a Write's tail
	// shorter than a message waits in the conn's current buffer for more
	// bytes, and the oldest message's completion sends it. Below it the
	// tail goes out at once, so a request/response exchange pays no delay.
	coalesceAt = 4
	// finImm marks the message that ends the stream in one direction
	// (CloseWrite, Close): the only message a conn sends with immediate
	// data.
	finImm = 0x46494e21 // "FIN!"
	// linger bounds how long Close lets queued bytes reach a peer that
	// stopped reading, before the connection is torn down.
	linger = 10 * time.Second
)

// ErrWriteClosed is the error of a Write after CloseWrite.
var ErrWriteClosed = errors.New("rdmanet: write after CloseWrite")

// errTruncated is a Read's error when the connection ended without the
// end of the stream (Close or CloseWrite on the peer's conn).
var errTruncated = fmt.Errorf("rdmanet: the connection ended before the peer's conn closed its stream: %w", io.ErrUnexpectedEOF)

// Conn is a byte stream over an endpoint's SENDs, implementing net.Conn
// (package doc). Every method may be called from any goroutine.
type Conn struct {
	ep    *runtime.Endpoint
	chunk int // bytes per message: the peer's message size
	local net.Addr
	peer  net.Addr

	rdl, wdl  *deadline
	closeOnce sync.Once
	closed    chan struct{} // Close began

	// Reading, one Read at a time (rser): the message being read and how
	// far.
	rser    sync.Mutex
	rctx    waitContext
	msg     runtime.Message
	msgOff  int
	haveMsg bool
	eof     bool // the peer's FIN was read

	// Writing, one Write at a time (wser); the state below is also the
	// flusher's and Close's, under wmu.
	wser     sync.Mutex
	wmu      sync.Mutex
	free     []*sendBuf // buffers not in flight
	bufs     int        // buffers allocated
	cur      *sendBuf   // being filled, not sent yet
	inflight sendRing   // sent, oldest first
	flushing bool       // a flusher goroutine waits to send cur
	werr     error      // the first failed send, or ErrWriteClosed
}

// sendBuf is one message's registered buffer.
type sendBuf struct {
	buf *runtime.Buffer
	n   int
}

// sent is a message in flight: its buffer (nil for the FIN) and its future.
// The conn consumes the futures itself, in order (an RC QP completes its
// sends in the order posted), instead of with Then: a callback per send
// would wake a worker goroutine per message, which on a small machine
// takes the processor from the goroutines waiting for the reply.
type sent struct {
	b *sendBuf
	f runtime.Future
}

// sendRing holds what is in flight: at most sendWindow messages and a FIN.
type sendRing struct {
	q    [sendWindow + 1]sent
	head int
	n    int
}

func (r *sendRing) push(s sent) {
	r.q[(r.head+r.n)%len(r.q)] = s
	r.n++
}

func (r *sendRing) oldest() runtime.Future { return r.q[r.head].f }

// NewConn makes a stream of ep, which it owns from then on: nothing else
// may call ep's Recv or send on it, and Close closes it. Both ends of the
// connection must be Conns. (Dial and Listener.Accept make their
// endpoints Conns so; NewConn is for an endpoint of DialCM or ListenCM.)
func NewConn(ep *runtime.Endpoint) *Conn {
	c := &Conn{
		ep:     ep,
		chunk:  ep.PeerMessageSize(),
		local:  ep.LocalAddr(),
		peer:   ep.RemoteAddr(),
		rdl:    newDeadline(),
		wdl:    newDeadline(),
		closed: make(chan struct{}),
	}
	return c
}

// Dial connects to a Listener of a runtime at the TCP address addr (its
// handshake address, as runtime.Runtime.Dial).
func Dial(ctx context.Context, rt *runtime.Runtime, addr string) (*Conn, error) {
	ep, err := rt.Dial(ctx, addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	return NewConn(ep), nil
}

const network = "rdma"

// Read reads what the peer wrote, at most len(p) bytes and at most one of
// its messages; io.EOF once the peer called CloseWrite or Close and
// everything before it was read.
func (c *Conn) Read(p []byte) (int, error) {
	if err := c.readable(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	c.rser.Lock()
	defer c.rser.Unlock()
	for !c.haveMsg {
		if c.eof {
			return 0, io.EOF
		}
		// Again under rser: a Read that waited for another's lock must
		// not take a message once the conn closed or its deadline passed.
		if err := c.readable(); err != nil {
			return 0, err
		}
		c.rctx.done = c.rdl.wait()
		m, err := c.ep.Recv(&c.rctx)
		if err != nil {
			if err == io.EOF {
				// The endpoint closed without the stream's end: the
				// peer's runtime or endpoint closed under its conn, and
				// what it wrote last may never have been sent. Say so,
				// instead of an io.EOF that would pass for the end.
				return 0, c.opError("read", errTruncated)
			}
			if cerr := c.readable(); cerr != nil {
				return 0, cerr
			}
			return 0, c.opError("read", err)
		}
		if imm, ok := m.Imm(); ok {
			m.Release()
			if imm == finImm {
				c.eof = true
				return 0, io.EOF
			}
			return 0, c.opError("read", errors.New("rdmanet: unexpected immediate data: the peer is not a stream"))
		}
		if m.Len() == 0 {
			m.Release()
			continue
		}
		c.msg, c.msgOff, c.haveMsg = m, 0, true
	}
	data := c.msg.Bytes()[c.msgOff:]
	n := copy(p, data)
	c.msgOff += n
	if n == len(data) {
		c.msg.Release()
		c.haveMsg = false
	}
	return n, nil
}

// readable returns why a Read may not go on: the conn closed or its read
// deadline passed.
func (c *Conn) readable() error {
	if isClosed(c.closed) {
		return c.opError("read", net.ErrClosed)
	}
	if isClosed(c.rdl.wait()) {
		return c.opError("read", os.ErrDeadlineExceeded)
	}
	return nil
}

// Write writes p to the stream. It returns once p is copied into the conn's
// registered buffers, as a socket's Write returns once the kernel has the
// bytes; it waits only while all of them are in flight, which a peer that
// reads nothing makes last until the write deadline.
func (c *Conn) Write(p []byte) (int, error) {
	if err := c.writable(); err != nil {
		return 0, err
	}
	c.wser.Lock()
	defer c.wser.Unlock()
	n := 0
	for len(p) > 0 {
		c.wmu.Lock()
		c.reapLocked()
		if c.werr != nil {
			err := c.werr
			c.wmu.Unlock()
			if isClosed(c.closed) {
				// Close sets werr (its FIN) while a Write may be between
				// two messages: that Write ends as any on a closed conn.
				err = net.ErrClosed
			}
			return n, c.opError("write", err)
		}
		if c.cur == nil {
			b, err := c.takeBufLocked()
			if err != nil {
				c.wmu.Unlock()
				return n, c.opError("write", err)
			}
			if b == nil {
				oldest := c.inflight.oldest()
				c.wmu.Unlock()
				if err := c.waitSent(oldest); err != nil {
					return n, err
				}
				continue
			}
			c.cur = b
		}
		k := copy(c.cur.buf.Bytes()[c.cur.n:c.chunk], p)
		c.cur.n += k
		p = p[k:]
		n += k
		if c.cur.n == c.chunk {
			c.sendCurLocked()
		}
		c.wmu.Unlock()
	}
	c.wmu.Lock()
	c.reapLocked()
	if c.cur != nil {
		if c.inflight.n < coalesceAt {
			c.sendCurLocked()
		} else if !c.flushing {
			c.flushing = true
			go c.flush()
		}
	}
	c.wmu.Unlock()
	return n, nil
}

// flush sends the coalesced tail once the oldest message in flight is
// done, so that bytes never wait for a Write that may not come. It runs
// only while a tail waits: a conn that writes nothing has no goroutine.
func (c *Conn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for c.cur != nil && c.werr == nil && !isClosed(c.closed) {
		if c.inflight.n == 0 {
			c.sendCurLocked()
			break
		}
		oldest := c.inflight.oldest()
		c.wmu.Unlock()
		select {
		case <-oldest.Done():
		case <-c.closed:
		case <-c.ep.Done():
		}
		c.wmu.Lock()
		if c.reapLocked() > 0 && c.cur != nil && c.werr == nil && !isClosed(c.closed) {
			c.sendCurLocked()
			break
		}
	}
	c.flushing = false
}

// reapLocked consumes the futures of the messages done, oldest first: their
// buffers are free again, and the first failure is the stream's. It
// returns how many it took.
func (c *Conn) reapLocked() int {
	r := &c.inflight
	k := 0
	for r.n > 0 {
		s := &r.q[r.head]
		_, err := s.f.Result()
		if err == runtime.ErrPending {
			break
		}
		s.f.Release()
		if err != nil && c.werr == nil {
			c.werr = err
		}
		if s.b != nil {
			s.b.n = 0
			c.free = append(c.free, s.b)
		}
		*s = sent{}
		r.head = (r.head + 1) % len(r.q)
		r.n--
		k++
	}
	return k
}

// writable returns why a Write may not begin.
func (c *Conn) writable() error {
	if isClosed(c.closed) {
		return c.opError("write", net.ErrClosed)
	}
	if isClosed(c.wdl.wait()) {
		return c.opError("write", os.ErrDeadlineExceeded)
	}
	select {
	case <-c.ep.Done():
		return c.opError("write", c.ep.Err())
	default:
	}
	return nil
}

// waitSent waits until f (the oldest message in flight) is done, the write
// deadline passes, the conn closes or the endpoint ends.
func (c *Conn) waitSent(f runtime.Future) error {
	select {
	case <-f.Done():
		return nil
	case <-c.wdl.wait():
		if isClosed(c.closed) {
			return c.opError("write", net.ErrClosed)
		}
		return c.opError("write", os.ErrDeadlineExceeded)
	case <-c.ep.Done():
		return c.opError("write", c.ep.Err())
	}
}

// takeBufLocked returns a free send buffer, allocating one while fewer than
// sendWindow exist and the runtime has memory; nil when all are in flight.
func (c *Conn) takeBufLocked() (*sendBuf, error) {
	if n := len(c.free); n > 0 {
		b := c.free[n-1]
		c.free = c.free[:n-1]
		return b, nil
	}
	if c.bufs == sendWindow {
		return nil, nil
	}
	buf, err := c.ep.Runtime().Alloc(c.chunk)
	if err != nil {
		if c.bufs > 0 && errors.Is(err, runtime.ErrNoMemory) {
			return nil, nil // the runtime's limit: make do with those in flight
		}
		return nil, err
	}
	c.bufs++
	return &sendBuf{buf: buf}, nil
}

// sendCurLocked sends the current buffer. Sends are made under wmu, so
// they reach the endpoint in the stream's order.
func (c *Conn) sendCurLocked() {
	b := c.cur
	c.cur = nil
	c.inflight.push(sent{b, c.ep.Send(context.Background(), b.buf.Slice(0, b.n))})
}

// freeBufsLocked gives the send buffers back to the runtime, once, after
// the endpoint closed (closeEndpoint); none may be in flight, as their
// memory is the device's until their futures resolve.
func (c *Conn) freeBufsLocked() {
	if c.inflight.n > 0 {
		return
	}
	for _, b := range c.free {
		b.buf.Free()
	}
	c.free = nil
	if c.cur != nil {
		c.cur.buf.Free()
		c.cur = nil
	}
}

// CloseWrite ends the stream toward the peer: after the bytes written
// before it, the peer's Read returns io.EOF. This side may still read.
func (c *Conn) CloseWrite() error {
	if isClosed(c.closed) {
		return c.opError("close", net.ErrClosed)
	}
	c.wser.Lock()
	defer c.wser.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		if c.werr == ErrWriteClosed {
			return nil
		}
		return c.opError("close", c.werr)
	}
	c.finishStreamLocked()
	return nil
}

// finishStreamLocked sends what waits in the current buffer, then the end
// of the stream (the FIN): a message without data, which takes a receive
// credit as a message does, so it never overtakes the bytes before it;
// Close waits for it as for them. A peer whose connection ends without it
// knows the stream was cut short (errTruncated).
func (c *Conn) finishStreamLocked() {
	if c.cur != nil {
		c.sendCurLocked()
	}
	c.werr = ErrWriteClosed
	c.inflight.push(sent{nil, c.ep.SendImm(context.Background(), runtime.Local{}, finImm)})
}

// Close closes the conn: blocked Reads and Writes return net.ErrClosed at
// once. What was written before it, then the end of the stream, still
// reach a peer that reads, for up to 10 s (the linger) after Close
// returns: the peer's Read returns io.EOF after the last byte. Then, or
// when the peer closes, the endpoint closes.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.closed)
		c.rdl.end()
		c.wdl.end()
		c.wmu.Lock()
		if c.werr == nil {
			c.finishStreamLocked()
		}
		c.reapLocked()
		pending := c.inflight.n > 0
		c.wmu.Unlock()
		// Readers woke (their deadline channel closed): drop what the
		// stream held.
		c.rser.Lock()
		if c.haveMsg {
			c.msg.Release()
			c.haveMsg = false
		}
		c.rser.Unlock()
		if pending {
			go c.closeEndpoint()
		} else {
			c.closeEndpoint()
		}
	})
	if !first {
		return c.opError("close", net.ErrClosed)
	}
	return nil
}

// closeEndpoint waits, within the linger, until the conn's sends are done,
// then closes the endpoint and frees the send buffers. It must wait itself:
// a closing endpoint fails the sends still waiting for the peer's receive
// credits (the peer may never grant them), and a stream's Close must not
// drop bytes a reading peer would take.
func (c *Conn) closeEndpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), linger)
	defer cancel()
	for {
		c.wmu.Lock()
		c.reapLocked()
		if c.inflight.n == 0 {
			c.wmu.Unlock()
			break
		}
		oldest := c.inflight.oldest()
		c.wmu.Unlock()
		select {
		case <-oldest.Done():
			continue
		case <-ctx.Done():
		case <-c.ep.Done():
		}
		break
	}
	c.ep.Close(ctx)
	// Every future is resolved once the endpoint closed.
	c.wmu.Lock()
	c.reapLocked()
	c.freeBufsLocked()
	c.wmu.Unlock()
}

// LocalAddr returns this end: the runtime's GID and the QP number
// (runtime.Addr, network "rdma").
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's end.
func (c *Conn) RemoteAddr() net.Addr { return c.peer }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if isClosed(c.closed) {
		return c.opError("set", net.ErrClosed)
	}
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

// SetReadDeadline sets the time after which a Read, blocked or not, fails
// with an error matching os.ErrDeadlineExceeded; the zero time removes it.
// Moving it affects a Read already blocked.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if isClosed(c.closed) {
		return c.opError("set", net.ErrClosed)
	}
	c.rdl.set(t)
	return nil
}

// SetWriteDeadline is SetReadDeadline for Write. A Write that times out
// may have written part of p: it returns how much.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if isClosed(c.closed) {
		return c.opError("set", net.ErrClosed)
	}
	c.wdl.set(t)
	return nil
}

// Endpoint returns the conn's endpoint, for its Done, Err and statistics.
func (c *Conn) Endpoint() *runtime.Endpoint { return c.ep }

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: network, Source: c.local, Addr: c.peer, Err: err}
}
