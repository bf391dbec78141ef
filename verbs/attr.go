package verbs

import (
	"net/netip"
)

// GID is a 128-bit global identifier (union ibv_gid). On RoCE it is an IPv6
// address or an IPv4-mapped one.
type GID [16]byte

// String renders the GID as an IPv6 address, the way ibv_devinfo -v does.
func (g GID) String() string { return netip.AddrFrom16(g).String() }

// IsZero reports whether every byte of g is zero (an empty GID table slot).
func (g GID) IsZero() bool { return g == GID{} }

// GIDFromAddr returns the GID of an IP address: IPv4 addresses are mapped
// (::ffff:a.b.c.d), as RoCEv2 does.
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// DeviceCap is a device capability flag (enum ibv_device_cap_flags).
type DeviceCap uint64

// Device capability flags (values from libibverbs).
const (
	DeviceResizeMaxWR      DeviceCap = 1 << 0
	DeviceBadPKeyCntr      DeviceCap = 1 << 1
	DeviceBadQKeyCntr      DeviceCap = 1 << 2
	DeviceAutoPathMig      DeviceCap = 1 << 4
	DeviceCurrQPStateMod   DeviceCap = 1 << 7
	DevicePortActiveEvent  DeviceCap = 1 << 10
	DeviceSysImageGUID     DeviceCap = 1 << 11
	DeviceRCRNRNAKGen      DeviceCap = 1 << 12
	DeviceSRQResize        DeviceCap = 1 << 13
	DeviceNNotifyCQ        DeviceCap = 1 << 14
	DeviceMemWindow        DeviceCap = 1 << 17
	DeviceUDIPCsum         DeviceCap = 1 << 18
	DeviceXRC              DeviceCap = 1 << 20
	DeviceMemMgtExtensions DeviceCap = 1 << 21
	DeviceMemWindowType2B  DeviceCap = 1 << 24
	DeviceRCIPCsum         DeviceCap = 1 << 25
	DeviceRawIPCsum        DeviceCap = 1 << 26
)

// AtomicCap says how atomics are atomic (enum ibv_atomic_cap).
type AtomicCap uint8

// Atomic capabilities.
const (
	AtomicNone AtomicCap = 0 // no atomics
	AtomicHCA  AtomicCap = 1 // atomic among the device's own QPs
	AtomicGlob AtomicCap = 2 // atomic with CPU accesses too
)

func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE"
	case AtomicHCA:
		return "ATOMIC_HCA"
	case AtomicGlob:
		return "ATOMIC_GLOB"
	}
	return "ATOMIC_UNKNOWN"
}

// DeviceAttr are the limits and capabilities of a device (struct
// ibv_device_attr).
type DeviceAttr struct {
	FWVer           string
	NodeGUID        uint64
	SysImageGUID    uint64
	MaxMRSize       uint64
	PageSizeCap     uint64
	VendorID        uint32
	VendorPartID    uint32
	HWVer           uint32
	MaxQP           int
	MaxQPWR         int
	DeviceCapFlags  DeviceCap
	MaxSGE          int
	MaxSGERd        int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxQPRdAtom     int
	MaxQPInitRdAtom int
	MaxSRQ          int
	MaxSRQWR        int
	MaxSRQSGE       int
	MaxAH           int
	AtomicCap       AtomicCap
	PhysPortCnt     int
}

// PortAttr describes a port (struct ibv_port_attr). Ports are numbered from 1.
type PortAttr struct {
	State        PortState
	MaxMTU       MTU
	ActiveMTU    MTU
	GIDTblLen    int
	PortCapFlags uint32
	MaxMsgSz     uint32
	LID          uint16
	SMLID        uint16
	LMC          uint8
	ActiveWidth  uint8
	ActiveSpeed  uint8
	PhysState    uint8
	LinkLayer    LinkLayer
	PKeyTblLen   int
}

// QPCaps are the queue sizes of a QP (struct ibv_qp_cap). At creation they
// are requests; QP.Query reports what the device granted, which may be more
// (rxe, for one, rounds queue sizes up to 2^n - 1).
type QPCaps struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// QPSpec describes a QP to create (struct ibv_qp_init_attr_ex). It is a plain
// value: validate it, copy it, create many QPs from it.
type QPSpec struct {
	Type   QPType
	SendCQ CQ // not used by XRC_RECV
	RecvCQ CQ // not used with an SRQ on XRC_RECV, nor by XRC_SEND
	SRQ    SRQ
	Caps   QPCaps
	// SigAll makes every send WR generate a completion (sq_sig_all); when
	// false only WRs with SendSignaled (and failed ones) complete.
	SigAll bool
	// XRCD is the XRC domain of an XRC_RECV QP (which has no PD).
	XRCD XRCD
}

