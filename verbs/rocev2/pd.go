package rocev2

import (
	"net/netip"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// pdHooks ties the context's PDs to the transport's QPs and SRQs, the
// device's key table and the RoCE address-vector check. An MR's Close
// returns once no packet the device's QPs were handling still reaches it.
func pdHooks(c *context) swhca.PDHooks {
	t := c.dev.t
	h := swhca.PDHooks{CreateQP: c.createQP, CreateSRQ: c.createSRQ, Keys: mrKeys{c.dev}, CheckAV: checkAV}
	h.Deregistered = func(bool) { t.quiesce() }
	return h
}

// mrKeys is the device's key table, keys drawn at random (newKey).
type mrKeys struct{ d *device }

// Reserve holds the key with a nil entry, which mrByKey reports as no MR.
func (k mrKeys) Reserve() uint32 {
	k.d.mrMu.Lock()
	defer k.d.mrMu.Unlock()
	key := k.d.newKey()
	k.d.mrs[key] = nil
	return key
}

func (k mrKeys) Publish(key uint32, m *swhca.MR) {
	k.d.mrMu.Lock()
	k.d.mrs[key] = m
	k.d.mrMu.Unlock()
}

func (k mrKeys) Delete(key uint32) {
	k.d.mrMu.Lock()
	delete(k.d.mrs, key)
	k.d.mrMu.Unlock()
}

func checkAV(a *verbs.AHAttr) error {
	switch {
	case !a.IsGlobal:
		return swhca.AttrError("RoCE address vectors need a GRH (is_global)")
	case a.GRH.SGIDIndex != 0:
		return swhca.AttrError("sgid_index out of the GID table (one entry)")
	case a.PortNum != 0 && a.PortNum != portNum:
		return swhca.AttrError("port_num")
	case netip.AddrFrom16(a.GRH.DGID).Is4In6():
		return swhca.AttrError("an IPv4 destination: rocev2 carries IPv6 only")
	}
	return nil
}

// qpMemory is the Memory a QP's responder reaches: MRs of the QP's PD
// whose rkey grants the access, on a QP whose access flags grant it too.
type qpMemory struct{ q *qp }

func (m qpMemory) Remote(rkey uint32, va uint64, n int, acc verbs.Access) ([]byte, bool) {
	if n == 0 {
		// A zero-length RDMA checks no key (SEMANTICS 12c).
		return []byte{}, true
	}
	if n < 0 || m.q.qpAccess.Load()&uint32(acc) != uint32(acc) {
		return nil, false
	}
	r := m.q.dev.mrByKey(rkey)
	if r == nil || r.PD() != m.q.pd || r.Closed() || r.Invalid() || r.Access()&acc != acc || r.RKey() != rkey {
		return nil, false
	}
	b := r.Slice(va, uint64(n))
	return b, b != nil
}

// Invalidate invalidates the MR rkey names, for a SEND_WITH_INV: it must
// be an MR of the QP's PD that grants remote access.
func (m qpMemory) Invalidate(rkey uint32) bool {
	r := m.q.dev.mrByKey(rkey)
	if r == nil || r.PD() != m.q.pd || r.Closed() || r.RKey() != rkey {
		return false
	}
	r.Invalidate()
	return true
}

// localInvalidate invalidates the MR key names, for a LOCAL_INV: it must
// be an MR of q's PD.
func (q *qp) localInvalidate(key uint32) bool {
	r := q.dev.mrByKey(key)
	if r == nil || r.PD() != q.pd || r.Closed() {
		return false
	}
	r.Invalidate()
	return true
}

// localSegs resolves a local gather or scatter list through the device's
// keys (swhca.LocalSegs); the segments are meaningful only when it
// reports true.
func localSegs(d *device, p *swhca.PD, sgl []verbs.SGE, need verbs.Access) ([][]byte, bool) {
	return swhca.LocalSegs(d.mrByKey, p, sgl, need, nil)
}

// copySegs copies the bytes of src, in order, into the segments of dst
// and returns how many it copied: a scatter.
func copySegs(dst [][]byte, src []byte) int {
	n := 0
	for _, d := range dst {
		if len(src) == 0 {
			break
		}
		c := copy(d, src)
		n, src = n+c, src[c:]
	}
	return n
}

// gather returns segs as one slice: the segment itself when there is one,
// a copy otherwise.
func gather(segs [][]byte) []byte {
	switch len(segs) {
	case 0:
		return nil
	case 1:
		return segs[0]
	}
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	b := make([]byte, 0, n)
	for _, s := range segs {
		b = append(b, s...)
	}
	return b
}
