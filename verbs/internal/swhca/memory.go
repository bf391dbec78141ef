package swhca

import (
	"sync/atomic"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// Keys is a device's table of memory keys (lkey == rkey). The provider
// chooses how keys are drawn: counted like hardware keys, or at random so
// that a peer cannot guess one from those it saw.
type Keys interface {
	// Reserve draws a key no live MR holds and keeps it from being drawn
	// again until Delete; a lookup does not find it yet.
	Reserve() uint32
	// Publish records m under its reserved key: from then on the engine
	// may find it.
	Publish(key uint32, m *MR)
	// Delete forgets key.
	Delete(key uint32)
}

// PDHooks are what a PD asks of its provider's device and engine.
type PDHooks struct {
	// CreateQP and CreateSRQ create the engine's QPs and SRQs in the PD.
	CreateQP  func(*PD, verbs.QPSpec) (verbs.QP, error)
	CreateSRQ func(*PD, verbs.SRQSpec) (verbs.SRQ, error)
	Keys      Keys
	// CheckAV validates an address vector for CreateAH; its error text
	// becomes the detail of an ErrInvalidArgument.
	CheckAV func(*verbs.AHAttr) error
	// Deregistered runs at the end of MR.Close; removed says the MR was
	// still the context's (not destroyed with it). It returns once the
	// engine no longer reaches the MR's memory.
	Deregistered func(removed bool)
}

// PD is a protection domain: what its MRs and AHs share, and what a QP of
// the same PD may reach. Its QPs and SRQs are the engine's (PDHooks). Safe
// for concurrent use.
type PD struct {
	reg   *Registry
	hooks PDHooks
	uses  Usage
}

// CreateQP implements verbs.PD.
func (p *PD) CreateQP(spec verbs.QPSpec) (verbs.QP, error) { return p.hooks.CreateQP(p, spec) }

// CreateSRQ implements verbs.PD.
func (p *PD) CreateSRQ(spec verbs.SRQSpec) (verbs.SRQ, error) { return p.hooks.CreateSRQ(p, spec) }

// Owner is the context the PD belongs to (Registry.Owner).
func (p *PD) Owner() any { return p.reg.owner }

// Uses counts the objects created from the PD.
func (p *PD) Uses() *Usage { return &p.uses }

// Close deallocates the PD; ErrBusy while an object created from it
// lives.
func (p *PD) Close() error {
	if p.uses.Busy() {
		return ErrBusy("ibv_dealloc_pd", "PD")
	}
	p.reg.Remove(p)
	return nil
}

// RegMR registers buf, which must not be Go memory (verbs.CheckRegistrable):
// an engine reads and writes it after the calls that posted the WRs have
// returned, as a device does.
func (p *PD) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	const op = "ibv_reg_mr"
	if err := verbs.CheckRegistrable(buf); err != nil {
		return nil, err
	}
	// The IB spec: remote write or atomic access needs local write.
	if access&(verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic) != 0 && access&verbs.AccessLocalWrite == 0 {
		return nil, verbs.NewError(op, verbs.ErrInvalidArgument, "REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE")
	}
	if access&(verbs.AccessMWBind|verbs.AccessZeroBased|verbs.AccessOnDemand) != 0 {
		return nil, verbs.Errorf(op, verbs.ErrNotSupported, "access %s", access)
	}
	m := &MR{pd: p, buf: buf, addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), access: access}
	// The key is set before the MR is published: the engine reads it
	// once it finds the MR. It is published before it is registered, so
	// that a context closing meanwhile destroys a published MR; no peer
	// knows the key yet.
	m.key = p.hooks.Keys.Reserve()
	p.hooks.Keys.Publish(m.key, m)
	if err := p.reg.Add(op, m, RankMR, m.destroy); err != nil {
		p.hooks.Keys.Delete(m.key)
		return nil, err
	}
	p.uses.Hold()
	return m, nil
}

// CreateAH creates an address handle for attr, checked by the provider's
// CheckAV.
func (p *PD) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	const op = "ibv_create_ah"
	if err := p.hooks.CheckAV(&attr); err != nil {
		return nil, verbs.NewError(op, verbs.ErrInvalidArgument, err.Error())
	}
	a := &AH{pd: p, attr: attr}
	if err := p.reg.Add(op, a, RankAH, a.destroy); err != nil {
		return nil, err
	}
	p.uses.Hold()
	return a, nil
}

// RemoteAccess is the kernel's IB_ACCESS_REMOTE.
const RemoteAccess = verbs.AccessRemoteRead | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic

