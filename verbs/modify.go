package verbs

import (
	"fmt"
	"time"
)

// transition is one allowed QP state change: the attribute mask bits it
// requires and those it also accepts, per QP type (the kernel's
// qp_state_table in drivers/infiniband/core/verbs.c).
type transition struct {
	req, opt map[QPType]QPAttrMask
}

const (
	maskRCLikeInit = QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags
	maskUDInit     = QPAttrPKeyIndex | QPAttrPort | QPAttrQKey
	maskRCRTR      = QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN |
		QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
	maskUCRTR   = QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
	maskRTROpt  = QPAttrAltPath | QPAttrAccessFlags | QPAttrPKeyIndex
	maskRCRTS   = QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRdAtomic
	maskRTSOpt  = QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrPathMigState
	maskRCRTSRT = maskRTSOpt | QPAttrMinRNRTimer
)

func perType(ud, uc, rc, xrcSend, xrcRecv, raw QPAttrMask) map[QPType]QPAttrMask {
	return map[QPType]QPAttrMask{QPTypeUD: ud, QPTypeUC: uc, QPTypeRC: rc,
		QPTypeXRCSend: xrcSend, QPTypeXRCRecv: xrcRecv, QPTypeRawPacket: raw}
}

var transitions = map[[2]QPState]transition{
	{QPStateReset, QPStateInit}: {
		req: perType(maskUDInit, maskRCLikeInit, maskRCLikeInit, maskRCLikeInit, maskRCLikeInit, QPAttrPort),
	},
	{QPStateInit, QPStateInit}: {
		opt: perType(maskUDInit, maskRCLikeInit, maskRCLikeInit, maskRCLikeInit, maskRCLikeInit, 0),
	},
	{QPStateInit, QPStateRTR}: {
		req: perType(0, maskUCRTR, maskRCRTR, maskUCRTR, maskRCRTR, 0),
		opt: perType(QPAttrPKeyIndex|QPAttrQKey, maskRTROpt, maskRTROpt, maskRTROpt, maskRTROpt, 0),
	},
	{QPStateRTR, QPStateRTS}: {
		req: perType(QPAttrSQPSN, QPAttrSQPSN, maskRCRTS, maskRCRTS, QPAttrTimeout|QPAttrSQPSN, 0),
		opt: perType(QPAttrCurState|QPAttrQKey, maskRTSOpt, maskRCRTSRT, maskRTSOpt, maskRCRTSRT, 0),
	},
	{QPStateRTS, QPStateRTS}: {
		opt: perType(QPAttrCurState|QPAttrQKey, maskRTSOpt, maskRCRTSRT, maskRTSOpt, maskRCRTSRT, 0),
	},
	{QPStateRTS, QPStateSQD}: {
		opt: perType(QPAttrEnSQDAsync, QPAttrEnSQDAsync, QPAttrEnSQDAsync, QPAttrEnSQDAsync, QPAttrEnSQDAsync, 0),
	},
	{QPStateSQD, QPStateRTS}: {
		opt: perType(QPAttrCurState|QPAttrQKey, maskRTSOpt, maskRCRTSRT, maskRTSOpt, maskRCRTSRT, 0),
	},
	{QPStateSQD, QPStateSQD}: {
		opt: perType(QPAttrPKeyIndex|QPAttrQKey, QPAttrAV|QPAttrAltPath|QPAttrAccessFlags|QPAttrPKeyIndex|QPAttrPathMigState,
			QPAttrPort|QPAttrAV|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic|
				QPAttrMaxDestRdAtomic|QPAttrAltPath|QPAttrAccessFlags|QPAttrPKeyIndex|QPAttrMinRNRTimer|QPAttrPathMigState,
			QPAttrPort|QPAttrAV|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic|
				QPAttrAltPath|QPAttrAccessFlags|QPAttrPKeyIndex|QPAttrPathMigState,
			QPAttrPort|QPAttrAV|QPAttrTimeout|QPAttrMaxDestRdAtomic|QPAttrAltPath|QPAttrAccessFlags|
				QPAttrPKeyIndex|QPAttrMinRNRTimer|QPAttrPathMigState, 0),
	},
	// Only UD and UC leave SQE for RTS; a reliable QP in SQE goes to ERR.
	{QPStateSQE, QPStateRTS}: {
		opt: map[QPType]QPAttrMask{QPTypeUD: QPAttrCurState | QPAttrQKey, QPTypeUC: QPAttrCurState | QPAttrAccessFlags},
	},
}

