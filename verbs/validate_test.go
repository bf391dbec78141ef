package verbs_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// fakeAH stands for an address handle: Validate only checks that a UD WR
// has one.
type fakeAH struct{}

func (fakeAH) Close() error { return nil }

const (
	ud      = verbs.QPTypeUD
	uc      = verbs.QPTypeUC
	rc      = verbs.QPTypeRC
	xrcSend = verbs.QPTypeXRCSend
	xrcRecv = verbs.QPTypeXRCRecv
	raw     = verbs.QPTypeRawPacket
)

// manPageTable is the opcode x QP-type table of ibv_post_send(3), row by
// row, transcribed independently of validate.go. XRC_RECV has no send queue
// and so appears in no row.
var manPageTable = map[verbs.Opcode][]verbs.QPType{
	verbs.OpSend:           {ud, uc, rc, xrcSend, raw},
	verbs.OpSendImm:        {ud, uc, rc, xrcSend},
	verbs.OpWrite:          {uc, rc, xrcSend},
	verbs.OpWriteImm:       {uc, rc, xrcSend},
	verbs.OpRead:           {rc, xrcSend},
	verbs.OpAtomicCmpSwp:   {rc, xrcSend},
	verbs.OpAtomicFetchAdd: {rc, xrcSend},
	verbs.OpLocalInv:       {uc, rc, xrcSend},
	verbs.OpBindMW:         {uc, rc, xrcSend},
	verbs.OpSendInv:        {uc, rc, xrcSend},
	verbs.OpTSO:            {ud, raw},
}

func inTable(qt verbs.QPType, op verbs.Opcode) bool { return slices.Contains(manPageTable[op], qt) }

// verbsrt has no memory-window or TSO API: these are refused with
// ErrNotSupported where the table allows them.
func unsupported(op verbs.Opcode) bool { return op == verbs.OpBindMW || op == verbs.OpTSO }

// isSendFamily and isWriteFamily are the man page's "Send" and "RDMA Write".
func isSendFamily(op verbs.Opcode) bool {
	return op == verbs.OpSend || op == verbs.OpSendImm || op == verbs.OpSendInv
}

func isWriteFamily(op verbs.Opcode) bool { return op == verbs.OpWrite || op == verbs.OpWriteImm }

// limits are generous caps, so that only the rule under test can fail.
func limits(qt verbs.QPType) verbs.SendLimits {
	return verbs.SendLimits{Type: qt, MaxSendSGE: 4, MaxInlineData: 64, IPCsum: true}
}

// validWR returns a WR of opcode op that passes every rule on a QP of type qt
// whose table cell allows op: one 8-byte SGE (what atomics need), aligned
// remote addresses, an AH on UD, a remote SRQ number on XRC.
func validWR(qt verbs.QPType, op verbs.Opcode, id uint64) verbs.SendWR {
	wr := verbs.SendWR{
		ID:     id,
		Opcode: op,
		SGL:    []verbs.SGE{{Addr: 0x10000, Length: 8, LKey: 0x11}},
		RDMA:   verbs.RDMA{RemoteAddr: 0x20000, RKey: 0x22},
		Atomic: verbs.Atomic{RemoteAddr: 0x30008, RKey: 0x33, CompareAdd: 1, Swap: 2},
	}
	if qt == ud {
		wr.UD = verbs.UD{AH: fakeAH{}, RemoteQPN: 0x44, RemoteQKey: 0x11111111}
	}
	if qt == xrcSend {
		wr.RemoteSRQN = 0x55
	}
	return wr
}

// rejection is what a rejected WR must look like.
type rejection struct {
	notSupported bool   // ErrNotSupported and EOPNOTSUPP instead of ErrInvalidWR and EINVAL
	index        int    // WRError.Index
	id           uint64 // WRError.WRID
	rule         string // the exact rule, when not empty
	contains     string // a part of the rule, when not empty
}