// MR is a registered memory region. Safe for concurrent use.
type MR struct {
	pd     *PD
	buf    []byte
	addr   uint64
	key    uint32
	access verbs.Access
	closed atomic.Bool
	// invalid is set by a LOCAL_INV or a SEND_WITH_INV of the key: local
	// and remote accesses through it fail from then on.
	invalid atomic.Bool
}

// PD is the protection domain the MR was registered in.
func (m *MR) PD() *PD { return m.pd }

// Addr is the address of the MR's first byte.
func (m *MR) Addr() uint64 { return m.addr }

// Len is the MR's length in bytes.
func (m *MR) Len() int { return len(m.buf) }

// LKey is the MR's key.
func (m *MR) LKey() uint32 { return m.key }

// Access is what the MR grants.
func (m *MR) Access() verbs.Access { return m.access }

// Bytes is the registered memory.
func (m *MR) Bytes() []byte { return m.buf }

// RKey is the MR's key, or 0 when the MR grants no remote access: rxe
// gives such an MR rkey 0 (measured through the conformance suite), and a
// program that hands one to a peer should fail here as it does there. The
// key itself stays refused to a peer whatever it sends.
func (m *MR) RKey() uint32 {
	if m.access&RemoteAccess == 0 {
		return 0
	}
	return m.key
}

// Closed reports whether the MR was deregistered.
func (m *MR) Closed() bool { return m.closed.Load() }

// Invalid reports whether a LOCAL_INV or SEND_WITH_INV invalidated the
// key.
func (m *MR) Invalid() bool { return m.invalid.Load() }

// Invalidate invalidates the key, for a LOCAL_INV or a SEND_WITH_INV.
func (m *MR) Invalidate() { m.invalid.Store(true) }

// Slice returns the registered bytes [addr, addr+n), or nil when the
// range is not inside the MR. n == 0 yields an empty, non-nil slice.
func (m *MR) Slice(addr, n uint64) []byte {
	if addr < m.addr {
		return nil
	}
	off := addr - m.addr
	if off > uint64(len(m.buf)) || n > uint64(len(m.buf))-off {
		return nil
	}
	return m.buf[off : off+n : off+n]
}

func (m *MR) destroy() { m.closed.Store(true); m.pd.hooks.Keys.Delete(m.key) }

// Close deregisters the MR: its key stops resolving, and Close returns
// once the engine no longer reaches the memory (PDHooks.Deregistered),
// so the memory may be unmapped then. The memory of WRs still posted
// (gather lists, receive buffers, READ destinations) must outlive them,
// as on a NIC; ibv_dereg_mr does not wait for them.
func (m *MR) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	removed := m.pd.reg.Remove(m)
	if removed {
		m.pd.hooks.Keys.Delete(m.key)
		m.pd.uses.Release()
	}
	m.pd.hooks.Deregistered(removed)
	return nil
}

// AH is an address handle. Safe for concurrent use.
type AH struct {
	pd     *PD
	attr   verbs.AHAttr
	closed atomic.Bool
}

// Owner is the context the AH belongs to (Registry.Owner).
func (a *AH) Owner() any { return a.pd.reg.owner }

// Attr is the address vector the AH was created with; not to be changed.
func (a *AH) Attr() *verbs.AHAttr { return &a.attr }

func (a *AH) destroy() { a.closed.Store(true) }

// Close destroys the AH.
func (a *AH) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	if a.pd.reg.Remove(a) {
		a.pd.uses.Release()
	}
	return nil
}

// Closed reports whether the AH was destroyed.
func (a *AH) Closed() bool { return a.closed.Load() }

// Context is the context the PD belongs to.
func (p *PD) Context() verbs.Context { return p.reg.owner.(verbs.Context) }

// UserBytes is memory the caller passed by address with no key: an inline
// payload, read at post time as a host's CPU reads it.
func UserBytes(addr uint64, n uint32) []byte {
	if n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

// LocalSegs resolves a local gather or scatter list through a device's
// keys (lookup, nil for a key it does not know), appending the registered
// bytes to out. Every key must name a live, valid MR of PD p that grants
// need and covers its range.
func LocalSegs(lookup func(key uint32) *MR, p *PD, sgl []verbs.SGE, need verbs.Access, out [][]byte) ([][]byte, bool) {
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		m := lookup(s.LKey)
		if m == nil || m.pd != p || m.closed.Load() || m.invalid.Load() || m.access&need != need {
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
