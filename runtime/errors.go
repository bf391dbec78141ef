package runtime

import (
	"errors"
	"fmt"
	"strings"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/rlimit"
	"github.com/verbsrt/verbsrt/verbs"
)

// Errors of the runtime. An operation's future fails with an *OpError,
// which says what failed where and wraps the cause: a *verbs.WCError for a
// failure on the wire (errors.Is(err, ErrFlushed) and so on), a
// *verbs.WRError for a rule of ibv_post_send(3) broken, one of the errors
// below, or the operation's context's error.
var (
	// ErrClosed is returned for operations on a closed runtime or endpoint,
	// and by futures still pending when it closed.
	ErrClosed = verbs.ErrClosed
	// ErrPending is returned by Future.Err and Future.Result while the
	// operation is in flight.
	ErrPending = future.ErrPending
	// ErrReleased is returned by a Future used after it was consumed (by
	// Wait returning a result, Then or Release).
	ErrReleased = future.ErrReleased
	// ErrMessagesHeld is returned by Recv when the application holds, in
	// Messages it has not released, every receive buffer a message could
	// arrive in (2 x WithRecvDepth - 1): none can arrive until it releases
	// one (Endpoint.Recv; package doc, "Backpressure").
	ErrMessagesHeld = errors.New("verbsrt: recv: every receive buffer of the endpoint is held by a Message not released")
	// ErrMessageTooLarge is returned by Send for a message larger than the
	// peer's receive buffers.
	ErrMessageTooLarge = errors.New("verbsrt: message larger than the peer's receive buffers")
	// ErrNoMemory is returned by Alloc, and by Dial and Accept for a
	// connection's receive buffers, when registered memory would exceed
	// its limit (WithMemoryLimit).
	ErrNoMemory = errors.New("verbsrt: out of registered memory")
	// ErrFreed is the error of an operation given memory that was freed
	// (Buffer.Free), and of the panic of a Buffer or Message used after
	// Free or Release.
	ErrFreed = errors.New("verbsrt: memory used after it was given back")
	// ErrCQOverrun matches the error of futures failed because their
	// endpoint's CQ overflowed and completions were lost.
	ErrCQOverrun = errors.New("verbsrt: completion queue overrun")
	// ErrQPFatal matches the error of futures failed because the device
	// reported their QP (or itself) in a fatal state.
	ErrQPFatal = errors.New("verbsrt: QP fatal error")
	// ErrPeerClosed is an endpoint's Err, and the error of what was still
	// pending on it, once its peer closed its end gracefully; Recv then
	// returns io.EOF after the messages that arrived before.
	ErrPeerClosed = errors.New("verbsrt: peer closed the connection")
	// ErrPeerLost is an endpoint's Err, and the error of what was still
	// pending on it and of Recv, once its peer went away without closing:
	// its process died or its device or host became unreachable. A peer
	// whose process died is lost also when an operation of the endpoint
	// failed first (Endpoint.Done).
	ErrPeerLost = errors.New("verbsrt: peer gone")
	// ErrConnFailed is an endpoint's Err, and the error of the operations
	// refused after it, once an operation failed on the wire: RC moved the
	// QP to the error state, which ends the connection. errors.Is and
	// errors.As reach that failure too (a *verbs.WCError:
	// ErrRetryExceeded for a peer that stopped answering,
	// ErrRemoteAccess, ...).
	ErrConnFailed = errors.New("verbsrt: connection failed")
	// ErrProtocol is returned when the connection handshake fails, and is
	// an endpoint's Err once its peer sent what the wire format does not
	// allow (doc.go, "Wire format").
	ErrProtocol = errors.New("verbsrt: protocol error")
)

// Causes an operation's error matches, the verbs layer's sentinels: an
// application matches them without importing verbs.
var (
	// ErrInvalidArgument is matched by the error of a call given what it
	// cannot take: a bad size, opcode, range or option, the zero Future.
	ErrInvalidArgument = verbs.ErrInvalidArgument
	// ErrRemoteAccess is matched by a failure on the wire with
	// REM_ACCESS_ERR: the peer's device refused the remote reference (an
	// access it does not allow, a key revoked, a range out of bounds).
	ErrRemoteAccess = verbs.ErrRemoteAccess
	// ErrRetryExceeded is matched by a failure on the wire with
	// RETRY_EXC_ERR: the peer stopped answering.
	ErrRetryExceeded = verbs.ErrRetryExceeded
	// ErrFlushed is matched by an operation its QP flushed unexecuted
	// (WR_FLUSH_ERR): one behind a failure on the wire, which moved the
	// QP to the error state.
	ErrFlushed = verbs.ErrFlushed
)

// The errors of methods called on a nil *Endpoint or *Listener, which
// return them as a nil *net.TCPConn's return syscall.EINVAL.
var (
	errNilEndpoint = fmt.Errorf("verbsrt: method of a nil *Endpoint: %w", verbs.ErrInvalidArgument)
	errNilListener = fmt.Errorf("verbsrt: method of a nil *Listener: %w", verbs.ErrInvalidArgument)
)

// closedOver is the Done of a nil *Endpoint: nothing to wait for.
var closedOver = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Addr is one end of a connection: a GID and a QP number. It is a
// net.Addr of network "rdma".
type Addr struct {
	GID verbs.GID
	QPN uint32
	// invented says the provider made the GID up (gidView): it is not
	// shown.
	invented bool
}

// Network returns "rdma".
func (Addr) Network() string { return "rdma" }