// checkRejected asserts that err is a *verbs.WRError as want describes.
func checkRejected(t *testing.T, what string, err error, want rejection) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want rejected", what)
		return
	}
	sentinel, other := verbs.ErrInvalidWR, verbs.ErrNotSupported
	errno, otherErrno := syscall.EINVAL, syscall.EOPNOTSUPP
	if want.notSupported {
		sentinel, other = other, sentinel
		errno, otherErrno = otherErrno, errno
	}
	if !errors.Is(err, sentinel) || errors.Is(err, other) {
		t.Errorf("%s: %v: errors.Is %v = %v, %v = %v", what, err,
			sentinel, errors.Is(err, sentinel), other, errors.Is(err, other))
	}
	if !errors.Is(err, errno) || errors.Is(err, otherErrno) {
		t.Errorf("%s: %v: errors.Is %v = %v, %v = %v", what, err,
			errno, errors.Is(err, errno), otherErrno, errors.Is(err, otherErrno))
	}
	var e *verbs.WRError
	if !errors.As(err, &e) {
		t.Errorf("%s: %T is not a *verbs.WRError", what, err)
		return
	}
	if e.Index != want.index || e.WRID != want.id {
		t.Errorf("%s: %v: Index %d WRID %#x, want %d %#x", what, err, e.Index, e.WRID, want.index, want.id)
	}
	if e.Err != sentinel {
		t.Errorf("%s: Err %v, want %v", what, e.Err, sentinel)
	}
	if want.rule != "" && e.Rule != want.rule {
		t.Errorf("%s: rule %q, want %q", what, e.Rule, want.rule)
	}
	if want.contains != "" && !strings.Contains(e.Rule, want.contains) {
		t.Errorf("%s: rule %q does not mention %q", what, e.Rule, want.contains)
	}
	if e.Rule == "" {
		t.Errorf("%s: empty rule", what)
	}
	if msg := fmt.Sprintf("verbs: wr %d (id %#x): %s", want.index, want.id, e.Rule); err.Error() != msg {
		t.Errorf("%s: message %q, want %q", what, err.Error(), msg)
	}
}

// checkOne validates wr alone through Validate (index 0) and through Check
// at index 5, and compares with want (nil: accepted).
func checkOne(t *testing.T, what string, lim verbs.SendLimits, wr verbs.SendWR, want *rejection) {
	t.Helper()
	errV := verbs.Validate(lim, []verbs.SendWR{wr})
	errC := lim.Check(5, &wr)
	if want == nil {
		if errV != nil || errC != nil {
			t.Errorf("%s: Validate: %v, Check: %v; want accepted", what, errV, errC)
		}
		return
	}
	w := *want
	w.index, w.id = 0, wr.ID
	checkRejected(t, what+" (Validate)", errV, w)
	w.index = 5
	checkRejected(t, what+" (Check)", errC, w)
}

// cellVerdict is what the opcode table alone says of op on qt.
func cellVerdict(qt verbs.QPType, op verbs.Opcode) *rejection {
	switch {
	case qt == xrcRecv:
		return &rejection{rule: "XRC_RECV QPs have no send queue"}
	case !inTable(qt, op):
		return &rejection{rule: fmt.Sprintf("%s is not supported on %s QPs", op, qt)}
	case unsupported(op):
		return &rejection{notSupported: true,
			rule: fmt.Sprintf("%s is not supported by verbsrt (no memory windows or TSO headers)", op)}
	}
	return nil
}