// CheckModify reports whether a QP of type t may go from cur to next with
// mask, as the kernel's ib_modify_qp_is_ok decides: every state may go to
// RESET, and every state but RESET to ERR, with no attribute but the state;
// otherwise the transition must exist for the type, mask must hold every
// required bit and no bit outside required | optional. mask without
// QPAttrState checks a modification within cur.
func CheckModify(t QPType, cur, next QPState, mask QPAttrMask) error {
	if mask&QPAttrCurState != 0 && cur != QPStateRTR && cur != QPStateRTS &&
		cur != QPStateSQD && cur != QPStateSQE {
		return Errorf("ibv_modify_qp", ErrQPState, "CUR_STATE is not allowed from %s", cur)
	}
	if mask&QPAttrState == 0 {
		next = cur
	}
	if next == QPStateReset || next == QPStateErr {
		if cur == QPStateReset && next == QPStateErr {
			return Errorf("ibv_modify_qp", ErrQPState, "%s QP cannot go from %s to %s", t, cur, next)
		}
		if extra := mask &^ QPAttrState; extra != 0 {
			return Errorf("ibv_modify_qp", ErrInvalidArgument, "%s -> %s on %s does not take %s", cur, next, t, extra)
		}
		return nil
	}
	tr := transitions[[2]QPState{cur, next}]
	req, hasReq := tr.req[t]
	opt, hasOpt := tr.opt[t]
	if !hasReq && !hasOpt {
		return Errorf("ibv_modify_qp", ErrQPState, "%s QP cannot go from %s to %s", t, cur, next)
	}
	if missing := req &^ mask; missing != 0 {
		return Errorf("ibv_modify_qp", ErrInvalidArgument, "%s -> %s on %s needs %s", cur, next, t, missing)
	}
	if extra := mask &^ (req | opt | QPAttrState); extra != 0 {
		return Errorf("ibv_modify_qp", ErrInvalidArgument, "%s -> %s on %s does not take %s", cur, next, t, extra)
	}
	return nil
}

// rnrTimerMicros is the IB encoding of min_rnr_timer, in microseconds
// (IBA table 45). Code 0 is the longest.
var rnrTimerMicros = [32]uint32{655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640,
	960, 1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440,
	81920, 122880, 163840, 245760, 327680, 491520}

// RNRTimerDuration decodes a min_rnr_timer value.
func RNRTimerDuration(code uint8) time.Duration {
	return time.Duration(rnrTimerMicros[code&31]) * time.Microsecond
}

// AckTimeoutDuration decodes the local ACK timeout: 4.096 µs * 2^code, 0 for
// code 0, which means wait forever.
func AckTimeoutDuration(code uint8) time.Duration {
	if code == 0 {
		return 0
	}
	return time.Duration(4096<<(code&31)) * time.Nanosecond
}

// AckTimeoutCode encodes a local ACK timeout: the smallest code (1 to 31)
// whose duration is at least d, 31 for one longer than code 31's.
func AckTimeoutCode(d time.Duration) uint8 {
	for code := uint8(1); code < 31; code++ {
		if AckTimeoutDuration(code) >= d {
			return code
		}
	}
	return 31
}

// String renders a QPAttr compactly for logs and test failures.
func (a *QPAttr) String() string {
	return fmt.Sprintf("{state %s dest_qpn %#x mtu %s timeout %d retry %d rnr_retry %d min_rnr %d}",
		a.State, a.DestQPN, a.PathMTU, a.Timeout, a.RetryCnt, a.RNRRetry, a.MinRNRTimer)
}
