package soft

import (
	"sync"
	"sync/atomic"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// Device limits beyond swhca's: the read and atomic depth, the first QPN
// (as rxe numbers them), the GRH a UD receive carries.
const (
	maxRdAtomic   = 16
	firstQPN      = 0x11 // QPNs 0 and 1 are the special QPs; rxe starts at 17 too
	grhLen        = 40
	defaultHopLim = 64
)

type device struct {
	p     *Provider
	idx   int
	name  string
	guid  uint64
	pci   string
	ports []port
	// rdAtom and initRdAtom: max_qp_rd_atom and max_qp_init_rd_atom.
	rdAtom, initRdAtom int

	nextQPN  atomic.Uint32
	nextKey  atomic.Uint32
	nextSRQN atomic.Uint32

	qps  cowMap[*qp]       // by QPN: where packets are delivered
	mrs  cowMap[*swhca.MR] // by key (lkey == rkey)
	srqs cowMap[*srq]      // XRC SRQs by SRQ number

	contexts swhca.ContextSet[*context]
}

func newDevice(p *Provider, i int, m DeviceModel) (*device, error) {
	guid := 0x0200_5e00_0000_0000 | uint64(i+1)
	ports, err := buildPorts(m, i, guid, p.mtu)
	if err != nil {
		return nil, err
	}
	d := &device{p: p, idx: i, name: deviceName(i), guid: guid, pci: m.PCIAddress, ports: ports}
	if d.rdAtom, err = rdAtomic(i, "MaxQPRdAtom", m.MaxQPRdAtom); err != nil {
		return nil, err
	}
	if d.initRdAtom, err = rdAtomic(i, "MaxQPInitRdAtom", m.MaxQPInitRdAtom); err != nil {
		return nil, err
	}
	d.nextQPN.Store(firstQPN - 1)
	d.nextKey.Store(0)
	d.nextSRQN.Store(0)
	return d, nil
}

func (d *device) Name() string { return d.name }
func (d *device) GUID() uint64 { return d.guid }

// Open opens a context and starts its engine goroutine.
func (d *device) Open() (verbs.Context, error) {
	d.p.mu.Lock()
	closed := d.p.closed
	d.p.mu.Unlock()
	if closed {
		return nil, verbs.NewError("ibv_open_device", verbs.ErrClosed, d.name)
	}
	c := newContext(d)
	d.contexts.Add(c)
	return c, nil
}

// mrByKey is the MR key names, or nil.
func (d *device) mrByKey(key uint32) *swhca.MR {
	m, _ := d.mrs.get(key)
	return m
}

// newKey returns a fresh memory key: an index in the upper 24 bits and a
// key byte in the lower 8, like hardware keys.
func (d *device) newKey() uint32 {
	n := d.nextKey.Add(1)
	return n<<8 | (n*0x9d)&0xff
}

func (d *device) attr() verbs.DeviceAttr {
	return verbs.DeviceAttr{
		FWVer:        "verbsrt-soft 1.0",
		NodeGUID:     d.guid,
		SysImageGUID: d.guid,
		MaxMRSize:    1 << 46,
		PageSizeCap:  4096,
		VendorID:     0,
		VendorPartID: 0,
		MaxQP:        swhca.MaxObjects,
		MaxQPWR:      swhca.MaxQPWR,
		DeviceCapFlags: verbs.DeviceRCRNRNAKGen | verbs.DeviceXRC | verbs.DeviceMemMgtExtensions |
			verbs.DevicePortActiveEvent | verbs.DeviceSysImageGUID | verbs.DeviceCurrQPStateMod,
		MaxSGE:          swhca.MaxSGE,
		MaxSGERd:        swhca.MaxSGE,
		MaxCQ:           swhca.MaxObjects,
		MaxCQE:          swhca.MaxCQE,
		MaxMR:           swhca.MaxObjects,
		MaxPD:           swhca.MaxObjects,
		MaxQPRdAtom:     d.rdAtom,
		MaxQPInitRdAtom: d.initRdAtom,
		MaxSRQ:          swhca.MaxObjects,
		MaxSRQWR:        swhca.MaxSRQWR,
		MaxSRQSGE:       swhca.MaxSGE,
		MaxAH:           swhca.MaxObjects,
		AtomicCap:       verbs.AtomicHCA,
		PhysPortCnt:     len(d.ports),
	}
}

func (pt *port) attr() verbs.PortAttr {
	return verbs.PortAttr{
		State:      verbs.PortActive,
		MaxMTU:     verbs.MTU4096,
		ActiveMTU:  pt.mtu,
		GIDTblLen:  len(pt.gids),
		MaxMsgSz:   verbs.MaxMessageSize,
		LID:        pt.lid,
		PhysState:  5, // LinkUp
		LinkLayer:  pt.linkLayer,
		PKeyTblLen: 1,
	}
}

// cowMap is a copy-on-write map by a uint32 key (QPN, memory key, SRQ
// number): lookups on the data path are one atomic load and a map read,
// with no lock; writes (object creation and destruction) copy the map of
// one shard only, so setting up or tearing down n objects costs n/64 copies
// of each, not n (a device of 10,000 QPs spent a third of its setup copying
// one map).
type cowMap[V any] struct {
	shards [cowShards]cowShard[V]
}

const cowShards = 64 // keys are handed out in sequence: they spread evenly

type cowShard[V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[uint32]V]
}

func (c *cowMap[V]) shard(k uint32) *cowShard[V] { return &c.shards[k%cowShards] }

func (c *cowMap[V]) get(k uint32) (V, bool) {
	if m := c.shard(k).m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

func (c *cowMap[V]) put(k uint32, v V) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m.Load()
	n := make(map[uint32]V, 1)
	if old != nil {
		n = make(map[uint32]V, len(*old)+1)
		for kk, vv := range *old {
			n[kk] = vv
		}
	}
	n[k] = v
	s.m.Store(&n)
}

func (c *cowMap[V]) del(k uint32) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m.Load()
	if old == nil {
		return
	}
	n := make(map[uint32]V, len(*old))
	for kk, vv := range *old {
		if kk != k {
			n[kk] = vv
		}
	}
	s.m.Store(&n)
}