// TestValidateOpcodeTable checks every cell of the table: 11 opcodes x 6 QP
// types.
func TestValidateOpcodeTable(t *testing.T) {
	if len(verbs.Opcodes) != 11 || len(verbs.QPTypes) != 6 {
		t.Fatalf("%d opcodes and %d QP types, want 11 and 6", len(verbs.Opcodes), len(verbs.QPTypes))
	}
	accepted := 0
	for _, qt := range verbs.QPTypes {
		for _, op := range verbs.Opcodes {
			t.Run(qt.String()+"/"+op.String(), func(t *testing.T) {
				if got, want := verbs.OpcodeAllowed(qt, op), inTable(qt, op); got != want {
					t.Errorf("OpcodeAllowed(%s, %s) = %v, want %v", qt, op, got, want)
				}
				want := cellVerdict(qt, op)
				if want == nil {
					accepted++
				}
				checkOne(t, "", limits(qt), validWR(qt, op, uint64(op)<<8|uint64(qt)), want)
			})
		}
	}
	// SEND 5, SEND_WITH_IMM 4, RDMA_WRITE 3, RDMA_WRITE_WITH_IMM 3,
	// RDMA_READ 2, the atomics 2 each, LOCAL_INV 3, SEND_WITH_INV 3;
	// BIND_MW and TSO none.
	if accepted != 27 {
		t.Errorf("%d cells accepted, want 27", accepted)
	}
}

// TestValidateSendFlags tries each send flag on each opcode of each QP type,
// with and without checksum offload.
func TestValidateSendFlags(t *testing.T) {
	flags := []verbs.SendFlags{verbs.SendFence, verbs.SendSignaled, verbs.SendSolicited, verbs.SendInline, verbs.SendIPCsum}
	for _, csum := range []bool{true, false} {
		for _, qt := range verbs.QPTypes {
			for _, op := range verbs.Opcodes {
				for _, f := range flags {
					lim := limits(qt)
					lim.IPCsum = csum
					wr := validWR(qt, op, 0x1000+uint64(f))
					wr.Flags = f
					want := cellVerdict(qt, op) // the opcode is checked first
					if want == nil {
						switch f {
						case verbs.SendFence:
							if qt != rc {
								want = &rejection{rule: fmt.Sprintf("FENCE is valid only on RC QPs, not %s", qt)}
							}
						case verbs.SendSolicited:
							if !isSendFamily(op) && op != verbs.OpWriteImm {
								want = &rejection{rule: fmt.Sprintf("SOLICITED is valid only for SEND and RDMA_WRITE_WITH_IMM, not %s", op)}
							}
						case verbs.SendInline:
							if !isSendFamily(op) && !isWriteFamily(op) {
								want = &rejection{rule: fmt.Sprintf("INLINE is valid only for SEND and RDMA_WRITE, not %s", op)}
							}
						case verbs.SendIPCsum:
							if !csum || (qt != ud && qt != raw) {
								want = &rejection{rule: "IP_CSUM needs a UD or RAW_PACKET QP on a device with checksum offload"}
							}
						}
					}
					checkOne(t, fmt.Sprintf("%s %s %s csum=%v", qt, op, f, csum), lim, wr, want)
				}
			}
		}
	}
}

