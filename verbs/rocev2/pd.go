package rocev2

import (
	"net/netip"
	"sync/atomic"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

type pd struct {
	ctx  *context
	uses swhca.Usage
}

func (p *pd) destroy()               {}
func (p *pd) Context() verbs.Context { return p.ctx }

func (p *pd) Close() error {
	if p.uses.Busy() {
		return swhca.ErrBusy("ibv_dealloc_pd", "PD")
	}
	p.ctx.reg.Remove(p)
	return nil
}

// RegMR registers buf, which must not be Go memory (verbs.CheckRegistrable):
// the transport's goroutine reads and writes it after the calls that
// posted the WRs have returned.
func (p *pd) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	const op = "ibv_reg_mr"
	if err := verbs.CheckRegistrable(buf); err != nil {
		return nil, err
	}
	if access&(verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic) != 0 && access&verbs.AccessLocalWrite == 0 {
		return nil, verbs.NewError(op, verbs.ErrInvalidArgument, "REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE")
	}
	if access&(verbs.AccessMWBind|verbs.AccessZeroBased|verbs.AccessOnDemand) != 0 {
		return nil, verbs.Errorf(op, verbs.ErrNotSupported, "access %s", access)
	}
	d := p.ctx.dev
	m := &mr{pd: p, buf: buf, addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), access: access}
	if err := p.ctx.reg.Add(op, m, swhca.RankMR, m.destroy); err != nil {
		return nil, err
	}
	p.uses.Hold()
	d.mrMu.Lock()
	m.key = d.newKey()
	d.mrs[m.key] = m
	d.mrMu.Unlock()
	return m, nil
}

// CreateAH checks an address vector as a RoCE device does: it needs a GRH
// (RoCE has no LIDs) with GID index 0 and an IPv6 destination.
func (p *pd) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	const op = "ibv_create_ah"
	if err := checkAV(&attr); err != nil {
		return nil, verbs.NewError(op, verbs.ErrInvalidArgument, err.Error())
	}
	a := &ah{pd: p, attr: attr}
	if err := p.ctx.reg.Add(op, a, swhca.RankAH, a.destroy); err != nil {
		return nil, err
	}
	p.uses.Hold()
	return a, nil
}

func (p *pd) CreateQP(spec verbs.QPSpec) (verbs.QP, error) { return newQP(p, spec) }

func (p *pd) CreateSRQ(spec verbs.SRQSpec) (verbs.SRQ, error) { return newSRQ(p, spec) }

type avError string

func (e avError) Error() string { return string(e) }

func checkAV(a *verbs.AHAttr) error {
	switch {
	case !a.IsGlobal:
		return avError("RoCE address vectors need a GRH (is_global)")
	case a.GRH.SGIDIndex != 0:
		return avError("sgid_index out of the GID table (one entry)")
	case a.PortNum != 0 && a.PortNum != portNum:
		return avError("port_num")
	case netip.AddrFrom16(a.GRH.DGID).Is4In6():
		return avError("an IPv4 destination: rocev2 carries IPv6 only")
	}
	return nil
}

type mr struct {
	pd     *pd
	buf    []byte
	addr   uint64
	key    uint32
	access verbs.Access
	closed atomic.Bool
	// invalid is set by a LOCAL_INV or a SEND_WITH_INV of the key: local
	// and remote accesses through it fail from then on.
	invalid atomic.Bool
}

func (m *mr) Addr() uint64         { return m.addr }
func (m *mr) Len() int             { return len(m.buf) }
func (m *mr) LKey() uint32         { return m.key }
func (m *mr) Access() verbs.Access { return m.access }
func (m *mr) Bytes() []byte        { return m.buf }

// RKey is the MR's key, or 0 when the MR grants no remote access, as rxe
// gives it.
func (m *mr) RKey() uint32 {
	if m.access&remoteAccess == 0 {
		return 0
	}
	return m.key
}

const remoteAccess = verbs.AccessRemoteRead | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic

func (m *mr) unlink() {
	d := m.pd.ctx.dev
	d.mrMu.Lock()
	delete(d.mrs, m.key)
	d.mrMu.Unlock()
}

func (m *mr) destroy() { m.closed.Store(true); m.unlink() }

// Close deregisters the MR: its keys stop resolving, and Close returns
// once no packet the device's QPs were handling still reaches it, so the
// memory may be unmapped then. The memory of WRs still posted (gather
// lists, receive buffers, READ destinations) must outlive them, as on a
// NIC; ibv_dereg_mr does not wait for them.
func (m *mr) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	if m.pd.ctx.reg.Remove(m) {
		m.unlink()
		m.pd.uses.Release()
	}
	m.pd.ctx.dev.t.quiesce()
	return nil
}

// slice returns the registered bytes [addr, addr+n), or nil when the
// range is not inside the MR.
func (m *mr) slice(addr, n uint64) []byte {
	if addr < m.addr {
		return nil
	}
	off := addr - m.addr
	if off > uint64(len(m.buf)) || n > uint64(len(m.buf))-off {
		return nil
	}
	return m.buf[off : off+n : off+n]
}

type ah struct {
	pd     *pd
	attr   verbs.AHAttr
	closed atomic.Bool
}

func (a *ah) destroy() { a.closed.Store(true) }
func (a *ah) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	if a.pd.ctx.reg.Remove(a) {
		a.pd.uses.Release()
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
	if r == nil || r.pd != m.q.pd || r.closed.Load() || r.invalid.Load() || r.access&acc != acc || r.RKey() != rkey {
		return nil, false
	}
	b := r.slice(va, uint64(n))
	return b, b != nil
}

// Invalidate invalidates the MR rkey names, for a SEND_WITH_INV: it must
// be an MR of the QP's PD that grants remote access.
func (m qpMemory) Invalidate(rkey uint32) bool {
	r := m.q.dev.mrByKey(rkey)
	if r == nil || r.pd != m.q.pd || r.closed.Load() || r.RKey() != rkey {
		return false
	}
	r.invalid.Store(true)
	return true
}

// localInvalidate invalidates the MR key names, for a LOCAL_INV: it must
// be an MR of q's PD.
func (q *qp) localInvalidate(key uint32) bool {
	r := q.dev.mrByKey(key)
	if r == nil || r.pd != q.pd || r.closed.Load() {
		return false
	}
	r.invalid.Store(true)
	return true
}

// localSegs resolves a local gather or scatter list through the device's
// keys: every key must name an MR of PD p that grants need and covers its
// range.
func localSegs(d *device, p *pd, sgl []verbs.SGE, need verbs.Access) ([][]byte, bool) {
	var out [][]byte
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		m := d.mrByKey(s.LKey)
		if m == nil || m.pd != p || m.closed.Load() || m.invalid.Load() || m.access&need != need {
			return nil, false
		}
		b := m.slice(s.Addr, uint64(s.Length))
		if b == nil {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
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

// userBytes is memory the caller passed by address with no key: an inline
// payload, read at post time as a host's CPU reads it.
func userBytes(addr uint64, n uint32) []byte {
	if n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}
