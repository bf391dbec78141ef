package verbs

import (
	"fmt"
	"strings"
)

// Opcode is the operation of a send work request (enum ibv_wr_opcode; the
// values are libibverbs').
type Opcode uint8

// Send work request opcodes.
const (
	OpWrite          Opcode = 0  // IBV_WR_RDMA_WRITE
	OpWriteImm       Opcode = 1  // IBV_WR_RDMA_WRITE_WITH_IMM
	OpSend           Opcode = 2  // IBV_WR_SEND
	OpSendImm        Opcode = 3  // IBV_WR_SEND_WITH_IMM
	OpRead           Opcode = 4  // IBV_WR_RDMA_READ
	OpAtomicCmpSwp   Opcode = 5  // IBV_WR_ATOMIC_CMP_AND_SWP
	OpAtomicFetchAdd Opcode = 6  // IBV_WR_ATOMIC_FETCH_AND_ADD
	OpLocalInv       Opcode = 7  // IBV_WR_LOCAL_INV
	OpBindMW         Opcode = 8  // IBV_WR_BIND_MW
	OpSendInv        Opcode = 9  // IBV_WR_SEND_WITH_INV
	OpTSO            Opcode = 10 // IBV_WR_TSO
	numOpcodes              = 11
)

var opcodeNames = [numOpcodes]string{
	"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ",
	"ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD", "LOCAL_INV", "BIND_MW",
	"SEND_WITH_INV", "TSO",
}

// Opcodes lists every send opcode, in numeric order.
var Opcodes = []Opcode{OpWrite, OpWriteImm, OpSend, OpSendImm, OpRead, OpAtomicCmpSwp,
	OpAtomicFetchAdd, OpLocalInv, OpBindMW, OpSendInv, OpTSO}

