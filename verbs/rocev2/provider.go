package rocev2

import (
	"encoding/binary"
	"fmt"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"net/netip"
	"sync"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// Config sets up a Provider.
type Config struct {
	// Addrs are the IPv6 addresses the devices bind, one device each, in
	// order (rocev2_0, rocev2_1, ...). An address may repeat: each device
	// has a socket and a port of its own. Empty means one device on ::1.
	Addrs []netip.Addr
	// Ports are the UDP ports the devices bind, by index; a missing or
	// zero entry lets the kernel pick one. A device that rxe or a RoCE
	// NIC must reach binds Port (4791).
	Ports []uint16
	// ActiveMTU is the ports' active MTU in bytes: 256 to 4096 (0 means
	// 4096). UD datagrams larger than it are dropped.
	ActiveMTU int
	// Clock drives the transport's timers; nil means SystemClock.
	Clock Clock
}

// Provider is the RoCE v2 verbs provider: one device per bound address,
// each with its own UDP socket (a Transport). Safe for concurrent use. A
// device's GID is the address its transport is bound to and its port's LID
// the UDP port; the package documentation says how a QP finds its peer's.
type Provider struct {
	devices []*device
	mtu     verbs.MTU
	clock   Clock

	qpMu  sync.RWMutex
	qpDev map[uint32]*device // QPN -> its device: QPNs are unique across the provider's devices

	mu     sync.Mutex
	closed bool
}

// New binds one transport per address of cfg and returns the provider.
// Close releases the sockets.
func New(cfg Config) (*Provider, error) {
	addrs := cfg.Addrs
	if len(addrs) == 0 {
		addrs = []netip.Addr{netip.IPv6Loopback()}
	}
	mtu := verbs.MTU4096
	if cfg.ActiveMTU != 0 {
		if mtu = verbs.MTUFromBytes(cfg.ActiveMTU); mtu == 0 {
			return nil, fmt.Errorf("rocev2: active MTU %d: %w", cfg.ActiveMTU, verbs.ErrInvalidArgument)
		}
	}
	p := &Provider{mtu: mtu, clock: cfg.Clock, qpDev: make(map[uint32]*device)}
	if p.clock == nil {
		p.clock = SystemClock{}
	}
	for i, a := range addrs {
		var port uint16
		if i < len(cfg.Ports) {
			port = cfg.Ports[i]
		}
		t, err := Listen(TransportConfig{Addr: netip.AddrPortFrom(a, port), Clock: p.clock})
		if err != nil {
			p.Close()
			return nil, err
		}
		p.devices = append(p.devices, newDevice(p, i, t))
	}
	return p, nil
}

// Name returns "rocev2".
func (p *Provider) Name() string { return "rocev2" }

// Devices lists the provider's devices.
func (p *Provider) Devices() ([]verbs.Device, error) {
	return swhca.Devices(p.devices), nil
}

// Transport returns the transport of device i, for fault injection in
// tests, or nil.
func (p *Provider) Transport(i int) *Transport {
	if i < 0 || i >= len(p.devices) {
		return nil
	}
	return p.devices[i].t
}

// Close closes every context still open and the devices' sockets.
func (p *Provider) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	for _, d := range p.devices {
		for _, c := range d.contexts.List() {
			c.Close()
		}
		d.t.Close()
	}
	return nil
}

func (p *Provider) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// newQPN hands out a QPN and records its device. QPNs are drawn at
// random, not counted up, so that a third party cannot aim a packet at the
// next QP from the QPNs it saw: 0 and 1 are the special QPs and 0xffffff
// the multicast QPN, none of them handed out.
func (p *Provider) newQPN(d *device) uint32 {
	p.qpMu.Lock()
	defer p.qpMu.Unlock()
	for {
		n := randomUint32() & wire.Mask24
		if _, used := p.qpDev[n]; used || n <= 1 || n == wire.Mask24 {
			continue
		}
		p.qpDev[n] = d
		return n
	}
}

func (p *Provider) forgetQPN(n uint32) {
	p.qpMu.Lock()
	delete(p.qpDev, n)
	p.qpMu.Unlock()
}

// route returns where packets for QP qpn at dgid go (see Provider), and
// whether the peer may send from another port than that: a peer that
// announced no port (DLID 0) and is no device of this provider is rxe or
// a NIC, whose source ports vary.
func (p *Provider) route(dgid verbs.GID, dlid uint16, qpn uint32) (to netip.AddrPort, anyPort bool) {
	a := netip.AddrFrom16(dgid)
	if dlid != 0 {
		return netip.AddrPortFrom(a, dlid), false
	}
	p.qpMu.RLock()
	d := p.qpDev[qpn&wire.Mask24]
	p.qpMu.RUnlock()
	if d != nil && d.gid == dgid {
		return d.t.LocalAddr(), false
	}
	return netip.AddrPortFrom(a, Port), true
}

// routeUD returns where a UD datagram for QP qpn at dgid goes.
func (p *Provider) routeUD(dgid verbs.GID, dlid uint16, qpn uint32) netip.AddrPort {
	to, _ := p.route(dgid, dlid, qpn)
	return to
}

type device struct {
	p    *Provider
	idx  int
	name string
	guid uint64
	gid  verbs.GID
	t    *Transport

	mrMu sync.RWMutex
	mrs  map[uint32]*swhca.MR // by key (lkey == rkey)

	contexts swhca.ContextSet[*context]
}

func newDevice(p *Provider, i int, t *Transport) *device {
	d := &device{p: p, idx: i, name: fmt.Sprintf("rocev2_%d", i), t: t,
		gid: verbs.GIDFromAddr(t.LocalAddr().Addr()), mrs: make(map[uint32]*swhca.MR)}
	// A GUID from the address and port, as an EUI-64 would come from a MAC.
	g := d.gid
	d.guid = binary.BigEndian.Uint64(g[8:]) ^ uint64(t.LocalAddr().Port())<<48 ^ uint64(i+1)
	return d
}

func (d *device) Name() string { return d.name }
func (d *device) GUID() uint64 { return d.guid }

// Open opens a context on the device.
func (d *device) Open() (verbs.Context, error) {
	if d.p.isClosed() {
		return nil, verbs.NewError("ibv_open_device", verbs.ErrClosed, d.name)
	}
	c := newContext(d)
	d.contexts.Add(c)
	return c, nil
}

// newKey returns a fresh memory key, drawn at random so that neither a
// third party nor the peer can guess a key from the ones it saw: never 0
// (no remote access) and never one in use. d.mrMu must be held.
func (d *device) newKey() uint32 {
	for {
		k := randomUint32()
		if _, used := d.mrs[k]; k != 0 && !used {
			return k
		}
	}
}

func (d *device) mrByKey(k uint32) *swhca.MR {
	d.mrMu.RLock()
	defer d.mrMu.RUnlock()
	return d.mrs[k]
}
