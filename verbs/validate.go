package verbs

import "fmt"

// MaxMessageSize is the largest message the IB spec allows (2^31 bytes).
const MaxMessageSize = 1 << 31

// SendLimits is what Validate checks send WRs against: the QP's type and
// the caps it was granted.
type SendLimits struct {
	Type          QPType
	MaxSendSGE    int
	MaxInlineData int
	// IPCsum reports that the device offloads checksums for this QP
	// (DeviceUDIPCsum or DeviceRawIPCsum): IP_CSUM is allowed.
	IPCsum bool
}

// qpTypeColumn maps a QP type to its column in opcodeTable.
func qpTypeColumn(t QPType) int {
	switch t {
	case QPTypeUD:
		return 0
	case QPTypeUC:
		return 1
	case QPTypeRC:
		return 2
	case QPTypeXRCSend:
		return 3
	case QPTypeRawPacket:
		return 4
	}
	return -1
}

// opcodeTable is the table of ibv_post_send(3): which opcode each transport
// service type supports. Columns: UD, UC, RC, XRC_SEND, RAW_PACKET.
var opcodeTable = [numOpcodes][5]bool{
	OpSend:           {true, true, true, true, true},
	OpSendImm:        {true, true, true, true, false},
	OpWrite:          {false, true, true, true, false},
	OpWriteImm:       {false, true, true, true, false},
	OpRead:           {false, false, true, true, false},
	OpAtomicCmpSwp:   {false, false, true, true, false},
	OpAtomicFetchAdd: {false, false, true, true, false},
	OpLocalInv:       {false, true, true, true, false},
	OpBindMW:         {false, true, true, true, false},
	OpSendInv:        {false, true, true, true, false},
	OpTSO:            {true, false, false, false, true},
}

// OpcodeAllowed reports whether the table of ibv_post_send(3) allows op on
// QPs of type t. XRC_RECV QPs have no send queue and allow nothing.
func OpcodeAllowed(t QPType, op Opcode) bool {
	c := qpTypeColumn(t)
	return c >= 0 && int(op) < numOpcodes && opcodeTable[op][c]
}

// Validate checks wrs against the rules of ibv_post_send(3) and lim. It
// returns nil or a *WRError for the first WR that breaks a rule; the WRs
// before it are valid.
func Validate(lim SendLimits, wrs []SendWR) error {
	for i := range wrs {
		if err := lim.Check(i, &wrs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Check validates one WR, reported as index i of its list.
//
// The rules, in the order they are checked:
//   - the opcode exists, and the opcode x QP-type table allows it;
//   - BIND_MW and TSO need members SendWR does not have: ErrNotSupported;
//   - no unknown send flag; FENCE only on RC; SOLICITED only on the SEND
//     family and RDMA_WRITE_WITH_IMM; INLINE only on the SEND family and the
//     RDMA_WRITE family, and within max_inline_data; IP_CSUM only on UD and
//     RAW_PACKET QPs of a device with checksum offload;
//   - the gather list has at most max_send_sge entries (inline WRs too: the
//     list is copied, but its length is still bounded) and at most 2^31 bytes;
//   - atomics: exactly one local SGE of 8 bytes, an 8-byte aligned remote
//     address;
//   - UD: an address handle; XRC_SEND: a remote SRQ number.
//
// "The SEND family" is SEND, SEND_WITH_IMM and SEND_WITH_INV; "the RDMA_WRITE
// family" is RDMA_WRITE and RDMA_WRITE_WITH_IMM: the man page's "Send" and
// "RDMA Write" as every provider reads them.
func (lim *SendLimits) Check(i int, wr *SendWR) error {
	rule, notSupported := lim.rule(wr)
	if rule == "" {
		return nil
	}
	e := &WRError{Index: i, WRID: wr.ID, Rule: rule, Err: ErrInvalidWR}
	if notSupported {
		e.Err = ErrNotSupported
	}
	return e
}

func (lim *SendLimits) rule(wr *SendWR) (rule string, notSupported bool) {
	op, t := wr.Opcode, lim.Type
	if int(op) >= numOpcodes {
		return fmt.Sprintf("unknown opcode %d", op), false
	}
	if t == QPTypeXRCRecv {
		return "XRC_RECV QPs have no send queue", false
	}
	if qpTypeColumn(t) < 0 {
		return fmt.Sprintf("unknown QP type %d", t), false
	}
	if !OpcodeAllowed(t, op) {
		return fmt.Sprintf("%s is not supported on %s QPs", op, t), false
	}
	if op == OpBindMW || op == OpTSO {
		return fmt.Sprintf("%s is not supported by verbsrt (no memory windows or TSO headers)", op), true
	}
	f := wr.Flags
	if f&^sendFlagsAll != 0 {
		return fmt.Sprintf("unknown send flags %#x", uint32(f&^sendFlagsAll)), false
	}
	if f&SendFence != 0 && t != QPTypeRC {
		return fmt.Sprintf("FENCE is valid only on RC QPs, not %s", t), false
	}
	if f&SendSolicited != 0 && !op.IsSend() && op != OpWriteImm {
		return fmt.Sprintf("SOLICITED is valid only for SEND and RDMA_WRITE_WITH_IMM, not %s", op), false
	}
	if f&SendIPCsum != 0 && (!lim.IPCsum || (t != QPTypeUD && t != QPTypeRawPacket)) {
		return "IP_CSUM needs a UD or RAW_PACKET QP on a device with checksum offload", false
	}
	if len(wr.SGL) > lim.MaxSendSGE {
		return fmt.Sprintf("%d SGEs exceed max_send_sge %d", len(wr.SGL), lim.MaxSendSGE), false
	}
	n := wr.Length()
	if n > MaxMessageSize {
		return fmt.Sprintf("message of %d bytes exceeds the 2^31-byte limit", n), false
	}
	if f&SendInline != 0 {
		if !op.IsSend() && op != OpWrite && op != OpWriteImm {
			return fmt.Sprintf("INLINE is valid only for SEND and RDMA_WRITE, not %s", op), false
		}
		if n > uint64(lim.MaxInlineData) {
			return fmt.Sprintf("inline data of %d bytes exceeds max_inline_data %d", n, lim.MaxInlineData), false
		}
	}
	if op.IsAtomic() {
		if len(wr.SGL) != 1 || wr.SGL[0].Length != 8 {
			return fmt.Sprintf("%s needs exactly one local SGE of 8 bytes", op), false
		}
		if wr.Atomic.RemoteAddr%8 != 0 {
			return fmt.Sprintf("%s remote address %#x is not 8-byte aligned", op, wr.Atomic.RemoteAddr), false
		}
	}
	if t == QPTypeUD && wr.UD.AH == nil {
		return "UD sends need an address handle (ud.ah)", false
	}
	if t == QPTypeXRCSend && wr.RemoteSRQN == 0 {
		return "XRC_SEND needs the remote SRQ number (xrc.remote_srqn)", false
	}
	return "", false
}

// RecvLimits is what receive WRs are checked against.
type RecvLimits struct {
	MaxRecvSGE int
}

// Check validates one receive WR, reported as index i of its list.
func (lim *RecvLimits) Check(i int, wr *RecvWR) error {
	if len(wr.SGL) > lim.MaxRecvSGE {
		return &WRError{Index: i, WRID: wr.ID, Err: ErrInvalidWR,
			Rule: fmt.Sprintf("%d SGEs exceed max_recv_sge %d", len(wr.SGL), lim.MaxRecvSGE)}
	}
	return nil
}
