package verbs_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// Short names for the mask bits, so the tables below read like the kernel's.
const (
	mState      = verbs.QPAttrState
	mCurState   = verbs.QPAttrCurState
	mSQDAsync   = verbs.QPAttrEnSQDAsync
	mAccess     = verbs.QPAttrAccessFlags
	mPKey       = verbs.QPAttrPKeyIndex
	mPort       = verbs.QPAttrPort
	mQKey       = verbs.QPAttrQKey
	mAV         = verbs.QPAttrAV
	mPathMTU    = verbs.QPAttrPathMTU
	mTimeout    = verbs.QPAttrTimeout
	mRetryCnt   = verbs.QPAttrRetryCnt
	mRNRRetry   = verbs.QPAttrRNRRetry
	mRQPSN      = verbs.QPAttrRQPSN
	mMaxQPRd    = verbs.QPAttrMaxQPRdAtomic
	mAltPath    = verbs.QPAttrAltPath
	mMinRNR     = verbs.QPAttrMinRNRTimer
	mSQPSN      = verbs.QPAttrSQPSN
	mMaxDestRd  = verbs.QPAttrMaxDestRdAtomic
	mPathMig    = verbs.QPAttrPathMigState
	mCap        = verbs.QPAttrCap
	mDestQPN    = verbs.QPAttrDestQPN
	numMaskBits = 21
)

const (
	sReset = verbs.QPStateReset
	sInit  = verbs.QPStateInit
	sRTR   = verbs.QPStateRTR
	sRTS   = verbs.QPStateRTS
	sSQD   = verbs.QPStateSQD
	sSQE   = verbs.QPStateSQE
	sErr   = verbs.QPStateErr
)

var allStates = []verbs.QPState{sReset, sInit, sRTR, sRTS, sSQD, sSQE, sErr}

// reqOpt is one cell of the kernel's qp_state_table for one QP type.
type reqOpt struct{ req, opt verbs.QPAttrMask }