// QPAttrMask selects the QPAttr fields Modify applies and Query fills
// (enum ibv_qp_attr_mask; the values are libibverbs').
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState           QPAttrMask = 1 << 0
	QPAttrCurState        QPAttrMask = 1 << 1
	QPAttrEnSQDAsync      QPAttrMask = 1 << 2
	QPAttrAccessFlags     QPAttrMask = 1 << 3
	QPAttrPKeyIndex       QPAttrMask = 1 << 4
	QPAttrPort            QPAttrMask = 1 << 5
	QPAttrQKey            QPAttrMask = 1 << 6
	QPAttrAV              QPAttrMask = 1 << 7
	QPAttrPathMTU         QPAttrMask = 1 << 8
	QPAttrTimeout         QPAttrMask = 1 << 9
	QPAttrRetryCnt        QPAttrMask = 1 << 10
	QPAttrRNRRetry        QPAttrMask = 1 << 11
	QPAttrRQPSN           QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic   QPAttrMask = 1 << 13
	QPAttrAltPath         QPAttrMask = 1 << 14
	QPAttrMinRNRTimer     QPAttrMask = 1 << 15
	QPAttrSQPSN           QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic QPAttrMask = 1 << 17
	QPAttrPathMigState    QPAttrMask = 1 << 18
	QPAttrCap             QPAttrMask = 1 << 19
	QPAttrDestQPN         QPAttrMask = 1 << 20
)

var qpAttrMaskNames = []string{"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS",
	"PKEY_INDEX", "PORT", "QKEY", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY",
	"RQ_PSN", "MAX_QP_RD_ATOMIC", "ALT_PATH", "MIN_RNR_TIMER", "SQ_PSN",
	"MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP", "DEST_QPN"}

func (m QPAttrMask) String() string { return flagString(uint64(m), qpAttrMaskNames) }

// GlobalRoute is the GRH part of an address vector (struct ibv_global_route).
type GlobalRoute struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector (struct ibv_ah_attr): where packets go.
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool
	PortNum     uint8
}

// QPAttr are the attributes of a QP (struct ibv_qp_attr). Modify applies
// the fields its mask selects.
type QPAttr struct {
	State           QPState
	CurState        QPState
	PathMTU         MTU
	QKey            uint32
	RQPSN           uint32
	SQPSN           uint32
	DestQPN         uint32
	AccessFlags     Access
	Cap             QPCaps
	AH              AHAttr
	PKeyIndex       uint16
	SQDraining      bool
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	// MinRNRTimer is the IB encoding (1 = 0.01 ms ... 31 = 491.52 ms,
	// 0 = 655.36 ms); see RNRTimerDuration.
	MinRNRTimer uint8
	PortNum     uint8
	// Timeout is the local ACK timeout, 4.096 µs * 2^Timeout (0 = infinite).
	Timeout  uint8
	RetryCnt uint8
	RNRRetry uint8 // 7 = retry forever
}

// CQSpec describes a completion queue to create.
type CQSpec struct {
	CQE        int         // minimum number of entries; the device may grant more
	Channel    CompChannel // optional: where ReqNotify events are delivered
	CompVector int
}

// SRQType is the type of a shared receive queue (enum ibv_srq_type).
type SRQType uint8

// SRQ types.
const (
	SRQTypeBasic SRQType = 0
	SRQTypeXRC   SRQType = 1
)

// SRQSpec describes a shared receive queue (struct ibv_srq_init_attr_ex).
type SRQSpec struct {
	MaxWR  int
	MaxSGE int
	Limit  int // srq_limit: arm the SRQ_LIMIT_REACHED event at creation
	Type   SRQType
	XRCD   XRCD // XRC SRQs only
	CQ     CQ   // XRC SRQs only: where receives on the SRQ complete
}

// SRQAttr are the attributes of an SRQ (struct ibv_srq_attr).
type SRQAttr struct {
	MaxWR  int
	MaxSGE int
	Limit  int
}

// SRQAttrMask selects what SRQ.Modify changes (enum ibv_srq_attr_mask).
type SRQAttrMask uint32

// SRQ attribute mask bits.
const (
	SRQAttrMaxWR SRQAttrMask = 1 << 0
	SRQAttrLimit SRQAttrMask = 1 << 1
)