// String returns the GID (as an IPv4 address for RoCE's IPv4-mapped GIDs)
// and the QP number, e.g. "198.18.0.1/qp0x11"; for a GID the provider
// made up (the soft provider's), the QP number alone ("qp0x11").
func (a Addr) String() string {
	if a.invented {
		return fmt.Sprintf("qp%#x", a.QPN)
	}
	return fmt.Sprintf("%s/qp%#x", gidView{}.addr(a.GID), a.QPN)
}

// addr returns the Addr of QP qpn at gid, on a device of the runtime's
// provider.
func (rt *Runtime) addr(gid verbs.GID, qpn uint32) Addr {
	return Addr{GID: gid, QPN: qpn, invented: gidViewOf(rt.prov).invented(gid)}
}

// AsyncError is the typed error of futures failed by an asynchronous event.
type AsyncError struct {
	Event verbs.EventType
	QPN   uint32
}

func (e *AsyncError) Error() string {
	return fmt.Sprintf("verbsrt: QP %#x: asynchronous event: %s", e.QPN, e.Event)
}

// Is matches ErrCQOverrun for CQ_ERR and ErrQPFatal for the QP and device
// fatal events.
func (e *AsyncError) Is(target error) bool {
	switch e.Event {
	case verbs.EventCQErr:
		return target == ErrCQOverrun
	case verbs.EventQPFatal, verbs.EventQPReqErr, verbs.EventQPAccessErr, verbs.EventDeviceFatal:
		return target == ErrQPFatal
	}
	return false
}

// connFailed is ErrConnFailed with the failure that caused it, and, for
// an access the peer refused, why, as the peer said (ErrLeaseExpired,
// ErrKeyRevoked; nil when it did not).
type connFailed struct {
	cause    *verbs.WCError
	peerSaid error
}

func (e *connFailed) Error() string {
	s := fmt.Sprintf("verbsrt: connection failed: a work request completed with %s (%s)", e.cause.Status, e.cause.Status.Name())
	if e.peerSaid != nil {
		s += ": " + strings.TrimPrefix(e.peerSaid.Error(), "verbsrt: ")
	}
	return s
}

func (e *connFailed) Unwrap() []error {
	if e.peerSaid != nil {
		return []error{ErrConnFailed, e.cause, e.peerSaid}
	}
	return []error{ErrConnFailed, e.cause}
}

// memlockError is the error of an arena chunk whose registration the
// kernel refused with ENOMEM. On Linux that is, most often, the
// locked-memory limit: registration pins the pages and counts them against
// RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK, and containers start
// with 64 KiB or 8 MiB. So it names the limit, what the arena needed
// locked, and how to raise it. It matches ErrNoMemory and the provider's
// error (verbs.ErrNoMemory, syscall.ENOMEM).
type memlockError struct {
	size       int          // bytes of the chunk being registered
	registered int          // bytes the arena had registered before it
	limit      rlimit.Limit // RLIMIT_MEMLOCK as the process had it then
	err        error        // the provider's
}

func (e *memlockError) Error() string {
	need := e.registered + e.size
	var b strings.Builder
	fmt.Fprintf(&b, "registering %d bytes of the arena (%d registered before it): ", e.size, e.registered)
	switch {
	case !e.limit.Known:
		fmt.Fprintf(&b, "out of memory; on Linux, the locked-memory limit (ulimit -l, RLIMIT_MEMLOCK) "+
			"must allow at least %s", kib(uint64(need)))
	case e.limit.Cur == rlimit.Infinity:
		fmt.Fprintf(&b, "out of memory, with an unlimited locked-memory limit (ulimit -l, RLIMIT_MEMLOCK) and %s "+
			"needed locked: the device ran out of registration resources, or the system of memory to pin", kib(uint64(need)))
	case e.limit.Cur >= uint64(need):
		fmt.Fprintf(&b, "out of memory, with a locked-memory limit (ulimit -l, RLIMIT_MEMLOCK) of %s, above the %s "+
			"the arena needed: memory the application registered itself, or queues a NIC keeps in user memory, "+
			"take the rest (raise the limit: ulimit -l unlimited, docker run --ulimit memlock=-1, systemd "+
			"LimitMEMLOCK=infinity), or the device ran out of registration resources",
			kib(e.limit.Cur), kib(uint64(need)))
	default:
		fmt.Fprintf(&b, "the locked-memory limit (ulimit -l, RLIMIT_MEMLOCK) is %s and the runtime needed %s locked "+
			"(more with memory of the application's own registered, or queues a NIC keeps in user memory); ",
			kib(e.limit.Cur), kib(uint64(need)))
		ulimit := fmt.Sprintf("ulimit -l %d", (need+1023)/1024)
		if e.limit.Max != rlimit.Infinity && e.limit.Max < uint64(need) {
			fmt.Fprintf(&b, "the hard limit is %s too, so raising it takes privilege (%s as root, "+
				"docker run --ulimit memlock=-1, systemd LimitMEMLOCK=infinity) or CAP_IPC_LOCK; ",
				kib(e.limit.Max), ulimit)
		} else {
			fmt.Fprintf(&b, "raise it (%s, docker run --ulimit memlock=-1, systemd LimitMEMLOCK=infinity), "+
				"grant CAP_IPC_LOCK, ", ulimit)
		}
		b.WriteString("or lower WithMemoryLimit to what the limit allows")
	}
	fmt.Fprintf(&b, ": %v", e.err)
	return b.String()
}

func (e *memlockError) Unwrap() []error { return []error{ErrNoMemory, e.err} }

// kib renders n bytes as "N bytes (K KiB)", the units of getrlimit and of
// ulimit -l.
func kib(n uint64) string { return fmt.Sprintf("%d bytes (%d KiB)", n, n/1024) }
