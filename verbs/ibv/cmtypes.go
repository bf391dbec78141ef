package ibv

import (
	"encoding/binary"
	"fmt"
	"syscall"
)

// ConnParam is what one side of an rdma_cm connection sends the other in
// its connect request or accept (struct rdma_conn_param). The QP number is
// the provider's business: it comes from the QP passed to Connect or Accept.
type ConnParam struct {
	// PrivateData rides in the CM message: up to 56 bytes in a connect
	// request and 196 in an accept on InfiniBand and RoCE. The receiver
	// gets it padded with zeros to what the transport carried, so its
	// length is not known exactly: give it a fixed layout (RemoteBuffer).
	PrivateData []byte
	// ResponderResources is how many RDMA READs and atomics the peer may
	// have outstanding towards us (our max_dest_rd_atomic); InitiatorDepth
	// how many we issue (our max_rd_atomic).
	ResponderResources uint8
	InitiatorDepth     uint8
	// RetryCount and RNRRetryCount are the transport and RNR retry counts
	// (7: RNR retries forever); the connecting side's values apply.
	RetryCount    uint8
	RNRRetryCount uint8
}

// CMEvent is a connection manager event type (enum rdma_cm_event_type,
// with its values).
type CMEvent int

// Connection manager events.
const (
	CMAddrResolved CMEvent = iota
	CMAddrError
	CMRouteResolved
	CMRouteError
	CMConnectRequest
	CMConnectResponse
	CMConnectError
	CMUnreachable
	CMRejected
	CMEstablished
	CMDisconnected
	CMDeviceRemoval
	CMMulticastJoin
	CMMulticastError
	CMAddrChange
	CMTimewaitExit
	numCMEvents
)

var cmEventNames = [numCMEvents]string{"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED",
	"ROUTE_ERROR", "CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE",
	"REJECTED", "ESTABLISHED", "DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN",
	"MULTICAST_ERROR", "ADDR_CHANGE", "TIMEWAIT_EXIT"}

// String returns what rdma_event_str returns.
func (e CMEvent) String() string {
	if e >= 0 && e < numCMEvents {
		return "RDMA_CM_EVENT_" + cmEventNames[e]
	}
	return "UNKNOWN EVENT"
}

// CMEventError is returned when the connection manager reports an event
// other than the one a call waits for: the peer rejected the connection
// (CMRejected, Status the IB reject reason, 28 when the peer's application
// rejected it), nobody listens there (CMRejected or CMUnreachable), an
// address or route did not resolve (Status a negative errno), the peer
// disconnected.
type CMEventError struct {
	Op     string // what was waiting, e.g. "rdma_connect"
	Event  CMEvent
	Status int
}

func (e *CMEventError) Error() string {
	return fmt.Sprintf("ibv: %s: %v (status %d)", e.Op, e.Event, e.Status)
}

// Unwrap returns the errno of a negative status (the kernel's -errno), nil
// otherwise.
func (e *CMEventError) Unwrap() error {
	if e.Status < 0 {
		return syscall.Errno(-e.Status)
	}
	return nil
}

// RemoteBuffer is what a peer needs to RDMA READ or WRITE a buffer of ours:
// its address, rkey and length. Its binary form is rping's struct
// rping_rdma_info (big-endian 64-bit address, 32-bit rkey, 32-bit length),
// which fits in connect-request private data and in a SEND.
type RemoteBuffer struct {
	Addr uint64
	RKey uint32
	Len  uint32
}

// RemoteBufferLen is the size of a RemoteBuffer's binary form.
const RemoteBufferLen = 16

// AppendBinary appends the 16-byte wire form of b to dst.
func (b RemoteBuffer) AppendBinary(dst []byte) ([]byte, error) {
	dst = binary.BigEndian.AppendUint64(dst, b.Addr)
	dst = binary.BigEndian.AppendUint32(dst, b.RKey)
	return binary.BigEndian.AppendUint32(dst, b.Len), nil
}

// MarshalBinary returns the 16-byte wire form of b.
func (b RemoteBuffer) MarshalBinary() ([]byte, error) {
	return b.AppendBinary(make([]byte, 0, RemoteBufferLen))
}

// UnmarshalBinary reads the first 16 bytes of data (private data comes
// padded); shorter data is an error matching ErrProtocol.
func (b *RemoteBuffer) UnmarshalBinary(data []byte) error {
	if len(data) < RemoteBufferLen {
		return fmt.Errorf("%w: %d bytes, a buffer reference takes %d", ErrProtocol, len(data), RemoteBufferLen)
	}
	b.Addr = binary.BigEndian.Uint64(data)
	b.RKey = binary.BigEndian.Uint32(data[8:])
	b.Len = binary.BigEndian.Uint32(data[12:])
	return nil
}
