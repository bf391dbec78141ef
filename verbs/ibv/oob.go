package ibv

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// DestLen is the size of the address message ibv_rc_pingpong sends over
// TCP: "LLLL:QQQQQQ:PPPPPP:" and 32 hex digits of GID, NUL-terminated (the
// C program writes sizeof its buffer, NUL included).
const DestLen = len("0000:000000:000000:00000000000000000000000000000000") + 1

// doneMsg is what the client writes once it has the server's address:
// sizeof "done" in C, NUL included.
const doneMsg = "done\x00"

// exchangeTimeout bounds an exchange whose context has no deadline.
const exchangeTimeout = 30 * time.Second

// MarshalDest renders p as ibv_rc_pingpong's address message:
// "%04x:%06x:%06x:%s" with the GID as gid_to_wire_gid writes it (the 16
// bytes in order, as 32 lower-case hex digits), NUL-padded to DestLen.
// LID takes 4 hex digits, QPN and PSN 6 (they are 24-bit numbers).
func MarshalDest(p verbs.PeerInfo) [DestLen]byte {
	var msg [DestLen]byte
	s := fmt.Sprintf("%04x:%06x:%06x:%s", p.LID, p.QPN&0xffffff, p.PSN&0xffffff, hex.EncodeToString(p.GID[:]))
	copy(msg[:], s)
	return msg
}

// UnmarshalDest parses an address message as ibv_rc_pingpong's
// sscanf("%x:%x:%x:%s") and wire_gid_to_gid do: everything up to the first
// NUL, three hex numbers and 32 hex digits of GID separated by colons. It
// is stricter than sscanf about what it accepts: a malformed message is an
// error matching ErrProtocol rather than a half-filled address.
func UnmarshalDest(msg []byte) (verbs.PeerInfo, error) {
	s := string(msg)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.Split(s, ":")
	bad := func(what string) (verbs.PeerInfo, error) {
		return verbs.PeerInfo{}, fmt.Errorf("%w: address message %q: %s", ErrProtocol, s, what)
	}
	if len(f) != 4 {
		return bad("want LID:QPN:PSN:GID")
	}
	lid, err := strconv.ParseUint(f[0], 16, 16)
	if err != nil {
		return bad("LID")
	}
	qpn, err := strconv.ParseUint(f[1], 16, 24)
	if err != nil {
		return bad("QPN")
	}
	psn, err := strconv.ParseUint(f[2], 16, 24)
	if err != nil {
		return bad("PSN")
	}
	var p verbs.PeerInfo
	if len(f[3]) != 2*len(p.GID) {
		return bad("GID is not 32 hex digits")
	}
	if _, err := hex.Decode(p.GID[:], []byte(f[3])); err != nil {
		return bad("GID is not 32 hex digits")
	}
	p.LID, p.QPN, p.PSN = uint16(lid), uint32(qpn), uint32(psn)
	return p, nil
}

// ClientExchangeDest is the client's half of ibv_rc_pingpong's exchange
// (pp_client_exch_dest) over c, a TCP connection to the server: send our
// address, read the server's, then write "done". The server has moved its
// QP to RTS before it answers, so the caller may connect its QP and send as
// soon as this returns. c stays open; ctx bounds the exchange.
func ClientExchangeDest(ctx context.Context, c net.Conn, local verbs.PeerInfo) (verbs.PeerInfo, error) {
	defer watchConn(ctx, c)()
	msg := MarshalDest(local)
	if _, err := c.Write(msg[:]); err != nil {
		return verbs.PeerInfo{}, exchangeErr(ctx, "couldn't send local address", err)
	}
	var in [DestLen]byte
	if _, err := io.ReadFull(c, in[:]); err != nil {
		return verbs.PeerInfo{}, exchangeErr(ctx, "couldn't read remote address", err)
	}
	if _, err := io.WriteString(c, doneMsg); err != nil {
		return verbs.PeerInfo{}, exchangeErr(ctx, "couldn't write done", err)
	}
	return UnmarshalDest(in[:])
}

// ServerExchangeDest is the server's half (pp_server_exch_dest) over c, a
// connection accepted from the client: read the client's address, call
// connect with it (which must bring the local QP to RTS: the client sends
// as soon as it has our answer), send our address and wait for "done". On
// an error from connect nothing is sent and c should be closed, as
// ibv_rc_pingpong does.
func ServerExchangeDest(ctx context.Context, c net.Conn, local verbs.PeerInfo,
	connect func(remote verbs.PeerInfo) error) (verbs.PeerInfo, error) {
	defer watchConn(ctx, c)()
	var in [DestLen]byte
	if _, err := io.ReadFull(c, in[:]); err != nil {
		return verbs.PeerInfo{}, exchangeErr(ctx, "couldn't read remote address", err)
	}
	remote, err := UnmarshalDest(in[:])
	if err != nil {
		return verbs.PeerInfo{}, err
	}
	if err := connect(remote); err != nil {
		return verbs.PeerInfo{}, err
	}
	msg := MarshalDest(local)
	if _, err := c.Write(msg[:]); err != nil {
		return verbs.PeerInfo{}, exchangeErr(ctx, "couldn't send local address", err)
	}
	var done [len(doneMsg)]byte
	if _, err := io.ReadFull(c, done[:]); err != nil {
		return verbs.PeerInfo{}, exchangeErr(ctx, "couldn't read done", err)
	}
	if string(done[:]) != doneMsg {
		return verbs.PeerInfo{}, fmt.Errorf("%w: got %q instead of \"done\"", ErrProtocol, done[:])
	}
	return remote, nil
}

// watchConn puts ctx's deadline (or exchangeTimeout) on c and wakes c's
// blocked calls when ctx ends; the returned func undoes both.
func watchConn(ctx context.Context, c net.Conn) func() {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(exchangeTimeout)
	}
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		c.SetDeadline(time.Time{})
	}
}

// exchangeErr names what failed; when ctx ended (or its deadline, which
// the connection carries, fired a moment before ctx's own timer) it says
// so with ctx's error.
func exchangeErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("ibv: %s: %w", what, ctx.Err())
	}
	if d, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(d) {
		return fmt.Errorf("ibv: %s: %w", what, context.DeadlineExceeded)
	}
	return fmt.Errorf("ibv: %s: %w", what, err)
}
