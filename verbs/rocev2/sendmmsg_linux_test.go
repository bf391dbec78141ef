//go:build linux && (amd64 || arm64)

package rocev2

import (
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"testing"
)

// TestSendmmsgWritesAll checks that sendmmsg itself writes a whole batch
// in order, so writeMany's one-by-one fallback is not what the batch
// tests exercise on Linux.
func TestSendmmsgWritesAll(t *testing.T) {
	a, b := listenPair(t, nil)
	r := newRecorder()
	b.Register(7, r, AnySource)
	h := a.header(a.LocalAddr(), b.LocalAddr())
	var out []outPacket
	for i := range 3 {
		p, err := sendOnly(wire.PSN(10+i), 7).Append(nil, &h)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, outPacket{b.LocalAddr(), p})
	}
	if n, err := a.sendmmsg(out); n != 3 || err != nil {
		t.Fatalf("sendmmsg wrote %d of 3: %v", n, err)
	}
	r.wait(t, 3)
	if got := r.psns(); len(got) != 3 || got[0] != 10 || got[2] != 12 {
		t.Fatalf("received PSNs %v", got)
	}
}
