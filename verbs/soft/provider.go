package soft

import (
	"fmt"
	"sync"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// Config sets up a soft provider.
type Config struct {
	// Devices is how many devices the fabric has: soft0, soft1, ... (0
	// means 1). Every device reaches every other, as HCAs on one switch.
	Devices int
	// ActiveMTU is the ports' active MTU in bytes: 256 to 4096 (0 means
	// 4096). UD messages larger than it are dropped, as on hardware.
	ActiveMTU int
	// Models describes the devices' ports and GID tables: device i has
	// Models[i], the devices beyond it the default model (one RoCE port,
	// DeviceModel's doc). The fabric has at least len(Models) devices.
	// New panics on a model it cannot build (an MTU that is not one).
	Models []DeviceModel
	// EngineOnly hands every doorbell to the context's engine goroutine
	// instead of executing the new WQEs on the poster's goroutine when the
	// engine is idle. Completions then never appear before PostSend
	// returns, as on a NIC, at the cost of a goroutine hand-off (and, when
	// the engine was parked, a wake-up) per doorbell.
	EngineOnly bool
}

// Provider is a software RDMA fabric: devices, and the wire between them.
// Devices of one Provider reach each other; two Providers are two separate
// fabrics. Safe for concurrent use.
type Provider struct {
	devices []*device
	mtu     verbs.MTU
	inline  bool // doorbells execute on the poster's goroutine when they can

	// byGID and byLID are the fabric's routing tables: by GID (a global
	// route) to a device, by LID (an InfiniBand route within the subnet)
	// to a port of one. New fills them and they never change, so the
	// engines read them without a lock.
	byGID map[verbs.GID]*device
	byLID map[uint16]lidPort
	// madeUp holds the GIDs of the default tables (MadeUpGID); New
	// fills it and it never changes.
	madeUp map[verbs.GID]bool

	mu     sync.Mutex
	closed bool
}

// New returns a provider with cfg.Devices devices (at least
// len(cfg.Models)). Nothing runs until a
// device is opened: each open Context runs one engine goroutine (the "HCA")
// that stops when the Context closes.
func New(cfg Config) *Provider {
	n := cfg.Devices
	if n <= 0 {
		n = 1
	}
	mtu := verbs.MTUFromBytes(cfg.ActiveMTU)
	if mtu == 0 {
		mtu = verbs.MTU4096
	}
	p := &Provider{mtu: mtu, byGID: make(map[verbs.GID]*device), byLID: make(map[uint16]lidPort),
		madeUp: make(map[verbs.GID]bool), inline: !cfg.EngineOnly}
	for i := range max(n, len(cfg.Models)) {
		var m DeviceModel
		if i < len(cfg.Models) {
			m = cfg.Models[i]
		}
		d, err := newDevice(p, i, m)
		if err != nil {
			panic(err.Error())
		}
		p.devices = append(p.devices, d)
		for n, pt := range d.ports {
			if _, taken := p.byLID[pt.lid]; !taken && pt.lid != 0 && pt.linkLayer == verbs.LinkLayerInfiniBand {
				p.byLID[pt.lid] = lidPort{d, uint8(n + 1)}
			}
			for _, e := range pt.gids {
				if _, taken := p.byGID[e.GID]; !taken && !e.GID.IsZero() {
					p.byGID[e.GID] = d
				}
				if pt.madeUp {
					p.madeUp[e.GID] = true
				}
			}
		}
	}
	return p
}

// Name returns "soft".
func (p *Provider) Name() string { return "soft" }

// MadeUpGID reports whether g is a GID of a default table, which the
// provider made up for a device whose model left the table to it
// (PortModel.GIDs nil): it looks like rxe's, and names nothing a reader
// could find on a network. A GID a model gave is not made up.
func (p *Provider) MadeUpGID(g verbs.GID) bool { return p.madeUp[g] }

// Devices lists the provider's devices.
func (p *Provider) Devices() ([]verbs.Device, error) {
	return swhca.Devices(p.devices), nil
}

// Device returns the device named name (e.g. "soft0").
func (p *Provider) Device(name string) (verbs.Device, error) {
	for _, d := range p.devices {
		if d.name == name {
			return d, nil
		}
	}
	return nil, verbs.Errorf("ibv_get_device_list", verbs.ErrNotFound, "no device %q", name)
}

// Close closes every context still open on the provider's devices.
func (p *Provider) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	for _, d := range p.devices {
		for _, c := range d.contexts.List() {
			c.Close()
		}
	}
	return nil
}

// lidPort is where a LID leads: a port of a device.
type lidPort struct {
	dev  *device
	port uint8
}

// route finds where the address vector a leads: by its GID when it has a
// global route, else by its DLID to an InfiniBand port. port is 0 when the
// route names a device only (a GID reaches its device whatever the port of
// the QP it is delivered to); dev is nil when nothing answers to it.
func (p *Provider) route(a *verbs.AHAttr) (dev *device, port uint8) {
	if a.IsGlobal {
		return p.byGID[a.GRH.DGID], 0
	}
	lp := p.byLID[a.DLID]
	return lp.dev, lp.port
}

func deviceName(i int) string { return fmt.Sprintf("soft%d", i) }

// quiesce waits until no engine of the fabric is in the middle of a WQE.
// Callers first make the object they destroy unreachable (key or QPN table),
// so no later WQE can find it.
func (p *Provider) quiesce() {
	for _, d := range p.devices {
		for _, c := range d.contexts.List() {
			c.eng.execMu.Lock()
			//lint:ignore SA2001 the empty critical section is the barrier
			c.eng.execMu.Unlock()
		}
	}
}
