package rocev2

import (
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// portNum is the device's one port (the others are swhca's limits).
const portNum = 1

type context struct {
	dev *device
	swhca.Context
}

func newContext(d *device) *context {
	c := &context{dev: d}
	c.Init(c, swhca.ContextHooks{
		PD: pdHooks(c),
		// A Poll that finds a CQ empty reads the device's socket itself
		// (Transport.pollSocket), so that completions come while the
		// caller spins, whether or not the scheduler runs the
		// transport's receive goroutine.
		OnEmptyCQ: d.t.pollSocket,
	})
	return c
}

func (c *context) Device() verbs.Device { return c.dev }

func (c *context) QueryDevice() (verbs.DeviceAttr, error) {
	if err := c.Registry().Check("ibv_query_device"); err != nil {
		return verbs.DeviceAttr{}, err
	}
	d := c.dev
	return verbs.DeviceAttr{
		FWVer: "verbsrt-rocev2 1.0", NodeGUID: d.guid, SysImageGUID: d.guid,
		MaxMRSize: 1 << 46, PageSizeCap: 4096, MaxQP: swhca.MaxObjects, MaxQPWR: swhca.MaxQPWR,
		DeviceCapFlags: verbs.DeviceRCRNRNAKGen | verbs.DevicePortActiveEvent |
			verbs.DeviceSysImageGUID | verbs.DeviceCurrQPStateMod,
		MaxSGE: swhca.MaxSGE, MaxSGERd: swhca.MaxSGE, MaxCQ: swhca.MaxObjects, MaxCQE: swhca.MaxCQE,
		MaxMR: swhca.MaxObjects, MaxPD: swhca.MaxObjects, MaxQPRdAtom: atomicHistory,
		MaxQPInitRdAtom: atomicHistory, MaxSRQ: swhca.MaxObjects, MaxSRQWR: swhca.MaxSRQWR, MaxSRQSGE: swhca.MaxSGE,
		MaxAH: swhca.MaxObjects, AtomicCap: verbs.AtomicHCA,
		PhysPortCnt: 1,
	}, nil
}

// QueryDeviceEx implements verbs.DeviceExQuerier.
func (c *context) QueryDeviceEx() (verbs.DeviceAttrEx, error) {
	return swhca.DeviceAttrEx(c.QueryDevice())
}

// QueryPort reports port 1. Its LID is the UDP port of the device's
// transport (see Provider).
func (c *context) QueryPort(port uint8) (verbs.PortAttr, error) {
	if err := c.Registry().Check("ibv_query_port"); err != nil {
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
	if err := c.Registry().Check("ibv_query_gid"); err != nil {
		return verbs.GID{}, err
	}
	if port != portNum || index != 0 {
		return verbs.GID{}, verbs.Errorf("ibv_query_gid", verbs.ErrNotFound, "port %d index %d", port, index)
	}
	return c.dev.gid, nil
}

// OpenXRCD returns ErrNotSupported: the device has no XRC.
func (c *context) OpenXRCD() (verbs.XRCD, error) {
	return nil, verbs.NewError("ibv_open_xrcd", verbs.ErrNotSupported, "rocev2 has no XRC")
}

// Close destroys everything still open on the context and closes
// AsyncEvents.
func (c *context) Close() error {
	if c.Registry().DestroyAll() {
		c.Registry().EndEvents(nil)
		c.dev.contexts.Forget(c)
	}
	return nil
}
