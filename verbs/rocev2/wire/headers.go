package wire

import (
	"encoding/binary"
	"time"
)

// BTH is the base transport header (IBA 9.2), 12 bytes:
//
//	byte 0      opcode
//	byte 1      SE(1) M(1) PadCnt(2) TVer(4)
//	bytes 2-3   P_Key
//	byte 4      FECN(1) BECN(1) reserved(6)   (RoCE v2: Annex A17.9)
//	bytes 5-7   destination QP
//	byte 8      AckReq(1) reserved(7)
//	bytes 9-11  PSN
type BTH struct {
	Opcode    Opcode
	Solicited bool
	MigReq    bool
	PadCount  uint8 // bytes of pad after the payload, 0-3
	TVer      uint8 // transport header version, 0
	PKey      uint16
	FECN      bool
	BECN      bool
	DestQP    uint32 // 24 bits
	AckReq    bool
	PSN       PSN
}

// DefaultPKey is the default partition's full-member key, what rxe and
// every RoCE NIC use unless configured otherwise.
const DefaultPKey = 0xffff

func (h *BTH) put(b []byte) {
	b[0] = byte(h.Opcode)
	b[1] = bit(h.Solicited, 7) | bit(h.MigReq, 6) | (h.PadCount&3)<<4 | h.TVer&0xf
	binary.BigEndian.PutUint16(b[2:], h.PKey)
	binary.BigEndian.PutUint32(b[4:], h.DestQP&Mask24)
	b[4] = bit(h.FECN, 7) | bit(h.BECN, 6)
	binary.BigEndian.PutUint32(b[8:], uint32(h.PSN)&Mask24)
	b[8] = bit(h.AckReq, 7)
}

func (h *BTH) get(b []byte) {
	h.Opcode = Opcode(b[0])
	h.Solicited = b[1]&0x80 != 0
	h.MigReq = b[1]&0x40 != 0
	h.PadCount = b[1] >> 4 & 3
	h.TVer = b[1] & 0xf
	h.PKey = binary.BigEndian.Uint16(b[2:])
	h.FECN = b[4]&0x80 != 0
	h.BECN = b[4]&0x40 != 0
	h.DestQP = binary.BigEndian.Uint32(b[4:]) & Mask24
	h.AckReq = b[8]&0x80 != 0
	h.PSN = PSN(binary.BigEndian.Uint32(b[8:]) & Mask24)
}

// RETH is the RDMA extended transport header (IBA 9.3.3.3): the remote
// range of a READ or WRITE, 16 bytes.
type RETH struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

func (h *RETH) put(b []byte) {
	binary.BigEndian.PutUint64(b, h.VA)
	binary.BigEndian.PutUint32(b[8:], h.RKey)
	binary.BigEndian.PutUint32(b[12:], h.DMALen)
}

func (h *RETH) get(b []byte) {
	h.VA = binary.BigEndian.Uint64(b)
	h.RKey = binary.BigEndian.Uint32(b[8:])
	h.DMALen = binary.BigEndian.Uint32(b[12:])
}

// AETH is the ACK extended transport header (IBA 9.3.5), 4 bytes: an
// 8-bit syndrome and the 24-bit message sequence number.
type AETH struct {
	Syndrome Syndrome
	MSN      uint32 // 24 bits
}

func (h *AETH) put(b []byte) {
	binary.BigEndian.PutUint32(b, h.MSN&Mask24)
	b[0] = byte(h.Syndrome)
}

func (h *AETH) get(b []byte) {
	h.Syndrome = Syndrome(b[0])
	h.MSN = binary.BigEndian.Uint32(b) & Mask24
}

// Syndrome is the AETH syndrome (IBA 9.7.5.2.1, table 42): bits 6-5 say
// ACK (00), RNR NAK (01) or NAK (11); bits 4-0 are the credit count, the
// RNR timer or the NAK code. Bit 7 is reserved.
type Syndrome uint8

// Syndrome kinds.
const (
	SyndromeACK    Syndrome = 0 << 5
	SyndromeRNRNAK Syndrome = 1 << 5
	SyndromeNAK    Syndrome = 3 << 5
	syndromeKind   Syndrome = 3 << 5
	syndromeValue  Syndrome = 0x1f
)