func TestValidateFlagCombinations(t *testing.T) {
	cases := []struct {
		qt    verbs.QPType
		op    verbs.Opcode
		flags verbs.SendFlags
		want  *rejection
	}{
		{rc, verbs.OpSend, verbs.SendFence | verbs.SendSignaled | verbs.SendSolicited | verbs.SendInline, nil},
		{rc, verbs.OpWriteImm, verbs.SendFence | verbs.SendSignaled | verbs.SendSolicited | verbs.SendInline, nil},
		{ud, verbs.OpSendImm, verbs.SendSignaled | verbs.SendSolicited | verbs.SendInline | verbs.SendIPCsum, nil},
		{raw, verbs.OpSend, verbs.SendSignaled | verbs.SendInline | verbs.SendIPCsum, nil},
		{xrcSend, verbs.OpSendInv, verbs.SendSignaled | verbs.SendSolicited | verbs.SendInline, nil},
		{rc, verbs.OpRead, verbs.SendFence | verbs.SendSignaled, nil},
		{rc, verbs.OpAtomicFetchAdd, verbs.SendFence | verbs.SendSignaled, nil},
		// The rules are checked in order: FENCE, SOLICITED, IP_CSUM, ..., INLINE.
		{uc, verbs.OpWrite, verbs.SendFence | verbs.SendSolicited, &rejection{rule: "FENCE is valid only on RC QPs, not UC"}},
		{rc, verbs.OpRead, verbs.SendSolicited | verbs.SendInline, &rejection{rule: "SOLICITED is valid only for SEND and RDMA_WRITE_WITH_IMM, not RDMA_READ"}},
		{rc, verbs.OpRead, verbs.SendInline | verbs.SendIPCsum, &rejection{rule: "IP_CSUM needs a UD or RAW_PACKET QP on a device with checksum offload"}},
		{rc, verbs.OpLocalInv, verbs.SendSignaled | verbs.SendInline, &rejection{rule: "INLINE is valid only for SEND and RDMA_WRITE, not LOCAL_INV"}},
		// Unknown bits beside known ones.
		{rc, verbs.OpSend, verbs.SendSignaled | 1<<7, &rejection{rule: "unknown send flags 0x80"}},
		{rc, verbs.OpSend, verbs.SendFence | 1<<5 | 1<<31, &rejection{rule: "unknown send flags 0x80000020"}},
	}
	for _, c := range cases {
		wr := validWR(c.qt, c.op, 9)
		wr.Flags = c.flags
		checkOne(t, fmt.Sprintf("%s %s %s", c.qt, c.op, c.flags), limits(c.qt), wr, c.want)
	}
}

func TestValidateUnknownFlags(t *testing.T) {
	for _, qt := range []verbs.QPType{rc, uc, ud, xrcSend, raw} {
		for b := 5; b < 32; b++ {
			wr := validWR(qt, verbs.OpSend, uint64(b))
			wr.Flags = verbs.SendFlags(1) << b
			checkOne(t, fmt.Sprintf("%s flag bit %d", qt, b), limits(qt), wr,
				&rejection{rule: fmt.Sprintf("unknown send flags %#x", uint32(1)<<b)})
		}
	}
}

func TestValidateUnknownOpcode(t *testing.T) {
	types := append([]verbs.QPType{0, 7}, verbs.QPTypes...)
	for _, qt := range types {
		for _, op := range []verbs.Opcode{11, 12, 128, 255} {
			if verbs.OpcodeAllowed(qt, op) {
				t.Errorf("OpcodeAllowed(%s, %d) = true", qt, op)
			}
			wr := validWR(qt, op, 0x77)
			checkOne(t, fmt.Sprintf("%s opcode %d", qt, op), limits(qt), wr,
				&rejection{rule: fmt.Sprintf("unknown opcode %d", op)})
		}
	}
}

func TestValidateUnknownQPType(t *testing.T) {
	for _, qt := range []verbs.QPType{0, 1, 5, 6, 7, 11, 255} {
		for _, op := range verbs.Opcodes {
			if verbs.OpcodeAllowed(qt, op) {
				t.Errorf("OpcodeAllowed(%s, %s) = true", qt, op)
			}
			checkOne(t, fmt.Sprintf("%s %s", qt, op), limits(qt), validWR(qt, op, 1),
				&rejection{rule: fmt.Sprintf("unknown QP type %d", qt)})
		}
	}
}

func sges(lengths ...uint32) []verbs.SGE {
	out := make([]verbs.SGE, len(lengths))
	for i, n := range lengths {
		out[i] = verbs.SGE{Addr: 0x10000 + uint64(i)<<32, Length: n, LKey: 0x11}
	}
	return out
}