// kernelTable is qp_state_table of Linux drivers/infiniband/core/verbs.c,
// transcribed independently of modify.go, for the QP types libibverbs
// exposes (XRC_SEND is the kernel's XRC_INI, XRC_RECV its XRC_TGT; raw
// packet's RATE_LIMIT has no bit in libibverbs' ibv_qp_attr_mask and is left
// out). A transition absent for a type is not allowed for it.
//
// One deliberate deviation: the kernel marks SQE -> RTS valid for every type
// (with no attribute for RC, XRC and RAW_PACKET), but only UD and UC QPs can
// be in SQE (a reliable QP goes to ERR instead), so verbsrt allows SQE -> RTS
// for UD and UC only.
var kernelTable = func() map[[2]verbs.QPState]map[verbs.QPType]reqOpt {
	const (
		rc, uc, ud  = verbs.QPTypeRC, verbs.QPTypeUC, verbs.QPTypeUD
		xi, xt, raw = verbs.QPTypeXRCSend, verbs.QPTypeXRCRecv, verbs.QPTypeRawPacket
	)
	all := func(ro reqOpt) map[verbs.QPType]reqOpt {
		return map[verbs.QPType]reqOpt{rc: ro, uc: ro, ud: ro, xi: ro, xt: ro, raw: ro}
	}
	tab := map[[2]verbs.QPState]map[verbs.QPType]reqOpt{
		{sReset, sInit}: {
			ud:  {req: mPKey | mPort | mQKey},
			raw: {req: mPort},
			uc:  {req: mPKey | mPort | mAccess},
			rc:  {req: mPKey | mPort | mAccess},
			xi:  {req: mPKey | mPort | mAccess},
			xt:  {req: mPKey | mPort | mAccess},
		},
		{sInit, sInit}: {
			ud:  {opt: mPKey | mPort | mQKey},
			uc:  {opt: mPKey | mPort | mAccess},
			rc:  {opt: mPKey | mPort | mAccess},
			xi:  {opt: mPKey | mPort | mAccess},
			xt:  {opt: mPKey | mPort | mAccess},
			raw: {},
		},
		{sInit, sRTR}: {
			uc:  {req: mAV | mPathMTU | mDestQPN | mRQPSN, opt: mAltPath | mAccess | mPKey},
			rc:  {req: mAV | mPathMTU | mDestQPN | mRQPSN | mMaxDestRd | mMinRNR, opt: mAltPath | mAccess | mPKey},
			xi:  {req: mAV | mPathMTU | mDestQPN | mRQPSN, opt: mAltPath | mAccess | mPKey},
			xt:  {req: mAV | mPathMTU | mDestQPN | mRQPSN | mMaxDestRd | mMinRNR, opt: mAltPath | mAccess | mPKey},
			ud:  {opt: mPKey | mQKey},
			raw: {},
		},
		{sRTR, sRTS}: {
			ud:  {req: mSQPSN, opt: mCurState | mQKey},
			uc:  {req: mSQPSN, opt: mCurState | mAltPath | mAccess | mPathMig},
			rc:  {req: mTimeout | mRetryCnt | mRNRRetry | mSQPSN | mMaxQPRd, opt: mCurState | mAltPath | mAccess | mMinRNR | mPathMig},
			xi:  {req: mTimeout | mRetryCnt | mRNRRetry | mSQPSN | mMaxQPRd, opt: mCurState | mAltPath | mAccess | mPathMig},
			xt:  {req: mTimeout | mSQPSN, opt: mCurState | mAltPath | mAccess | mMinRNR | mPathMig},
			raw: {},
		},
		{sRTS, sRTS}: {
			ud:  {opt: mCurState | mQKey},
			uc:  {opt: mCurState | mAccess | mAltPath | mPathMig},
			rc:  {opt: mCurState | mAccess | mAltPath | mPathMig | mMinRNR},
			xi:  {opt: mCurState | mAccess | mAltPath | mPathMig},
			xt:  {opt: mCurState | mAccess | mAltPath | mPathMig | mMinRNR},
			raw: {},
		},
		{sRTS, sSQD}: {
			ud: {opt: mSQDAsync}, uc: {opt: mSQDAsync}, rc: {opt: mSQDAsync},
			xi: {opt: mSQDAsync}, xt: {opt: mSQDAsync}, raw: {},
		},
		{sSQD, sRTS}: {
			ud:  {opt: mCurState | mQKey},
			uc:  {opt: mCurState | mAltPath | mAccess | mPathMig},
			rc:  {opt: mCurState | mAltPath | mAccess | mMinRNR | mPathMig},
			xi:  {opt: mCurState | mAltPath | mAccess | mPathMig},
			xt:  {opt: mCurState | mAltPath | mAccess | mMinRNR | mPathMig},
			raw: {},
		},
		{sSQD, sSQD}: {
			ud: {opt: mPKey | mQKey},
			uc: {opt: mAV | mAltPath | mAccess | mPKey | mPathMig},
			rc: {opt: mPort | mAV | mTimeout | mRetryCnt | mRNRRetry | mMaxQPRd | mMaxDestRd |
				mAltPath | mAccess | mPKey | mMinRNR | mPathMig},
			xi: {opt: mPort | mAV | mTimeout | mRetryCnt | mRNRRetry | mMaxQPRd |
				mAltPath | mAccess | mPKey | mPathMig},
			xt: {opt: mPort | mAV | mTimeout | mMaxDestRd | mAltPath | mAccess | mPKey |
				mMinRNR | mPathMig},
			raw: {},
		},
		{sSQE, sRTS}: {
			ud: {opt: mCurState | mQKey},
			uc: {opt: mCurState | mAccess},
		},
	}
	// Every state may go to RESET, every state but RESET to ERR, with the
	// state bit only.
	for _, s := range allStates {
		tab[[2]verbs.QPState{s, sReset}] = all(reqOpt{})
		if s != sReset {
			tab[[2]verbs.QPState{s, sErr}] = all(reqOpt{})
		}
	}
	return tab
}()

// kernelVerdict is what ib_modify_qp_is_ok decides, as the sentinel
// CheckModify returns: nil, ErrQPState (the transition does not exist, or
// CUR_STATE from a state that has none) or ErrInvalidArgument (the mask).
func kernelVerdict(t verbs.QPType, cur, next verbs.QPState, mask verbs.QPAttrMask) error {
	if mask&mCurState != 0 && cur != sRTR && cur != sRTS && cur != sSQD && cur != sSQE {
		return verbs.ErrQPState
	}
	if mask&mState == 0 {
		next = cur
	}
	ro, ok := kernelTable[[2]verbs.QPState{cur, next}][t]
	if !ok {
		return verbs.ErrQPState
	}
	if mask&ro.req != ro.req || mask&^(ro.req|ro.opt|mState) != 0 {
		return verbs.ErrInvalidArgument
	}
	return nil
}