// NAK codes (IBA table 43).
const (
	NAKPSNSequenceError  uint8 = 0
	NAKInvalidRequest    uint8 = 1
	NAKRemoteAccessError uint8 = 2
	NAKRemoteOpError     uint8 = 3
	NAKInvalidRDRequest  uint8 = 4
)

// CreditsInvalid is the credit count of an ACK whose responder does not
// report end-to-end credits (IBA 9.7.7.2.3: 11111b), what rxe sends.
const CreditsInvalid uint8 = 0x1f

// ACK returns an ACK syndrome with a credit count (CreditsInvalid when
// the responder does not count).
func ACK(credits uint8) Syndrome { return SyndromeACK | Syndrome(credits)&syndromeValue }

// RNRNAK returns an RNR NAK syndrome with the timer's 5-bit code (see
// RNRTimer).
func RNRNAK(timer uint8) Syndrome { return SyndromeRNRNAK | Syndrome(timer)&syndromeValue }

// NAK returns a NAK syndrome with one of the NAK codes.
func NAK(code uint8) Syndrome { return SyndromeNAK | Syndrome(code)&syndromeValue }

// IsACK, IsRNRNAK and IsNAK say which kind s is.
func (s Syndrome) IsACK() bool    { return s&syndromeKind == SyndromeACK }
func (s Syndrome) IsRNRNAK() bool { return s&syndromeKind == SyndromeRNRNAK }
func (s Syndrome) IsNAK() bool    { return s&syndromeKind == SyndromeNAK }

// Value is the low five bits: credits, RNR timer code or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s & syndromeValue) }

// rnrTimerTable is IBA table 45 (9.7.5.2.8), in microseconds: code 0 is
// the longest, 655.36 ms; codes 1-31 grow from 0.01 ms to 491.52 ms.
var rnrTimerTable = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
}

// RNRTimer returns the delay an RNR NAK's 5-bit timer code asks for.
func RNRTimer(code uint8) time.Duration {
	return time.Duration(rnrTimerTable[code&0x1f]) * time.Microsecond
}

// LocalACKTimeout returns the local ACK timeout a QP attribute's 5-bit
// timeout asks for: 4.096 µs * 2^timeout (IBA 9.7.6.1.3). Zero means
// infinite, returned as 0.
func LocalACKTimeout(timeout uint8) time.Duration {
	if timeout == 0 {
		return 0
	}
	return time.Duration(4096<<(timeout&0x1f)) * time.Nanosecond
}

// ImmDt is the immediate data header, 4 bytes carried bit for bit.
type ImmDt struct{ Imm uint32 }

// IETH is the invalidate extended transport header: the rkey a
// SEND_WITH_INVALIDATE invalidates at the responder.
type IETH struct{ RKey uint32 }

// AtomicETH is the atomic extended transport header (IBA 9.3.3.4), 28
// bytes.
type AtomicETH struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64 // swap value of CMP_SWAP, addend of FETCH_ADD
	Compare uint64
}

func (h *AtomicETH) put(b []byte) {
	binary.BigEndian.PutUint64(b, h.VA)
	binary.BigEndian.PutUint32(b[8:], h.RKey)
	binary.BigEndian.PutUint64(b[12:], h.SwapAdd)
	binary.BigEndian.PutUint64(b[20:], h.Compare)
}

func (h *AtomicETH) get(b []byte) {
	h.VA = binary.BigEndian.Uint64(b)
	h.RKey = binary.BigEndian.Uint32(b[8:])
	h.SwapAdd = binary.BigEndian.Uint64(b[12:])
	h.Compare = binary.BigEndian.Uint64(b[20:])
}

// AtomicAckETH carries the original remote value of an atomic (IBA
// 9.3.5.3), 8 bytes.
type AtomicAckETH struct{ OrigRemData uint64 }

// DETH is the datagram extended transport header (IBA 9.3.2), 8 bytes:
// the Q_Key, 8 reserved bits and the source QP.
type DETH struct {
	QKey  uint32
	SrcQP uint32 // 24 bits
}

func (h *DETH) put(b []byte) {
	binary.BigEndian.PutUint32(b, h.QKey)
	binary.BigEndian.PutUint32(b[4:], h.SrcQP&Mask24)
}

func (h *DETH) get(b []byte) {
	h.QKey = binary.BigEndian.Uint32(b)
	h.SrcQP = binary.BigEndian.Uint32(b[4:]) & Mask24
}

func bit(v bool, n uint) byte {
	if v {
		return 1 << n
	}
	return 0
}
