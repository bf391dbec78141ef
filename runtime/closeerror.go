package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/verbs"
)

// maxCloseReason is the longest reason CloseWithError carries, in bytes.
const maxCloseReason = 256

// closeCodeSize is the code's length in the goodbye's data, in front of
// the reason.
const closeCodeSize = 4

// PeerCloseError is an endpoint's Err, and the error of what was still
// pending on it, once its peer closed with CloseWithError: the peer's
// application code and reason. It matches ErrPeerClosed (errors.Is), as
// the peer's close is graceful: Recv returns io.EOF after the messages
// that arrived before. The reason is the peer's text; Error quotes it.
type PeerCloseError struct {
	Code   uint32
	Reason string
}

func (e *PeerCloseError) Error() string {
	reason := strconv.Quote(e.Reason)
	if len(reason) > maxQuotedReason {
		reason = reason[:maxQuotedReason] + "..."
	}
	return fmt.Sprintf("verbsrt: peer closed the connection with code %d, reason %s", e.Code, reason)
}

// maxQuotedReason bounds a reason as Error quotes it: escaped control
// bytes take up to 4 times their room, and an error fits a log line.
const maxQuotedReason = 300

// Is reports whether target is ErrPeerClosed.
func (e *PeerCloseError) Is(target error) bool { return target == ErrPeerClosed }

// CloseWithError closes the endpoint as Close does, and tells the peer
// why: its goodbye carries code and reason, and the peer's Err becomes a
// *PeerCloseError with them. The reason is UTF-8 text of at most 256
// bytes; another is refused with an error matching
// verbs.ErrInvalidArgument, and the endpoint stays open. The peer reads
// as much of the reason as its largest message (WithMessageSize) holds
// after the code's 4 bytes. Code 0 with no reason is Close: the peer's
// Err is ErrPeerClosed. A peer too old to read the code sees a Close.
// Once the endpoint is closing, CloseWithError does nothing more, as
// Close.
func (ep *Endpoint) CloseWithError(ctx context.Context, code uint32, reason string) error {
	if ep == nil {
		return errNilEndpoint
	}
	if ctx == nil {
		return future.ErrNilContext
	}
	if len(reason) > maxCloseReason {
		return fmt.Errorf("verbsrt: CloseWithError: a reason of %d bytes, longer than the %d allowed: %w", len(reason), maxCloseReason, verbs.ErrInvalidArgument)
	}
	if !utf8.ValidString(reason) {
		return fmt.Errorf("verbsrt: CloseWithError: the reason is not UTF-8 text: %w", verbs.ErrInvalidArgument)
	}
	var err error
	ep.closeOnce.Do(func() {
		ep.writeGoodbye(code, reason)
		err = ep.close(ctx)
	})
	return err
}

// writeGoodbye puts code and reason, as much of it as the peer's
// receives take, in registered memory for the goodbye SEND to carry
// (goodbyeData), unless there is nothing to say.
func (ep *Endpoint) writeGoodbye(code uint32, reason string) {
	if code == 0 && reason == "" {
		return
	}
	room := ep.peerMsgSize - closeCodeSize
	if room < 0 {
		ep.rt.log.Warn("verbsrt: CloseWithError: the peer's messages are too small for the code; it sees a Close", "code", code, "peer_msg_size", ep.peerMsgSize)
		return
	}
	for len(reason) > room || !utf8.ValidString(reason) {
		reason = reason[:min(room, len(reason)-1)] // cut whole characters
	}
	buf, err := ep.rt.allocOwn(closeCodeSize + len(reason))
	if err != nil {
		ep.rt.log.Warn("verbsrt: CloseWithError: no memory for the code; the peer sees a Close", "code", code, "err", err)
		return
	}
	binary.BigEndian.PutUint32(buf.mem, code)
	copy(buf.mem[closeCodeSize:], reason)
	ep.goodbye = buf
	ep.goodbyeLen = closeCodeSize + len(reason)
}

// goodbyeData is what the goodbye SEND carries after its header: nothing
// for a Close.
func (ep *Endpoint) goodbyeData() verbs.SGE {
	if ep.goodbye == nil {
		return verbs.SGE{}
	}
	return verbs.SGE{Addr: ep.goodbye.addr, Length: uint32(ep.goodbyeLen), LKey: ep.goodbye.lkey}
}

// peerGoodbye is the Err of an endpoint whose peer said goodbye with
// data (its bytes after the header): the code and reason of
// CloseWithError. A goodbye without them, or of fewer bytes than a code,
// is a Close's.
func peerGoodbye(data []byte) error {
	if len(data) < closeCodeSize {
		return ErrPeerClosed
	}
	reason := data[closeCodeSize:]
	reason = reason[:min(len(reason), maxCloseReason)]
	return &PeerCloseError{Code: binary.BigEndian.Uint32(data), Reason: string(reason)}
}
