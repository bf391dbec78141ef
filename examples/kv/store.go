package main

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/verbsrt/verbsrt/runtime"
)

// Slot layout. Every slot is slotSize bytes (a multiple of 8, at least
// minSlotSize) of one registered region:
//
//	[0, 8)   version: even = unlocked, odd = locked. Only atomics change it.
//	[8, 16)  stamp:   the version the value below was committed under
//	[16, 24) counter: how many updates the slot has committed
//	[24, n)  fill:    bytes derived from the slot index and the counter
//
// A committed slot at version v has stamp v and counter v/2 (each update
// adds 2 to the version and 1 to the counter) and the fill of that counter.
// The words are in host byte order: the device runs atomics on host-order
// words, and every peer here is this program.
const (
	offVersion  = 0
	offStamp    = 8
	offCounter  = 16
	offFill     = 24
	minSlotSize = 32
)

var ne = binary.NativeEndian

// errLocked is what checkSlot reports for a slot an update holds.
var errLocked = errors.New("slot locked")

// fillByte is byte i of a slot's value: a torn or misplaced value fails
// the check.
func fillByte(slot int, counter uint64, i int) byte {
	return byte(uint64(slot)*131 + counter*7 + uint64(i))
}

// putValue writes the value of slot committed under version stamp with
// counter into the slot image s (everything after the version word).
func putValue(s []byte, slot int, stamp, counter uint64) {
	ne.PutUint64(s[offStamp:], stamp)
	ne.PutUint64(s[offCounter:], counter)
	for i := offFill; i < len(s); i++ {
		s[i] = fillByte(slot, counter, i)
	}
}

// checkValue reports whether the value in the slot image s is the one
// committed under version v.
func checkValue(s []byte, slot int, v uint64) error {
	if stamp := ne.Uint64(s[offStamp:]); stamp != v {
		return fmt.Errorf("slot %d: stamp %d, want %d", slot, stamp, v)
	}
	counter := ne.Uint64(s[offCounter:])
	if counter != v/2 {
		return fmt.Errorf("slot %d: counter %d at version %d, want %d", slot, counter, v, v/2)
	}
	for i := offFill; i < len(s); i++ {
		if s[i] != fillByte(slot, counter, i) {
			return fmt.Errorf("slot %d: fill byte %d is %#02x, want %#02x", slot, i, s[i], fillByte(slot, counter, i))
		}
	}
	return nil
}

// checkSlot checks a whole slot image and returns its version and counter:
// errLocked for a locked slot, another error for a value that is not the
// one committed under the version.
func checkSlot(s []byte, slot int) (version, counter uint64, err error) {
	version = ne.Uint64(s[offVersion:])
	if version&1 != 0 {
		return version, 0, errLocked
	}
	if err := checkValue(s, slot, version); err != nil {
		return version, 0, err
	}
	return version, version / 2, nil
}

// regionInfo is what the server hands each client once, at connect time:
// where the slots are and how they are laid out.
type regionInfo struct {
	Ref      runtime.RemoteRef
	Slots    uint32
	SlotSize uint32
}

const (
	infoMagic = "kv02"
	refLen    = 21 // runtime.RemoteRef's encoding
	infoLen   = 4 + refLen + 4 + 4
)

// AppendBinary encodes the info: a magic, the reference in the runtime's
// own encoding, then the slot count and size, little-endian.
func (ri regionInfo) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, infoMagic...)
	b, _ = ri.Ref.AppendBinary(b) // the runtime's own encoding, versioned
	b = binary.LittleEndian.AppendUint32(b, ri.Slots)
	b = binary.LittleEndian.AppendUint32(b, ri.SlotSize)
	return b, nil
}

