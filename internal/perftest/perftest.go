package perftest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"

	"github.com/verbsrt/verbsrt/verbs"
)

// Sizes and values of perftest's protocol.
const (
	Version       = "6.06" // the protocol this end speaks
	minVersion    = 5.70   // the oldest a 6.06 peer accepts
	versionSize   = 16     // MAX_VERSION
	keyMsgSize    = 59     // KEY_MSG_SIZE: the keys without a GID
	keyMsgSizeGID = 108    // KEY_MSG_SIZE_GID
	doneMsg       = "done\x00"
	// peerMark follows the version's NUL in what this end sends: the C
	// program reads the version with atof and never sees it; a verbsrt
	// peer learns that the bytes it receives follow verbsrt's pattern
	// and checks them.
	peerMark = "verbsrt"
)

// Dest is what perftest's ends tell each other of a QP (struct
// pingpong_dest): where to send, and the buffer the peer may access.
type Dest struct {
	LID      uint16
	OutReads uint32 // outstanding READs and atomics it takes as responder
	QPN      uint32
	PSN      uint32
	RKey     uint32
	VAddr    uint64
	GID      verbs.GID
	SRQN     uint32 // XRC and DC only; 0 here
}

// keysSize is the size of the keys message with or without a GID.
func keysSize(withGID bool) int {
	if withGID {
		return keyMsgSizeGID
	}
	return keyMsgSize
}

// marshal formats d as KEY_PRINT_FMT ("%04x:%04x:%06x:%06x:%08x:%016llx:
// %08x") or, with a GID, KEY_PRINT_FMT_GID (the 16 GID bytes as %02x
// between vaddr and srqn, and a final colon), NUL-padded to the message
// size.
func (d Dest) marshal(withGID bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x:", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr)
	if withGID {
		for _, g := range d.GID {
			fmt.Fprintf(&b, "%02x:", g)
		}
		fmt.Fprintf(&b, "%08x:", d.SRQN)
	} else {
		fmt.Fprintf(&b, "%08x", d.SRQN)
	}
	msg := make([]byte, keysSize(withGID))
	copy(msg, b.String())
	return msg
}

// parseDest parses a keys message as the C program does: hexadecimal
// fields separated by colons, up to the first NUL.
func parseDest(msg []byte, withGID bool) (Dest, error) {
	var d Dest
	s, _, _ := bytes.Cut(msg, []byte{0})
	fields := strings.Split(string(s), ":")
	want := 7
	if withGID {
		want = 6 + 16 + 1
		if len(fields) == want+1 && fields[want] == "" {
			fields = fields[:want]
		}
	}
	if len(fields) != want {
		return d, fmt.Errorf("perftest keys %q: %d fields, want %d", s, len(fields), want)
	}
	vals := make([]uint64, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseUint(f, 16, 64)
		if err != nil {
			return d, fmt.Errorf("perftest keys %q: field %d: %w", s, i, err)
		}
		vals[i] = v
	}
	if vals[0] > math.MaxUint16 || vals[2] > 0xffffff || vals[3] > 0xffffff || vals[1] > math.MaxUint32 || vals[4] > math.MaxUint32 {
		return d, fmt.Errorf("perftest keys %q: a field out of range", s)
	}
	d = Dest{LID: uint16(vals[0]), OutReads: uint32(vals[1]), QPN: uint32(vals[2]), PSN: uint32(vals[3]),
		RKey: uint32(vals[4]), VAddr: vals[5]}
	last := vals[len(vals)-1]
	if withGID {
		for i := range d.GID {
			if vals[6+i] > 0xff {
				return d, fmt.Errorf("perftest keys %q: GID byte %d out of range", s, i)
			}
			d.GID[i] = byte(vals[6+i])
		}
	}
	if last > math.MaxUint32 {
		return d, fmt.Errorf("perftest keys %q: SRQN out of range", s)
	}
	d.SRQN = uint32(last)
	return d, nil
}

// Report is one end's result as perftest's ends exchange it (struct
// bw_report_data): MB/s are 2^20 bytes a second, the rate in Mpps.
type Report struct {
	Size, Iters           uint64
	BWPeak, BWAvg, MsgAvg float64
}

// Hello is what the first exchanges settle: the peer's version and the
// values both ends then use.
type Hello struct {
	PeerVersion string
	Verbsrt     bool // the peer is verbsrt (peerMark)
	CycleBuffer int
	CacheLine   int
	MTU         verbs.MTU
}

// Conn is one end of perftest's control connection. One goroutine uses
// it at a time: the exchanges are a fixed sequence.
type Conn struct {
	c      net.Conn
	client bool
}

// NewConn returns the client's end (client true) or the server's of the
// control connection c.
func NewConn(c net.Conn, client bool) *Conn { return &Conn{c: c, client: client} }

