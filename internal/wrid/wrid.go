package wrid

// The wr_id of every work request the runtime posts, sends and receives
// alike, is laid out here and only here: the actors make and read the
// sends', the pollers tell the two apart, the runtime's receive side makes
// and reads the receives'.
//
//	 63  62          48 47                                      0
//	+---+--------------+------------------------------------------+
//	| 0 |   actor ID   |  sequence number (slot and generation)   |  send
//	+---+--------------+------------------------------------------+
//	| 1 |            receive buffer index                         |  receive
//	+---+---------------------------------------------------------+
//
// The sequence number is the WR's slot (seq mod the shadow size) and its
// generation (seq div the size) in one; 48 bits last 2^48 WRs, some nine
// months at ten million a second on one QP.
const (
	// RecvBit marks a receive's wr_id.
	RecvBit = 1 << 63
	// ActorIDBits is the width of the actor ID in a send's wr_id.
	ActorIDBits = 15
	// MaxActorID is the largest actor ID a wr_id carries.
	MaxActorID = 1<<ActorIDBits - 1

	seqBits = 48
	seqMask = 1<<seqBits - 1
)

// Send encodes the wr_id of the send with sequence number seq on actor id
// (id at most MaxActorID; New refuses larger ones).
func Send(id uint16, seq uint64) uint64 {
	return uint64(id&MaxActorID)<<seqBits | seq&seqMask
}

// DecodeSend splits a send's wr_id made by Send.
func DecodeSend(wrid uint64) (id uint16, seq uint64) {
	return uint16(wrid>>seqBits) & MaxActorID, wrid & seqMask
}

// Recv encodes the wr_id of the receive into buffer index.
func Recv(index int) uint64 { return RecvBit | uint64(index)&^RecvBit }

// IsRecv reports whether wrid is a receive's.
func IsRecv(wrid uint64) bool { return wrid&RecvBit != 0 }

// RecvIndex returns the buffer index of a receive's wr_id.
func RecvIndex(wrid uint64) int { return int(wrid &^ RecvBit) }

// ActorID maps the n-th actor a runtime creates to an ID: IDs wrap at
// MaxActorID+1, and only actors whose completions share a CQ need
// different ones.
func ActorID(n uint32) uint16 { return uint16(n & MaxActorID) }
