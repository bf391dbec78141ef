package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Errors of the codec, matched with errors.Is; the returned errors wrap
// them with the offending values.
var (
	// ErrShort is returned when a packet ends before its headers, its
	// pad or its ICRC do.
	ErrShort = errors.New("rocev2: packet too short")
	// ErrOpcode is returned for an opcode the codec does not know.
	ErrOpcode = errors.New("rocev2: unknown opcode")
	// ErrICRC is returned when a packet's ICRC does not match.
	ErrICRC = errors.New("rocev2: ICRC mismatch")
	// ErrHeader is returned for a header field out of range: a transport
	// version other than 0, a pad on an opcode without payload, a payload
	// longer than a packet may carry.
	ErrHeader = errors.New("rocev2: invalid header")
)

// MaxPayload is the largest payload this codec encodes: a 4096-byte path
// MTU, the largest IB MTU.
const MaxPayload = 4096

// Packet is one RoCE v2 packet above UDP: the BTH, the extension headers
// its opcode carries (the others are ignored when encoding and zeroed
// when decoding) and the payload. Decode makes Payload alias the buffer
// decoded.
type Packet struct {
	BTH          BTH
	RETH         RETH
	AETH         AETH
	ImmDt        ImmDt
	IETH         IETH
	AtomicETH    AtomicETH
	AtomicAckETH AtomicAckETH
	DETH         DETH
	Payload      []byte
}

func (p *Packet) String() string {
	return fmt.Sprintf("%v qp=%#x psn=%d ack=%v len=%d", p.BTH.Opcode, p.BTH.DestQP, p.BTH.PSN,
		p.BTH.AckReq, len(p.Payload))
}

// EncodedLen is the UDP payload length of p: headers, payload, pad, ICRC.
func (p *Packet) EncodedLen() int {
	return p.BTH.Opcode.HeaderLen() + padded(len(p.Payload)) + ICRCLen
}

func padded(n int) int { return (n + 3) &^ 3 }

// Append encodes p after dst and returns the extended slice. It sets the
// BTH's pad count from the payload's length, and computes the ICRC for
// the IP and UDP header h (nil leaves the ICRC zero, for a caller that
// fills it later with SealICRC).
func (p *Packet) Append(dst []byte, h *IPHeader) ([]byte, error) {
	op := p.BTH.Opcode
	if !op.Valid() {
		return dst, fmt.Errorf("%w %#02x", ErrOpcode, uint8(op))
	}
	if len(p.Payload) > 0 && !op.HasPayload() {
		return dst, fmt.Errorf("%w: %v carries no payload, got %d bytes", ErrHeader, op, len(p.Payload))
	}
	if len(p.Payload) > MaxPayload {
		return dst, fmt.Errorf("%w: payload %d bytes > %d", ErrHeader, len(p.Payload), MaxPayload)
	}
	start := len(dst)
	n := p.EncodedLen()
	dst = grow(dst, n)
	b := dst[start:]
	clear(b)
	p.BTH.PadCount = uint8(padded(len(p.Payload)) - len(p.Payload))
	p.BTH.put(b)
	off := BTHLen
	f := opTable[op].flags
	if f&hasDETH != 0 {
		p.DETH.put(b[off:])
		off += DETHLen
	}
	if f&hasRETH != 0 {
		p.RETH.put(b[off:])
		off += RETHLen
	}
	if f&hasAtomicETH != 0 {
		p.AtomicETH.put(b[off:])
		off += AtomicETHLen
	}
	if f&hasAETH != 0 {
		p.AETH.put(b[off:])
		off += AETHLen
	}
	if f&hasAtomicAckETH != 0 {
		binary.BigEndian.PutUint64(b[off:], p.AtomicAckETH.OrigRemData)
		off += AtomicAckETHLen
	}
	if f&hasImmDt != 0 {
		binary.BigEndian.PutUint32(b[off:], p.ImmDt.Imm)
		off += ImmDtLen
	}
	if f&hasIETH != 0 {
		binary.BigEndian.PutUint32(b[off:], p.IETH.RKey)
		off += IETHLen
	}
	copy(b[off:], p.Payload)
	if h != nil {
		SealICRC(b, h)
	}
	return dst, nil
}

