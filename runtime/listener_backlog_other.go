//go:build !linux

package runtime

import "net"

// endBacklog leaves the backlog to the listening socket's close where
// accept4 is not at hand: what it holds may be reset.
func endBacklog(net.Listener) {}
