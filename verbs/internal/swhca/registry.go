package swhca

import (
	"sort"
	"sync/atomic"

	"github.com/verbsrt/verbsrt/internal/lockrank"
	"github.com/verbsrt/verbsrt/verbs"
)

// Rank orders the destruction of a context's resources when the context
// closes first: what uses an object goes before it.
type Rank int

// Destruction ranks.
const (
	RankQP Rank = iota
	RankSRQ
	RankAH
	RankMR
	RankXRCD
	RankCQ
	RankChannel
	RankPD
)

// Registry is a context's set of live resources and its async event
// queue. Close of the context destroys what is left, in rank order; until
// then each resource removes itself when closed. Safe for concurrent use;
// the zero value is not usable, call Init.
type Registry struct {
	owner any

	mu        lockrank.Mutex[lockrank.Registry]
	closed    bool
	resources map[any]entry

	evMu     lockrank.Mutex[lockrank.RegistryEvents]
	evClosed bool
	evErr    error // why events ended before the context did
	events   chan verbs.AsyncEvent
	dropped  atomic.Uint64
}

type entry struct {
	rank    Rank
	destroy func()
}

// Init prepares r for the context owner, with room for buffer undelivered
// async events (Raise drops the ones beyond).
func (r *Registry) Init(owner any, buffer int) {
	r.owner = owner
	r.resources = make(map[any]entry)
	r.events = make(chan verbs.AsyncEvent, buffer)
}

// Owner is the context Init named: what a provider compares to tell its
// own objects from another context's.
func (r *Registry) Owner() any { return r.owner }

// AsyncEvents is the context's event channel, closed by EndEvents.
func (r *Registry) AsyncEvents() <-chan verbs.AsyncEvent { return r.events }

// AsyncErr is the error EndEvents ended the events with, nil for a plain
// close.
func (r *Registry) AsyncErr() error {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	return r.evErr
}

// DroppedEvents counts the events Raise dropped on a full queue.
func (r *Registry) DroppedEvents() uint64 { return r.dropped.Load() }

// Raise queues an async event, dropping it when the consumer is a full
// buffer behind; it never blocks, so an engine may raise from its data
// path.
func (r *Registry) Raise(ev verbs.AsyncEvent) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	if r.evClosed {
		return
	}
	select {
	case r.events <- ev:
	default:
		r.dropped.Add(1)
	}
}

// EndEvents closes AsyncEvents with err as AsyncErr, once.
func (r *Registry) EndEvents(err error) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	if r.evClosed {
		return
	}
	r.evClosed, r.evErr = true, err
	close(r.events)
}

func errContextClosed(op string) error { return verbs.NewError(op, verbs.ErrClosed, "context") }

// Check fails op with ErrClosed once the context closed.
func (r *Registry) Check(op string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errContextClosed(op)
	}
	return nil
}

// Add records obj, to be destroyed in rank order by DestroyAll unless
// Remove forgets it first; op names the verb for the error on a closed
// context.
func (r *Registry) Add(op string, obj any, rank Rank, destroy func()) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errContextClosed(op)
	}
	r.resources[obj] = entry{rank, destroy}
	return nil
}

// Remove forgets obj; false when the context already closed (and
// destroyed or is destroying it), so the caller must not release what obj
// held a second time.
func (r *Registry) Remove(obj any) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resources == nil {
		return false
	}
	_, ok := r.resources[obj]
	delete(r.resources, obj)
	return ok
}

// DestroyAll closes the registry and destroys every resource still in it,
// in rank order; false when it was closed already. It leaves the events
// open: a provider ends them (EndEvents) once its engine stopped raising.
func (r *Registry) DestroyAll() bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.closed = true
	rs := make([]entry, 0, len(r.resources))
	for _, e := range r.resources {
		rs = append(rs, e)
	}
	r.resources = nil
	r.mu.Unlock()
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].rank < rs[j].rank })
	for _, e := range rs {
		e.destroy()
	}
	return true
}

// Usage counts the objects that depend on another, so closing it early
// fails with ErrBusy as the kernel's EBUSY does.
type Usage struct{ n atomic.Int64 }

// Hold records one more dependent.
func (u *Usage) Hold() { u.n.Add(1) }

// Release records one dependent fewer.
func (u *Usage) Release() { u.n.Add(-1) }

// Add changes the count by d.
func (u *Usage) Add(d int64) { u.n.Add(d) }

// Busy reports whether anything still depends on the object.
func (u *Usage) Busy() bool { return u.n.Load() > 0 }

// ErrBusy is the error of destroying what is still in use.
func ErrBusy(op, what string) error {
	return verbs.Errorf(op, verbs.ErrBusy, "%s is still in use", what)
}
