package verbs_test

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/verbsrt/verbsrt/verbs"
)

// exampleAH stands for an address handle made by PD.CreateAH.
type exampleAH struct{}

func (exampleAH) Close() error { return nil }

// Validate checks a WR list before it reaches a send queue and names the
// first WR that breaks a rule of ibv_post_send(3): here an RDMA READ on a UD
// QP, which the opcode table does not allow.
func ExampleValidate() {
	lim := verbs.SendLimits{Type: verbs.QPTypeUD, MaxSendSGE: 1, MaxInlineData: 64}
	ah := exampleAH{}
	send := func(id uint64) verbs.SendWR {
		return verbs.SendWR{
			ID:     id,
			Opcode: verbs.OpSend,
			Flags:  verbs.SendSignaled | verbs.SendInline,
			SGL:    []verbs.SGE{{Addr: 0x7f0000001000, Length: 32, LKey: 0x100}},
			UD:     verbs.UD{AH: ah, RemoteQPN: 0x12, RemoteQKey: 0x11111111},
		}
	}
	wrs := []verbs.SendWR{send(0x27), send(0x28), send(0x29), {
		ID:     0x2a,
		Opcode: verbs.OpRead,
		SGL:    []verbs.SGE{{Addr: 0x7f0000002000, Length: 4096, LKey: 0x100}},
		RDMA:   verbs.RDMA{RemoteAddr: 0x7f1000000000, RKey: 0x200},
		UD:     verbs.UD{AH: ah, RemoteQPN: 0x12},
	}}

	err := verbs.Validate(lim, wrs)
	fmt.Println(err)
	fmt.Println(errors.Is(err, verbs.ErrInvalidWR), errors.Is(err, syscall.EINVAL))

	var wrErr *verbs.WRError
	if errors.As(err, &wrErr) {
		fmt.Printf("WRs before %d are valid; wr_id %#x is not\n", wrErr.Index, wrErr.WRID)
		fmt.Println(verbs.Validate(lim, wrs[:wrErr.Index]))
	}
	// Output:
	// verbs: wr 3 (id 0x2a): RDMA_READ is not supported on UD QPs
	// true true
	// WRs before 3 are valid; wr_id 0x2a is not
	// <nil>
}

// Opcodes the table allows but verbsrt has no API for are refused as not
// supported, with EOPNOTSUPP.
func ExampleValidate_notSupported() {
	lim := verbs.SendLimits{Type: verbs.QPTypeRC, MaxSendSGE: 1}
	err := verbs.Validate(lim, []verbs.SendWR{{ID: 1, Opcode: verbs.OpBindMW}})
	fmt.Println(err)
	fmt.Println(errors.Is(err, verbs.ErrNotSupported), errors.Is(err, syscall.EOPNOTSUPP))
	// Output:
	// verbs: wr 0 (id 0x1): BIND_MW is not supported by verbsrt (no memory windows or TSO headers)
	// true true
}

// A failed work completion is a *WCError that matches ErrQPError and the
// sentinel of its status.
func ExampleWCError() {
	wc := verbs.WC{WRID: 7, Status: verbs.WCWRFlushErr, QPNum: 0x11}
	err := wc.Err()
	fmt.Println(err)
	fmt.Println(errors.Is(err, verbs.ErrFlushed), errors.Is(err, verbs.ErrQPError), errors.Is(err, verbs.ErrRemoteAccess))

	var wcErr *verbs.WCError
	if errors.As(err, &wcErr) {
		fmt.Println(wcErr.Status.Name(), wcErr.WRID)
	}
	// Output:
	// verbs: wr id 0x7 on QP 0x11: Work Request Flushed Error (WR_FLUSH_ERR, vendor_err 0x0)
	// true true false
	// WR_FLUSH_ERR 7
}

// CheckModify applies the kernel's QP state table: RC needs these attributes
// to go from INIT to RTR.
func ExampleCheckModify() {
	const rtr = verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN |
		verbs.QPAttrRQPSN | verbs.QPAttrMaxDestRdAtomic | verbs.QPAttrMinRNRTimer
	fmt.Println(verbs.CheckModify(verbs.QPTypeRC, verbs.QPStateInit, verbs.QPStateRTR, rtr))
	fmt.Println(verbs.CheckModify(verbs.QPTypeRC, verbs.QPStateInit, verbs.QPStateRTR, rtr&^verbs.QPAttrMinRNRTimer))
	fmt.Println(verbs.CheckModify(verbs.QPTypeRC, verbs.QPStateReset, verbs.QPStateRTS, verbs.QPAttrState))
	// Output:
	// <nil>
	// verbs: ibv_modify_qp: invalid argument: INIT -> RTR on RC needs MIN_RNR_TIMER (invalid argument)
	// verbs: ibv_modify_qp: QP state does not allow this: RC QP cannot go from RESET to RTS (invalid argument)
}
