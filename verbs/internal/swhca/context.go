package swhca

import (
	"sync"

	"github.com/verbsrt/verbsrt/verbs"
)

// Device limits the software HCA shares: rxe's where the rxe
// measurements showed them (max_sge 32, inline up to 512 bytes, at least
// 64 granted), otherwise generous but finite.
const (
	MaxQPWR    = 1 << 14
	MaxSRQWR   = 1 << 14
	MaxSGE     = 32
	MaxInline  = 512
	MinInline  = 64
	MaxCQE     = 1 << 20
	MaxObjects = 1 << 16
)

// Context is the engine-free part of a provider's verbs.Context: its
// registry and events, PD, CQ and completion channel creation. A
// provider embeds it and adds the device queries and XRC. Safe for
// concurrent use.
type Context struct {
	reg   Registry
	hooks ContextHooks
}

// ContextHooks are what a Context asks of its provider.
type ContextHooks struct {
	// PD is what the context's PDs ask of the provider.
	PD PDHooks
	// OnEmptyCQ runs when a Poll finds a CQ empty (CreateCQ); may be nil.
	OnEmptyCQ func()
}

// EventBuffer is how many undelivered async events a context holds before
// it drops new ones (counted in Registry.DroppedEvents).
const EventBuffer = 1024

// Init prepares c for the provider's context owner.
func (c *Context) Init(owner any, hooks ContextHooks) {
	c.reg.Init(owner, EventBuffer)
	c.hooks = hooks
}

// Registry is the context's resource registry.
func (c *Context) Registry() *Registry { return &c.reg }

// AllocPD implements verbs.Context.
func (c *Context) AllocPD() (verbs.PD, error) {
	p := &PD{reg: &c.reg, hooks: c.hooks.PD}
	if err := c.reg.Add("ibv_alloc_pd", p, RankPD, func() {}); err != nil {
		return nil, err
	}
	return p, nil
}

// CreateCompChannel implements verbs.Context.
func (c *Context) CreateCompChannel() (verbs.CompChannel, error) {
	return CreateCompChannel(&c.reg)
}

// CreateCQ implements verbs.Context.
func (c *Context) CreateCQ(spec verbs.CQSpec) (verbs.CQ, error) {
	return CreateCQ(&c.reg, spec, MaxCQE, c.hooks.OnEmptyCQ)
}

// AsyncEvents implements verbs.Context.
func (c *Context) AsyncEvents() <-chan verbs.AsyncEvent { return c.reg.AsyncEvents() }

// AsyncErr implements verbs.Context: nil unless the provider ended the
// events with an error (Registry.EndEvents).
func (c *Context) AsyncErr() error { return c.reg.AsyncErr() }

// ContextSet is the set of a device's open contexts, which the provider's
// Close closes. Safe for concurrent use; the zero value is empty.
type ContextSet[C comparable] struct {
	mu sync.Mutex
	m  map[C]struct{}
}

// Add records c.
func (s *ContextSet[C]) Add(c C) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[C]struct{})
	}
	s.m[c] = struct{}{}
}

// Forget forgets c.
func (s *ContextSet[C]) Forget(c C) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

// List returns the contexts open now.
func (s *ContextSet[C]) List() []C {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]C, 0, len(s.m))
	for c := range s.m {
		out = append(out, c)
	}
	return out
}

// Devices lists ds as verbs devices, for a Provider's Devices.
func Devices[D verbs.Device](ds []D) []verbs.Device {
	out := make([]verbs.Device, len(ds))
	for i, d := range ds {
		out[i] = d
	}
	return out
}

// DeviceAttrEx extends a device's attributes (from its QueryDevice, with
// its error) with the limits of ibv_query_device_ex.
func DeviceAttrEx(a verbs.DeviceAttr, err error) (verbs.DeviceAttrEx, error) {
	return verbs.DeviceAttrEx{DeviceAttr: a, Extended: true, MaxInlineData: MaxInline, MaxSendSGE: MaxSGE}, err
}
