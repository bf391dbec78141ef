package runtime

import (
	"encoding/binary"
	"fmt"

	"github.com/verbsrt/verbsrt/verbs"
)

// RemoteRef names exposed memory of the peer (Exposure.RemoteRef): its
// address, the key the device checks and its length. It is plain data: send
// it to the peer as bytes (MarshalBinary) and decode it there
// (UnmarshalBinary). The device, not this value, decides what it may reach:
// an access outside what the exposure granted fails.
type RemoteRef struct {
	Addr uint64
	RKey uint32
	Len  uint64
}

// At returns the reference off bytes further in. It panics (with an
// error matching verbs.ErrInvalidArgument) when off is outside [0, Len].
func (r RemoteRef) At(off int) RemoteRef {
	if off < 0 || uint64(off) > r.Len {
		panic(fmt.Errorf("verbsrt: RemoteRef.At(%d) outside a reference of %d bytes: %w", off, r.Len, verbs.ErrInvalidArgument))
	}
	return RemoteRef{Addr: r.Addr + uint64(off), RKey: r.RKey, Len: r.Len - uint64(off)}
}

// Slice returns the reference to bytes [off, off+n). It panics (with an
// error matching verbs.ErrInvalidArgument) when the range is outside the
// reference.
func (r RemoteRef) Slice(off, n int) RemoteRef {
	if off < 0 || n < 0 || uint64(off) > r.Len || uint64(n) > r.Len-uint64(off) {
		panic(fmt.Errorf("verbsrt: RemoteRef.Slice(%d, %d) outside a reference of %d bytes: %w", off, n, r.Len, verbs.ErrInvalidArgument))
	}
	return RemoteRef{Addr: r.Addr + uint64(off), RKey: r.RKey, Len: uint64(n)}
}

func (r RemoteRef) rdma() verbs.RDMA { return verbs.RDMA{RemoteAddr: r.Addr, RKey: r.RKey} }

func (r RemoteRef) String() string { return fmt.Sprintf("%#x+%d/rkey %#x", r.Addr, r.Len, r.RKey) }

// The encoding of a RemoteRef: a version byte, then the address, the key
// and the length, big-endian.
const (
	remoteRefV1   = 1
	remoteRefSize = 1 + 8 + 4 + 8
)

// AppendBinary appends the reference's encoding to b.
func (r RemoteRef) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, remoteRefV1)
	b = binary.BigEndian.AppendUint64(b, r.Addr)
	b = binary.BigEndian.AppendUint32(b, r.RKey)
	return binary.BigEndian.AppendUint64(b, r.Len), nil
}

// MarshalBinary encodes the reference in 21 bytes.
func (r RemoteRef) MarshalBinary() ([]byte, error) {
	return r.AppendBinary(make([]byte, 0, remoteRefSize))
}

// UnmarshalBinary decodes what MarshalBinary encoded. It refuses another
// length, an unknown version, and a range that wraps around the address
// space.
func (r *RemoteRef) UnmarshalBinary(b []byte) error {
	if len(b) != remoteRefSize {
		return fmt.Errorf("verbsrt: a RemoteRef is %d bytes, got %d: %w", remoteRefSize, len(b), verbs.ErrInvalidArgument)
	}
	if b[0] != remoteRefV1 {
		return fmt.Errorf("verbsrt: RemoteRef encoding version %d, want %d: %w", b[0], remoteRefV1, verbs.ErrInvalidArgument)
	}
	ref := RemoteRef{Addr: binary.BigEndian.Uint64(b[1:]), RKey: binary.BigEndian.Uint32(b[9:]), Len: binary.BigEndian.Uint64(b[13:])}
	if ref.Addr+ref.Len < ref.Addr {
		return fmt.Errorf("verbsrt: RemoteRef %v wraps around the address space: %w", ref, verbs.ErrInvalidArgument)
	}
	*r = ref
	return nil
}
