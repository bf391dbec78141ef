package rocev2

import (
	"net"
	"syscall"
)

// udpNoCheck6RX is UDP_NO_CHECK6_RX (linux/udp.h): accept IPv6 UDP
// datagrams whose checksum is zero. rxe writes a zero UDP checksum
// (prepare_udp_hdr in drivers/infiniband/sw/rxe/rxe_net.c) and accepts one
// itself (its tunnel socket leaves use_udp6_rx_checksums unset); a plain
// IPv6 socket drops such datagrams unless this is set. The ICRC still
// covers the payload.
const udpNoCheck6RX = 102

// tuneSocket sets the socket options a RoCE v2 transport wants; failures
// are ignored, the transport works without them between verbsrt peers.
func tuneSocket(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_UDP, udpNoCheck6RX, 1)
	})
}
