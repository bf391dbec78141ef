package credit

import (
	"bytes"
	"testing"
)

// TestHeaderBytes: the headers the protocol sends have the layout of the
// specification, byte for byte: peers of earlier builds and of other
// processes read them.
func TestHeaderBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		f    Fields
		want Header
	}{
		{"message", Fields{Credits: 0x01020304, Kind: KindMessage}, Header{1, 2, 3, 4, 0, 0, 0, 0}},
		{"message held back", Fields{Credits: 5, Kind: KindMessage, Backlog: true}, Header{0, 0, 0, 5, 0, 1, 0, 0}},
		{"report", Fields{Credits: 7, Kind: KindCredits}, Header{0, 0, 0, 7, 1, 0, 0, 0}},
		{"window asked", Fields{Credits: 2, Kind: KindCredits, Window: 0x0102}, Header{0, 0, 0, 2, 1, 0, 1, 2}},
		{"credits given back", Fields{Kind: KindCredits, Return: true, Window: 9}, Header{0, 0, 0, 0, 1, 2, 0, 9}},
		{"goodbye", Fields{Credits: 1, Kind: KindGoodbye}, Header{0, 0, 0, 1, 2, 0, 0, 0}},
	} {
		if got := Encode(c.f); got != c.want {
			t.Errorf("%s: Encode(%+v) = %x, want %x", c.name, c.f, got, c.want)
		}
		back, err := Decode(c.want[:], HeaderSize)
		if err != nil || back != c.f {
			t.Errorf("%s: Decode(%x) = %+v, %v; want %+v", c.name, c.want, back, err, c.f)
		}
	}
	h := Encode(Fields{Credits: 3})
	h.SetBacklog()
	if want := Encode(Fields{Credits: 3, Backlog: true}); h != want {
		t.Errorf("SetBacklog: %x, want %x", h, want)
	}
}

// TestGoodbyeWithData: a goodbye followed by data (the code and reason of
// the runtime's CloseWithError) decodes as the goodbye it is, whatever its
// length: a peer that reads the header alone and drops what follows sees
// a goodbye.
func TestGoodbyeWithData(t *testing.T) {
	h := Encode(Fields{Credits: 1, Kind: KindGoodbye})
	b := append(h[:], 0, 0, 0, 42, 'b', 'y', 'e')
	f, err := Decode(b, uint32(len(b)))
	if err != nil || f != (Fields{Credits: 1, Kind: KindGoodbye}) {
		t.Fatalf("Decode(%x) = %+v, %v; want the goodbye", b, f, err)
	}
}

// FuzzDecode: Decode never panics, refuses a SEND shorter than the header,
// an unknown kind and unknown flags, and reads back what Encode wrote.
func FuzzDecode(f *testing.F) {
	for _, kind := range []byte{0, 1, 2, 3, 0xff} {
		h := Header{0xde, 0xad, 0xbe, 0xef, kind, flagBacklog | flagReturn, 0, 9}
		f.Add(h[:], uint32(HeaderSize))
		f.Add(h[:], uint32(HeaderSize-1))
	}
	f.Fuzz(func(t *testing.T, b []byte, n uint32) {
		var hdr Header
		copy(hdr[:], b)
		fs, err := Decode(hdr[:], n)
		valid := n >= HeaderSize && Kind(hdr[offKind]) <= KindGoodbye && hdr[offFlags]&^(flagBacklog|flagReturn) == 0
		if (err == nil) != valid {
			t.Fatalf("Decode(%x, %d) = %v, valid: %v", hdr, n, err, valid)
		}
		if err != nil {
			return
		}
		if back := Encode(fs); !bytes.Equal(back[:], hdr[:]) {
			t.Fatalf("Decode(%x) = %+v: encoded back %x", hdr, fs, back)
		}
		if fs.Asked() != 0 && fs.Returned() != 0 {
			t.Fatalf("Decode(%x) = %+v: asks for a window and gives credits back", hdr, fs)
		}
	})
}
