package verbs

import "context"

// Provider is an implementation of the verbs: "soft" (verbs/soft) or "ibv"
// (verbs/ibv).
type Provider interface {
	// Name is the name the provider is selected by.
	Name() string
	// Devices lists the provider's devices (ibv_get_device_list).
	Devices() ([]Device, error)
}

// Device is an RDMA device not yet opened.
type Device interface {
	Name() string
	GUID() uint64
	// Open opens a context on the device (ibv_open_device).
	Open() (Context, error)
}

// Context is an open device (struct ibv_context). Closing it destroys what
// was created from it that is still open and ends AsyncEvents.
type Context interface {
	Device() Device
	QueryDevice() (DeviceAttr, error)
	// QueryPort returns the attributes of port (numbered from 1).
	QueryPort(port uint8) (PortAttr, error)
	QueryGID(port uint8, index int) (GID, error)
	AllocPD() (PD, error)
	CreateCompChannel() (CompChannel, error)
	CreateCQ(spec CQSpec) (CQ, error)
	// OpenXRCD opens a new XRC domain; ErrNotSupported where the device
	// has no XRC (DeviceXRC not in DeviceCapFlags).
	OpenXRCD() (XRCD, error)
	// AsyncEvents delivers the context's asynchronous events
	// (ibv_get_async_event). The channel is closed when the context is,
	// or before, when the provider can no longer read the device's events;
	// AsyncErr then says why. Events are acknowledged on delivery; a
	// consumer that falls behind a provider's buffer loses the oldest.
	AsyncEvents() <-chan AsyncEvent
	// AsyncErr returns why AsyncEvents was closed before the context: an
	// error matching ErrEventsLost (and the errno, where there is one).
	// It is nil while the channel is open and when Close closed it. A
	// consumer calls it once the channel is closed: from then on nothing
	// reports CQ overruns, QP fatal errors or the device's death, so what
	// waits for completions on the context may wait for good.
	AsyncErr() error
	Close() error
}

// PD is a protection domain. MRs, QPs, AHs and SRQs belong to one.
type PD interface {
	Context() Context
	// RegMR registers buf for the access given. buf must stay valid until
	// the MR is closed, and memory the Go runtime owns is refused with
	// ErrGoMemory (see CheckRegistrable and Arena): the device accesses
	// it after calls return.
	RegMR(buf []byte, access Access) (MR, error)
	CreateQP(spec QPSpec) (QP, error)
	CreateAH(attr AHAttr) (AH, error)
	CreateSRQ(spec SRQSpec) (SRQ, error)
	Close() error
}

// MR is a registered memory region.
type MR interface {
	// Addr is the virtual address of the first byte, the address SGEs and
	// remote peers use.
	Addr() uint64
	Len() int
	LKey() uint32
	RKey() uint32
	Access() Access
	// Bytes returns the registered memory.
	Bytes() []byte
	Close() error
}

// QP is a queue pair.
//
// PostSend and PostRecv may be called concurrently with each other and with
// Poll on the QP's CQs; verbsrt's runtime calls PostSend from one goroutine
// per QP, which is the fast path every provider optimizes for.
type QP interface {
	QPN() uint32
	Type() QPType
	// Modify applies the attributes attr selects with mask
	// (ibv_modify_qp). Transitions and masks are checked as the kernel
	// checks them (see CheckModify).
	Modify(attr *QPAttr, mask QPAttrMask) error
	// Query returns the QP's attributes, with Cap holding the granted
	// queue sizes.
	Query() (QPAttr, error)
	// PostSend posts wrs in order (ibv_post_send). It returns how many were
	// posted; when err is not nil, wrs[posted] is the one that failed and
	// no later WR was posted. Each WR is checked by Validate first.
	PostSend(wrs []SendWR) (posted int, err error)
	// PostRecv posts receive WRs with the same contract as PostSend.
	PostRecv(wrs []RecvWR) (posted int, err error)
	Close() error
}

// CQ is a completion queue.
type CQ interface {
	// Poll moves up to len(wcs) completions into wcs (ibv_poll_cq) and
	// returns how many. It never blocks.
	Poll(wcs []WC) (int, error)
	// ReqNotify arms the CQ to signal its completion channel once on the
	// next completion (solicitedOnly: the next solicited or failed one).
	ReqNotify(solicitedOnly bool) error
	// CQE is the number of entries granted.
	CQE() int
	// AckEvents acknowledges n events returned by CompChannel.GetCQEvent
	// for this CQ (ibv_ack_cq_events). Close waits for none: acknowledging
	// is for providers that need it, harmless for the rest.
	AckEvents(n int)
	Close() error
}

// CompChannel is a completion event channel (struct ibv_comp_channel).
type CompChannel interface {
	// GetCQEvent waits until an armed CQ of this channel has an event, or
	// ctx ends (ibv_get_cq_event). A provider with a file descriptor waits
	// through Go's netpoller, without a blocked thread.
	GetCQEvent(ctx context.Context) (CQ, error)
	Close() error
}

// SRQ is a shared receive queue.
type SRQ interface {
	PostRecv(wrs []RecvWR) (posted int, err error)
	Modify(attr SRQAttr, mask SRQAttrMask) error
	Query() (SRQAttr, error)
	// SRQN is the number XRC senders address it by (ibv_get_srq_num);
	// ErrNotSupported for a basic SRQ.
	SRQN() (uint32, error)
	Close() error
}

// XRCD is an XRC domain.
type XRCD interface {
	Close() error
}

// AH is an address handle for UD sends.
type AH interface {
	Close() error
}

// EventType is the type of an asynchronous event (enum ibv_event_type).
type EventType uint8

// Asynchronous event types.
const (
	EventCQErr            EventType = 0
	EventQPFatal          EventType = 1
	EventQPReqErr         EventType = 2
	EventQPAccessErr      EventType = 3
	EventCommEst          EventType = 4
	EventSQDrained        EventType = 5
	EventPathMig          EventType = 6
	EventPathMigErr       EventType = 7
	EventDeviceFatal      EventType = 8
	EventPortActive       EventType = 9
	EventPortErr          EventType = 10
	EventLIDChange        EventType = 11
	EventPKeyChange       EventType = 12
	EventSMChange         EventType = 13
	EventSRQErr           EventType = 14
	EventSRQLimitReached  EventType = 15
	EventQPLastWQEReached EventType = 16
	EventClientReregister EventType = 17
	EventGIDChange        EventType = 18
)

// eventTypeStrings are ibv_event_type_str's strings.
var eventTypeStrings = []string{"CQ error", "local work queue catastrophic error",
	"invalid request local work queue error", "local access violation work queue error",
	"communication established", "send queue drained", "path migrated",
	"path migration request error", "local catastrophic error", "port active",
	"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
	"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change"}

// String returns what ibv_event_type_str returns.
func (t EventType) String() string {
	if int(t) < len(eventTypeStrings) {
		return eventTypeStrings[t]
	}
	return "unknown"
}

// AsyncEvent is an asynchronous event (struct ibv_async_event). The field
// that matches the type is set: QP for QP events, CQ for CQ_ERR, SRQ for
// SRQ events, Port for port events.
type AsyncEvent struct {
	Type EventType
	QP   QP
	CQ   CQ
	SRQ  SRQ
	Port uint8
}