// SealICRC computes and writes the ICRC of an encoded packet b (whose
// last four bytes are the ICRC's place) for the headers h.
func SealICRC(b []byte, h *IPHeader) {
	if len(b) < BTHLen+ICRCLen {
		return
	}
	PutICRC(b[len(b)-ICRCLen:], ICRC(h, b[:len(b)-ICRCLen]))
}

// CheckICRC reports whether the ICRC of the encoded packet b matches the
// headers h; an error wrapping ErrICRC or ErrShort if not.
func CheckICRC(b []byte, h *IPHeader) error {
	if len(b) < BTHLen+ICRCLen {
		return fmt.Errorf("%w: %d bytes", ErrShort, len(b))
	}
	want := ICRC(h, b[:len(b)-ICRCLen])
	if got := GetICRC(b[len(b)-ICRCLen:]); got != want {
		return fmt.Errorf("%w: got %08x, want %08x", ErrICRC, got, want)
	}
	return nil
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// Decode parses b, a UDP payload (BTH through ICRC), into p. It checks
// the lengths and header fields, not the ICRC (CheckICRC does, for the
// headers the packet came with). p.Payload aliases b.
func (p *Packet) Decode(b []byte) error {
	*p = Packet{}
	if len(b) < BTHLen+ICRCLen {
		return fmt.Errorf("%w: %d bytes", ErrShort, len(b))
	}
	p.BTH.get(b)
	op := p.BTH.Opcode
	if !op.Valid() {
		return fmt.Errorf("%w %#02x", ErrOpcode, uint8(op))
	}
	if p.BTH.TVer != 0 {
		return fmt.Errorf("%w: transport version %d", ErrHeader, p.BTH.TVer)
	}
	info := opTable[op]
	if len(b) < info.hdrLen+ICRCLen {
		return fmt.Errorf("%w: %v needs %d header bytes, packet has %d", ErrShort, op, info.hdrLen, len(b)-ICRCLen)
	}
	if len(b)%4 != 0 {
		// Headers, padded payload and ICRC are whole 32-bit words.
		return fmt.Errorf("%w: length %d is not a multiple of 4", ErrHeader, len(b))
	}
	payload := len(b) - info.hdrLen - ICRCLen
	pad := int(p.BTH.PadCount)
	if payload < pad {
		return fmt.Errorf("%w: pad %d > %d bytes after the headers", ErrShort, pad, payload)
	}
	if payload > 0 && !op.HasPayload() {
		return fmt.Errorf("%w: %v with %d bytes of payload", ErrHeader, op, payload)
	}
	if payload-pad > MaxPayload {
		return fmt.Errorf("%w: payload %d bytes > %d", ErrHeader, payload-pad, MaxPayload)
	}
	off := BTHLen
	f := info.flags
	if f&hasDETH != 0 {
		p.DETH.get(b[off:])
		off += DETHLen
	}
	if f&hasRETH != 0 {
		p.RETH.get(b[off:])
		off += RETHLen
	}
	if f&hasAtomicETH != 0 {
		p.AtomicETH.get(b[off:])
		off += AtomicETHLen
	}
	if f&hasAETH != 0 {
		p.AETH.get(b[off:])
		off += AETHLen
	}
	if f&hasAtomicAckETH != 0 {
		p.AtomicAckETH.OrigRemData = binary.BigEndian.Uint64(b[off:])
		off += AtomicAckETHLen
	}
	if f&hasImmDt != 0 {
		p.ImmDt.Imm = binary.BigEndian.Uint32(b[off:])
		off += ImmDtLen
	}
	if f&hasIETH != 0 {
		p.IETH.RKey = binary.BigEndian.Uint32(b[off:])
		off += IETHLen
	}
	p.Payload = b[off : off+payload-pad : off+payload-pad]
	return nil
}
