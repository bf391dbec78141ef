package rocev2

import (
	"crypto/rand"
	"encoding/binary"
)

// randomUint32 returns 32 bits from the operating system's random source:
// what the transport draws QPNs and memory keys from, so that a third
// party that saw some cannot predict the next.
func randomUint32() uint32 {
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand.Read's contract)
	return binary.NativeEndian.Uint32(b[:])
}
