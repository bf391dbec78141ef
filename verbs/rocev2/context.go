package rocev2

import (
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
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

type context struct {
	dev *device
	reg swhca.Registry
}

func newContext(d *device) *context {
	c := &context{dev: d}
	c.reg.Init(c, eventBuffer)
	return c
}

func (c *context) Device() verbs.Device { return c.dev }

func (c *context) QueryDevice() (verbs.DeviceAttr, error) {
	if err := c.reg.Check("ibv_query_device"); err != nil {
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
	if err := c.reg.Check("ibv_query_port"); err != nil {
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
	if err := c.reg.Check("ibv_query_gid"); err != nil {
		return verbs.GID{}, err
	}
	if port != portNum || index != 0 {
		return verbs.GID{}, verbs.Errorf("ibv_query_gid", verbs.ErrNotFound, "port %d index %d", port, index)
	}
	return c.dev.gid, nil
}

func (c *context) AllocPD() (verbs.PD, error) {
	pd := &pd{ctx: c}
	if err := pd.AllocPD(&c.reg, memoryHooks(c.dev)); err != nil {
		return nil, err
	}
	return pd, nil
}

func (c *context) CreateCompChannel() (verbs.CompChannel, error) {
	return swhca.CreateCompChannel(&c.reg)
}

// CreateCQ creates a CQ whose Poll, when it finds the CQ empty, reads the
// device's socket itself (Transport.pollSocket), so that completions come
// while the caller spins, whether or not the scheduler runs the
// transport's receive goroutine.
func (c *context) CreateCQ(spec verbs.CQSpec) (verbs.CQ, error) {
	return swhca.CreateCQ(&c.reg, spec, maxCQE, c.dev.t.pollSocket)
}

// OpenXRCD returns ErrNotSupported: the device has no XRC.
func (c *context) OpenXRCD() (verbs.XRCD, error) {
	return nil, verbs.NewError("ibv_open_xrcd", verbs.ErrNotSupported, "rocev2 has no XRC")
}

func (c *context) AsyncEvents() <-chan verbs.AsyncEvent { return c.reg.AsyncEvents() }

// AsyncErr is always nil: the device's events come from this process.
func (c *context) AsyncErr() error { return c.reg.AsyncErr() }

// Close destroys everything still open on the context and closes
// AsyncEvents.
func (c *context) Close() error {
	if c.reg.DestroyAll() {
		c.reg.EndEvents(nil)
		c.dev.forget(c)
	}
	return nil
}
