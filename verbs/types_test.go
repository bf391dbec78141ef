//go:build unix

// This file also tests Arena, which exists on unix only.

package verbs_test

import (
	"errors"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

func TestWCStatusString(t *testing.T) {
	// ibv_wc_status_str, word for word.
	want := []string{
		"success",
		"local length error",
		"local QP operation error",
		"local EE context operation error",
		"local protection error",
		"Work Request Flushed Error",
		"memory management operation error",
		"bad response error",
		"local access error",
		"remote invalid request error",
		"remote access error",
		"remote operation error",
		"transport retry counter exceeded",
		"RNR retry counter exceeded",
		"local RDD violation error",
		"remote invalid RD request",
		"aborted error",
		"invalid EE context number",
		"invalid EE context state",
		"fatal error",
		"response timeout error",
		"general error",
		"TM error",
		"TM software rendezvous",
	}
	if len(want) != 24 {
		t.Fatalf("%d strings", len(want))
	}
	for i, w := range want {
		if got := verbs.WCStatus(i).String(); got != w {
			t.Errorf("WCStatus(%d).String() = %q, want %q", i, got, w)
		}
	}
	for _, s := range []verbs.WCStatus{24, 25, 255} {
		if got := s.String(); got != "unknown" {
			t.Errorf("WCStatus(%d).String() = %q, want unknown", s, got)
		}
	}
	for s, name := range map[verbs.WCStatus]string{
		verbs.WCSuccess:          "SUCCESS",
		verbs.WCWRFlushErr:       "WR_FLUSH_ERR",
		verbs.WCRemAccessErr:     "REM_ACCESS_ERR",
		verbs.WCRNRRetryExcErr:   "RNR_RETRY_EXC_ERR",
		verbs.WCTMRndvIncomplete: "TM_RNDV_INCOMPLETE",
		24:                       "WCStatus(24)",
	} {
		if got := s.Name(); got != name {
			t.Errorf("WCStatus(%d).Name() = %q, want %q", s, got, name)
		}
	}
}

// TestEnumValues pins the numeric values libibverbs gives its enums, which a
// cgo provider relies on.
func TestEnumValues(t *testing.T) {
	type pair struct {
		name      string
		got, want uint64
	}
	pairs := []pair{
		{"IBV_QPT_RC", uint64(verbs.QPTypeRC), 2},
		{"IBV_QPT_UC", uint64(verbs.QPTypeUC), 3},
		{"IBV_QPT_UD", uint64(verbs.QPTypeUD), 4},
		{"IBV_QPT_RAW_PACKET", uint64(verbs.QPTypeRawPacket), 8},
		{"IBV_QPT_XRC_SEND", uint64(verbs.QPTypeXRCSend), 9},
		{"IBV_QPT_XRC_RECV", uint64(verbs.QPTypeXRCRecv), 10},

		{"IBV_WR_RDMA_WRITE", uint64(verbs.OpWrite), 0},
		{"IBV_WR_RDMA_WRITE_WITH_IMM", uint64(verbs.OpWriteImm), 1},
		{"IBV_WR_SEND", uint64(verbs.OpSend), 2},
		{"IBV_WR_SEND_WITH_IMM", uint64(verbs.OpSendImm), 3},
		{"IBV_WR_RDMA_READ", uint64(verbs.OpRead), 4},
		{"IBV_WR_ATOMIC_CMP_AND_SWP", uint64(verbs.OpAtomicCmpSwp), 5},
		{"IBV_WR_ATOMIC_FETCH_AND_ADD", uint64(verbs.OpAtomicFetchAdd), 6},
		{"IBV_WR_LOCAL_INV", uint64(verbs.OpLocalInv), 7},
		{"IBV_WR_BIND_MW", uint64(verbs.OpBindMW), 8},
		{"IBV_WR_SEND_WITH_INV", uint64(verbs.OpSendInv), 9},
		{"IBV_WR_TSO", uint64(verbs.OpTSO), 10},

		{"IBV_SEND_FENCE", uint64(verbs.SendFence), 1},
		{"IBV_SEND_SIGNALED", uint64(verbs.SendSignaled), 2},
		{"IBV_SEND_SOLICITED", uint64(verbs.SendSolicited), 4},
		{"IBV_SEND_INLINE", uint64(verbs.SendInline), 8},
		{"IBV_SEND_IP_CSUM", uint64(verbs.SendIPCsum), 16},

		{"IBV_QPS_RESET", uint64(verbs.QPStateReset), 0},
		{"IBV_QPS_INIT", uint64(verbs.QPStateInit), 1},
		{"IBV_QPS_RTR", uint64(verbs.QPStateRTR), 2},
		{"IBV_QPS_RTS", uint64(verbs.QPStateRTS), 3},
		{"IBV_QPS_SQD", uint64(verbs.QPStateSQD), 4},
		{"IBV_QPS_SQE", uint64(verbs.QPStateSQE), 5},
		{"IBV_QPS_ERR", uint64(verbs.QPStateErr), 6},

		{"IBV_ACCESS_LOCAL_WRITE", uint64(verbs.AccessLocalWrite), 1},
		{"IBV_ACCESS_REMOTE_WRITE", uint64(verbs.AccessRemoteWrite), 2},
		{"IBV_ACCESS_REMOTE_READ", uint64(verbs.AccessRemoteRead), 4},
		{"IBV_ACCESS_REMOTE_ATOMIC", uint64(verbs.AccessRemoteAtomic), 8},
		{"IBV_ACCESS_MW_BIND", uint64(verbs.AccessMWBind), 16},
		{"IBV_ACCESS_ZERO_BASED", uint64(verbs.AccessZeroBased), 32},
		{"IBV_ACCESS_ON_DEMAND", uint64(verbs.AccessOnDemand), 64},
		{"IBV_ACCESS_RELAXED_ORDERING", uint64(verbs.AccessRelaxedOrder), 1 << 20},

		{"IBV_WC_SUCCESS", uint64(verbs.WCSuccess), 0},
		{"IBV_WC_WR_FLUSH_ERR", uint64(verbs.WCWRFlushErr), 5},
		{"IBV_WC_REM_ACCESS_ERR", uint64(verbs.WCRemAccessErr), 10},
		{"IBV_WC_RETRY_EXC_ERR", uint64(verbs.WCRetryExcErr), 12},
		{"IBV_WC_RNR_RETRY_EXC_ERR", uint64(verbs.WCRNRRetryExcErr), 13},
		{"IBV_WC_GENERAL_ERR", uint64(verbs.WCGeneralErr), 21},
		{"IBV_WC_TM_RNDV_INCOMPLETE", uint64(verbs.WCTMRndvIncomplete), 23},

		{"IBV_WC_SEND", uint64(verbs.WCSend), 0},
		{"IBV_WC_RDMA_WRITE", uint64(verbs.WCRDMAWrite), 1},
		{"IBV_WC_RDMA_READ", uint64(verbs.WCRDMARead), 2},
		{"IBV_WC_COMP_SWAP", uint64(verbs.WCCompSwap), 3},
		{"IBV_WC_FETCH_ADD", uint64(verbs.WCFetchAdd), 4},
		{"IBV_WC_BIND_MW", uint64(verbs.WCBindMW), 5},
		{"IBV_WC_LOCAL_INV", uint64(verbs.WCLocalInv), 6},
		{"IBV_WC_TSO", uint64(verbs.WCTSO), 7},
		{"IBV_WC_RECV", uint64(verbs.WCRecv), 128},
		{"IBV_WC_RECV_RDMA_WITH_IMM", uint64(verbs.WCRecvRDMAWithImm), 129},

		{"IBV_WC_GRH", uint64(verbs.WCFlagGRH), 1},
		{"IBV_WC_WITH_IMM", uint64(verbs.WCFlagWithImm), 2},
		{"IBV_WC_IP_CSUM_OK", uint64(verbs.WCFlagIPCsumOK), 4},
		{"IBV_WC_WITH_INV", uint64(verbs.WCFlagWithInv), 8},
		{"IBV_WC_TM_SYNC_REQ", uint64(verbs.WCFlagTMSyncReq), 16},
		{"IBV_WC_TM_MATCH", uint64(verbs.WCFlagTMMatch), 32},
		{"IBV_WC_TM_DATA_VALID", uint64(verbs.WCFlagTMDataSent), 64},

		{"IBV_QP_STATE", uint64(verbs.QPAttrState), 1 << 0},
		{"IBV_QP_CUR_STATE", uint64(verbs.QPAttrCurState), 1 << 1},
		{"IBV_QP_EN_SQD_ASYNC_NOTIFY", uint64(verbs.QPAttrEnSQDAsync), 1 << 2},
		{"IBV_QP_ACCESS_FLAGS", uint64(verbs.QPAttrAccessFlags), 1 << 3},
		{"IBV_QP_PKEY_INDEX", uint64(verbs.QPAttrPKeyIndex), 1 << 4},
		{"IBV_QP_PORT", uint64(verbs.QPAttrPort), 1 << 5},
		{"IBV_QP_QKEY", uint64(verbs.QPAttrQKey), 1 << 6},
		{"IBV_QP_AV", uint64(verbs.QPAttrAV), 1 << 7},
		{"IBV_QP_PATH_MTU", uint64(verbs.QPAttrPathMTU), 1 << 8},
		{"IBV_QP_TIMEOUT", uint64(verbs.QPAttrTimeout), 1 << 9},
		{"IBV_QP_RETRY_CNT", uint64(verbs.QPAttrRetryCnt), 1 << 10},
		{"IBV_QP_RNR_RETRY", uint64(verbs.QPAttrRNRRetry), 1 << 11},
		{"IBV_QP_RQ_PSN", uint64(verbs.QPAttrRQPSN), 1 << 12},
		{"IBV_QP_MAX_QP_RD_ATOMIC", uint64(verbs.QPAttrMaxQPRdAtomic), 1 << 13},
		{"IBV_QP_ALT_PATH", uint64(verbs.QPAttrAltPath), 1 << 14},
		{"IBV_QP_MIN_RNR_TIMER", uint64(verbs.QPAttrMinRNRTimer), 1 << 15},
		{"IBV_QP_SQ_PSN", uint64(verbs.QPAttrSQPSN), 1 << 16},
		{"IBV_QP_MAX_DEST_RD_ATOMIC", uint64(verbs.QPAttrMaxDestRdAtomic), 1 << 17},
		{"IBV_QP_PATH_MIG_STATE", uint64(verbs.QPAttrPathMigState), 1 << 18},
		{"IBV_QP_CAP", uint64(verbs.QPAttrCap), 1 << 19},
		{"IBV_QP_DEST_QPN", uint64(verbs.QPAttrDestQPN), 1 << 20},

		{"IBV_MTU_256", uint64(verbs.MTU256), 1},
		{"IBV_MTU_4096", uint64(verbs.MTU4096), 5},
		{"IBV_PORT_ACTIVE", uint64(verbs.PortActive), 4},
		{"IBV_LINK_LAYER_ETHERNET", uint64(verbs.LinkLayerEthernet), 2},
		{"IBV_ATOMIC_GLOB", uint64(verbs.AtomicGlob), 2},
		{"IBV_SRQT_XRC", uint64(verbs.SRQTypeXRC), 1},
		{"IBV_SRQ_LIMIT", uint64(verbs.SRQAttrLimit), 2},

		{"IBV_EVENT_CQ_ERR", uint64(verbs.EventCQErr), 0},
		{"IBV_EVENT_COMM_EST", uint64(verbs.EventCommEst), 4},
		{"IBV_EVENT_PORT_ACTIVE", uint64(verbs.EventPortActive), 9},
		{"IBV_EVENT_SRQ_LIMIT_REACHED", uint64(verbs.EventSRQLimitReached), 15},
		{"IBV_EVENT_GID_CHANGE", uint64(verbs.EventGIDChange), 18},

		{"IBV_DEVICE_CURR_QP_STATE_MOD", uint64(verbs.DeviceCurrQPStateMod), 1 << 7},
		{"IBV_DEVICE_MEM_WINDOW", uint64(verbs.DeviceMemWindow), 1 << 17},
		{"IBV_DEVICE_UD_IP_CSUM", uint64(verbs.DeviceUDIPCsum), 1 << 18},
		{"IBV_DEVICE_XRC", uint64(verbs.DeviceXRC), 1 << 20},
		{"IBV_DEVICE_RAW_IP_CSUM", uint64(verbs.DeviceRawIPCsum), 1 << 26},
	}
	for _, p := range pairs {
		if p.got != p.want {
			t.Errorf("%s = %d, want %d", p.name, p.got, p.want)
		}
	}
	for i, op := range verbs.Opcodes {
		if int(op) != i {
			t.Errorf("Opcodes[%d] = %d", i, op)
		}
	}
}

func TestStrings(t *testing.T) {
	for _, c := range []struct {
		got  interface{ String() string }
		want string
	}{
		{verbs.OpWrite, "RDMA_WRITE"},
		{verbs.OpWriteImm, "RDMA_WRITE_WITH_IMM"},
		{verbs.OpSend, "SEND"},
		{verbs.OpSendImm, "SEND_WITH_IMM"},
		{verbs.OpRead, "RDMA_READ"},
		{verbs.OpAtomicCmpSwp, "ATOMIC_CMP_AND_SWP"},
		{verbs.OpAtomicFetchAdd, "ATOMIC_FETCH_AND_ADD"},
		{verbs.OpLocalInv, "LOCAL_INV"},
		{verbs.OpBindMW, "BIND_MW"},
		{verbs.OpSendInv, "SEND_WITH_INV"},
		{verbs.OpTSO, "TSO"},
		{verbs.Opcode(11), "Opcode(11)"},

		{verbs.QPTypeRC, "RC"},
		{verbs.QPTypeUC, "UC"},
		{verbs.QPTypeUD, "UD"},
		{verbs.QPTypeRawPacket, "RAW_PACKET"},
		{verbs.QPTypeXRCSend, "XRC_SEND"},
		{verbs.QPTypeXRCRecv, "XRC_RECV"},
		{verbs.QPType(0), "QPType(0)"},

		{verbs.QPStateReset, "RESET"},
		{verbs.QPStateRTS, "RTS"},
		{verbs.QPStateErr, "ERR"},
		{verbs.QPState(7), "QPState(7)"},

		{verbs.SendFlags(0), "0"},
		{verbs.SendFence | verbs.SendSignaled, "FENCE|SIGNALED"},
		{verbs.SendInline | 1<<5, "INLINE|0x20"},
		{verbs.SendFlags(1 << 9), "0x200"},
		{verbs.AccessAllRemote, "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC"},
		{verbs.QPAttrState | verbs.QPAttrDestQPN, "STATE|DEST_QPN"},
		{verbs.WCFlagWithImm | verbs.WCFlagGRH, "GRH|WITH_IMM"},

		{verbs.WCSend, "SEND"},
		{verbs.WCRecv, "RECV"},
		{verbs.WCRecvRDMAWithImm, "RECV_RDMA_WITH_IMM"},
		{verbs.WCOpcode(8), "WCOpcode(8)"},

		{verbs.MTU1024, "1024"},
		{verbs.MTU(0), "MTU(0)"},
		{verbs.MTU(6), "MTU(6)"},
		{verbs.PortActive, "PORT_ACTIVE"},
		{verbs.PortState(9), "PortState(9)"},
		{verbs.LinkLayerInfiniBand, "InfiniBand"},
		{verbs.LinkLayerEthernet, "Ethernet"},
		{verbs.LinkLayerUnspecified, "Unknown"},
		{verbs.AtomicHCA, "ATOMIC_HCA"},
		{verbs.AtomicCap(3), "ATOMIC_UNKNOWN"},
	} {
		if s := c.got.String(); s != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.got, s, c.want)
		}
	}
}

