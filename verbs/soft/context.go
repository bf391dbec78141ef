package soft

import (
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// asyncEventBuffer is how many undelivered async events a context holds
// before it drops new ones (counted in Registry.DroppedEvents).
const asyncEventBuffer = 1024

type context struct {
	dev *device
	eng *engine
	reg swhca.Registry
}

func newContext(d *device) *context {
	c := &context{dev: d}
	c.reg.Init(c, asyncEventBuffer)
	c.eng = newEngine(c)
	go c.eng.run()
	return c
}

func (c *context) Device() verbs.Device { return c.dev }

func (c *context) QueryDevice() (verbs.DeviceAttr, error) {
	if err := c.reg.Check("ibv_query_device"); err != nil {
		return verbs.DeviceAttr{}, err
	}
	return c.dev.attr(), nil
}

// QueryDeviceEx implements verbs.DeviceExQuerier.
func (c *context) QueryDeviceEx() (verbs.DeviceAttrEx, error) {
	a, err := c.QueryDevice()
	return verbs.DeviceAttrEx{DeviceAttr: a, Extended: true, MaxInlineData: maxInline, MaxSendSGE: maxSGE}, err
}

func (c *context) QueryPort(port uint8) (verbs.PortAttr, error) {
	if err := c.reg.Check("ibv_query_port"); err != nil {
		return verbs.PortAttr{}, err
	}
	pt := c.dev.portN(port)
	if pt == nil {
		return verbs.PortAttr{}, verbs.Errorf("ibv_query_port", verbs.ErrNotFound, "port %d (the device has %d)", port, len(c.dev.ports))
	}
	return pt.attr(), nil
}

func (c *context) QueryGID(port uint8, index int) (verbs.GID, error) {
	if err := c.reg.Check("ibv_query_gid"); err != nil {
		return verbs.GID{}, err
	}
	pt := c.dev.portN(port)
	if pt == nil || index < 0 || index >= len(pt.gids) {
		return verbs.GID{}, verbs.Errorf("ibv_query_gid", verbs.ErrNotFound, "port %d index %d", port, index)
	}
	return pt.gids[index].GID, nil
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

func (c *context) CreateCQ(spec verbs.CQSpec) (verbs.CQ, error) {
	return swhca.CreateCQ(&c.reg, spec, maxCQE, nil)
}

func (c *context) OpenXRCD() (verbs.XRCD, error) {
	x := &xrcd{ctx: c}
	if err := c.reg.Add("ibv_open_xrcd", x, swhca.RankXRCD, x.destroy); err != nil {
		return nil, err
	}
	return x, nil
}

func (c *context) AsyncEvents() <-chan verbs.AsyncEvent { return c.reg.AsyncEvents() }

// AsyncErr is nil unless FaultEventsLost ended the events: the soft device
// itself always delivers them.
func (c *context) AsyncErr() error { return c.reg.AsyncErr() }

// Close destroys everything still open on the context, stops its engine
// and closes AsyncEvents.
func (c *context) Close() error {
	if !c.reg.DestroyAll() {
		return nil
	}
	c.eng.stop()
	c.reg.EndEvents(nil)
	c.dev.forget(c)
	return nil
}

type xrcd struct {
	ctx *context
}

func (x *xrcd) destroy() {}
func (x *xrcd) Close() error {
	x.ctx.reg.Remove(x)
	return nil
}
