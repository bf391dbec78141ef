package runtime

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/verbsrt/verbsrt/verbs"
)

// hello is what the two ends exchange over TCP before their QPs connect:
// what ibv_rc_pingpong exchanges (LID, QPN, PSN, GID), the receive window
// and message size the credit scheme needs, and what the two QPs must
// agree on: the path MTU and the read/atomic depths (negotiate). One JSON
// line each way,
// then one "ready" line each way once both QPs are in RTS. A side that
// cannot or will not connect writes a refusal instead of its hello or of
// its "ready": a line with an "error" (and, where it has one, a "cause"),
// which the other side reports (ErrRefused) instead of waiting for a
// timeout. The doc.go section "Wire format" is the specification.
type hello struct {
	Version   int    `json:"version"`
	QPN       uint32 `json:"qpn"`
	PSN       uint32 `json:"psn"`
	LID       uint16 `json:"lid"`
	GID       string `json:"gid"`
	RecvDepth int    `json:"recv_depth"` // the largest window (WithRecvDepth)
	Window    int    `json:"window"`     // the initial window: the peer's first credits
	MsgSize   int    `json:"msg_size"`
	// The port's active MTU in bytes, and the read/atomic depths of the
	// side's QPs: as initiator (max_rd_atomic) and as responder
	// (max_dest_rd_atomic).
	MTU             int `json:"mtu"`
	MaxRdAtomic     int `json:"max_rd_atomic"`
	MaxDestRdAtomic int `json:"max_dest_rd_atomic"`
	// The side's verbs provider, by name, and the transport its QPs speak
	// (transportOf): sides of different transports cannot connect.
	// Absent from the hellos of earlier builds, and then not checked.
	Provider  string `json:"provider,omitempty"`
	Transport string `json:"transport,omitempty"`

	// A refusal's: why, in words, and the cause's name (refusalCauses).
	Error string `json:"error,omitempty"`
	Cause string `json:"cause,omitempty"`

	gid verbs.GID
}

// helloVersion is the version of the handshake and of what travels on the
// connection after it (doc.go, "Wire format"). Version 2 moved the credit
// reports from the immediate data of SENDs into a header in front of their
// data, giving the immediate data to the application. Version 3 shares
// receives: windows start at Window, grow to RecvDepth, and the header
// carries the backlog flag and the want field. Version 4 carries the
// port's MTU and the read/atomic depths, which both sides negotiate.
const helloVersion = 4

// Bounds of a hello, checked on every one received (TCP and the connection
// manager's private data alike), so that no peer can hand the runtime a
// value it cannot honour.
const (
	// maxHelloLine bounds a line of the handshake, newline included: the
	// longest hello is under 300 bytes, a refusal's text is cut to fit.
	maxHelloLine = 512
	// maxRefusalText bounds the words of a refusal written.
	maxRefusalText = 320
	// maxQPN and maxPSN: both are 24-bit fields of the transport's header.
	maxQPN = 1<<24 - 1
	maxPSN = 1<<24 - 1
	// minQPN: QPs 0 and 1 are the special QPs, never an RC peer.
	minQPN = 2
	// maxHelloWindow bounds recv_depth (and so window): a credit report
	// asks for a window in 16 bits (the header's want field).
	maxHelloWindow = 1 << 16
	// maxHelloMsgSize bounds msg_size: a SEND carries the 8-byte header
	// and the message, within the 2 GiB the transport allows a message,
	// with room to spare for the length arithmetic of both sides.
	maxHelloMsgSize = 1 << 30
	// minHelloMTU and maxHelloMTU bound mtu, which must be one of the
	// path MTUs a QP takes: a power of two from 256 to 4096 bytes.
	minHelloMTU = 256
	maxHelloMTU = 4096
	// maxHelloRdAtomic bounds max_rd_atomic and max_dest_rd_atomic: the
	// most the runtime asks of its own device (maxRdAtomic), and at least
	// one, as the endpoint's READs and atomics need the peer to answer
	// them.
	maxHelloRdAtomic = maxRdAtomic
)