func TestValidateSGECount(t *testing.T) {
	for _, qt := range []verbs.QPType{rc, uc, ud, xrcSend, raw} {
		for _, op := range []verbs.Opcode{verbs.OpSend, verbs.OpSendImm, verbs.OpWrite, verbs.OpWriteImm, verbs.OpRead, verbs.OpSendInv} {
			if cellVerdict(qt, op) != nil {
				continue
			}
			for _, max := range []int{0, 1, 2, 30} {
				lim := limits(qt)
				lim.MaxSendSGE = max
				for n := 0; n <= max+2; n++ {
					wr := validWR(qt, op, uint64(n))
					wr.SGL = sges(make([]uint32, n)...)
					var want *rejection
					if n > max {
						want = &rejection{rule: fmt.Sprintf("%d SGEs exceed max_send_sge %d", n, max)}
					}
					checkOne(t, fmt.Sprintf("%s %s %d SGEs, max %d", qt, op, n, max), lim, wr, want)
					// Inline data is copied, but the list is still bounded.
					if isSendFamily(op) || isWriteFamily(op) {
						wr.Flags = verbs.SendInline
						checkOne(t, fmt.Sprintf("%s %s inline %d SGEs, max %d", qt, op, n, max), lim, wr, want)
					}
				}
			}
		}
	}
}

func TestValidateInlineSize(t *testing.T) {
	for _, qt := range []verbs.QPType{rc, uc, ud, xrcSend, raw} {
		for _, op := range []verbs.Opcode{verbs.OpSend, verbs.OpSendImm, verbs.OpSendInv, verbs.OpWrite, verbs.OpWriteImm} {
			if cellVerdict(qt, op) != nil {
				continue
			}
			for _, c := range []struct {
				max     int
				lengths []uint32
				ok      bool
			}{
				{64, []uint32{64}, true},
				{64, []uint32{32, 32}, true},
				{64, []uint32{16, 16, 16, 16}, true},
				{64, []uint32{0}, true},
				{64, nil, true},
				{64, []uint32{65}, false},
				{64, []uint32{33, 32}, false},
				{64, []uint32{16, 16, 16, 17}, false},
				{0, nil, true},
				{0, []uint32{0}, true},
				{0, []uint32{1}, false},
				{220, []uint32{220}, true},
				{220, []uint32{221}, false},
			} {
				lim := limits(qt)
				lim.MaxInlineData = c.max
				wr := validWR(qt, op, 0x1)
				wr.SGL = sges(c.lengths...)
				wr.Flags = verbs.SendInline | verbs.SendSignaled
				var n uint64
				for _, l := range c.lengths {
					n += uint64(l)
				}
				var want *rejection
				if !c.ok {
					want = &rejection{rule: fmt.Sprintf("inline data of %d bytes exceeds max_inline_data %d", n, c.max)}
				}
				what := fmt.Sprintf("%s %s inline %v, max %d", qt, op, c.lengths, c.max)
				checkOne(t, what, lim, wr, want)
				// Without INLINE the size is not bounded by max_inline_data.
				wr.Flags = verbs.SendSignaled
				checkOne(t, what+" not inline", lim, wr, nil)
			}
		}
	}
}

