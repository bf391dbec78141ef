package credit

import (
	"encoding/binary"
	"fmt"
	"math"
)

// HeaderSize is the length of the header in front of every SEND: one
// scratch slot of the sending actor, and a multiple of 8, so that data
// received behind it in the same buffer stays 8-byte aligned.
const HeaderSize = 8

// Header is the wire form of a SEND's header (doc.go, "The header").
type Header [HeaderSize]byte

// Kind is what a SEND carries besides its credits.
type Kind byte

// The kinds of SEND.
const (
	KindMessage Kind = 0 // data for the application (possibly none), and immediate data if any
	KindCredits Kind = 1 // a credit report: the header alone
	KindGoodbye Kind = 2 // a credit report that also says the sender closed its end
)

// Offsets of the header's fields, and its flags.
const (
	offCredits = 0
	offKind    = 4
	offFlags   = 5
	offWindow  = 6

	flagBacklog = 1 << 0 // the sender was held back by credits
	flagReturn  = 1 << 1 // Window is credits given back, not a window asked for
)

// Fields are a header's content.
type Fields struct {
	Credits uint32 // receives its sender granted since its last report
	Kind    Kind
	Backlog bool // its sender had more to send than its credits allowed
	// Return says Window is credits its sender gives back, not a window
	// it asks for.
	Return bool
	// Window is the window a credit report asks for, or with Return the
	// credits given back; 0 for neither.
	Window uint16
}

// Asked is the window the header asks for, 0 for none.
func (f Fields) Asked() int {
	if f.Return {
		return 0
	}
	return int(f.Window)
}

// Returned is the credits the header gives back.
func (f Fields) Returned() int {
	if !f.Return {
		return 0
	}
	return int(f.Window)
}

// clamp16 is n within the header's 16-bit window field.
func clamp16(n int64) uint16 { return uint16(max(0, min(n, math.MaxUint16))) }

// Encode returns the header of f.
func Encode(f Fields) (h Header) {
	binary.BigEndian.PutUint32(h[offCredits:], f.Credits)
	h[offKind] = byte(f.Kind)
	if f.Backlog {
		h[offFlags] |= flagBacklog
	}
	if f.Return {
		h[offFlags] |= flagReturn
	}
	binary.BigEndian.PutUint16(h[offWindow:], f.Window)
	return h
}

// SetBacklog flags a stamped header: its sender had more to send than the
// peer's credits allowed.
func (h *Header) SetBacklog() { h[offFlags] |= flagBacklog }

// Decode reads the header of a SEND of n bytes from b (at least
// HeaderSize bytes when n is). It refuses a SEND shorter than the header,
// an unknown kind and unknown flags.
func Decode(b []byte, n uint32) (Fields, error) {
	if n < HeaderSize || len(b) < HeaderSize {
		return Fields{}, fmt.Errorf("a SEND of %d bytes, shorter than the %d-byte header", n, HeaderSize)
	}
	f := Fields{
		Credits: binary.BigEndian.Uint32(b[offCredits:]),
		Kind:    Kind(b[offKind]),
		Backlog: b[offFlags]&flagBacklog != 0,
		Return:  b[offFlags]&flagReturn != 0,
		Window:  binary.BigEndian.Uint16(b[offWindow:]),
	}
	if f.Kind > KindGoodbye {
		return Fields{}, fmt.Errorf("a SEND of unknown kind %d", f.Kind)
	}
	if b[offFlags]&^(flagBacklog|flagReturn) != 0 {
		return Fields{}, fmt.Errorf("a SEND with unknown flags %#x", b[offFlags])
	}
	return f, nil
}