// maxRdAtomic caps the read/atomic depths the runtime asks of its device,
// as initiator and as responder: verbs.ConnectSpec's default.
const maxRdAtomic = 16

// ErrRefused matches the error of Dial (and of a listener's failed
// handshake, which its logger reports) when the other side refused the
// connection and said why: the error's text carries its words, and where
// it named a cause the error matches that too (ErrNoMemory when its
// registered memory is exhausted, syscall.EMFILE or syscall.ENFILE when
// its process or system is out of file descriptors, ErrProtocol when it
// took this side's hello for one it cannot honour, verbs.ErrEventsLost
// when its device can start no endpoint).
var ErrRefused = errors.New("verbsrt: the peer refused the connection")

// refusalCauses names the causes a refusal carries, both ways.
var refusalCauses = []struct {
	name string
	err  error
}{
	{"no_memory", ErrNoMemory},
	{"emfile", syscall.EMFILE},
	{"enfile", syscall.ENFILE},
	{"enomem", syscall.ENOMEM},
	{"protocol", ErrProtocol},
	{"events_lost", verbs.ErrEventsLost},
}

// refusedError is a refusal received.
type refusedError struct {
	text  string
	cause error // nil when the peer named none this side knows
}

func (e *refusedError) Error() string { return ErrRefused.Error() + ": " + e.text }

func (e *refusedError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrRefused}
	}
	return []error{ErrRefused, e.cause}
}

// refusal returns the line that refuses a connection because of err.
func refusal(err error) []byte {
	h := hello{Version: helloVersion, Error: err.Error()}
	if len(h.Error) > maxRefusalText {
		h.Error = h.Error[:maxRefusalText] + "..."
	}
	for _, c := range refusalCauses {
		if errors.Is(err, c.err) {
			h.Cause = c.name
			break
		}
	}
	return marshalLine(h)
}

// marshalLine returns h as one line of JSON, the newline included.
func marshalLine(h hello) []byte {
	b, err := json.Marshal(h)
	if err != nil {
		panic(err) // a struct of numbers and strings always marshals
	}
	return append(b, '\n')
}

// readLine reads one line of the handshake, at most maxHelloLine bytes
// with its newline. br must have been made with bufio.NewReaderSize(c,
// maxHelloLine): its buffer is the bound. The slice is valid until the next
// read.
func readLine(br *bufio.Reader, what string) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fmt.Errorf("%w: the peer's %s is longer than %d bytes", ErrProtocol, what, maxHelloLine)
	case err != nil:
		return nil, fmt.Errorf("%w: reading the peer's %s: %w", ErrProtocol, what, err)
	}
	return line, nil
}

// parseHello parses the peer's hello, a line read with readLine, and checks
// every field against what this runtime can honour. A refusal comes back
// as an error matching ErrRefused; anything else the peer may not say, as
// one matching ErrProtocol naming the field.
func parseHello(line []byte) (hello, error) {
	var h hello
	if err := json.Unmarshal(line, &h); err != nil {
		return hello{}, fmt.Errorf("%w: the peer's hello: %v", ErrProtocol, err)
	}
	if h.Error != "" || h.Cause != "" {
		return hello{}, refusedFrom(h)
	}
	if err := h.check(); err != nil {
		return hello{}, err
	}
	if h.QPN < minQPN || h.QPN > maxQPN {
		return hello{}, fmt.Errorf("%w: the peer's hello: qpn %#x is not an RC QP's number (24 bits, 0 and 1 are special)", ErrProtocol, h.QPN)
	}
	if h.PSN > maxPSN {
		return hello{}, fmt.Errorf("%w: the peer's hello: psn %#x is wider than 24 bits", ErrProtocol, h.PSN)
	}
	if len(h.GID) > len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255") {
		return hello{}, fmt.Errorf("%w: the peer's hello: gid of %d characters is no GID", ErrProtocol, len(h.GID))
	}
	a, err := netip.ParseAddr(h.GID)
	if err != nil || a.Zone() != "" {
		return hello{}, fmt.Errorf("%w: the peer's hello: gid %q is not an IPv6 address's text", ErrProtocol, h.GID)
	}
	h.gid = verbs.GID(a.As16())
	return h, nil
}