// xchg sends mine and returns the peer's n bytes, in the order of the
// end: the client writes first, the server reads first.
func (p *Conn) xchg(mine []byte, n int) ([]byte, error) {
	theirs := make([]byte, n)
	if p.client {
		if _, err := p.c.Write(mine); err != nil {
			return nil, err
		}
	}
	if _, err := io.ReadFull(p.c, theirs); err != nil {
		return nil, err
	}
	if !p.client {
		if _, err := p.c.Write(mine); err != nil {
			return nil, err
		}
	}
	return theirs, nil
}

// atof reads a version as C's atof does: the longest leading decimal
// number, 0 when there is none.
func atof(s string) float64 {
	end := 0
	dot := false
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' && !dot) {
		dot = dot || s[end] == '.'
		end++
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s[:end], "."), 64)
	if err != nil {
		return 0
	}
	return v
}

// versionMsg is the version this end sends: "6.06", its NUL, the mark.
func versionMsg() []byte {
	msg := make([]byte, versionSize)
	copy(msg, Version+"\x00"+peerMark)
	return msg
}

// hello runs the exchanges before the keys: versions, sys data and MTU,
// with this end's page size, cache line size and port MTU.
func (p *Conn) Hello(cycleBuffer, cacheLine int, mtu verbs.MTU) (Hello, error) {
	h := Hello{CycleBuffer: cycleBuffer, CacheLine: cacheLine, MTU: mtu}
	rv, err := p.xchg(versionMsg(), versionSize)
	if err != nil {
		return h, fmt.Errorf("perftest version exchange: %w", err)
	}
	v, rest, _ := bytes.Cut(rv, []byte{0})
	h.PeerVersion = string(v)
	h.Verbsrt = bytes.HasPrefix(rest, []byte(peerMark))
	ver := atof(h.PeerVersion)
	if ver < minVersion {
		return h, fmt.Errorf("perftest version %q: this end speaks %s, which needs a peer of %.2f or later", h.PeerVersion, Version, minVersion)
	}
	for _, v := range []*int{&h.CycleBuffer, &h.CacheLine} {
		b, err := p.xchg(binary.BigEndian.AppendUint32(nil, uint32(*v)), 4)
		if err != nil {
			return h, fmt.Errorf("perftest sys data exchange: %w", err)
		}
		*v = max(*v, int(int32(binary.BigEndian.Uint32(b))))
	}
	mine := make([]byte, 2)
	copy(mine, strconv.Itoa(int(mtu)))
	b, err := p.xchg(mine, len(mine))
	if err != nil {
		return h, fmt.Errorf("perftest MTU exchange: %w", err)
	}
	digits, _, _ := bytes.Cut(b, []byte{0})
	if rem, err := strconv.Atoi(string(digits)); err == nil && verbs.MTU(rem).Bytes() != 0 && verbs.MTU(rem) < mtu {
		h.MTU = verbs.MTU(rem)
	}
	return h, nil
}

// handshake exchanges the keys of one QP.
func (p *Conn) Handshake(mine Dest, withGID bool) (Dest, error) {
	b, err := p.xchg(mine.marshal(withGID), keysSize(withGID))
	if err != nil {
		return Dest{}, fmt.Errorf("perftest keys exchange: %w", err)
	}
	return parseDest(b, withGID)
}

// reports exchanges the results, each value on its own.
func (p *Conn) Reports(mine Report) (Report, error) {
	var r Report
	for _, f := range []struct {
		mine   uint64
		theirs *uint64
	}{{mine.Size, &r.Size}, {mine.Iters, &r.Iters}} {
		b, err := p.xchg(binary.BigEndian.AppendUint64(nil, f.mine), 8)
		if err != nil {
			return r, fmt.Errorf("perftest report exchange: %w", err)
		}
		*f.theirs = binary.BigEndian.Uint64(b)
	}
	for _, f := range []struct {
		mine   float64
		theirs *float64
	}{{mine.BWPeak, &r.BWPeak}, {mine.BWAvg, &r.BWAvg}, {mine.MsgAvg, &r.MsgAvg}} {
		b, err := p.xchg(binary.BigEndian.AppendUint64(nil, math.Float64bits(f.mine)), 8)
		if err != nil {
			return r, fmt.Errorf("perftest report exchange: %w", err)
		}
		*f.theirs = math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	return r, nil
}

// close is ctx_close_connection: a last handshake, then "done".
func (p *Conn) Close(mine Dest, withGID bool) error {
	if _, err := p.Handshake(mine, withGID); err != nil {
		return err
	}
	_, err := p.c.Write([]byte(doneMsg))
	return err
}

// V4Mapped says whether gid is an IPv4-mapped address, as perftest's
// check of the two ends' GID types (ctx_check_gid_compatibility) reads it.
func V4Mapped(gid verbs.GID) bool {
	var prefix = [12]byte{10: 0xff, 11: 0xff}
	return [12]byte(gid[:12]) == prefix
}

var ErrGIDTypes = errors.New("perftest: one end's GID is IPv4-mapped and the other's is not (give both ends GIDs of one IP version)")
