package main

import (
	"bytes"
	"context"
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

// perftest's out-of-band protocol, the TCP exchange of ib_write_bw,
// ib_read_bw, ib_send_bw and ib_atomic_bw (perftest 6.06, Debian's
// 4.5-0.17, src/perftest_communication.c), which "verbsrt bench -direct"
// speaks so that either end may be the C program. The client connects to
// the server's port (18515); every exchange below is symmetric: the client
// writes its value and then reads the server's, the server reads and then
// writes, each value a fixed number of bytes.
//
//	versions      16 bytes: the version as a NUL-terminated string
//	              ("6.06"; the peer refuses one older than 5.70)
//	sys data      from 5.32 on: the cycle buffer (page size) and then the
//	              cache line size, each a 32-bit big-endian int; both
//	              ends take the larger of each
//	MTU           from 5.1 on: the enum ibv_mtu of the port in decimal,
//	              NUL-terminated, 2 bytes from 5.31 on (4 before); both
//	              ends take the smaller
//	keys          one handshake: LID, out_reads, QPN, PSN, rkey, vaddr
//	              (and the GID when the ends use one) as text in
//	              KEY_PRINT_FMT or KEY_PRINT_FMT_GID, NUL-padded to 59 or
//	              108 bytes
//
// Then, for one QP, the keys handshake three times (before the QP is
// connected, after, and once more after RTR), and the client of write,
// read or atomic starts its run; send has a fourth, the sync before the
// run, once its server posted its receives. After the run:
//
//	write, read, atomic  a keys handshake (the server waits there for the
//	                     client's run), then the reports: size and iters as
//	                     64-bit, bw_peak, bw_avg and msgRate as 64-bit
//	                     big-endian IEEE doubles, each value exchanged on
//	                     its own; the server prints the client's
//	send                 each end prints its own result
//
// and last a keys handshake and "done" with its NUL (5 bytes), which
// neither end reads, before the ends close.

// Sizes and values of perftest's protocol.
const (
	ptVersion       = "6.06" // the protocol this end speaks
	ptMinVersion    = 5.70   // the oldest a 6.06 peer accepts
	ptVersionSize   = 16     // MAX_VERSION
	ptKeyMsgSize    = 59     // KEY_MSG_SIZE: the keys without a GID
	ptKeyMsgSizeGID = 108    // KEY_MSG_SIZE_GID
	ptDone          = "done\x00"
	// ptPeerMark follows the version's NUL in what this end sends: the C
	// program reads the version with atof and never sees it; a verbsrt
	// peer learns that the bytes it receives follow verbsrt's pattern
	// and checks them.
	ptPeerMark = "verbsrt"
)

// ptDest is what perftest's ends tell each other of a QP (struct
// pingpong_dest): where to send, and the buffer the peer may access.
type ptDest struct {
	LID      uint16
	OutReads uint32 // outstanding READs and atomics it takes as responder
	QPN      uint32
	PSN      uint32
	RKey     uint32
	VAddr    uint64
	GID      verbs.GID
	SRQN     uint32 // XRC and DC only; 0 here
}

// ptKeysSize is the size of the keys message with or without a GID.
func ptKeysSize(withGID bool) int {
	if withGID {
		return ptKeyMsgSizeGID
	}
	return ptKeyMsgSize
}

// marshal formats d as KEY_PRINT_FMT ("%04x:%04x:%06x:%06x:%08x:%016llx:
// %08x") or, with a GID, KEY_PRINT_FMT_GID (the 16 GID bytes as %02x
// between vaddr and srqn, and a final colon), NUL-padded to the message
// size.
func (d ptDest) marshal(withGID bool) []byte {
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
	msg := make([]byte, ptKeysSize(withGID))
	copy(msg, b.String())
	return msg
}

// parsePtDest parses a keys message as the C program does: hexadecimal
// fields separated by colons, up to the first NUL.
func parsePtDest(msg []byte, withGID bool) (ptDest, error) {
	var d ptDest
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
	d = ptDest{LID: uint16(vals[0]), OutReads: uint32(vals[1]), QPN: uint32(vals[2]), PSN: uint32(vals[3]),
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

// ptReport is one end's result as perftest's ends exchange it (struct
// bw_report_data): MB/s are 2^20 bytes a second, the rate in Mpps.
type ptReport struct {
	Size, Iters           uint64
	BWPeak, BWAvg, MsgAvg float64
}

// ptHello is what the first exchanges settle: the peer's version and the
// values both ends then use.
type ptHello struct {
	PeerVersion string
	Verbsrt     bool // the peer is verbsrt (ptPeerMark)
	CycleBuffer int
	CacheLine   int
	MTU         verbs.MTU
}

// ptConn is one end of perftest's control connection.
type ptConn struct {
	c      net.Conn
	client bool
}

// xchg sends mine and returns the peer's n bytes, in the order of the
// end: the client writes first, the server reads first.
func (p *ptConn) xchg(mine []byte, n int) ([]byte, error) {
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

// ptAtof reads a version as C's atof does: the longest leading decimal
// number, 0 when there is none.
func ptAtof(s string) float64 {
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

// ptVersionMsg is the version this end sends: "6.06", its NUL, the mark.
func ptVersionMsg() []byte {
	msg := make([]byte, ptVersionSize)
	copy(msg, ptVersion+"\x00"+ptPeerMark)
	return msg
}

// hello runs the exchanges before the keys: versions, sys data and MTU,
// with this end's page size, cache line size and port MTU.
func (p *ptConn) hello(cycleBuffer, cacheLine int, mtu verbs.MTU) (ptHello, error) {
	h := ptHello{CycleBuffer: cycleBuffer, CacheLine: cacheLine, MTU: mtu}
	rv, err := p.xchg(ptVersionMsg(), ptVersionSize)
	if err != nil {
		return h, fmt.Errorf("perftest version exchange: %w", err)
	}
	v, rest, _ := bytes.Cut(rv, []byte{0})
	h.PeerVersion = string(v)
	h.Verbsrt = bytes.HasPrefix(rest, []byte(ptPeerMark))
	ver := ptAtof(h.PeerVersion)
	if ver < ptMinVersion {
		return h, fmt.Errorf("perftest version %q: this end speaks %s, which needs a peer of %.2f or later", h.PeerVersion, ptVersion, ptMinVersion)
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
func (p *ptConn) handshake(mine ptDest, withGID bool) (ptDest, error) {
	b, err := p.xchg(mine.marshal(withGID), ptKeysSize(withGID))
	if err != nil {
		return ptDest{}, fmt.Errorf("perftest keys exchange: %w", err)
	}
	return parsePtDest(b, withGID)
}

// reports exchanges the results, each value on its own.
func (p *ptConn) reports(mine ptReport) (ptReport, error) {
	var r ptReport
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
func (p *ptConn) close(mine ptDest, withGID bool) error {
	if _, err := p.handshake(mine, withGID); err != nil {
		return err
	}
	_, err := p.c.Write([]byte(ptDone))
	return err
}

// closeOnDone closes c when ctx ends, so that a read or write blocked on
// the peer returns; the returned function stops watching.
func closeOnDone(ctx context.Context, c net.Conn) func() bool {
	return context.AfterFunc(ctx, func() { c.Close() })
}

// ptV4Mapped says whether gid is an IPv4-mapped address, as perftest's
// check of the two ends' GID types (ctx_check_gid_compatibility) reads it.
func ptV4Mapped(gid verbs.GID) bool {
	var prefix = [12]byte{10: 0xff, 11: 0xff}
	return [12]byte(gid[:12]) == prefix
}

var errPtGIDTypes = errors.New("perftest: one end's GID is IPv4-mapped and the other's is not (give both ends GIDs of one IP version)")