// UnmarshalBinary decodes and validates what AppendBinary encoded.
func (ri *regionInfo) UnmarshalBinary(b []byte) error {
	if len(b) != infoLen || string(b[:4]) != infoMagic {
		return fmt.Errorf("region info: %d bytes, not a %q message of %d", len(b), infoMagic, infoLen)
	}
	b = b[4:]
	var r regionInfo
	if err := r.Ref.UnmarshalBinary(b[:refLen]); err != nil {
		return fmt.Errorf("region info: %w", err)
	}
	r.Slots = binary.LittleEndian.Uint32(b[refLen:])
	r.SlotSize = binary.LittleEndian.Uint32(b[refLen+4:])
	if err := r.validate(); err != nil {
		return fmt.Errorf("region info: %w", err)
	}
	*ri = r
	return nil
}

func (ri regionInfo) validate() error {
	switch {
	case ri.Slots == 0:
		return errors.New("no slots")
	case ri.SlotSize < minSlotSize || ri.SlotSize%8 != 0:
		return fmt.Errorf("slot size %d is not a multiple of 8 of at least %d", ri.SlotSize, minSlotSize)
	case uint64(ri.Slots)*uint64(ri.SlotSize) > uint64(ri.Ref.Len):
		return fmt.Errorf("%d slots of %d bytes overflow a region of %d", ri.Slots, ri.SlotSize, ri.Ref.Len)
	case ri.Ref.Addr%8 != 0:
		return fmt.Errorf("region address %#x is not 8-byte aligned", ri.Ref.Addr)
	}
	return nil
}

// slot returns the reference to slot i.
func (ri regionInfo) slot(i int) runtime.RemoteRef {
	return ri.Ref.Slice(i*int(ri.SlotSize), int(ri.SlotSize))
}

// store is the server's side: one registered region of slots. After init
// the server's CPU takes no part in reads and updates; it looks at the
// memory again only in verify, once the clients are done, and close takes
// the region back.
type store struct {
	region   *runtime.Buffer
	exp      *runtime.Exposure // the region, for the clients: reads, writes, atomics
	slots    int
	slotSize int
}

func newStore(rt *runtime.Runtime, slots, slotSize int) (*store, error) {
	region, err := rt.Alloc(slots * slotSize)
	if err != nil {
		return nil, err
	}
	// The clients need all three rights: they READ whole slots, WRITE
	// values and change the version words with CAS and FETCH_ADD. A key
	// grants its rights over its whole range, so a narrower grant (no
	// WRITE to the version words, atomics on them alone) would take keys
	// per slot. Nothing else of the server's memory is theirs to reach.
	exp, err := region.Expose(runtime.RemoteRead | runtime.RemoteWrite | runtime.RemoteAtomic)
	if err != nil {
		region.Free()
		return nil, err
	}
	st := &store{region: region, exp: exp, slots: slots, slotSize: slotSize}
	for i := range slots {
		s := st.slotBytes(i)
		ne.PutUint64(s[offVersion:], 0)
		putValue(s, i, 0, 0)
	}
	return st, nil
}

// close revokes the clients' access and gives the region back: a client
// that touches it afterwards fails with REM_ACCESS_ERR, which ends its
// connection.
func (st *store) close() error {
	err := st.exp.Close()
	st.region.Free() // would revoke the exposure too
	return err
}

func (st *store) slotBytes(i int) []byte {
	return st.region.Bytes()[i*st.slotSize : (i+1)*st.slotSize]
}

func (st *store) info() regionInfo {
	return regionInfo{Ref: st.exp.RemoteRef(), Slots: uint32(st.slots), SlotSize: uint32(st.slotSize)}
}

// verify checks every slot once no client is running: each must be
// unlocked and hold the value committed under its version (so its counter
// is its version/2). It returns the sum of the counters, which must equal
// the updates the clients committed.
func (st *store) verify() (counters uint64, err error) {
	var errs []error
	for i := range st.slots {
		_, c, err := checkSlot(st.slotBytes(i), i)
		if err != nil {
			if errors.Is(err, errLocked) {
				err = fmt.Errorf("slot %d: still locked at version %d", i, ne.Uint64(st.slotBytes(i)))
			}
			errs = append(errs, err)
			continue
		}
		counters += c
	}
	if len(errs) > 4 {
		errs = append(errs[:4], fmt.Errorf("and %d more inconsistent slots", len(errs)-4))
	}
	return counters, errors.Join(errs...)
}
