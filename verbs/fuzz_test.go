package verbs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// fuzzTypes are the QP types a fuzz input picks from: the six of libibverbs
// and two unknown ones.
var fuzzTypes = []verbs.QPType{rc, uc, ud, raw, xrcSend, xrcRecv, 0, 7}

// decodeSendWRs turns fuzz bytes into SendLimits and a WR list.
//
// Header, 4 bytes: QP type, max_send_sge (0-7), max_inline_data / 4, and bit
// 0 for checksum offload. Then 4 bytes per WR, plus one per SGE:
//
//	opcode % 13 (11 and 12 are unknown opcodes)
//	send flags: bits 0-4 as given; bit 5 adds the unknown flag 1<<(5+bits 6-7)
//	misc: bits 0-2 the SGE count, bit 4 an AH, bit 5 a remote SRQ number
//	one length byte per SGE: 253 = 2^31-1, 254 = 2^31, 255 = 2^32-1
//	remote address (atomic and RDMA) 0x10000 + byte
//
// Missing bytes read as zero; at most 64 WRs.
func decodeSendWRs(data []byte) (verbs.SendLimits, []verbs.SendWR) {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	lim := verbs.SendLimits{
		Type:          fuzzTypes[int(next())%len(fuzzTypes)],
		MaxSendSGE:    int(next() % 8),
		MaxInlineData: int(next()) * 4,
		IPCsum:        next()&1 != 0,
	}
	var wrs []verbs.SendWR
	for len(data) > 0 && len(wrs) < 64 {
		op := verbs.Opcode(next() % 13)
		fb := next()
		flags := verbs.SendFlags(fb & 0x1f)
		if fb&0x20 != 0 {
			flags |= verbs.SendFlags(1) << (5 + fb>>6)
		}
		misc := next()
		sgl := make([]verbs.SGE, misc&7)
		for i := range sgl {
			n := uint32(next())
			switch n {
			case 253:
				n = 1<<31 - 1
			case 254:
				n = 1 << 31
			case 255:
				n = 1<<32 - 1
			}
			sgl[i] = verbs.SGE{Addr: 0x1000 * uint64(i+1), Length: n, LKey: 1}
		}
		addr := 0x10000 + uint64(next())
		wr := verbs.SendWR{
			ID:     uint64(len(wrs))<<8 | uint64(misc),
			SGL:    sgl,
			Opcode: op,
			Flags:  flags,
			RDMA:   verbs.RDMA{RemoteAddr: addr, RKey: 2},
			Atomic: verbs.Atomic{RemoteAddr: addr, RKey: 2},
		}
		if misc&0x10 != 0 {
			wr.UD.AH = fakeAH{}
		}
		if misc&0x20 != 0 {
			wr.RemoteSRQN = 1 + uint32(misc)
		}
		wrs = append(wrs, wr)
	}
	return lim, wrs
}

// oracle restates the rules of ibv_post_send(3) independently of
// validate.go: whether wr must be rejected, and whether as not supported.
func oracle(lim verbs.SendLimits, wr *verbs.SendWR) (reject, notSupported bool) {
	op, qt, f := wr.Opcode, lim.Type, wr.Flags
	if int(op) >= 11 || !inTable(qt, op) {
		return true, false
	}
	if unsupported(op) {
		return true, true
	}
	n := wr.Length()
	switch {
	case f&^(verbs.SendFence|verbs.SendSignaled|verbs.SendSolicited|verbs.SendInline|verbs.SendIPCsum) != 0,
		f&verbs.SendFence != 0 && qt != rc,
		f&verbs.SendSolicited != 0 && !isSendFamily(op) && op != verbs.OpWriteImm,
		f&verbs.SendIPCsum != 0 && !(lim.IPCsum && (qt == ud || qt == raw)),
		len(wr.SGL) > lim.MaxSendSGE,
		n > 1<<31,
		f&verbs.SendInline != 0 && (!isSendFamily(op) && !isWriteFamily(op) || n > uint64(lim.MaxInlineData)),
		op.IsAtomic() && (len(wr.SGL) != 1 || wr.SGL[0].Length != 8 || wr.Atomic.RemoteAddr%8 != 0),
		qt == ud && wr.UD.AH == nil,
		qt == xrcSend && wr.RemoteSRQN == 0:
		return true, false
	}
	return false, false
}

