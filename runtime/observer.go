package runtime

import (
	"time"

	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// An Observer sees every operation of a runtime's endpoints (Send, Write,
// Read, CompareAndSwap, FetchAdd, each WR of a Post) three times: when it
// starts, when it is posted to the device, and when it completes
// (WithObserver). The runtime's own traffic (receive credits, the
// goodbye) and receives are not reported.
//
// ObserveOp runs on the goroutine that moves the operation on: the caller
// at OpStarted, whoever posts at OpPosted, whoever handles the completion
// at OpCompleted, before the operation's future resolves (except for an
// operation whose context ended while it was queued: its future fails at
// once, and the observer sees it complete when the endpoint drops it from
// its queue). It is called
// concurrently, and must not block or wait for an operation: it runs on
// the runtime's data path (feed a histogram or a counter, not a network
// call).
type Observer interface {
	ObserveOp(OpEvent)
}

// OpPhase is how far an operation has come (OpEvent).
type OpPhase uint8

const (
	// OpStarted: the caller asked for it, before it is queued.
	OpStarted OpPhase = iota
	// OpPosted: it is handed to the device. An operation in a chain the
	// device refused at an earlier WR is posted again, and seen again.
	OpPosted
	// OpCompleted: it is over, on the device or before it (refused,
	// cancelled, the endpoint closed); every operation that started
	// completes once.
	OpCompleted
)

// OpEvent is one operation at one OpPhase. It is passed by value and
// holds nothing the observer must release.
type OpEvent struct {
	Phase    OpPhase
	Endpoint *Endpoint
	Opcode   verbs.Opcode
	Bytes    int // the operation's local bytes; 8 for an atomic
	// Latency is the time since OpStarted: the wait in the endpoint's
	// queue at OpPosted, the whole operation at OpCompleted; 0 at
	// OpStarted.
	Latency time.Duration
	// At OpCompleted: Status is the status of the operation's completion
	// (WCSuccess for success), WCWRFlushErr for one that ended without
	// reaching the device; Err is nil on success, else the failure.
	Status verbs.WCStatus
	Err    error
}

// WithObserver makes o see every operation of the runtime's endpoints
// (Observer). Without it the data path pays one nil check per step.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// endpointObserver tells the runtime's Observer the events of one
// endpoint's actor.
type endpointObserver struct {
	ep *Endpoint
	o  Observer
}

func (eo *endpointObserver) Observe(e qpactor.Event) {
	eo.o.ObserveOp(OpEvent{Phase: OpPhase(e.Phase), Endpoint: eo.ep, Opcode: e.Opcode, Bytes: int(e.Bytes),
		Latency: e.Since, Status: e.Status, Err: e.Err})
}

// actorObserver is what the endpoint's actor reports to: nil without
// WithObserver, so that the actor checks for nil and calls nothing.
func (ep *Endpoint) actorObserver() qpactor.Observer {
	if ep.rt.cfg.observer == nil {
		return nil
	}
	return &endpointObserver{ep: ep, o: ep.rt.cfg.observer}
}
