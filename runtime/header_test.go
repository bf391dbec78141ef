package runtime

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseHeader: parseHeader never panics, refuses a SEND shorter than
// the header and an unknown kind with ErrProtocol, and reads back what
// makeHeader wrote.
func FuzzParseHeader(f *testing.F) {
	for _, kind := range []byte{kindMessage, kindCredits, kindGoodbye, 3, 0xff} {
		h := makeHeader(0xdeadbeef, kind)
		f.Add(h[:], uint32(headerSize))
		f.Add(h[:], uint32(headerSize-1))
	}
	f.Fuzz(func(t *testing.T, b []byte, n uint32) {
		var hdr [headerSize]byte
		copy(hdr[:], b)
		credits, kind, err := parseHeader(hdr[:], n)
		valid := n >= headerSize && hdr[headerKind] <= kindGoodbye
		if (err == nil) != valid || (err != nil && !errors.Is(err, ErrProtocol)) {
			t.Fatalf("parseHeader(%x, %d) = %v, valid: %v", hdr, n, err, valid)
		}
		if err != nil {
			return
		}
		if back := makeHeader(credits, kind); !bytes.Equal(back[:headerKind+1], hdr[:headerKind+1]) {
			t.Fatalf("parseHeader(%x) = %d credits, kind %d: makeHeader gives %x", hdr, credits, kind, back)
		}
	})
}