func TestEventTypeString(t *testing.T) {
	// ibv_event_type_str, word for word.
	want := []string{"CQ error", "local work queue catastrophic error",
		"invalid request local work queue error", "local access violation work queue error",
		"communication established", "send queue drained", "path migrated",
		"path migration request error", "local catastrophic error", "port active",
		"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
		"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change"}
	for i, w := range want {
		if got := verbs.EventType(i).String(); got != w {
			t.Errorf("EventType(%d).String() = %q, want %q", i, got, w)
		}
	}
	if got := verbs.EventType(200).String(); got != "unknown" {
		t.Errorf("EventType(200).String() = %q", got)
	}
}

func TestOpcodePredicates(t *testing.T) {
	for _, op := range verbs.Opcodes {
		send := op == verbs.OpSend || op == verbs.OpSendImm || op == verbs.OpSendInv
		atomic := op == verbs.OpAtomicCmpSwp || op == verbs.OpAtomicFetchAdd
		imm := op == verbs.OpSendImm || op == verbs.OpWriteImm
		if op.IsSend() != send || op.IsAtomic() != atomic || op.HasImm() != imm {
			t.Errorf("%s: IsSend %v IsAtomic %v HasImm %v", op, op.IsSend(), op.IsAtomic(), op.HasImm())
		}
	}
	for op, want := range map[verbs.Opcode]verbs.WCOpcode{
		verbs.OpWrite: verbs.WCRDMAWrite, verbs.OpWriteImm: verbs.WCRDMAWrite,
		verbs.OpSend: verbs.WCSend, verbs.OpSendImm: verbs.WCSend, verbs.OpSendInv: verbs.WCSend,
		verbs.OpRead: verbs.WCRDMARead, verbs.OpAtomicCmpSwp: verbs.WCCompSwap,
		verbs.OpAtomicFetchAdd: verbs.WCFetchAdd, verbs.OpLocalInv: verbs.WCLocalInv,
		verbs.OpBindMW: verbs.WCBindMW, verbs.OpTSO: verbs.WCTSO,
	} {
		if got := verbs.WCOpcodeOf(op); got != want {
			t.Errorf("WCOpcodeOf(%s) = %s, want %s", op, got, want)
		}
	}
	for _, o := range []verbs.WCOpcode{verbs.WCSend, verbs.WCRDMAWrite, verbs.WCRDMARead, verbs.WCCompSwap,
		verbs.WCFetchAdd, verbs.WCBindMW, verbs.WCLocalInv, verbs.WCTSO} {
		if o.IsRecv() {
			t.Errorf("%s.IsRecv() = true", o)
		}
	}
	if !verbs.WCRecv.IsRecv() || !verbs.WCRecvRDMAWithImm.IsRecv() {
		t.Error("receive completions do not report IsRecv")
	}
	for _, qt := range verbs.QPTypes {
		connected := qt == verbs.QPTypeRC || qt == verbs.QPTypeUC || qt == verbs.QPTypeXRCSend || qt == verbs.QPTypeXRCRecv
		reliable := qt == verbs.QPTypeRC || qt == verbs.QPTypeXRCSend || qt == verbs.QPTypeXRCRecv
		if qt.Connected() != connected || qt.Reliable() != reliable {
			t.Errorf("%s: Connected %v Reliable %v", qt, qt.Connected(), qt.Reliable())
		}
	}
}