func TestValidateAtomics(t *testing.T) {
	for _, qt := range []verbs.QPType{rc, xrcSend} {
		for _, op := range []verbs.Opcode{verbs.OpAtomicCmpSwp, verbs.OpAtomicFetchAdd} {
			shape := &rejection{rule: fmt.Sprintf("%s needs exactly one local SGE of 8 bytes", op)}
			for _, c := range []struct {
				lengths []uint32
				want    *rejection
			}{
				{[]uint32{8}, nil},
				{nil, shape},
				{[]uint32{0}, shape},
				{[]uint32{4}, shape},
				{[]uint32{7}, shape},
				{[]uint32{9}, shape},
				{[]uint32{16}, shape},
				{[]uint32{4, 4}, shape},
				{[]uint32{8, 8}, shape},
				{[]uint32{8, 0}, shape},
			} {
				wr := validWR(qt, op, 0xa)
				wr.SGL = sges(c.lengths...)
				checkOne(t, fmt.Sprintf("%s %s SGEs %v", qt, op, c.lengths), limits(qt), wr, c.want)
			}
			for _, addr := range []uint64{0, 8, 0x30008, 0x7ffffffffffffff8, 0xfffffffffffffff8} {
				wr := validWR(qt, op, 0xb)
				wr.Atomic.RemoteAddr = addr
				checkOne(t, fmt.Sprintf("%s %s remote %#x", qt, op, addr), limits(qt), wr, nil)
			}
			for _, addr := range []uint64{1, 4, 7, 0x30001, 0x30004, 0x3000c, 0xffffffffffffffff} {
				wr := validWR(qt, op, 0xc)
				wr.Atomic.RemoteAddr = addr
				checkOne(t, fmt.Sprintf("%s %s remote %#x", qt, op, addr), limits(qt), wr,
					&rejection{rule: fmt.Sprintf("%s remote address %#x is not 8-byte aligned", op, addr)})
			}
			// The RDMA member does not matter to an atomic.
			wr := validWR(qt, op, 0xd)
			wr.RDMA.RemoteAddr = 3
			checkOne(t, fmt.Sprintf("%s %s unaligned rdma.remote_addr", qt, op), limits(qt), wr, nil)
			// max_send_sge applies to atomics too.
			lim := limits(qt)
			lim.MaxSendSGE = 0
			checkOne(t, fmt.Sprintf("%s %s max_send_sge 0", qt, op), lim, validWR(qt, op, 0xe),
				&rejection{rule: "1 SGEs exceed max_send_sge 0"})
		}
	}
	// Alignment only concerns atomics.
	wr := validWR(rc, verbs.OpRead, 1)
	wr.RDMA.RemoteAddr = 0x30001
	wr.Atomic.RemoteAddr = 0x30001
	wr.SGL = sges(3)
	checkOne(t, "RDMA_READ of 3 bytes at an odd address", limits(rc), wr, nil)
}

func TestValidateUDNeedsAH(t *testing.T) {
	for _, op := range []verbs.Opcode{verbs.OpSend, verbs.OpSendImm} {
		for _, f := range []verbs.SendFlags{0, verbs.SendSignaled | verbs.SendInline, verbs.SendIPCsum | verbs.SendSolicited} {
			wr := validWR(ud, op, 0x99)
			wr.Flags = f
			checkOne(t, fmt.Sprintf("UD %s %s with an AH", op, f), limits(ud), wr, nil)
			wr.UD.AH = nil
			checkOne(t, fmt.Sprintf("UD %s %s without an AH", op, f), limits(ud), wr,
				&rejection{rule: "UD sends need an address handle (ud.ah)"})
		}
	}
	// The other types ignore wr.ud.
	for _, qt := range []verbs.QPType{rc, uc, xrcSend, raw} {
		wr := validWR(qt, verbs.OpSend, 1)
		wr.UD = verbs.UD{}
		checkOne(t, qt.String()+" SEND without an AH", limits(qt), wr, nil)
	}
}

func TestValidateXRCNeedsRemoteSRQN(t *testing.T) {
	for _, op := range verbs.Opcodes {
		if cellVerdict(xrcSend, op) != nil {
			continue
		}
		wr := validWR(xrcSend, op, 0x5)
		checkOne(t, fmt.Sprintf("XRC_SEND %s with remote_srqn", op), limits(xrcSend), wr, nil)
		wr.RemoteSRQN = 0
		checkOne(t, fmt.Sprintf("XRC_SEND %s without remote_srqn", op), limits(xrcSend), wr,
			&rejection{rule: "XRC_SEND needs the remote SRQ number (xrc.remote_srqn)"})
	}
	for _, qt := range []verbs.QPType{rc, uc, ud, raw} {
		wr := validWR(qt, verbs.OpSend, 1)
		wr.RemoteSRQN = 0
		checkOne(t, qt.String()+" SEND without remote_srqn", limits(qt), wr, nil)
	}
}