// check checks the fields of a hello that both handshakes carry (TCP and
// the connection manager's): the version, the windows, the message size,
// the MTU and the read/atomic depths.
func (h *hello) check() error {
	switch {
	case h.Version != helloVersion:
		return versionError(h.Version)
	case h.RecvDepth < 2 || h.RecvDepth > maxHelloWindow:
		return fmt.Errorf("%w: the peer's hello: recv_depth %d outside [2, %d]", ErrProtocol, h.RecvDepth, maxHelloWindow)
	case h.Window < 2 || h.Window > h.RecvDepth:
		return fmt.Errorf("%w: the peer's hello: window %d outside [2, recv_depth %d]", ErrProtocol, h.Window, h.RecvDepth)
	case h.MsgSize < 1 || h.MsgSize > maxHelloMsgSize:
		return fmt.Errorf("%w: the peer's hello: msg_size %d outside [1, %d]", ErrProtocol, h.MsgSize, maxHelloMsgSize)
	case h.MTU < minHelloMTU || h.MTU > maxHelloMTU || h.MTU&(h.MTU-1) != 0:
		return fmt.Errorf("%w: the peer's hello: mtu %d is not 256, 512, 1024, 2048 or 4096", ErrProtocol, h.MTU)
	case h.MaxRdAtomic < 1 || h.MaxRdAtomic > maxHelloRdAtomic:
		return fmt.Errorf("%w: the peer's hello: max_rd_atomic %d outside [1, %d]", ErrProtocol, h.MaxRdAtomic, maxHelloRdAtomic)
	case h.MaxDestRdAtomic < 1 || h.MaxDestRdAtomic > maxHelloRdAtomic:
		return fmt.Errorf("%w: the peer's hello: max_dest_rd_atomic %d outside [1, %d]", ErrProtocol, h.MaxDestRdAtomic, maxHelloRdAtomic)
	case !helloName(h.Provider):
		return fmt.Errorf("%w: the peer's hello: provider of %d bytes is not a provider's name (at most %d letters, digits, '-' and '_')", ErrProtocol, len(h.Provider), maxHelloName)
	case !helloName(h.Transport):
		return fmt.Errorf("%w: the peer's hello: transport of %d bytes is not a transport's name (at most %d letters, digits, '-' and '_')", ErrProtocol, len(h.Transport), maxHelloName)
	}
	return nil
}

// maxHelloName bounds the provider and transport names of a hello.
const maxHelloName = 32

