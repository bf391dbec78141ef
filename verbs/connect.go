package verbs

// PeerInfo is what the two ends of a connection exchange out of band before
// their QPs can talk: what ibv_rc_pingpong sends over TCP (LID, QPN, PSN,
// GID).
type PeerInfo struct {
	LID uint16
	QPN uint32
	PSN uint32
	GID GID
}

// ConnectSpec is the local side of a connection: how to bring a QP from
// RESET to RTS. Zero fields take the defaults documented on each.
type ConnectSpec struct {
	Port     uint8 // 0: port 1
	GIDIndex uint8
	PathMTU  MTU    // 0: MTU1024
	Access   Access // remote access granted to the peer; 0: LOCAL_WRITE and every remote access RC allows
	PSN      uint32 // our first send PSN (the peer's RQPSN)
	QKey     uint32 // UD only
	// Reliable-transport timers; zero values take rdma-core's example
	// defaults: Timeout 14 (67 ms), RetryCnt 7, RNRRetry 7 (forever),
	// MinRNRTimer 12 (0.64 ms), 16 outstanding reads/atomics each way.
	Timeout     uint8
	RetryCnt    uint8
	RNRRetry    uint8
	MinRNRTimer uint8
	MaxRdAtomic uint8
	// Explicit: use Timeout, RetryCnt and RNRRetry as given, zeros included
	// (rnr_retry 0 means no RNR retry at all).
	Explicit bool
}

// WithDefaults returns s with its zero fields set to their defaults for a
// QP of type t, as Init and Connect use it.
func (s ConnectSpec) WithDefaults(t QPType) ConnectSpec { return s.withDefaults(t) }

func (s ConnectSpec) withDefaults(t QPType) ConnectSpec {
	if s.Port == 0 {
		s.Port = 1
	}
	if s.PathMTU == 0 {
		s.PathMTU = MTU1024
	}
	if s.Access == 0 {
		s.Access = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
		if t == QPTypeUC {
			s.Access = AccessLocalWrite | AccessRemoteWrite
		}
	}
	if !s.Explicit {
		if s.Timeout == 0 {
			s.Timeout = 14
		}
		if s.RetryCnt == 0 {
			s.RetryCnt = 7
		}
		if s.RNRRetry == 0 {
			s.RNRRetry = 7
		}
	}
	if s.MinRNRTimer == 0 {
		s.MinRNRTimer = 12
	}
	if s.MaxRdAtomic == 0 {
		s.MaxRdAtomic = 16
	}
	return s
}

// Init moves qp from RESET to INIT, where receives may be posted.
func Init(qp QP, local ConnectSpec) error {
	t := qp.Type()
	s := local.withDefaults(t)
	init := QPAttr{State: QPStateInit, PortNum: s.Port, AccessFlags: s.Access, QKey: s.QKey}
	mask := QPAttrState | QPAttrPKeyIndex | QPAttrPort
	if t == QPTypeUD {
		mask |= QPAttrQKey
	} else {
		mask |= QPAttrAccessFlags
	}
	return qp.Modify(&init, mask)
}

// Connect moves qp through INIT (unless Init already did) and RTR to RTS
// towards peer, with exactly the attribute masks the kernel requires for
// qp's type (UD ignores peer: its destination is in each WR). Post receives
// before the QP reaches RTR (after Init): a message can arrive at once.
func Connect(qp QP, local ConnectSpec, peer PeerInfo) error {
	t := qp.Type()
	s := local.withDefaults(t)
	attr, err := qp.Query()
	if err != nil {
		return err
	}
	if attr.State == QPStateReset {
		if err := Init(qp, local); err != nil {
			return err
		}
	}
	var mask QPAttrMask
	rtr := QPAttr{State: QPStateRTR, PathMTU: s.PathMTU, DestQPN: peer.QPN, RQPSN: peer.PSN,
		MaxDestRdAtomic: s.MaxRdAtomic, MinRNRTimer: s.MinRNRTimer,
		AH: AHAttr{IsGlobal: true, DLID: peer.LID, PortNum: s.Port,
			GRH: GlobalRoute{DGID: peer.GID, SGIDIndex: s.GIDIndex, HopLimit: 64}}}
	mask = QPAttrState
	switch t {
	case QPTypeRC, QPTypeXRCRecv:
		mask |= QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
	case QPTypeUC, QPTypeXRCSend:
		mask |= QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
	}
	if err := qp.Modify(&rtr, mask); err != nil {
		return err
	}
	rts := QPAttr{State: QPStateRTS, SQPSN: s.PSN, Timeout: s.Timeout, RetryCnt: s.RetryCnt,
		RNRRetry: s.RNRRetry, MaxRdAtomic: s.MaxRdAtomic}
	mask = QPAttrState | QPAttrSQPSN
	switch t {
	case QPTypeRC, QPTypeXRCSend:
		mask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
	case QPTypeXRCRecv:
		mask |= QPAttrTimeout
	}
	return qp.Modify(&rts, mask)
}
