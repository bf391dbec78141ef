package runtime

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// OpError is the error of a failed operation, in the manner of
// net.OpError: which operation, on which connection, towards which remote
// memory, and why. errors.Is and errors.As reach the cause through Unwrap:
// a *verbs.WCError (errors.Is(err, verbs.ErrRemoteAccess), ...), a
// *verbs.WRError for a rule of ibv_post_send(3) broken, ErrClosed, the
// operation's context's error, the endpoint's end (ErrPeerClosed, ...).
//
// An operation that failed because its endpoint ended (a flush, any other
// failed completion, ErrClosed) also matches, with errors.Is, what ended
// it: the endpoint's Err (ErrPeerClosed, ErrPeerLost, ErrConnFailed,
// ErrClosed, an *AsyncError...), besides its own status (verbs.ErrFlushed
// and so on). Its completion may be polled before the endpoint learned
// why it ended (a flush can overtake the event that explains it), so the
// match is made against the endpoint's cause when errors.Is asks: it
// holds for certain once the endpoint's Done is closed.
type OpError struct {
	// Op is the operation: "write", "read", "send", "send-with-imm",
	// "write-with-imm", "compare-and-swap", "fetch-and-add".
	Op string
	// Batch is the size of the batch the operation belonged to (Post), 0
	// for one submitted alone.
	Batch int
	// Local and Remote are the connection's two ends, when known.
	Local, Remote net.Addr
	// RemoteAddr and RKey are the remote memory of an RDMA or atomic
	// operation (zero for a send).
	RemoteAddr uint64
	RKey       uint32
	// Len is the number of local bytes the operation carried.
	Len uint32
	Err error

	// ep is the endpoint whose end the failure came of, or nil.
	ep *Endpoint
}

func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString("verbsrt: ")
	b.WriteString(e.Op)
	if e.Len > 0 {
		fmt.Fprintf(&b, " of %d bytes", e.Len)
	}
	if e.RKey != 0 || e.RemoteAddr != 0 {
		fmt.Fprintf(&b, " at %#x (rkey %#x)", e.RemoteAddr, e.RKey)
	}
	if e.Batch > 1 {
		fmt.Fprintf(&b, " in a batch of %d", e.Batch)
	}
	if e.Local != nil || e.Remote != nil {
		fmt.Fprintf(&b, " on %s->%s", addrString(e.Local), addrString(e.Remote))
	}
	b.WriteString(": ")
	b.WriteString(causeString(e.Err))
	if c := e.endCause(); c != nil && errors.Is(e.Err, verbs.ErrFlushed) {
		b.WriteString(" (the endpoint ended: ")
		b.WriteString(causeString(c))
		b.WriteString(")")
	} else if cf := (*connFailed)(nil); errors.As(c, &cf) && cf.peerSaid != nil && errors.Is(e.Err, verbs.ErrRemoteAccess) {
		b.WriteString(": ")
		b.WriteString(causeString(cf.peerSaid)) // why the peer refused the access
	}
	return b.String()
}

func (e *OpError) Unwrap() error { return e.Err }

// Is reports whether target matches the end of the operation's endpoint,
// when the operation failed of it (see OpError); errors.Is reaches Err
// through Unwrap. An operation that broke a rule of ibv_post_send(3) (a
// *verbs.WRError of verbs.ErrInvalidWR) matches verbs.ErrInvalidArgument
// too, as every argument the runtime refuses itself does.
func (e *OpError) Is(target error) bool {
	if target == verbs.ErrInvalidArgument {
		var wre *verbs.WRError
		if errors.As(e.Err, &wre) && errors.Is(wre.Err, verbs.ErrInvalidWR) {
			return true
		}
	}
	c := e.endCause()
	return c != nil && errors.Is(c, target)
}

// endCause is why e's endpoint ended, as far as it is known, when the
// operation failed of it.
func (e *OpError) endCause() error {
	if e.ep == nil {
		return nil
	}
	return e.ep.cause()
}

func addrString(a net.Addr) string {
	if a == nil {
		return "?"
	}
	return a.String()
}

// causeString words the cause without what OpError already says: a work
// completion's status without its wr_id, a broken rule without the WR's
// index and wr_id (the runtime's bookkeeping, not the application's),
// other errors without their package prefix.
func causeString(err error) string {
	if err == nil {
		return "<nil>"
	}
	var wce *verbs.WCError
	if errors.As(err, &wce) && error(wce) == err {
		return fmt.Sprintf("%s (%s, vendor_err %#x)", wce.Status, wce.Status.Name(), wce.VendorErr)
	}
	var wre *verbs.WRError
	if errors.As(err, &wre) && error(wre) == err {
		return wre.Rule
	}
	s := err.Error()
	for _, prefix := range []string{"verbsrt: ", "verbs: "} {
		s = strings.TrimPrefix(s, prefix)
	}
	return s
}

// opNames names the opcodes operations use.
var opNames = map[verbs.Opcode]string{
	verbs.OpWrite:          "write",
	verbs.OpWriteImm:       "write-with-imm",
	verbs.OpSend:           "send",
	verbs.OpSendImm:        "send-with-imm",
	verbs.OpRead:           "read",
	verbs.OpAtomicCmpSwp:   "compare-and-swap",
	verbs.OpAtomicFetchAdd: "fetch-and-add",
}

// opName returns the name OpError gives an operation of opcode o.
func opName(o verbs.Opcode) string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return strings.ToLower(o.String())
}

// opError wraps err, the failure of op (alone: batch 0, or in a batch of
// that many WRs), as an *OpError naming the endpoint's two ends; nil stays
// nil, and an *OpError is not wrapped twice. The endpoint's actor calls it
// for every failure it resolves a future with.
func (ep *Endpoint) opError(op *qpactor.Op, batch int, err error) error {
	if err == nil {
		return nil
	}
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	e := &OpError{Op: opName(op.Opcode), Local: ep.LocalAddr(), Remote: ep.RemoteAddr(),
		RemoteAddr: op.Remote.RemoteAddr, RKey: op.Remote.RKey, Len: op.Local.Length, Err: err}
	if batch > 1 {
		e.Batch = batch
	}
	if endedBy(err) {
		e.ep = ep
	}
	return e
}

// endedBy reports whether an operation that failed with err failed because
// its endpoint ended: a completion with an error (on RC, the first fails
// the connection and the rest come back flushed) or ErrClosed (the
// endpoint refused it or failed it as it ended). A context's end, memory
// freed or a refused argument are the operation's own.
func endedBy(err error) bool {
	var wce *verbs.WCError
	return errors.As(err, &wce) || errors.Is(err, ErrClosed)
}

// cause returns why the endpoint ended, as far as it is known: its Err
// once Done is closed; before, the failure it recorded (failErr), or
// ErrClosed once Close began; nil while it is open.
func (ep *Endpoint) cause() error {
	if err := ep.Err(); err != nil {
		return err
	}
	if err := ep.failErr.Load(); err != nil {
		return err
	}
	if ep.closing.Load() {
		return ErrClosed
	}
	return nil
}
