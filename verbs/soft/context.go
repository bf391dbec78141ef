package soft

import (
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

type context struct {
	dev *device
	eng *engine
	swhca.Context
}

func newContext(d *device) *context {
	c := &context{dev: d}
	c.Init(c, swhca.ContextHooks{PD: pdHooks(c)})
	c.eng = newEngine(c)
	go c.eng.run()
	return c
}

func (c *context) Device() verbs.Device { return c.dev }

func (c *context) QueryDevice() (verbs.DeviceAttr, error) {
	if err := c.Registry().Check("ibv_query_device"); err != nil {
		return verbs.DeviceAttr{}, err
	}
	return c.dev.attr(), nil
}

// QueryDeviceEx implements verbs.DeviceExQuerier.
func (c *context) QueryDeviceEx() (verbs.DeviceAttrEx, error) {
	return swhca.DeviceAttrEx(c.QueryDevice())
}

func (c *context) QueryPort(port uint8) (verbs.PortAttr, error) {
	if err := c.Registry().Check("ibv_query_port"); err != nil {
		return verbs.PortAttr{}, err
	}
	pt := c.dev.portN(port)
	if pt == nil {
		return verbs.PortAttr{}, verbs.Errorf("ibv_query_port", verbs.ErrNotFound, "port %d (the device has %d)", port, len(c.dev.ports))
	}
	return pt.attr(), nil
}

func (c *context) QueryGID(port uint8, index int) (verbs.GID, error) {
	if err := c.Registry().Check("ibv_query_gid"); err != nil {
		return verbs.GID{}, err
	}
	pt := c.dev.portN(port)
	if pt == nil || index < 0 || index >= len(pt.gids) {
		return verbs.GID{}, verbs.Errorf("ibv_query_gid", verbs.ErrNotFound, "port %d index %d", port, index)
	}
	return pt.gids[index].GID, nil
}

func (c *context) OpenXRCD() (verbs.XRCD, error) {
	x := &xrcd{ctx: c}
	if err := c.Registry().Add("ibv_open_xrcd", x, swhca.RankXRCD, x.destroy); err != nil {
		return nil, err
	}
	return x, nil
}

// Close destroys everything still open on the context, stops its engine
// and closes AsyncEvents.
func (c *context) Close() error {
	if !c.Registry().DestroyAll() {
		return nil
	}
	c.eng.stop()
	c.Registry().EndEvents(nil)
	c.dev.contexts.Forget(c)
	return nil
}

type xrcd struct {
	ctx *context
}

func (x *xrcd) destroy() {}
func (x *xrcd) Close() error {
	x.ctx.Registry().Remove(x)
	return nil
}
