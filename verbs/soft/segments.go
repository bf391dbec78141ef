package soft

import (
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// localSegs resolves a local gather or scatter list through the device's
// keys, appending the registered bytes to out (swhca.LocalSegs).
func localSegs(q *qp, sgl []verbs.SGE, need verbs.Access, out [][]byte) ([][]byte, bool) {
	return swhca.LocalSegs(q.dev.mrByKey, q.pd, sgl, need, out)
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
