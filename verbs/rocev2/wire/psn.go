package wire

// PSN is a packet sequence number: 24 bits that wrap. Two PSNs compare by
// their distance modulo 2^24 read as a signed 24-bit number, so b is after
// a when b lies less than half the space (2^23) ahead of a (IBA 9.7.5.1.4
// and 9.7.6.1.2: a valid PSN lies in the half window that follows the
// last acknowledged or expected one, a duplicate in the half before).
type PSN uint32

const (
	// Mask24 keeps the 24 bits of a PSN, a QP number or an MSN.
	Mask24 = 1<<24 - 1
	// PSNSpace is the number of distinct PSNs.
	PSNSpace = 1 << 24
)

// Add returns p+n modulo 2^24 (n may be negative).
func (p PSN) Add(n int) PSN { return PSN((int64(p) + int64(n)) & Mask24) }

// Next returns p+1 modulo 2^24.
func (p PSN) Next() PSN { return (p + 1) & Mask24 }

// Diff returns the signed distance from q to p: positive when p is after
// q, within [-2^23, 2^23).
func (p PSN) Diff(q PSN) int {
	d := int32(uint32(p-q)<<8) >> 8
	return int(d)
}

// Before reports whether p comes before q in sequence.
func (p PSN) Before(q PSN) bool { return p.Diff(q) < 0 }

// After reports whether p comes after q in sequence.
func (p PSN) After(q PSN) bool { return p.Diff(q) > 0 }

// Valid reports whether p fits in 24 bits.
func (p PSN) Valid() bool { return p <= Mask24 }
