//go:build !linux

package rocev2

import "net"

// tuneSocket has nothing to set outside Linux.
func tuneSocket(*net.UDPConn) {}