// helloName reports whether s may be a hello's provider or transport: a
// short word, or nothing.
func helloName(s string) bool {
	if len(s) > maxHelloName {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// The transports a hello names: what a QP of the side speaks on the wire.
// The soft provider's QPs reach only QPs of its own fabric, in its
// process; a RoCE device's (ibv over RoCE, rocev2) RoCE v2 packets; an
// InfiniBand port's InfiniBand.
const (
	transportSoft = "soft"
	transportRoCE = "roce"
	transportIB   = "ib"
)

// transportWords says what a transport is, for the error of a mismatch.
var transportWords = map[string]string{
	transportSoft: "an in-process fabric",
	transportRoCE: "RoCE v2",
	transportIB:   "InfiniBand",
}

// transportOf returns the transport of a runtime on provider, whose port
// has link layer ll.
func transportOf(provider string, ll verbs.LinkLayer) string {
	switch {
	case provider == "soft":
		return transportSoft
	case ll == verbs.LinkLayerInfiniBand:
		return transportIB
	default:
		return transportRoCE
	}
}

// errTransportMismatch matches the error of a peer whose QPs speak
// another transport than this side's.
var errTransportMismatch = errors.New("provider mismatch")

// sameTransport refuses a peer whose hello names another transport than
// this side's (provider, transport): its QP could not reach this one, and
// connecting would fail in the device with an error about addresses. A
// hello that names none (an earlier build's) passes.
func sameTransport(provider, transport string, peer hello) error {
	if peer.Transport == "" || peer.Transport == transport {
		return nil
	}
	words := func(t string) string {
		if w, ok := transportWords[t]; ok {
			return w
		}
		return "transport " + t
	}
	return fmt.Errorf("%w: %w: the peer runs provider %s (%s), this runtime %s (%s); both sides need the same transport (WithProvider)",
		ErrProtocol, errTransportMismatch, peer.Provider, words(peer.Transport), provider, words(transport))
}

// versionError is the error of a peer's hello of version v, not this
// runtime's: the two cannot talk, whichever is newer, and the text says
// which side to upgrade.
func versionError(v int) error {
	hint := ""
	switch {
	case v > 0 && v < helloVersion:
		hint = ": the peer's verbsrt is older; upgrade it"
	case v > helloVersion:
		hint = ": the peer's verbsrt is newer; upgrade this one"
	}
	return fmt.Errorf("%w: the peer's hello: version %d, this runtime speaks version %d%s", ErrProtocol, v, helloVersion, hint)
}

// negotiate returns how ep's QP connects to the peer whose hello is peer,
// from spec, this side's own (Runtime.connectSpec): both sides use the
// smaller of the two ports' MTUs, since a port drops packets larger than
// its own; this side initiates at most as many READs and atomics at once
// as the peer takes as responder, since the responder NAKs those beyond
// its depth and the QP fails; and on InfiniBand a peer of the same subnet
// is addressed by LID (verbs.LIDRouted), where ll is the port's link layer
// and gid its GID.
func negotiate(spec verbs.ConnectSpec, ll verbs.LinkLayer, gid verbs.GID, peer hello) verbs.ConnectSpec {
	spec.PathMTU = min(spec.PathMTU, verbs.MTUFromBytes(peer.MTU))
	spec.MaxRdAtomic = min(spec.MaxRdAtomic, uint8(peer.MaxDestRdAtomic))
	spec.ByLID = verbs.LIDRouted(ll, gid, peer.gid)
	return spec
}

// refusedFrom is the error of the refusal h.
func refusedFrom(h hello) error {
	e := &refusedError{text: h.Error}
	if e.text == "" {
		e.text = h.Cause
	}
	for _, c := range refusalCauses {
		if h.Cause == c.name {
			e.cause = c.err
		}
	}
	return e
}

// readReady reads the peer's "ready", or its refusal.
func readReady(br *bufio.Reader) error {
	line, err := readLine(br, `"ready"`)
	if err != nil {
		return err
	}
	if string(line) == "ready\n" {
		return nil
	}
	var h hello
	if json.Unmarshal(line, &h) == nil && (h.Error != "" || h.Cause != "") {
		return refusedFrom(h)
	}
	return fmt.Errorf("%w: the peer wrote %q where \"ready\" belongs", ErrProtocol, line[:min(len(line), 32)])
}

// notSelf refuses a peer whose address (GID, QPN and the port's LID) is
// the endpoint's own, lid being its port's: a QP connected to itself
// sends to and receives from itself, and the application believes it has
// a peer. Runtimes reach that on two soft providers, which are separate
// fabrics with the same GIDs and QP numbers (softdefault.go). Two
// processes of one host on the rocev2 provider share the GID and number
// their QPs alike too, and differ in the LID, which is their UDP port.
func notSelf(local Addr, lid uint16, peer hello) error {
	if peer.gid == local.GID && peer.QPN == local.QPN && peer.LID == lid {
		return fmt.Errorf("%w: the peer's hello names this endpoint itself (%s): the two sides are on separate fabrics that number alike (two soft providers?)",
			ErrProtocol, local)
	}
	return nil
}

// writeLine writes one line of the handshake.
func writeLine(c net.Conn, line []byte) error {
	_, err := c.Write(line)
	return err
}