func bits(m verbs.QPAttrMask) []verbs.QPAttrMask {
	var out []verbs.QPAttrMask
	for i := range numMaskBits {
		if b := verbs.QPAttrMask(1) << i; m&b != 0 {
			out = append(out, b)
		}
	}
	return out
}

const allMaskBits = verbs.QPAttrMask(1)<<numMaskBits - 1

// checkModifyErr asserts that err is the *verbs.Error CheckModify returns for
// sentinel want (nil: no error).
func checkModifyErr(t *testing.T, err, want error, what string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s: got %v, want nil", what, err)
		}
		return
	}
	if err == nil {
		t.Errorf("%s: got nil, want %v", what, want)
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want errors.Is %v", what, err, want)
	}
	for _, other := range []error{verbs.ErrQPState, verbs.ErrInvalidArgument} {
		if other != want && errors.Is(err, other) {
			t.Errorf("%s: %v also matches %v", what, err, other)
		}
	}
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("%s: %v does not match EINVAL", what, err)
	}
	var e *verbs.Error
	if !errors.As(err, &e) {
		t.Errorf("%s: %T is not a *verbs.Error", what, err)
	} else if e.Op != "ibv_modify_qp" {
		t.Errorf("%s: Op %q, want ibv_modify_qp", what, e.Op)
	}
}

// step is one transition of the connection path with exactly the required
// attributes.
type step struct {
	from, to verbs.QPState
	mask     verbs.QPAttrMask // required bits, without STATE
}

var connectPaths = map[verbs.QPType][]step{
	verbs.QPTypeRC: {
		{sReset, sInit, mPKey | mPort | mAccess},
		{sInit, sRTR, mAV | mPathMTU | mDestQPN | mRQPSN | mMaxDestRd | mMinRNR},
		{sRTR, sRTS, mTimeout | mRetryCnt | mRNRRetry | mSQPSN | mMaxQPRd},
	},
	verbs.QPTypeUC: {
		{sReset, sInit, mPKey | mPort | mAccess},
		{sInit, sRTR, mAV | mPathMTU | mDestQPN | mRQPSN},
		{sRTR, sRTS, mSQPSN},
	},
	verbs.QPTypeUD: {
		{sReset, sInit, mPKey | mPort | mQKey},
		{sInit, sRTR, 0},
		{sRTR, sRTS, mSQPSN},
	},
	verbs.QPTypeXRCSend: {
		{sReset, sInit, mPKey | mPort | mAccess},
		{sInit, sRTR, mAV | mPathMTU | mDestQPN | mRQPSN},
		{sRTR, sRTS, mTimeout | mRetryCnt | mRNRRetry | mSQPSN | mMaxQPRd},
	},
	verbs.QPTypeXRCRecv: {
		{sReset, sInit, mPKey | mPort | mAccess},
		{sInit, sRTR, mAV | mPathMTU | mDestQPN | mRQPSN | mMaxDestRd | mMinRNR},
		{sRTR, sRTS, mTimeout | mSQPSN},
	},
	verbs.QPTypeRawPacket: {
		{sReset, sInit, mPort},
		{sInit, sRTR, 0},
		{sRTR, sRTS, 0},
	},
}

func TestCheckModifyConnectPath(t *testing.T) {
	for _, qt := range verbs.QPTypes {
		for _, st := range connectPaths[qt] {
			mask := mState | st.mask
			if err := verbs.CheckModify(qt, st.from, st.to, mask); err != nil {
				t.Errorf("%s %s -> %s with %s: %v", qt, st.from, st.to, mask, err)
			}
		}
	}
}

