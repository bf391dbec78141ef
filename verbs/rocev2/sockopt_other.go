//go:build !linux

package rocev2

import "net"

// tuneSocket has nothing to set outside Linux.
func tuneSocket(*net.UDPConn) {}

// setReadBuffer asks for a receive buffer of n bytes; the platform does
// not say what it granted, so it reports 0.
func setReadBuffer(c *net.UDPConn, n int) int {
	c.SetReadBuffer(n)
	return 0
}