func TestMTU(t *testing.T) {
	for m, n := range map[verbs.MTU]int{verbs.MTU256: 256, verbs.MTU512: 512, verbs.MTU1024: 1024,
		verbs.MTU2048: 2048, verbs.MTU4096: 4096, 0: 0, 6: 0} {
		if got := m.Bytes(); got != n {
			t.Errorf("MTU(%d).Bytes() = %d, want %d", m, got, n)
		}
		if n != 0 && verbs.MTUFromBytes(n) != m {
			t.Errorf("MTUFromBytes(%d) = %d, want %d", n, verbs.MTUFromBytes(n), m)
		}
	}
	for _, n := range []int{0, 128, 1000, 1500, 8192, -1} {
		if got := verbs.MTUFromBytes(n); got != 0 {
			t.Errorf("MTUFromBytes(%d) = %d, want 0", n, got)
		}
	}
}

func TestGID(t *testing.T) {
	g := verbs.GIDFromAddr(netip.MustParseAddr("192.168.1.10"))
	if got := g.String(); got != "::ffff:192.168.1.10" {
		t.Errorf("IPv4 GID = %q", got)
	}
	g = verbs.GIDFromAddr(netip.MustParseAddr("fe80::1"))
	if got := g.String(); got != "fe80::1" || g.IsZero() {
		t.Errorf("IPv6 GID = %q, zero %v", got, g.IsZero())
	}
	if !(verbs.GID{}).IsZero() {
		t.Error("the zero GID is not IsZero")
	}
}