func TestValidateMessageSize(t *testing.T) {
	const max = verbs.MaxMessageSize
	if max != 1<<31 {
		t.Fatalf("MaxMessageSize = %d, want 2^31", max)
	}
	for _, qt := range []verbs.QPType{rc, uc, ud, xrcSend} {
		for _, op := range []verbs.Opcode{verbs.OpSend, verbs.OpWrite, verbs.OpRead} {
			if cellVerdict(qt, op) != nil {
				continue
			}
			for _, c := range []struct {
				lengths []uint32
				ok      bool
			}{
				{[]uint32{max}, true},
				{[]uint32{max - 1, 1}, true},
				{[]uint32{max / 2, max / 2}, true},
				{[]uint32{max, 1}, false},
				{[]uint32{max - 1, 2}, false},
				{[]uint32{0xffffffff}, false},
				{[]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, false},
			} {
				wr := validWR(qt, op, 0x31)
				wr.SGL = sges(c.lengths...)
				var want *rejection
				if !c.ok {
					want = &rejection{rule: fmt.Sprintf("message of %d bytes exceeds the 2^31-byte limit", wr.Length())}
				}
				checkOne(t, fmt.Sprintf("%s %s %v", qt, op, c.lengths), limits(qt), wr, want)
			}
		}
	}
	wr := verbs.SendWR{SGL: sges(0xffffffff, 0xffffffff, 1)}
	if got := wr.Length(); got != 2*0xffffffff+1 {
		t.Errorf("Length = %d, want %d", got, uint64(2*0xffffffff+1))
	}
}

// TestValidateList checks that Validate reports the first bad WR of a list,
// and that the WRs before it are valid.
func TestValidateList(t *testing.T) {
	lim := limits(ud)
	if err := verbs.Validate(lim, nil); err != nil {
		t.Errorf("Validate(nil) = %v", err)
	}
	if err := verbs.Validate(lim, []verbs.SendWR{}); err != nil {
		t.Errorf("Validate(empty) = %v", err)
	}
	good := func(n int) []verbs.SendWR {
		wrs := make([]verbs.SendWR, n)
		for i := range wrs {
			wrs[i] = validWR(ud, verbs.OpSend, uint64(100+i))
		}
		return wrs
	}
	if err := verbs.Validate(lim, good(16)); err != nil {
		t.Errorf("Validate(16 good) = %v", err)
	}

	// The canonical message.
	wrs := good(5)
	wrs[3] = validWR(ud, verbs.OpRead, 0x2a)
	err := verbs.Validate(lim, wrs)
	const canonical = "verbs: wr 3 (id 0x2a): RDMA_READ is not supported on UD QPs"
	if err == nil || err.Error() != canonical {
		t.Errorf("got %v, want %q", err, canonical)
	}
	checkRejected(t, "RDMA_READ at 3", err, rejection{index: 3, id: 0x2a, rule: "RDMA_READ is not supported on UD QPs"})

	// A bad WR at every position; a second bad one after it is not reported.
	for n := 1; n <= 6; n++ {
		for bad := range n {
			wrs := good(n)
			wrs[bad].SGL = sges(1, 1, 1, 1, 1)
			wrs[bad].ID = 0xbad
			if bad+1 < n {
				wrs[n-1].Opcode = verbs.OpWrite
				wrs[n-1].ID = 0xbad2
			}
			err := verbs.Validate(lim, wrs)
			checkRejected(t, fmt.Sprintf("%d WRs, bad at %d", n, bad), err,
				rejection{index: bad, id: 0xbad, rule: "5 SGEs exceed max_send_sge 4"})
			var e *verbs.WRError
			if errors.As(err, &e) {
				for i := range e.Index {
					if err := lim.Check(i, &wrs[i]); err != nil {
						t.Errorf("%d WRs, bad at %d: WR %d before it fails: %v", n, bad, i, err)
					}
				}
			}
		}
	}

	// WRs of a mixed list on RC.
	lim = limits(rc)
	mixed := []verbs.SendWR{
		validWR(rc, verbs.OpWrite, 1),
		validWR(rc, verbs.OpRead, 2),
		validWR(rc, verbs.OpAtomicCmpSwp, 3),
		validWR(rc, verbs.OpSendImm, 4),
		validWR(rc, verbs.OpBindMW, 5),
		validWR(rc, verbs.OpTSO, 6),
	}
	checkRejected(t, "BIND_MW in an RC list", verbs.Validate(lim, mixed),
		rejection{notSupported: true, index: 4, id: 5, contains: "BIND_MW is not supported by verbsrt"})
	if err := verbs.Validate(lim, mixed[:4]); err != nil {
		t.Errorf("the first 4: %v", err)
	}
	mixed[1] = validWR(rc, verbs.OpTSO, 6)
	checkRejected(t, "TSO in an RC list", verbs.Validate(lim, mixed),
		rejection{index: 1, id: 6, rule: "TSO is not supported on RC QPs"})
}