func (o Opcode) String() string {
	if int(o) < len(opcodeNames) {
		return opcodeNames[o]
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// IsSend reports whether o is one of the SEND family (SEND, SEND_WITH_IMM,
// SEND_WITH_INV): the opcodes that consume a receive WR at the responder.
func (o Opcode) IsSend() bool { return o == OpSend || o == OpSendImm || o == OpSendInv }

// IsAtomic reports whether o is a compare-and-swap or fetch-and-add.
func (o Opcode) IsAtomic() bool { return o == OpAtomicCmpSwp || o == OpAtomicFetchAdd }

// HasImm reports whether o carries immediate data to the responder.
func (o Opcode) HasImm() bool { return o == OpSendImm || o == OpWriteImm }

// SendFlags are the send_flags of a work request (enum ibv_send_flags).
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0 // IBV_SEND_FENCE
	SendSignaled  SendFlags = 1 << 1 // IBV_SEND_SIGNALED
	SendSolicited SendFlags = 1 << 2 // IBV_SEND_SOLICITED
	SendInline    SendFlags = 1 << 3 // IBV_SEND_INLINE
	SendIPCsum    SendFlags = 1 << 4 // IBV_SEND_IP_CSUM
	sendFlagsAll            = SendFence | SendSignaled | SendSolicited | SendInline | SendIPCsum
)

var sendFlagNames = []string{"FENCE", "SIGNALED", "SOLICITED", "INLINE", "IP_CSUM"}

func (f SendFlags) String() string { return flagString(uint64(f), sendFlagNames) }

// QPType is the transport service type of a QP (enum ibv_qp_type).
type QPType uint8

// QP transport types.
const (
	QPTypeRC        QPType = 2  // IBV_QPT_RC
	QPTypeUC        QPType = 3  // IBV_QPT_UC
	QPTypeUD        QPType = 4  // IBV_QPT_UD
	QPTypeRawPacket QPType = 8  // IBV_QPT_RAW_PACKET
	QPTypeXRCSend   QPType = 9  // IBV_QPT_XRC_SEND
	QPTypeXRCRecv   QPType = 10 // IBV_QPT_XRC_RECV
)

// QPTypes lists every QP type.
var QPTypes = []QPType{QPTypeRC, QPTypeUC, QPTypeUD, QPTypeRawPacket, QPTypeXRCSend, QPTypeXRCRecv}

func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	case QPTypeRawPacket:
		return "RAW_PACKET"
	case QPTypeXRCSend:
		return "XRC_SEND"
	case QPTypeXRCRecv:
		return "XRC_RECV"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// Connected reports whether t is a connected transport (RC, UC, XRC), whose
// QPs need a remote QPN and path in RTR.
func (t QPType) Connected() bool {
	return t == QPTypeRC || t == QPTypeUC || t == QPTypeXRCSend || t == QPTypeXRCRecv
}

// Reliable reports whether t acknowledges and retransmits (RC and XRC).
func (t QPType) Reliable() bool {
	return t == QPTypeRC || t == QPTypeXRCSend || t == QPTypeXRCRecv
}

// QPState is the state of a QP (enum ibv_qp_state).
type QPState uint8

// QP states.
const (
	QPStateReset QPState = 0 // IBV_QPS_RESET
	QPStateInit  QPState = 1 // IBV_QPS_INIT
	QPStateRTR   QPState = 2 // IBV_QPS_RTR
	QPStateRTS   QPState = 3 // IBV_QPS_RTS
	QPStateSQD   QPState = 4 // IBV_QPS_SQD
	QPStateSQE   QPState = 5 // IBV_QPS_SQE
	QPStateErr   QPState = 6 // IBV_QPS_ERR
)

var qpStateNames = []string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// Access are memory and QP access flags (enum ibv_access_flags).
type Access uint32

// Access flags.
const (
	AccessLocalWrite   Access = 1 << 0  // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = 1 << 1  // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = 1 << 2  // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 1 << 3  // IBV_ACCESS_REMOTE_ATOMIC
	AccessMWBind       Access = 1 << 4  // IBV_ACCESS_MW_BIND
	AccessZeroBased    Access = 1 << 5  // IBV_ACCESS_ZERO_BASED
	AccessOnDemand     Access = 1 << 6  // IBV_ACCESS_ON_DEMAND
	AccessRelaxedOrder Access = 1 << 20 // IBV_ACCESS_RELAXED_ORDERING

	// AccessAllRemote is LOCAL_WRITE with every remote access, what most
	// RDMA applications register their buffers with.
	AccessAllRemote = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
)

var accessNames = []string{"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC",
	"MW_BIND", "ZERO_BASED", "ON_DEMAND"}

func (a Access) String() string { return flagString(uint64(a), accessNames) }

// WCStatus is the status of a work completion (enum ibv_wc_status).
type WCStatus uint8

// Work completion statuses.
const (
	WCSuccess          WCStatus = iota // IBV_WC_SUCCESS
	WCLocLenErr                        // IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr                       // IBV_WC_LOC_QP_OP_ERR
	WCLocEECOpErr                      // IBV_WC_LOC_EEC_OP_ERR
	WCLocProtErr                       // IBV_WC_LOC_PROT_ERR
	WCWRFlushErr                       // IBV_WC_WR_FLUSH_ERR
	WCMWBindErr                        // IBV_WC_MW_BIND_ERR
	WCBadRespErr                       // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr                     // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr                     // IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr                     // IBV_WC_REM_ACCESS_ERR
	WCRemOpErr                         // IBV_WC_REM_OP_ERR
	WCRetryExcErr                      // IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr                   // IBV_WC_RNR_RETRY_EXC_ERR
	WCLocRDDViolErr                    // IBV_WC_LOC_RDD_VIOL_ERR
	WCRemInvRDReqErr                   // IBV_WC_REM_INV_RD_REQ_ERR
	WCRemAbortErr                      // IBV_WC_REM_ABORT_ERR
	WCInvEECNErr                       // IBV_WC_INV_EECN_ERR
	WCInvEECStateErr                   // IBV_WC_INV_EEC_STATE_ERR
	WCFatalErr                         // IBV_WC_FATAL_ERR
	WCRespTimeoutErr                   // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr                       // IBV_WC_GENERAL_ERR
	WCTMErr                            // IBV_WC_TM_ERR
	WCTMRndvIncomplete                 // IBV_WC_TM_RNDV_INCOMPLETE
	numWCStatus
)

// wcStatusStrings are ibv_wc_status_str's strings, word for word.
var wcStatusStrings = [numWCStatus]string{
	"success", "local length error", "local QP operation error",
	"local EE context operation error", "local protection error",
	"Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error",
	"remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request", "aborted error",
	"invalid EE context number", "invalid EE context state", "fatal error",
	"response timeout error", "general error", "TM error", "TM software rendezvous",
}

var wcStatusNames = [numWCStatus]string{
	"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR",
	"WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR",
	"REM_ACCESS_ERR", "REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR",
	"LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR", "INV_EECN_ERR",
	"INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR", "TM_ERR",
	"TM_RNDV_INCOMPLETE",
}

// String returns what ibv_wc_status_str returns for s.
func (s WCStatus) String() string {
	if s < numWCStatus {
		return wcStatusStrings[s]
	}
	return "unknown"
}

// Name returns the enum name without its IBV_WC_ prefix, e.g. "WR_FLUSH_ERR".
func (s WCStatus) Name() string {
	if s < numWCStatus {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("WCStatus(%d)", uint8(s))
}

// WCOpcode is the opcode of a work completion (enum ibv_wc_opcode).
type WCOpcode uint8

// Work completion opcodes.
const (
	WCSend            WCOpcode = 0   // IBV_WC_SEND
	WCRDMAWrite       WCOpcode = 1   // IBV_WC_RDMA_WRITE
	WCRDMARead        WCOpcode = 2   // IBV_WC_RDMA_READ
	WCCompSwap        WCOpcode = 3   // IBV_WC_COMP_SWAP
	WCFetchAdd        WCOpcode = 4   // IBV_WC_FETCH_ADD
	WCBindMW          WCOpcode = 5   // IBV_WC_BIND_MW
	WCLocalInv        WCOpcode = 6   // IBV_WC_LOCAL_INV
	WCTSO             WCOpcode = 7   // IBV_WC_TSO
	WCRecv            WCOpcode = 128 // IBV_WC_RECV
	WCRecvRDMAWithImm WCOpcode = 129 // IBV_WC_RECV_RDMA_WITH_IMM
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCBindMW:
		return "BIND_MW"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCTSO:
		return "TSO"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return fmt.Sprintf("WCOpcode(%d)", uint8(o))
}

// IsRecv reports whether o completes a receive WR.
func (o WCOpcode) IsRecv() bool { return o&WCRecv != 0 }

// WCOpcodeOf returns the completion opcode a successful send WR of opcode op
// reports.
func WCOpcodeOf(op Opcode) WCOpcode {
	switch op {
	case OpWrite, OpWriteImm:
		return WCRDMAWrite
	case OpRead:
		return WCRDMARead
	case OpAtomicCmpSwp:
		return WCCompSwap
	case OpAtomicFetchAdd:
		return WCFetchAdd
	case OpLocalInv:
		return WCLocalInv
	case OpBindMW:
		return WCBindMW
	case OpTSO:
		return WCTSO
	}
	return WCSend
}

// WCFlags are the wc_flags of a work completion (enum ibv_wc_flags).
type WCFlags uint32

// Work completion flags.
const (
	WCFlagGRH        WCFlags = 1 << 0 // IBV_WC_GRH: a 40-byte GRH heads the receive buffer (UD) or the packet had one (RoCE)
	WCFlagWithImm    WCFlags = 1 << 1 // IBV_WC_WITH_IMM: Imm holds immediate data
	WCFlagIPCsumOK   WCFlags = 1 << 2 // IBV_WC_IP_CSUM_OK
	WCFlagWithInv    WCFlags = 1 << 3 // IBV_WC_WITH_INV: Imm holds the invalidated rkey
	WCFlagTMSyncReq  WCFlags = 1 << 4 // IBV_WC_TM_SYNC_REQ
	WCFlagTMMatch    WCFlags = 1 << 5 // IBV_WC_TM_MATCH
	WCFlagTMDataSent WCFlags = 1 << 6 // IBV_WC_TM_DATA_VALID
)

var wcFlagNames = []string{"GRH", "WITH_IMM", "IP_CSUM_OK", "WITH_INV", "TM_SYNC_REQ", "TM_MATCH", "TM_DATA_VALID"}

func (f WCFlags) String() string { return flagString(uint64(f), wcFlagNames) }

// MTU is a path MTU (enum ibv_mtu).
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return fmt.Sprint(b)
	}
	return fmt.Sprintf("MTU(%d)", uint8(m))
}

// MTUFromBytes returns the MTU enum of n bytes, or 0 when n is not one.
func MTUFromBytes(n int) MTU {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m
		}
	}
	return 0
}

// PortState is the logical state of a port (enum ibv_port_state).
type PortState uint8

// Port states.
const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

var portStateNames = []string{"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"}

func (s PortState) String() string {
	if int(s) < len(portStateNames) {
		return portStateNames[s]
	}
	return fmt.Sprintf("PortState(%d)", uint8(s))
}

// LinkLayer is the link layer of a port.
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2
)

func (l LinkLayer) String() string {
	switch l {
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// flagString renders a bit set as NAME|NAME|0x..., "0" when empty.
func flagString(v uint64, names []string) string {
	if v == 0 {
		return "0"
	}
	var b strings.Builder
	for i, n := range names {
		if v&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(n)
			v &^= 1 << i
		}
	}
	if v != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "%#x", v)
	}
	return b.String()
}
