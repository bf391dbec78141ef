package rocev2

import (
	"sort"
	"sync"

	"github.com/verbsrt/verbsrt/verbs"
)

// Device limits: rxe's where the rxe measurements showed them (max_sge
// 32, inline up to 512 bytes), otherwise generous but finite.
const (
	maxQPWR     = 1 << 14
	maxSGE      = 32
	maxInline   = 512
	minInline   = 64
	maxCQE      = 1 << 20
	maxObjects  = 1 << 16
	portNum     = 1
	eventBuffer = 1024
)

// resource is an object created from a context, destroyed with it when
// the context closes first; rank orders destruction (QPs before the CQs
// they use, PDs last).
type resource interface {
	destroy()
	rank() int
}

const (
	rankQP = iota
	rankSRQ
	rankAH
	rankMR
	rankCQ
	rankChannel
	rankPD
)

type context struct {
	dev *device

	mu        sync.Mutex
	closed    bool
	resources map[resource]struct{}

	evMu     sync.Mutex
	evClosed bool
	events   chan verbs.AsyncEvent
}

func newContext(d *device) *context {
	return &context{dev: d, resources: make(map[resource]struct{}),
		events: make(chan verbs.AsyncEvent, eventBuffer)}
}

func (c *context) Device() verbs.Device { return c.dev }

func (c *context) QueryDevice() (verbs.DeviceAttr, error) {
	if err := c.check("ibv_query_device"); err != nil {
		return verbs.DeviceAttr{}, err
	}
	d := c.dev
	return verbs.DeviceAttr{
		FWVer: "verbsrt-rocev2 1.0", NodeGUID: d.guid, SysImageGUID: d.guid,
		MaxMRSize: 1 << 46, PageSizeCap: 4096, MaxQP: maxObjects, MaxQPWR: maxQPWR,
		DeviceCapFlags: verbs.DeviceRCRNRNAKGen | verbs.DevicePortActiveEvent |
			verbs.DeviceSysImageGUID | verbs.DeviceCurrQPStateMod,
		MaxSGE: maxSGE, MaxSGERd: maxSGE, MaxCQ: maxObjects, MaxCQE: maxCQE,
		MaxMR: maxObjects, MaxPD: maxObjects, MaxQPRdAtom: atomicHistory,
		MaxQPInitRdAtom: atomicHistory, MaxSRQ: maxObjects, MaxSRQWR: maxSRQWR, MaxSRQSGE: maxSGE,
		MaxAH: maxObjects, AtomicCap: verbs.AtomicHCA,
		PhysPortCnt: 1,
	}, nil
}

// QueryDeviceEx implements verbs.DeviceExQuerier.
func (c *context) QueryDeviceEx() (verbs.DeviceAttrEx, error) {
	a, err := c.QueryDevice()
	return verbs.DeviceAttrEx{DeviceAttr: a, Extended: true, MaxInlineData: maxInline, MaxSendSGE: maxSGE}, err
}

// QueryPort reports port 1. Its LID is the UDP port of the device's
// transport (see Provider).
func (c *context) QueryPort(port uint8) (verbs.PortAttr, error) {
	if err := c.check("ibv_query_port"); err != nil {
		return verbs.PortAttr{}, err
	}
	if port != portNum {
		return verbs.PortAttr{}, verbs.Errorf("ibv_query_port", verbs.ErrNotFound, "port %d (the device has port 1)", port)
	}
	return verbs.PortAttr{State: verbs.PortActive, MaxMTU: verbs.MTU4096, ActiveMTU: c.dev.p.mtu,
		GIDTblLen: 1, MaxMsgSz: verbs.MaxMessageSize, LID: c.dev.t.LocalAddr().Port(),
		PhysState: 5, LinkLayer: verbs.LinkLayerEthernet, PKeyTblLen: 1}, nil
}

// QueryGID returns the device's one GID, the IPv6 address it is bound to.
func (c *context) QueryGID(port uint8, index int) (verbs.GID, error) {
	if err := c.check("ibv_query_gid"); err != nil {
		return verbs.GID{}, err
	}
	if port != portNum || index != 0 {
		return verbs.GID{}, verbs.Errorf("ibv_query_gid", verbs.ErrNotFound, "port %d index %d", port, index)
	}
	return c.dev.gid, nil
}

func (c *context) AllocPD() (verbs.PD, error) {
	pd := &pd{ctx: c}
	if err := c.add("ibv_alloc_pd", pd); err != nil {
		return nil, err
	}
	return pd, nil
}

func (c *context) CreateCompChannel() (verbs.CompChannel, error) {
	ch := newCompChannel(c)
	if err := c.add("ibv_create_comp_channel", ch); err != nil {
		return nil, err
	}
	return ch, nil
}

func (c *context) CreateCQ(spec verbs.CQSpec) (verbs.CQ, error) {
	q, err := newCQ(c, spec)
	if err != nil {
		return nil, err
	}
	if err := c.add("ibv_create_cq", q); err != nil {
		return nil, err
	}
	return q, nil
}

// OpenXRCD returns ErrNotSupported: the device has no XRC.
func (c *context) OpenXRCD() (verbs.XRCD, error) {
	return nil, verbs.NewError("ibv_open_xrcd", verbs.ErrNotSupported, "rocev2 has no XRC")
}

func (c *context) AsyncEvents() <-chan verbs.AsyncEvent { return c.events }

// AsyncErr is always nil: the device's events come from this process.
func (c *context) AsyncErr() error { return nil }

// raise queues an async event, dropping it when the consumer is a full
// buffer behind; it never blocks.
func (c *context) raise(ev verbs.AsyncEvent) {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	if c.evClosed {
		return
	}
	select {
	case c.events <- ev:
	default:
	}
}

// Close destroys everything still open on the context and closes
// AsyncEvents.
func (c *context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	rs := make([]resource, 0, len(c.resources))
	for r := range c.resources {
		rs = append(rs, r)
	}
	c.resources = nil
	c.mu.Unlock()
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].rank() < rs[j].rank() })
	for _, r := range rs {
		r.destroy()
	}
	c.evMu.Lock()
	if !c.evClosed {
		c.evClosed = true
		close(c.events)
	}
	c.evMu.Unlock()
	c.dev.forget(c)
	return nil
}

func (c *context) check(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verbs.NewError(op, verbs.ErrClosed, "context")
	}
	return nil
}

func (c *context) add(op string, r resource) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verbs.NewError(op, verbs.ErrClosed, "context")
	}
	c.resources[r] = struct{}{}
	return nil
}

// remove forgets r; false when the context already closed (and destroyed
// or is destroying it).
func (c *context) remove(r resource) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resources == nil {
		return false
	}
	_, ok := c.resources[r]
	delete(c.resources, r)
	return ok
}
