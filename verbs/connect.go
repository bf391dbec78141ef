package verbs

import (
	"crypto/rand"
	"encoding/binary"
)

// PeerInfo is what the two ends of a connection exchange out of band before
// their QPs can talk: what ibv_rc_pingpong sends over TCP (LID, QPN, PSN,
// GID).
type PeerInfo struct {
	LID uint16
	QPN uint32
	PSN uint32
	GID GID
}

// RandomPSN returns a first packet sequence number (24 bits) drawn from the
// operating system's random source, as rdma-core's tools and rdma_cm draw
// theirs. A connection's PSNs are what a packet must carry to be taken as
// the peer's: one that always starts at the same PSN lets a third party
// who guesses the QP number aim packets at it (RoCE carries no
// authentication of its own).
func RandomPSN() uint32 {
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand.Read's contract)
	return binary.NativeEndian.Uint32(b[:]) & (1<<24 - 1)
}

// ConnectSpec is the local side of a connection: how to bring a QP from
// RESET to RTS. Zero fields take the defaults documented on each.
type ConnectSpec struct {
	Port     uint8 // 0: port 1
	GIDIndex uint8
	PathMTU  MTU    // 0: MTU1024
	Access   Access // remote access granted to the peer; 0: LOCAL_WRITE and every remote access RC allows
	PSN      uint32 // our first send PSN (the peer's RQPSN): RandomPSN's, told to the peer
	QKey     uint32 // UD only
	// Reliable-transport timers; zero values take rdma-core's example
	// defaults: Timeout 14 (67 ms), RetryCnt 7, RNRRetry 7 (forever),
	// MinRNRTimer 12 (0.64 ms), 16 outstanding reads/atomics each way.
	Timeout     uint8
	RetryCnt    uint8
	RNRRetry    uint8
	MinRNRTimer uint8
	// MaxRdAtomic is how many RDMA READs and atomics the QP may have
	// outstanding as initiator (max_rd_atomic, at most the device's
	// max_qp_init_rd_atom and the peer's max_dest_rd_atomic).
	// MaxDestRdAtomic is how many of the peer's it takes at once as
	// responder (max_dest_rd_atomic, at most the device's max_qp_rd_atom);
	// 0: MaxRdAtomic.
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	// ByLID addresses the peer by its LID alone (PeerInfo.LID; the address
	// vector's is_global 0, no GRH): InfiniBand within one subnet
	// (LIDRouted). False: by its GID, with a global route header, which
	// RoCE always needs and InfiniBand across subnets.
	ByLID bool
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
	if s.MaxDestRdAtomic == 0 {
		s.MaxDestRdAtomic = s.MaxRdAtomic
	}
	return s
}

// LIDRouted reports whether a port of link layer ll whose GID is sgid
// reaches the peer whose GID is dgid by LID alone: on InfiniBand, when
// both GIDs carry the same subnet prefix (their first 8 bytes), since a
// LID is unique only within its subnet and a router forwards by the GRH.
// RoCE has no LIDs: its packets always carry the global route.
func LIDRouted(ll LinkLayer, sgid, dgid GID) bool {
	return ll == LinkLayerInfiniBand && [8]byte(sgid[:8]) == [8]byte(dgid[:8])
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
	ah := AHAttr{IsGlobal: true, DLID: peer.LID, PortNum: s.Port,
		GRH: GlobalRoute{DGID: peer.GID, SGIDIndex: s.GIDIndex, HopLimit: 64}}
	if s.ByLID {
		ah = AHAttr{DLID: peer.LID, PortNum: s.Port}
	}
	rtr := QPAttr{State: QPStateRTR, PathMTU: s.PathMTU, DestQPN: peer.QPN, RQPSN: peer.PSN,
		MaxDestRdAtomic: s.MaxDestRdAtomic, MinRNRTimer: s.MinRNRTimer, AH: ah}
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