// TestValidateCanonicalMessages pins a few whole messages.
func TestValidateCanonicalMessages(t *testing.T) {
	lim := verbs.SendLimits{Type: uc, MaxSendSGE: 2, MaxInlineData: 16}
	for _, c := range []struct {
		lim  verbs.SendLimits
		wrs  []verbs.SendWR
		want string
		ns   bool
	}{
		{lim, []verbs.SendWR{validWR(uc, verbs.OpBindMW, 1)},
			"verbs: wr 0 (id 0x1): BIND_MW is not supported by verbsrt (no memory windows or TSO headers)", true},
		{limits(ud), []verbs.SendWR{validWR(ud, verbs.OpSend, 1), validWR(ud, verbs.OpTSO, 0xffffffffffffffff)},
			"verbs: wr 1 (id 0xffffffffffffffff): TSO is not supported by verbsrt (no memory windows or TSO headers)", true},
		{lim, []verbs.SendWR{validWR(uc, verbs.OpSend, 0), {ID: 7, Opcode: verbs.OpWrite, SGL: sges(1, 1, 1)}},
			"verbs: wr 1 (id 0x7): 3 SGEs exceed max_send_sge 2", false},
		{lim, []verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendFence}},
			"verbs: wr 0 (id 0x0): FENCE is valid only on RC QPs, not UC", false},
		{lim, []verbs.SendWR{{ID: 0x10, Opcode: verbs.OpWrite, Flags: verbs.SendInline, SGL: sges(17)}},
			"verbs: wr 0 (id 0x10): inline data of 17 bytes exceeds max_inline_data 16", false},
		{limits(rc), []verbs.SendWR{{ID: 3, Opcode: verbs.OpAtomicFetchAdd, SGL: sges(8), Atomic: verbs.Atomic{RemoteAddr: 0x1004}}},
			"verbs: wr 0 (id 0x3): ATOMIC_FETCH_AND_ADD remote address 0x1004 is not 8-byte aligned", false},
		{limits(xrcRecv), []verbs.SendWR{{ID: 2, Opcode: verbs.OpSend}},
			"verbs: wr 0 (id 0x2): XRC_RECV QPs have no send queue", false},
		{limits(ud), []verbs.SendWR{{ID: 4, Opcode: verbs.OpSend}},
			"verbs: wr 0 (id 0x4): UD sends need an address handle (ud.ah)", false},
	} {
		err := verbs.Validate(c.lim, c.wrs)
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
			continue
		}
		if got := errors.Is(err, verbs.ErrNotSupported); got != c.ns {
			t.Errorf("%q: errors.Is ErrNotSupported = %v", c.want, got)
		}
	}
}

func TestRecvLimitsCheck(t *testing.T) {
	lim := verbs.RecvLimits{MaxRecvSGE: 2}
	for n := range 3 {
		wr := verbs.RecvWR{ID: uint64(n), SGL: sges(make([]uint32, n)...)}
		if err := lim.Check(n, &wr); err != nil {
			t.Errorf("%d SGEs: %v", n, err)
		}
	}
	wr := verbs.RecvWR{ID: 0x2a, SGL: sges(1, 2, 3)}
	checkRejected(t, "3 receive SGEs", lim.Check(4, &wr),
		rejection{index: 4, id: 0x2a, rule: "3 SGEs exceed max_recv_sge 2"})
}
