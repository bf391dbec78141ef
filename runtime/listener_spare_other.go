//go:build !linux

package runtime

import (
	"log/slog"
	"net"
)

// spareFD keeps no descriptor in reserve where accept4 is not at hand:
// a client that arrives while the process is out of descriptors waits for
// one, or for its Dial's timeout.
type spareFD struct{}

func (*spareFD) reserve() {}

func (*spareFD) release() {}

func (*spareFD) refuse(net.Listener, error, *slog.Logger) {}
