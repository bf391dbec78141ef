package verbs

// SGE is one entry of a scatter/gather list (struct ibv_sge): Length bytes at
// virtual address Addr inside the memory region whose local key is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// RDMA holds the remote side of an RDMA READ or WRITE (wr.rdma).
type RDMA struct {
	RemoteAddr uint64
	RKey       uint32
}

// Atomic holds the remote side and operands of an atomic (wr.atomic). The
// remote 8 bytes are in the responder's host byte order, as on every
// libibverbs device.
type Atomic struct {
	RemoteAddr uint64
	CompareAdd uint64 // compare value of CMP_AND_SWP, addend of FETCH_AND_ADD
	Swap       uint64
	RKey       uint32
}

// UD addresses the destination of a UD send (wr.ud).
type UD struct {
	AH         AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// SendWR is a send work request (struct ibv_send_wr without next: a batch is
// a slice). The provider may keep SGL only until PostSend returns.
type SendWR struct {
	ID     uint64 // wr_id, returned in the WC
	SGL    []SGE
	Opcode Opcode
	Flags  SendFlags
	// Imm is imm_data for SEND_WITH_IMM and RDMA_WRITE_WITH_IMM, carried bit
	// for bit (libibverbs declares it __be32 and swaps nothing).
	Imm uint32
	// InvalidateRKey is the rkey SEND_WITH_INV invalidates at the responder,
	// or the key LOCAL_INV invalidates locally (the invalidate_rkey member
	// of the union with imm_data).
	InvalidateRKey uint32
	RDMA           RDMA   // RDMA_READ, RDMA_WRITE, RDMA_WRITE_WITH_IMM
	Atomic         Atomic // ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD
	UD             UD     // every send on a UD QP
	RemoteSRQN     uint32 // qp_type.xrc.remote_srqn: every send on an XRC_SEND QP
}

// Length returns the total length of the gather list.
func (wr *SendWR) Length() uint64 {
	var n uint64
	for i := range wr.SGL {
		n += uint64(wr.SGL[i].Length)
	}
	return n
}

// RecvWR is a receive work request (struct ibv_recv_wr without next).
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WC is a work completion (struct ibv_wc). When Status is not WCSuccess only
// WRID, Status, QPNum and VendorErr are meaningful.
type WC struct {
	WRID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32
	// Imm is the immediate data (Flags has WCFlagWithImm) or the rkey a
	// SEND_WITH_INV invalidated (Flags has WCFlagWithInv).
	Imm          uint32
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
}

// Err returns nil for a successful completion and a *WCError otherwise.
func (wc *WC) Err() error {
	if wc.Status == WCSuccess {
		return nil
	}
	return &WCError{Status: wc.Status, VendorErr: wc.VendorErr, WRID: wc.WRID, QPN: wc.QPNum}
}
