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

// setReadBuffer asks for a receive buffer of n bytes and returns what the
// kernel granted, as SO_RCVBUF reads back (Linux doubles the request to
// cover its per-packet bookkeeping, and each datagram is charged its
// length plus that bookkeeping). SO_RCVBUFFORCE, which needs CAP_NET_ADMIN,
// goes past net.core.rmem_max; without the capability SO_RCVBUF is capped
// at rmem_max, silently.
func setReadBuffer(c *net.UDPConn, n int) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	got := 0
	rc.Control(func(fd uintptr) {
		if syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, n) != nil {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		}
		got, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	})
	return got
}
