package rocev2

import (
	"syscall"
	"testing"
)

// TestSocketAcceptsZeroChecksum checks that the transport's socket accepts
// IPv6 UDP datagrams without a checksum, which rxe sends.
func TestSocketAcceptsZeroChecksum(t *testing.T) {
	a, _ := listenPair(t, nil)
	rc, err := a.conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	rc.Control(func(fd uintptr) {
		v, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_UDP, udpNoCheck6RX)
	})
	if gerr != nil || v != 1 {
		t.Fatalf("UDP_NO_CHECK6_RX = %d, %v", v, gerr)
	}
}
