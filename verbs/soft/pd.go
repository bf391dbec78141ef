package soft

import (
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

// RegMR registers buf. The soft device reaches it through the slice, so it
// could work with any memory; it refuses Go memory all the same
// (verbs.CheckRegistrable), as the ibv provider does, so that what runs
// here runs on a device.
func (p *pd) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
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
	m := &mr{pd: p, buf: buf, addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), access: access}
	m.key = p.ctx.dev.newKey()
	m.valid.Store(true)
	if err := p.ctx.reg.Add(op, m, swhca.RankMR, m.destroy); err != nil {
		return nil, err
	}
	p.uses.Hold()
	p.ctx.dev.mrs.put(m.key, m)
	return m, nil
}

func (p *pd) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	const op = "ibv_create_ah"
	if err := checkAV(p.ctx.dev, &attr); err != nil {
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

// avPort is the port an address vector leaves from: port 1 when it names
// none.
func avPort(a *verbs.AHAttr) uint8 { return max(a.PortNum, 1) }

// checkAV validates an address vector the way a device does: on a RoCE
// port it needs a GRH (RoCE has no LIDs), on an InfiniBand port the GRH is
// optional (without one the DLID alone routes, within the subnet); a GRH's
// source GID index must exist on the port.
type avError string

func (e avError) Error() string { return string(e) }

func checkAV(d *device, a *verbs.AHAttr) error {
	pt := d.portN(avPort(a))
	if pt == nil {
		return avError("port_num")
	}
	if !a.IsGlobal {
		if pt.linkLayer != verbs.LinkLayerInfiniBand {
			return avError("RoCE address vectors need a GRH (is_global)")
		}
		return nil
	}
	if int(a.GRH.SGIDIndex) >= len(pt.gids) {
		return avError("sgid_index out of the GID table")
	}
	return nil
}

type mr struct {
	pd     *pd
	buf    []byte
	addr   uint64
	key    uint32
	access verbs.Access
	// valid goes false when a LOCAL_INV or SEND_WITH_INV invalidates the
	// key; remote and local accesses with it then fail.
	valid  atomic.Bool
	closed atomic.Bool
}

func (m *mr) Addr() uint64         { return m.addr }
func (m *mr) Len() int             { return len(m.buf) }
func (m *mr) LKey() uint32         { return m.key }
func (m *mr) Access() verbs.Access { return m.access }
func (m *mr) Bytes() []byte        { return m.buf }
func (m *mr) destroy()             { m.pd.ctx.dev.mrs.del(m.key); m.closed.Store(true) }
func (m *mr) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	if m.pd.ctx.reg.Remove(m) {
		m.pd.ctx.dev.mrs.del(m.key)
		m.pd.ctx.dev.p.quiesce()
		m.pd.uses.Release()
	}
	return nil
}

// RKey is the MR's key, or 0 when the MR grants no remote access: rxe
// gives such an MR rkey 0 (measured through the conformance suite), and a
// program that hands one to a peer should fail here as it does there. The
// key itself stays refused by remoteMR whatever a peer sends.
func (m *mr) RKey() uint32 {
	if m.access&remoteAccess == 0 {
		return 0
	}
	return m.key
}

// remoteAccess is the kernel's IB_ACCESS_REMOTE.
const remoteAccess = verbs.AccessRemoteRead | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic

// slice returns the registered bytes [addr, addr+n), or nil when the range
// is not inside the MR. n == 0 yields an empty, non-nil slice.
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
