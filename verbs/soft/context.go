package soft

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/verbsrt/verbsrt/verbs"
)

// asyncEventBuffer is how many undelivered async events a context holds
// before it drops new ones (counted in droppedEvents).
const asyncEventBuffer = 1024

// resource is an object created from a context, destroyed with it when the
// context closes first. rank orders destruction: QPs before the SRQs and
// CQs they use, PDs last.
type resource interface {
	destroy()
	rank() int
}

type context struct {
	dev *device
	eng *engine

	mu        sync.Mutex
	closed    bool
	resources map[resource]struct{}

	evMu          sync.Mutex
	evClosed      bool
	evErr         error // why events closed before the context (InjectContext)
	events        chan verbs.AsyncEvent
	droppedEvents atomic.Uint64
}

func newContext(d *device) *context {
	c := &context{dev: d, resources: make(map[resource]struct{}),
		events: make(chan verbs.AsyncEvent, asyncEventBuffer)}
	c.eng = newEngine(c)
	go c.eng.run()
	return c
}

func (c *context) Device() verbs.Device { return c.dev }

func (c *context) QueryDevice() (verbs.DeviceAttr, error) {
	if err := c.check("ibv_query_device"); err != nil {
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
	if err := c.check("ibv_query_port"); err != nil {
		return verbs.PortAttr{}, err
	}
	pt := c.dev.portN(port)
	if pt == nil {
		return verbs.PortAttr{}, verbs.Errorf("ibv_query_port", verbs.ErrNotFound, "port %d (the device has %d)", port, len(c.dev.ports))
	}
	return pt.attr(), nil
}

func (c *context) QueryGID(port uint8, index int) (verbs.GID, error) {
	if err := c.check("ibv_query_gid"); err != nil {
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
	cq, err := newCQ(c, spec)
	if err != nil {
		return nil, err
	}
	if err := c.add("ibv_create_cq", cq); err != nil {
		return nil, err
	}
	return cq, nil
}

func (c *context) OpenXRCD() (verbs.XRCD, error) {
	x := &xrcd{ctx: c}
	if err := c.add("ibv_open_xrcd", x); err != nil {
		return nil, err
	}
	return x, nil
}

func (c *context) AsyncEvents() <-chan verbs.AsyncEvent { return c.events }

// AsyncErr is nil unless FaultEventsLost ended the events: the soft device
// itself always delivers them.
func (c *context) AsyncErr() error {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	return c.evErr
}

// endEvents closes AsyncEvents with err as AsyncErr, once.
func (c *context) endEvents(err error) {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	if c.evClosed {
		return
	}
	c.evClosed, c.evErr = true, err
	close(c.events)
}

// raise queues an async event; it never blocks the engine.
func (c *context) raise(ev verbs.AsyncEvent) {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	if c.evClosed {
		return
	}
	select {
	case c.events <- ev:
	default:
		c.droppedEvents.Add(1)
	}
}

// Close destroys everything still open on the context, stops its engine
// and closes AsyncEvents.
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
	c.eng.stop()
	c.endEvents(nil)
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

// Destruction ranks: what uses an object goes before it.
const (
	rankQP = iota
	rankSRQ
	rankAH
	rankMR
	rankXRCD
	rankCQ
	rankChannel
	rankPD
)

type xrcd struct {
	ctx *context
}

func (x *xrcd) rank() int { return rankXRCD }
func (x *xrcd) destroy()  {}
func (x *xrcd) Close() error {
	x.ctx.remove(x)
	return nil
}
