package swhca

import (
	"sync"

	"github.com/verbsrt/verbsrt/verbs"
)

// AttrError is a rule an attribute value broke; its text becomes the
// detail of an ErrInvalidArgument.
type AttrError string

func (e AttrError) Error() string { return string(e) }

// NextState is the state an ibv_modify_qp of a QP of type typ in state
// cur moves to, after the kernel's checks of the transition and its mask;
// ErrClosed when the QP is closed.
func NextState(closed bool, typ verbs.QPType, cur verbs.QPState, attr *verbs.QPAttr, mask verbs.QPAttrMask) (verbs.QPState, error) {
	if closed {
		return cur, verbs.NewError("ibv_modify_qp", verbs.ErrClosed, "QP")
	}
	next := cur
	if mask&verbs.QPAttrState != 0 {
		next = attr.State
	}
	if next > verbs.QPStateErr {
		return next, verbs.Errorf("ibv_modify_qp", verbs.ErrInvalidArgument, "state %d", next)
	}
	return next, verbs.CheckModify(typ, cur, next, mask)
}

// AttrRules are the device's own rules for the attribute values of
// ibv_modify_qp; CheckAttr applies them among the common ones.
type AttrRules struct {
	// Port checks port_num.
	Port func(port uint8) error
	// RdAtomic checks max_rd_atomic and max_dest_rd_atomic, those of
	// them mask names.
	RdAtomic func(a *verbs.QPAttr, mask verbs.QPAttrMask) error
	// AV checks the address vector.
	AV func(*verbs.AHAttr) error
}

// CheckAttr checks the values mask names in a, in the order the kernel
// does: port, P_Key index, path MTU, timers and retry counts, read and
// atomic depths, access flags, the address vector.
func CheckAttr(a *verbs.QPAttr, mask verbs.QPAttrMask, r AttrRules) error {
	if mask&verbs.QPAttrPort != 0 {
		if err := r.Port(a.PortNum); err != nil {
			return err
		}
	}
	switch {
	case mask&verbs.QPAttrPKeyIndex != 0 && a.PKeyIndex != 0:
		return AttrError("pkey_index must be 0 (the P_Key table has one entry)")
	case mask&verbs.QPAttrPathMTU != 0 && a.PathMTU.Bytes() == 0:
		return AttrError("path_mtu")
	case mask&verbs.QPAttrTimeout != 0 && a.Timeout > 31,
		mask&verbs.QPAttrRetryCnt != 0 && a.RetryCnt > 7,
		mask&verbs.QPAttrRNRRetry != 0 && a.RNRRetry > 7,
		mask&verbs.QPAttrMinRNRTimer != 0 && a.MinRNRTimer > 31:
		return AttrError("timeout, retry_cnt, rnr_retry or min_rnr_timer out of range")
	}
	if mask&(verbs.QPAttrMaxQPRdAtomic|verbs.QPAttrMaxDestRdAtomic) != 0 {
		if err := r.RdAtomic(a, mask); err != nil {
			return err
		}
	}
	if mask&verbs.QPAttrAccessFlags != 0 && a.AccessFlags&^(verbs.AccessLocalWrite|RemoteAccess) != 0 {
		return AttrError("qp_access_flags")
	}
	if mask&verbs.QPAttrAV != 0 {
		return r.AV(&a.AH)
	}
	return nil
}

// ApplyAttr copies into t the attributes mask names in a (the state
// aside: the QP's state machine sets it).
func ApplyAttr(t, a *verbs.QPAttr, mask verbs.QPAttrMask) {
	set := func(bit verbs.QPAttrMask, f func()) {
		if mask&bit != 0 {
			f()
		}
	}
	set(verbs.QPAttrAccessFlags, func() { t.AccessFlags = a.AccessFlags })
	set(verbs.QPAttrPKeyIndex, func() { t.PKeyIndex = a.PKeyIndex })
	set(verbs.QPAttrPort, func() { t.PortNum = a.PortNum })
	set(verbs.QPAttrQKey, func() { t.QKey = a.QKey })
	set(verbs.QPAttrAV, func() { t.AH = a.AH })
	set(verbs.QPAttrPathMTU, func() { t.PathMTU = a.PathMTU })
	set(verbs.QPAttrTimeout, func() { t.Timeout = a.Timeout })
	set(verbs.QPAttrRetryCnt, func() { t.RetryCnt = a.RetryCnt })
	set(verbs.QPAttrRNRRetry, func() { t.RNRRetry = a.RNRRetry })
	set(verbs.QPAttrRQPSN, func() { t.RQPSN = a.RQPSN })
	set(verbs.QPAttrMaxQPRdAtomic, func() { t.MaxRdAtomic = a.MaxRdAtomic })
	set(verbs.QPAttrMinRNRTimer, func() { t.MinRNRTimer = a.MinRNRTimer })
	set(verbs.QPAttrSQPSN, func() { t.SQPSN = a.SQPSN })
	set(verbs.QPAttrMaxDestRdAtomic, func() { t.MaxDestRdAtomic = a.MaxDestRdAtomic })
	set(verbs.QPAttrDestQPN, func() { t.DestQPN = a.DestQPN })
}

// QueryAttr is what ibv_query_qp reports of a QP whose attributes are a:
// a in state, with the QP's capabilities.
func QueryAttr(a verbs.QPAttr, state verbs.QPState, caps verbs.QPCaps) verbs.QPAttr {
	a.State, a.CurState, a.Cap = state, state, caps
	return a
}

// Deps are the objects a QP or an SRQ uses, held while it lives so that
// closing one of them early fails with ErrBusy. A nil entry is one it has
// not.
type Deps struct {
	PD             *PD
	SendCQ, RecvCQ *CQ
	SRQ            *Usage
}

// Hold records one more user of each.
func (d Deps) Hold() { d.add(1) }

// Release records one user fewer of each.
func (d Deps) Release() { d.add(-1) }

func (d Deps) add(n int64) {
	if d.PD != nil {
		d.PD.uses.Add(n)
	}
	for _, q := range [...]*CQ{d.SendCQ, d.RecvCQ} {
		if q != nil {
			q.uses.Add(n)
		}
	}
	if d.SRQ != nil {
		d.SRQ.Add(n)
	}
}

// Close is the close of a QP or an SRQ obj of the context of reg: unless
// closed (read under mu) says it is closed already, it runs destroy, and
// when obj was still the context's, releases deps.
func Close(mu sync.Locker, closed *bool, destroy func(), reg *Registry, obj any, deps Deps) {
	mu.Lock()
	done := *closed
	mu.Unlock()
	if done {
		return
	}
	destroy()
	if reg.Remove(obj) {
		deps.Release()
	}
}
