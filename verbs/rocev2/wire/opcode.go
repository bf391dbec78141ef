package wire

import "fmt"

// Opcode is the BTH opcode (IBA 9.2.1, table 35): the transport service in
// the top three bits (RC 000, UC 001, RD 010, UD 011, CNP 100) and the
// operation in the low five.
type Opcode uint8

// RC opcodes (service 000).
const (
	RCSendFirst          Opcode = 0x00
	RCSendMiddle         Opcode = 0x01
	RCSendLast           Opcode = 0x02
	RCSendLastImm        Opcode = 0x03
	RCSendOnly           Opcode = 0x04
	RCSendOnlyImm        Opcode = 0x05
	RCWriteFirst         Opcode = 0x06
	RCWriteMiddle        Opcode = 0x07
	RCWriteLast          Opcode = 0x08
	RCWriteLastImm       Opcode = 0x09
	RCWriteOnly          Opcode = 0x0a
	RCWriteOnlyImm       Opcode = 0x0b
	RCReadRequest        Opcode = 0x0c
	RCReadResponseFirst  Opcode = 0x0d
	RCReadResponseMiddle Opcode = 0x0e
	RCReadResponseLast   Opcode = 0x0f
	RCReadResponseOnly   Opcode = 0x10
	RCAcknowledge        Opcode = 0x11
	RCAtomicAcknowledge  Opcode = 0x12
	RCCompareSwap        Opcode = 0x13
	RCFetchAdd           Opcode = 0x14
	RCSendLastInvalidate Opcode = 0x16
	RCSendOnlyInvalidate Opcode = 0x17
	UDSendOnly           Opcode = 0x64
	UDSendOnlyImm        Opcode = 0x65
	CNP                  Opcode = 0x81 // RoCE v2 congestion notification (Annex A17.9.3)
	maxOpcodeTable              = 256
	cnpPaddingLen               = 16
)

// The transport service of an opcode: ServiceMask selects it, the others
// are its values besides RC's 0.
const (
	ServiceMask          Opcode = 0xe0
	ServiceUC, ServiceUD Opcode = 0x20, 0x60
	ServiceCNP           Opcode = 0x80
)

// Header lengths in bytes (IBA 9.2-9.4).
const (
	BTHLen, RETHLen   = 12, 16
	AETHLen, ImmDtLen = 4, 4
	AtomicETHLen      = 28
	AtomicAckETHLen   = 8
	DETHLen, IETHLen  = 8, 4
)

// Header flags: which extension headers an opcode carries, and where in a
// message its packet stands.
type opFlags uint16

const (
	hasRETH opFlags = 1 << iota
	hasAETH
	hasImmDt
	hasAtomicETH
	hasAtomicAckETH
	hasDETH
	hasIETH
	hasPayload
	isFirst
	isMiddle
	isLast
	isRequest  // sent by a requester (consumes a PSN at the responder)
	isResponse // sent by a responder (ACKs, read responses)
	opValid
)

// opInfo describes one opcode.
type opInfo struct {
	name  string
	flags opFlags
	// hdrLen is the length of the BTH and its extension headers.
	hdrLen int
}

