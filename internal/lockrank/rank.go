package lockrank

// Rank is a lock's place in the order: a goroutine may Lock a lock only
// while every lock it holds has a lower rank.
type Rank uint8

// The lock order of the module, the one table of it: a lock may be taken
// while the goroutine holds only locks above it in this list. Each entry
// names the field its class is declared on; the chain it encodes crosses
// packages:
//
//	cqpoller.Poller.mu -> cqpoller.cqOwner.mu (the CQ's handler lock)
//	  -> runtime.recvStore.mu (re-posting receives while handling a CQ)
//	  -> a provider's queue locks (SRQ.PostRecv; QP.PostSend from an
//	     inline drain) -> the software HCA's CQ.mu -> CompChannel.mu
//
// What the poller calls under cqOwner.mu that takes no ranked lock (the
// actor's Complete, the credit handlers) is described in cqpoller's doc.
// A provider's locks come after everything above the provider, and the two
// software providers' groups never nest in each other; what both share
// (verbs/internal/swhca) comes after both.
const (
	// cqpoller.
	rankPoller  Rank = iota + 1 // Poller.mu: the poller's targets and active set
	rankCQOwner                 // cqOwner.mu: held by whoever handles a CQ's completions

	// runtime.
	rankRecvStore // recvStore.mu: receive buffers and the pools' counts

	// verbs/soft: execution holds at most one QP lock at a time (the
	// requester's, then the responder's), and a poster rings the doorbell
	// holding none.
	rankSoftExec // engine.execMu: held while a WQE executes
	rankSoftQP   // qp.mu
	rankSoftSRQ  // srq.mu

	// verbs/rocev2: the verbs QP around a transport QP (rcQP, udQP), the
	// transport QP's own locks, then the SRQ its responder takes receives
	// from; completions are delivered under deliverMu after mu is
	// released, and what receives them takes no QP lock.
	rankRoCEQP       // qp.mu: the verbs state machine
	rankRoCERx       // Transport.rxMu: the one reader of the socket
	rankRoCEReceiver // rcQP.mu, udQP.mu: a Receiver's own lock
	rankRoCESRQ      // srq.mu
	rankRoCEDeliver  // rcQP.deliverMu, udQP.deliverMu: completions in order

	// verbs/internal/swhca, under either provider's locks.
	rankCQ          // CQ.mu
	rankCompChannel // CompChannel.mu

	// Leaves: nothing is taken under them.
	rankRoCETransport // rocev2 Transport.mu: receivers and faults
	rankRegistry      // swhca Registry.mu: a context's resources
	rankEvents        // swhca Registry.evMu: a context's async events
)

// A class is the type argument of a Mutex: it names the lock's rank. Only
// this package declares classes, so every rank is in the table above.
type class interface{ rank() Rank }

// The classes, one per rank, in the table's order.
type (
	Poller         struct{}
	CQOwner        struct{}
	RecvStore      struct{}
	SoftExec       struct{}
	SoftQP         struct{}
	SoftSRQ        struct{}
	RoCEQP         struct{}
	RoCERx         struct{}
	RoCEReceiver   struct{}
	RoCESRQ        struct{}
	RoCEDeliver    struct{}
	CQ             struct{}
	CompChannel    struct{}
	RoCETransport  struct{}
	Registry       struct{}
	RegistryEvents struct{}
)

func (Poller) rank() Rank         { return rankPoller }
func (CQOwner) rank() Rank        { return rankCQOwner }
func (RecvStore) rank() Rank      { return rankRecvStore }
func (SoftExec) rank() Rank       { return rankSoftExec }
func (SoftQP) rank() Rank         { return rankSoftQP }
func (SoftSRQ) rank() Rank        { return rankSoftSRQ }
func (RoCEQP) rank() Rank         { return rankRoCEQP }
func (RoCERx) rank() Rank         { return rankRoCERx }
func (RoCEReceiver) rank() Rank   { return rankRoCEReceiver }
func (RoCESRQ) rank() Rank        { return rankRoCESRQ }
func (RoCEDeliver) rank() Rank    { return rankRoCEDeliver }
func (CQ) rank() Rank             { return rankCQ }
func (CompChannel) rank() Rank    { return rankCompChannel }
func (RoCETransport) rank() Rank  { return rankRoCETransport }
func (Registry) rank() Rank       { return rankRegistry }
func (RegistryEvents) rank() Rank { return rankEvents }