func TestArena(t *testing.T) {
	page := os.Getpagesize()
	for _, c := range []struct{ size, want int }{
		{1, page}, {page - 1, page}, {page, page}, {page + 1, 2 * page}, {5*page + 3, 6 * page},
	} {
		a, err := verbs.NewArena(c.size)
		if err != nil {
			t.Fatalf("NewArena(%d): %v", c.size, err)
		}
		b := a.Bytes()
		if len(b) != c.want || a.Len() != c.want || cap(b) != c.want {
			t.Errorf("NewArena(%d): len %d Len %d cap %d, want %d", c.size, len(b), a.Len(), cap(b), c.want)
		}
		for i, v := range b {
			if v != 0 {
				t.Fatalf("NewArena(%d): byte %d is %#x, not zero", c.size, i, v)
			}
		}
		for i := range b {
			b[i] = byte(i * 7)
		}
		for i, v := range a.Bytes() {
			if v != byte(i*7) {
				t.Fatalf("NewArena(%d): byte %d reads %#x after writing %#x", c.size, i, v, byte(i*7))
			}
		}
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := a.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if a.Bytes() != nil || a.Len() != 0 {
			t.Errorf("after Close: Bytes %d bytes, Len %d", len(a.Bytes()), a.Len())
		}
	}
	for _, size := range []int{0, -1} {
		a, err := verbs.NewArena(size)
		if a != nil || !errors.Is(err, verbs.ErrInvalidArgument) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("NewArena(%d) = %v, %v; want ErrInvalidArgument", size, a, err)
		}
	}
}

func TestArenaConcurrentUse(t *testing.T) {
	a, err := verbs.NewArena(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var wg sync.WaitGroup
	const workers = 4
	chunk := a.Len() / workers
	for w := range workers {
		wg.Go(func() {
			b := a.Bytes()[w*chunk : (w+1)*chunk]
			for i := range b {
				b[i] = byte(w + 1)
			}
		})
	}
	wg.Wait()
	for i, v := range a.Bytes() {
		if v != byte(i/chunk+1) {
			t.Fatalf("byte %d = %d, want %d", i, v, i/chunk+1)
		}
	}
}
