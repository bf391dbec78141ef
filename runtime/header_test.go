package runtime

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseHeader: parseHeader never panics, refuses a SEND shorter than
// the header, an unknown kind and unknown flags with ErrProtocol, and reads
// back what makeHeader, MarkBacklog and Want wrote.
func FuzzParseHeader(f *testing.F) {
	for _, kind := range []byte{kindMessage, kindCredits, kindGoodbye, 3, 0xff} {
		h := makeHeader(0xdeadbeef, kind)
		f.Add(h[:], uint32(headerSize))
		f.Add(h[:], uint32(headerSize-1))
	}
	f.Fuzz(func(t *testing.T, b []byte, n uint32) {
		var hdr [headerSize]byte
		copy(hdr[:], b)
		h, err := parseHeader(hdr[:], n)
		valid := n >= headerSize && hdr[headerKind] <= kindGoodbye && hdr[headerFlags]&^(flagBacklog|flagReturn) == 0
		if (err == nil) != valid || (err != nil && !errors.Is(err, ErrProtocol)) {
			t.Fatalf("parseHeader(%x, %d) = %v, valid: %v", hdr, n, err, valid)
		}
		if err != nil {
			return
		}
		back := makeHeader(h.credits, h.kind)
		if h.backlog {
			(&recvSide{}).MarkBacklog(&back)
		}
		w := h.want
		if hdr[headerFlags]&flagReturn != 0 {
			back[headerFlags] |= flagReturn
			w = h.returned
		}
		back[headerWant], back[headerWant+1] = byte(w>>8), byte(w)
		if !bytes.Equal(back[:], hdr[:]) {
			t.Fatalf("parseHeader(%x) = %+v: written back %x", hdr, h, back)
		}
	})
}
