package soft_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestPostSendBadWRMidList: the WRs before a bad one are posted and
// execute, the bad one is named (index, id, rule), none after it is posted.
func TestPostSendBadWRMidList(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	bad := []struct {
		name string
		wr   verbs.SendWR
		rule string
	}{
		{"misaligned atomic", verbs.SendWR{Opcode: verbs.OpAtomicFetchAdd, SGL: sge(a.mr, 0, 8),
			Atomic: verbs.Atomic{RemoteAddr: b.mr.Addr() + 4, RKey: b.mr.RKey()}}, "not 8-byte aligned"},
		{"too many SGEs", verbs.SendWR{Opcode: verbs.OpWrite, SGL: make([]verbs.SGE, 5)}, "5 SGEs exceed max_send_sge 4"},
		{"inline too long", verbs.SendWR{Opcode: verbs.OpSend, Flags: verbs.SendInline, SGL: sge(a.mr, 0, 65)},
			"inline data of 65 bytes exceeds max_inline_data 64"},
		{"solicited write", verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.SendSolicited}, "SOLICITED is valid only"},
	}
	for i, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			base := uint64(i * 10)
			wrs := []verbs.SendWR{write(base+1, a, b, 0, 8), write(base+2, a, b, 8, 8), tc.wr, write(base+4, a, b, 16, 8)}
			wrs[2].ID = 0x2a
			n, err := a.qp.PostSend(wrs)
			if n != 2 {
				t.Fatalf("posted %d, want 2", n)
			}
			var we *verbs.WRError
			if !errors.As(err, &we) || we.Index != 2 || we.WRID != 0x2a || !strings.Contains(err.Error(), tc.rule) {
				t.Fatalf("error %v", err)
			}
			if !errors.Is(err, verbs.ErrInvalidWR) || !errors.Is(err, syscall.EINVAL) {
				t.Fatalf("error %v does not match ErrInvalidWR and EINVAL", err)
			}
			if !strings.HasPrefix(err.Error(), "verbs: wr 2 (id 0x2a): ") {
				t.Fatalf("message %q", err)
			}
			wcs := pollN(t, a.cq, 2)
			if wcs[0].WRID != base+1 || wcs[1].WRID != base+2 {
				t.Fatalf("%+v", wcs)
			}
			if extra, _ := a.cq.Poll(make([]verbs.WC, 2)); extra != 0 {
				t.Fatal("a WR after the bad one was posted")
			}
		})
	}
}

func TestPostSendBeforeRTS(t *testing.T) {
	a, _ := newPair(t, pairOpts{})
	if err := a.qp.Modify(&verbs.QPAttr{State: verbs.QPStateReset}, verbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	n, err := a.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}})
	if n != 0 || !errors.Is(err, verbs.ErrQPState) || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("posted %d: %v", n, err)
	}
}

func TestSendQueueFullUnsignaled(t *testing.T) {
	// Unsignaled WRs hold their slots until a signaled completion: a list
	// longer than the queue stops with ENOMEM at its capacity.
	a, b := newPair(t, pairOpts{sendWR: 16})
	attr, _ := a.qp.Query()
	if attr.Cap.MaxSendWR != 31 {
		t.Fatalf("max_send_wr 16 granted %d, want 31", attr.Cap.MaxSendWR)
	}
	wrs := make([]verbs.SendWR, 40)
	for i := range wrs {
		wrs[i] = write(uint64(i), a, b, 0, 8)
		wrs[i].Flags = 0
	}
	n, err := a.qp.PostSend(wrs)
	if n != 31 || !errors.Is(err, verbs.ErrNoMemory) || !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("posted %d: %v", n, err)
	}
	// Still full, though every WR has executed by now: only a signaled
	// completion releases slots.
	if n, err := a.qp.PostSend(wrs[:1]); n != 0 || !errors.Is(err, verbs.ErrNoMemory) {
		t.Fatalf("posted %d: %v", n, err)
	}
}
