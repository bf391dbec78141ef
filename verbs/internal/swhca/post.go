package swhca

import "github.com/verbsrt/verbsrt/verbs"

// Errors of posting that both engines return alike.
var (
	ErrRecvInReset   = verbs.NewError("ibv_post_recv", verbs.ErrQPState, "the QP is in RESET")
	ErrSendQueueFull = verbs.NewError("ibv_post_send", verbs.ErrNoMemory, "send queue full")
	ErrSendClosed    = verbs.NewError("ibv_post_send", verbs.ErrClosed, "QP")
	ErrRecvOnSRQ     = verbs.NewError("ibv_post_recv", verbs.ErrInvalidArgument, "the QP receives through an SRQ")
)

// SRQSize is an SRQ's size and its srq_limit, as ibv_create_srq and
// ibv_modify_srq check them. The limit is guarded by the SRQ's lock.
type SRQSize struct {
	MaxWR, MaxSGE int // as granted: rounded up, at least 1 SGE
	limit         int // srq_limit: armed when > 0
}

// NewSRQSize checks the size and the limit of spec.
func NewSRQSize(spec verbs.SRQSpec) (SRQSize, error) {
	const op = "ibv_create_srq"
	if spec.MaxWR < 1 || spec.MaxWR > MaxSRQWR || spec.MaxSGE < 0 || spec.MaxSGE > MaxSGE {
		return SRQSize{}, verbs.Errorf(op, verbs.ErrInvalidArgument, "max_wr %d max_sge %d", spec.MaxWR, spec.MaxSGE)
	}
	z := SRQSize{MaxWR: QueueCapacity(spec.MaxWR), MaxSGE: max(spec.MaxSGE, 1)}
	if spec.Limit < 0 || spec.Limit > z.MaxWR {
		return SRQSize{}, verbs.Errorf(op, verbs.ErrInvalidArgument, "srq_limit %d > max_wr %d", spec.Limit, z.MaxWR)
	}
	z.limit = spec.Limit
	return z, nil
}

// Modify applies an ibv_modify_srq: only srq_limit may change, within
// 0..MaxWR.
func (z *SRQSize) Modify(attr verbs.SRQAttr, mask verbs.SRQAttrMask) error {
	const op = "ibv_modify_srq"
	if mask&^(verbs.SRQAttrMaxWR|verbs.SRQAttrLimit) != 0 {
		return verbs.Errorf(op, verbs.ErrInvalidArgument, "mask %#x", uint32(mask))
	}
	if mask&verbs.SRQAttrMaxWR != 0 {
		return verbs.NewError(op, verbs.ErrNotSupported, "resizing an SRQ")
	}
	if mask&verbs.SRQAttrLimit != 0 {
		if attr.Limit < 0 || attr.Limit > z.MaxWR {
			return verbs.Errorf(op, verbs.ErrInvalidArgument, "srq_limit %d > max_wr %d", attr.Limit, z.MaxWR)
		}
		z.limit = attr.Limit
	}
	return nil
}

// Attr is what ibv_query_srq reports.
func (z *SRQSize) Attr() verbs.SRQAttr {
	return verbs.SRQAttr{MaxWR: z.MaxWR, MaxSGE: z.MaxSGE, Limit: z.limit}
}

// Consumed is told how many receives are left after one was taken; it
// reports whether that crossed the armed limit, which then disarms
// (SEMANTICS 15c, 15d: checked on consumption only). The caller raises
// SRQ_LIMIT_REACHED.
func (z *SRQSize) Consumed(left int) bool {
	fire := z.limit > 0 && left < z.limit
	if fire {
		z.limit = 0
	}
	return fire
}