// opTable is indexed by opcode; the zero entry (no opValid) marks an
// opcode this implementation does not know. The extension headers follow
// the BTH in the order of IBA 9.2 (DETH, RETH, AtomicETH, AETH,
// AtomicAckETH, ImmDt, IETH), which is the order of the flag bits used by
// layout.
var opTable = func() [maxOpcodeTable]opInfo {
	var t [maxOpcodeTable]opInfo
	set := func(o Opcode, name string, f opFlags) {
		n := BTHLen
		if f&hasDETH != 0 {
			n += DETHLen
		}
		if f&hasRETH != 0 {
			n += RETHLen
		}
		if f&hasAtomicETH != 0 {
			n += AtomicETHLen
		}
		if f&hasAETH != 0 {
			n += AETHLen
		}
		if f&hasAtomicAckETH != 0 {
			n += AtomicAckETHLen
		}
		if f&hasImmDt != 0 {
			n += ImmDtLen
		}
		if f&hasIETH != 0 {
			n += IETHLen
		}
		t[o] = opInfo{name: name, flags: f | opValid, hdrLen: n}
	}
	req, resp, pay := isRequest, isResponse, hasPayload
	only := isFirst | isLast
	set(RCSendFirst, "RC_SEND_FIRST", req|pay|isFirst)
	set(RCSendMiddle, "RC_SEND_MIDDLE", req|pay|isMiddle)
	set(RCSendLast, "RC_SEND_LAST", req|pay|isLast)
	set(RCSendLastImm, "RC_SEND_LAST_WITH_IMMEDIATE", req|pay|isLast|hasImmDt)
	set(RCSendOnly, "RC_SEND_ONLY", req|pay|only)
	set(RCSendOnlyImm, "RC_SEND_ONLY_WITH_IMMEDIATE", req|pay|only|hasImmDt)
	set(RCWriteFirst, "RC_RDMA_WRITE_FIRST", req|pay|isFirst|hasRETH)
	set(RCWriteMiddle, "RC_RDMA_WRITE_MIDDLE", req|pay|isMiddle)
	set(RCWriteLast, "RC_RDMA_WRITE_LAST", req|pay|isLast)
	set(RCWriteLastImm, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", req|pay|isLast|hasImmDt)
	set(RCWriteOnly, "RC_RDMA_WRITE_ONLY", req|pay|only|hasRETH)
	set(RCWriteOnlyImm, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", req|pay|only|hasRETH|hasImmDt)
	set(RCReadRequest, "RC_RDMA_READ_REQUEST", req|only|hasRETH)
	set(RCReadResponseFirst, "RC_RDMA_READ_RESPONSE_FIRST", resp|pay|isFirst|hasAETH)
	set(RCReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", resp|pay|isMiddle)
	set(RCReadResponseLast, "RC_RDMA_READ_RESPONSE_LAST", resp|pay|isLast|hasAETH)
	set(RCReadResponseOnly, "RC_RDMA_READ_RESPONSE_ONLY", resp|pay|only|hasAETH)
	set(RCAcknowledge, "RC_ACKNOWLEDGE", resp|only|hasAETH)
	set(RCAtomicAcknowledge, "RC_ATOMIC_ACKNOWLEDGE", resp|only|hasAETH|hasAtomicAckETH)
	set(RCCompareSwap, "RC_COMPARE_SWAP", req|only|hasAtomicETH)
	set(RCFetchAdd, "RC_FETCH_ADD", req|only|hasAtomicETH)
	set(RCSendLastInvalidate, "RC_SEND_LAST_WITH_INVALIDATE", req|pay|isLast|hasIETH)
	set(RCSendOnlyInvalidate, "RC_SEND_ONLY_WITH_INVALIDATE", req|pay|only|hasIETH)
	set(UDSendOnly, "UD_SEND_ONLY", req|pay|only|hasDETH)
	set(UDSendOnlyImm, "UD_SEND_ONLY_WITH_IMMEDIATE", req|pay|only|hasDETH|hasImmDt)
	// UC has the SEND and WRITE opcodes of RC under service 001.
	for o := RCSendFirst; o <= RCWriteOnlyImm; o++ {
		t[o|ServiceUC] = t[o]
		t[o|ServiceUC].name = "UC" + t[o].name[2:]
	}
	// A CNP carries 16 reserved bytes after the BTH, which the codec
	// treats as payload.
	set(CNP, "CNP", pay|only)
	return t
}()

// Valid reports whether the codec knows o.
func (o Opcode) Valid() bool { return opTable[o].flags&opValid != 0 }

func (o Opcode) String() string {
	if o.Valid() {
		return opTable[o].name
	}
	return fmt.Sprintf("Opcode(%#02x)", uint8(o))
}

// HeaderLen is the length of the BTH and the extension headers o carries.
func (o Opcode) HeaderLen() int { return opTable[o].hdrLen }

// IsRequest reports whether a requester sends o.
func (o Opcode) IsRequest() bool { return opTable[o].flags&isRequest != 0 }

// IsResponse reports whether a responder sends o (ACKs, read responses).
func (o Opcode) IsResponse() bool { return opTable[o].flags&isResponse != 0 }

// IsFirst reports whether o starts a message (FIRST or ONLY).
func (o Opcode) IsFirst() bool { return opTable[o].flags&isFirst != 0 }

// IsLast reports whether o ends a message (LAST or ONLY).
func (o Opcode) IsLast() bool { return opTable[o].flags&isLast != 0 }

// HasPayload reports whether o may carry payload.
func (o Opcode) HasPayload() bool { return opTable[o].flags&hasPayload != 0 }

// IsSend reports whether o is part of a SEND message (RC or UD).
func (o Opcode) IsSend() bool {
	switch o {
	case RCSendFirst, RCSendMiddle, RCSendLast, RCSendLastImm, RCSendOnly, RCSendOnlyImm,
		RCSendLastInvalidate, RCSendOnlyInvalidate, UDSendOnly, UDSendOnlyImm:
		return true
	}
	return false
}

// IsWrite reports whether o is part of an RDMA WRITE message.
func (o Opcode) IsWrite() bool { return o >= RCWriteFirst && o <= RCWriteOnlyImm }

// IsReadResponse reports whether o is an RDMA READ response packet.
func (o Opcode) IsReadResponse() bool {
	return o >= RCReadResponseFirst && o <= RCReadResponseOnly
}

// HasImm reports whether o carries an ImmDt.
func (o Opcode) HasImm() bool { return opTable[o].flags&hasImmDt != 0 }
