package soft

import (
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// localSegs resolves a local gather or scatter list through the device's
// keys, appending the registered bytes to out. Every key must belong to q's
// PD, be valid, grant need and cover its range.
func localSegs(q *qp, sgl []verbs.SGE, need verbs.Access, out [][]byte) ([][]byte, bool) {
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		m, found := q.dev.mrs.get(s.LKey)
		if !found || m.PD() != &q.pd.PD || m.Invalid() || m.Access()&need != need {
			return out, false
		}
		b := m.Slice(s.Addr, uint64(s.Length))
		if b == nil {
			return out, false
		}
		out = append(out, b)
	}
	return out, true
}

func segsLen(segs [][]byte) uint64 {
	var n uint64
	for _, s := range segs {
		n += uint64(len(s))
	}
	return n
}

// copySegs copies the bytes of src, in order, into dst and returns how
// many it copied: a scatter/gather memcpy.
func copySegs(dst, src [][]byte) int {
	n, di, off := 0, 0, 0
	for _, s := range src {
		for len(s) > 0 {
			for di < len(dst) && off == len(dst[di]) {
				di, off = di+1, 0
			}
			if di == len(dst) {
				return n
			}
			c := copy(dst[di][off:], s)
			n, off, s = n+c, off+c, s[c:]
		}
	}
	return n
}

// copySegs1 gathers src into one contiguous destination.
func copySegs1(dst []byte, src [][]byte) {
	for _, s := range src {
		dst = dst[copy(dst, s):]
	}
}

// atomic64 performs an RDMA atomic on the 8 aligned bytes of b and returns
// the value they held before. The bytes are in host order, as on every
// libibverbs device (SEMANTICS 5a).
func atomic64(b []byte, op verbs.Opcode, compareAdd, swap uint64) uint64 {
	p := (*uint64)(unsafe.Pointer(&b[0]))
	if op == verbs.OpAtomicFetchAdd {
		return atomicAdd(p, compareAdd) - compareAdd
	}
	for {
		old := atomicLoad(p)
		if old != compareAdd || atomicCAS(p, old, swap) {
			return old
		}
	}
}

// userBytes is memory the caller passed by address with no key: an inline
// payload, read at post time like the CPU of a real host reads it.
func userBytes(addr uint64, n uint32) []byte {
	if n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}