func TestCheckModifyMissingRequired(t *testing.T) {
	for _, qt := range verbs.QPTypes {
		for _, st := range connectPaths[qt] {
			for _, b := range bits(st.mask) {
				mask := mState | st.mask&^b
				err := verbs.CheckModify(qt, st.from, st.to, mask)
				what := qt.String() + " " + st.from.String() + " -> " + st.to.String() + " without " + b.String()
				checkModifyErr(t, err, verbs.ErrInvalidArgument, what)
				if err != nil && !strings.Contains(err.Error(), "needs "+b.String()) {
					t.Errorf("%s: message %q does not name the missing %s", what, err, b)
				}
			}
		}
	}
	// Several missing bits are all named.
	err := verbs.CheckModify(verbs.QPTypeRC, sRTR, sRTS, mState|mSQPSN|mMaxQPRd)
	want := "verbs: ibv_modify_qp: invalid argument: RTR -> RTS on RC needs TIMEOUT|RETRY_CNT|RNR_RETRY (invalid argument)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

// TestCheckModifyOptionalAndExtra tries every mask bit on each step of the
// connection paths: optional bits are accepted, the others rejected.
func TestCheckModifyOptionalAndExtra(t *testing.T) {
	opt := map[verbs.QPType][]verbs.QPAttrMask{ // per step of connectPaths
		verbs.QPTypeRC: {0, mAltPath | mAccess | mPKey, mCurState | mAltPath | mAccess | mMinRNR | mPathMig},
		verbs.QPTypeUC: {0, mAltPath | mAccess | mPKey, mCurState | mAltPath | mAccess | mPathMig},
		verbs.QPTypeUD: {0, mPKey | mQKey, mCurState | mQKey},
	}
	for qt, opts := range opt {
		for i, st := range connectPaths[qt] {
			for _, b := range bits(allMaskBits &^ (st.mask | mState)) {
				mask := mState | st.mask | b
				err := verbs.CheckModify(qt, st.from, st.to, mask)
				what := qt.String() + " " + st.from.String() + " -> " + st.to.String() + " with extra " + b.String()
				if opts[i]&b != 0 {
					checkModifyErr(t, err, nil, what)
					continue
				}
				if b == mCurState && st.from != sRTR {
					// CUR_STATE only from RTR, RTS, SQD and SQE.
					checkModifyErr(t, err, verbs.ErrQPState, what)
					continue
				}
				checkModifyErr(t, err, verbs.ErrInvalidArgument, what)
				if err != nil && !strings.Contains(err.Error(), "does not take "+b.String()) {
					t.Errorf("%s: message %q does not name the extra %s", what, err, b)
				}
			}
			// All optional bits at once.
			checkModifyErr(t, verbs.CheckModify(qt, st.from, st.to, mState|st.mask|opts[i]), nil,
				qt.String()+" "+st.from.String()+" -> "+st.to.String()+" with every optional bit")
		}
	}

	err := verbs.CheckModify(verbs.QPTypeRC, sReset, sInit, mState|mPKey|mPort|mAccess|mQKey)
	want := "verbs: ibv_modify_qp: invalid argument: RESET -> INIT on RC does not take QKEY (invalid argument)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func TestCheckModifyIllegalTransitions(t *testing.T) {
	rc := verbs.QPTypeRC
	cases := []struct {
		qt       verbs.QPType
		cur, nxt verbs.QPState
		mask     verbs.QPAttrMask
	}{
		// Skipping a step, even with every attribute the target needs.
		{rc, sReset, sRTS, mState | mTimeout | mRetryCnt | mRNRRetry | mSQPSN | mMaxQPRd},
		{rc, sReset, sRTR, mState | mAV | mPathMTU | mDestQPN | mRQPSN | mMaxDestRd | mMinRNR},
		{rc, sInit, sRTS, mState | mTimeout | mRetryCnt | mRNRRetry | mSQPSN | mMaxQPRd},
		{verbs.QPTypeUD, sInit, sRTS, mState | mSQPSN},
		// Going back.
		{rc, sRTS, sRTR, mState},
		{rc, sRTS, sInit, mState},
		{rc, sRTR, sInit, mState},
		{verbs.QPTypeUC, sRTS, sRTR, mState},
		// A reliable QP never leaves SQE for RTS.
		{rc, sSQE, sRTS, mState},
		{verbs.QPTypeXRCSend, sSQE, sRTS, mState},
		{verbs.QPTypeXRCRecv, sSQE, sRTS, mState},
		{verbs.QPTypeRawPacket, sSQE, sRTS, mState},
		// ERR leaves only for RESET.
		{rc, sErr, sRTS, mState},
		{rc, sErr, sInit, mState | mPKey | mPort | mAccess},
		{verbs.QPTypeUD, sErr, sRTS, mState},
		// The kernel has no RESET -> ERR.
		{rc, sReset, sErr, mState},
		{verbs.QPTypeUD, sReset, sErr, mState},
		// Within a state that takes no modification.
		{rc, sRTR, sRTR, mState},
		{rc, sRTR, sRTR, mMinRNR},
		{rc, sSQE, sSQE, mState},
		{rc, sSQD, sSQE, mState},
		{rc, sRTS, sSQE, mState},
		// An unknown QP type has no transitions.
		{verbs.QPType(0), sReset, sInit, mState | mPKey | mPort | mAccess},
		// CUR_STATE is only for RTR, RTS, SQD and SQE.
		{rc, sInit, sRTR, mState | mCurState | mAV | mPathMTU | mDestQPN | mRQPSN | mMaxDestRd | mMinRNR},
		{rc, sInit, sErr, mState | mCurState},
		{rc, sReset, sReset, mState | mCurState},
	}
	for _, c := range cases {
		err := verbs.CheckModify(c.qt, c.cur, c.nxt, c.mask)
		checkModifyErr(t, err, verbs.ErrQPState, c.qt.String()+" "+c.cur.String()+" -> "+c.nxt.String()+" with "+c.mask.String())
	}
	err := verbs.CheckModify(rc, sReset, sRTS, mState)
	want := "verbs: ibv_modify_qp: QP state does not allow this: RC QP cannot go from RESET to RTS (invalid argument)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func TestCheckModifyToResetAndErr(t *testing.T) {
	for _, qt := range verbs.QPTypes {
		for _, cur := range allStates {
			if err := verbs.CheckModify(qt, cur, sReset, mState); err != nil {
				t.Errorf("%s %s -> RESET: %v", qt, cur, err)
			}
			if cur != sReset {
				if err := verbs.CheckModify(qt, cur, sErr, mState); err != nil {
					t.Errorf("%s %s -> ERR: %v", qt, cur, err)
				}
			}
			// Those transitions take no attribute but the state.
			for _, next := range []verbs.QPState{sReset, sErr} {
				if cur == sReset && next == sErr {
					continue
				}
				err := verbs.CheckModify(qt, cur, next, mState|mQKey)
				checkModifyErr(t, err, verbs.ErrInvalidArgument, qt.String()+" "+cur.String()+" -> "+next.String()+" with QKEY")
			}
		}
	}
	// A modification within ERR or RESET without the state bit.
	if err := verbs.CheckModify(verbs.QPTypeRC, sErr, sRTS, 0); err != nil {
		t.Errorf("RC in ERR, empty mask: %v", err)
	}
	checkModifyErr(t, verbs.CheckModify(verbs.QPTypeRC, sErr, sErr, mAccess), verbs.ErrInvalidArgument, "RC in ERR with ACCESS_FLAGS")
}

func TestCheckModifySQEToRTS(t *testing.T) {
	for _, c := range []struct {
		qt   verbs.QPType
		mask verbs.QPAttrMask
	}{
		{verbs.QPTypeUD, mState},
		{verbs.QPTypeUD, mState | mCurState},
		{verbs.QPTypeUD, mState | mCurState | mQKey},
		{verbs.QPTypeUC, mState},
		{verbs.QPTypeUC, mState | mCurState | mAccess},
	} {
		if err := verbs.CheckModify(c.qt, sSQE, sRTS, c.mask); err != nil {
			t.Errorf("%s SQE -> RTS with %s: %v", c.qt, c.mask, err)
		}
	}
	checkModifyErr(t, verbs.CheckModify(verbs.QPTypeUC, sSQE, sRTS, mState|mQKey), verbs.ErrInvalidArgument, "UC SQE -> RTS with QKEY")
	checkModifyErr(t, verbs.CheckModify(verbs.QPTypeUD, sSQE, sRTS, mState|mAccess), verbs.ErrInvalidArgument, "UD SQE -> RTS with ACCESS_FLAGS")
}

func TestCheckModifyWithinState(t *testing.T) {
	// Without STATE in the mask the QP stays where it is.
	ok := []struct {
		qt   verbs.QPType
		cur  verbs.QPState
		mask verbs.QPAttrMask
	}{
		{verbs.QPTypeRC, sRTS, mMinRNR},
		{verbs.QPTypeRC, sRTS, mAccess | mAltPath | mPathMig},
		{verbs.QPTypeUD, sRTS, mQKey},
		{verbs.QPTypeUD, sInit, mQKey},
		{verbs.QPTypeRC, sInit, mAccess},
		{verbs.QPTypeRC, sSQD, mTimeout | mRetryCnt},
		{verbs.QPTypeRC, sRTS, 0},
		{verbs.QPTypeRC, sReset, 0},
	}
	for _, c := range ok {
		if err := verbs.CheckModify(c.qt, c.cur, sErr /* ignored without STATE */, c.mask); err != nil {
			t.Errorf("%s within %s with %s: %v", c.qt, c.cur, c.mask, err)
		}
	}
	checkModifyErr(t, verbs.CheckModify(verbs.QPTypeUC, sRTS, sRTS, mMinRNR), verbs.ErrInvalidArgument, "UC within RTS with MIN_RNR_TIMER")
	checkModifyErr(t, verbs.CheckModify(verbs.QPTypeRC, sReset, sReset, mQKey), verbs.ErrInvalidArgument, "RC within RESET with QKEY")
}

// TestCheckModifyKernelTable compares CheckModify with the transcription of
// the kernel's table on every state pair and QP type, with the exact
// required mask, every required bit missing, every other bit added, every
// optional bit added, and with and without the STATE bit.
func TestCheckModifyKernelTable(t *testing.T) {
	n := 0
	for _, qt := range verbs.QPTypes {
		for _, cur := range allStates {
			for _, next := range allStates {
				ro := kernelTable[[2]verbs.QPState{cur, next}][qt]
				masks := []verbs.QPAttrMask{mState, mState | ro.req, mState | ro.req | ro.opt, ro.req, ro.req | ro.opt, allMaskBits}
				for _, b := range bits(ro.req) {
					masks = append(masks, mState|ro.req&^b)
				}
				for _, b := range bits(allMaskBits &^ mState) {
					masks = append(masks, mState|ro.req|b, ro.req|b)
				}
				for _, mask := range masks {
					n++
					got := verbs.CheckModify(qt, cur, next, mask)
					want := kernelVerdict(qt, cur, next, mask)
					if (got == nil) != (want == nil) || (want != nil && !errors.Is(got, want)) {
						t.Errorf("CheckModify(%s, %s, %s, %s) = %v, want %v", qt, cur, next, mask, got, want)
					}
				}
			}
		}
	}
	t.Logf("%d cases", n)
}

func TestRNRTimerDuration(t *testing.T) {
	for _, c := range []struct {
		code uint8
		want time.Duration
	}{
		{0, 655360 * time.Microsecond},
		{1, 10 * time.Microsecond},
		{2, 20 * time.Microsecond},
		{12, 640 * time.Microsecond},
		{14, 1280 * time.Microsecond},
		{18, 5120 * time.Microsecond},
		{24, 40960 * time.Microsecond},
		{31, 491520 * time.Microsecond},
	} {
		if got := verbs.RNRTimerDuration(c.code); got != c.want {
			t.Errorf("RNRTimerDuration(%d) = %v, want %v", c.code, got, c.want)
		}
	}
	// The encoding grows with the code from 1 to 31; 0 is the longest.
	for c := uint8(2); c < 32; c++ {
		if verbs.RNRTimerDuration(c) <= verbs.RNRTimerDuration(c-1) {
			t.Errorf("RNRTimerDuration(%d) = %v is not above code %d's %v", c, verbs.RNRTimerDuration(c), c-1, verbs.RNRTimerDuration(c-1))
		}
		if verbs.RNRTimerDuration(c) >= verbs.RNRTimerDuration(0) {
			t.Errorf("RNRTimerDuration(%d) = %v is not below code 0's", c, verbs.RNRTimerDuration(c))
		}
	}
}

func TestAckTimeoutDuration(t *testing.T) {
	for _, c := range []struct {
		code uint8
		want time.Duration
	}{
		{0, 0}, // wait forever
		{1, 8192 * time.Nanosecond},
		{14, 67108864 * time.Nanosecond}, // ~67.1 ms
		{18, 1073741824 * time.Nanosecond},
		{31, 4096 << 31 * time.Nanosecond}, // ~2.4 hours
	} {
		if got := verbs.AckTimeoutDuration(c.code); got != c.want {
			t.Errorf("AckTimeoutDuration(%d) = %v, want %v", c.code, got, c.want)
		}
	}
	if got := verbs.AckTimeoutDuration(14); got.Round(100*time.Microsecond) != 67100*time.Microsecond {
		t.Errorf("AckTimeoutDuration(14) = %v, want ~67.1ms", got)
	}
}