func FuzzValidate(f *testing.F) {
	f.Add([]byte{})
	// RC: SEND of 8 bytes, signaled; RDMA_WRITE inline of 64 bytes.
	f.Add([]byte{0, 4, 16, 0, 2, 0x02, 1, 8, 0, 0, 0x08, 1, 64, 0})
	// UD: three sends with an AH, then an RDMA_READ (the canonical error).
	f.Add([]byte{2, 2, 8, 1, 2, 0, 0x11, 8, 0, 2, 0x10, 0x11, 8, 0, 3, 0x12, 0x11, 8, 0, 4, 0, 0x11, 8, 0})
	// RC: FETCH_AND_ADD, aligned then not.
	f.Add([]byte{0, 1, 0, 0, 6, 0x02, 1, 8, 8, 6, 0x02, 1, 8, 4})
	// XRC_SEND with and without remote SRQ number; BIND_MW.
	f.Add([]byte{4, 2, 4, 0, 2, 0, 0x21, 8, 0, 2, 0, 0x01, 8, 0, 8, 0, 0x21, 8, 0})
	// RAW_PACKET with IP_CSUM; TSO.
	f.Add([]byte{3, 2, 4, 1, 2, 0x10, 1, 8, 0, 10, 0, 1, 8, 0})
	// Messages over 2^31 bytes, unknown flags, unknown opcode.
	f.Add([]byte{0, 7, 0, 0, 2, 0, 2, 254, 1, 0, 0, 0x20, 0, 0, 11, 0, 0, 0, 1, 0xe0, 3, 255, 255, 255, 0})
	// XRC_RECV and an unknown QP type.
	f.Add([]byte{5, 1, 1, 1, 2, 0, 1, 1, 0})
	f.Add([]byte{6, 1, 1, 1, 2, 0, 1, 1, 0})

	f.Fuzz(func(t *testing.T, data []byte) {
		lim, wrs := decodeSendWRs(data)
		err := verbs.Validate(lim, wrs)

		// Each WR alone agrees with the oracle.
		firstBad := len(wrs)
		for i := range wrs {
			errC := lim.Check(i, &wrs[i])
			reject, ns := oracle(lim, &wrs[i])
			if (errC != nil) != reject {
				t.Fatalf("%+v, WR %d %+v: Check = %v, oracle reject = %v", lim, i, wrs[i], errC, reject)
			}
			if errC != nil {
				if got := errors.Is(errC, verbs.ErrNotSupported); got != ns {
					t.Fatalf("WR %d: %v: ErrNotSupported %v, oracle %v", i, errC, got, ns)
				}
				if firstBad == len(wrs) {
					firstBad = i
				}
			}
		}

		if err == nil {
			if firstBad != len(wrs) {
				t.Fatalf("Validate accepted the list, but WR %d fails Check", firstBad)
			}
			return
		}
		var e *verbs.WRError
		if !errors.As(err, &e) {
			t.Fatalf("Validate returned %T %v, not a *WRError", err, err)
		}
		if e.Index < 0 || e.Index >= len(wrs) {
			t.Fatalf("Index %d outside the %d WRs", e.Index, len(wrs))
		}
		if e.Index != firstBad {
			t.Fatalf("Index %d, but the first WR that fails Check is %d", e.Index, firstBad)
		}
		if e.WRID != wrs[e.Index].ID {
			t.Fatalf("WRID %#x, want WR %d's %#x", e.WRID, e.Index, wrs[e.Index].ID)
		}
		for i := range e.Index {
			if errC := lim.Check(i, &wrs[i]); errC != nil {
				t.Fatalf("WR %d before the reported %d fails: %v", i, e.Index, errC)
			}
		}
		if errC := lim.Check(e.Index, &wrs[e.Index]); errC == nil || errC.Error() != err.Error() {
			t.Fatalf("Check of WR %d = %v, Validate = %v", e.Index, errC, err)
		}
		switch e.Err {
		case verbs.ErrInvalidWR:
			if !errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) {
				t.Fatalf("%v: ErrInvalidWR without EINVAL", err)
			}
		case verbs.ErrNotSupported:
			if !errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EINVAL) {
				t.Fatalf("%v: ErrNotSupported without EOPNOTSUPP", err)
			}
		default:
			t.Fatalf("%v: Err is %v", err, e.Err)
		}
		if e.Rule == "" {
			t.Fatalf("%v: empty rule", err)
		}
	})
}

// TestDecodeSendWRs checks that the fuzz decoder reaches what it claims to.
func TestDecodeSendWRs(t *testing.T) {
	lim, wrs := decodeSendWRs([]byte{2, 3, 5, 1, 4, 0xe3, 0x22, 254, 253, 7, 12})
	if lim != (verbs.SendLimits{Type: ud, MaxSendSGE: 3, MaxInlineData: 20, IPCsum: true}) {
		t.Errorf("limits %+v", lim)
	}
	if len(wrs) != 2 {
		t.Fatalf("%d WRs, want 2", len(wrs))
	}
	w := wrs[0]
	if w.Opcode != verbs.OpRead || w.Flags != verbs.SendFence|verbs.SendSignaled|1<<8 ||
		len(w.SGL) != 2 || w.SGL[0].Length != 1<<31 || w.SGL[1].Length != 1<<31-1 ||
		w.Atomic.RemoteAddr != 0x10007 || w.UD.AH != nil || w.RemoteSRQN == 0 || w.ID != 0x22 {
		t.Errorf("WR 0 %+v", w)
	}
	if w := wrs[1]; w.Opcode != 12 || w.ID != 1<<8 || len(w.SGL) != 0 {
		t.Errorf("WR 1 %+v", w)
	}
}
