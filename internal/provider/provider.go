package provider

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// Names are the providers Open makes, in the order a help lists them.
var Names = []string{"soft", "rocev2", "ibv"}

// DefaultRocev2Addr is the address a rocev2 device binds when Spec.Addr is
// empty: the IPv6 loopback, which reaches every process of this host and
// no other.
const DefaultRocev2Addr = "::1"

// Spec names a provider and its options.
type Spec struct {
	Name string // one of Names
	// Addr is the IPv6 address the rocev2 devices bind ("":
	// DefaultRocev2Addr); Port the UDP port of the first device (0: the
	// kernel picks one, and the connection handshake announces it as the
	// port's LID).
	Addr string
	Port int
	// Faults are the packet drops to inject into the first rocev2 device
	// (ParseFaults), a testing aid; FaultLog is where the provider's
	// release reports them (nil: stderr).
	Faults   string
	FaultLog io.Writer
	// Clock drives the rocev2 provider's timers; nil: the system's
	// (tests set a rocev2.ManualClock).
	Clock rocev2.Clock
}

// SpecError is an Open error that the Spec itself is wrong (an unknown
// name, a bad address, a bad fault rule), not the machine.
type SpecError struct{ Err error }

func (e *SpecError) Error() string { return e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

// Rocev2Addr parses Addr: an IPv6 address of this host (with or without
// brackets), not the unspecified one, whose source address the ICRC would
// cover unseen.
func (spec Spec) Rocev2Addr() (netip.Addr, error) {
	given := spec.Addr
	if given == "" {
		given = DefaultRocev2Addr
	}
	s := strings.TrimSuffix(strings.TrimPrefix(given, "["), "]")
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return a, fmt.Errorf("-rocev2-addr %q: not an IP address (an IPv6 address of this host, such as %s)", given, DefaultRocev2Addr)
	case a.Is4() || a.Is4In6():
		return a, fmt.Errorf("-rocev2-addr %s: the rocev2 provider speaks IPv6 only (over IPv4 the ICRC covers the identification field, which a plain socket cannot read); give an IPv6 address of this host, such as %s", given, DefaultRocev2Addr)
	case a.IsUnspecified():
		return a, fmt.Errorf("-rocev2-addr %s: give a specific IPv6 address of this host, such as %s (the ICRC covers the source address, which an unbound socket leaves to the kernel)", given, DefaultRocev2Addr)
	}
	return a, nil
}

// Open returns the provider spec names, with devices devices where the
// provider makes them (soft, rocev2), and what releases it. A wrong spec
// is a *SpecError.
func Open(spec Spec, devices int) (verbs.Provider, func(), error) {
	switch spec.Name {
	case "soft":
		p := soft.New(soft.Config{Devices: devices})
		return p, func() { p.Close() }, nil
	case "ibv":
		return ibv.New(), func() {}, nil
	case "rocev2":
		return openRocev2(spec, devices)
	}
	return nil, nil, &SpecError{fmt.Errorf("unknown provider %q (the providers are %s)", spec.Name, strings.Join(Names, ", "))}
}

// openRocev2 opens devices rocev2 devices on spec's address, the first
// with spec's faults.
func openRocev2(spec Spec, devices int) (verbs.Provider, func(), error) {
	a, err := spec.Rocev2Addr()
	if err != nil {
		return nil, nil, &SpecError{err}
	}
	// One socket per device on the same address: the first on Port, the
	// others on ports the kernel picks.
	cfg := rocev2.Config{Addrs: make([]netip.Addr, devices), Ports: []uint16{uint16(spec.Port)}, Clock: spec.Clock}
	for i := range cfg.Addrs {
		cfg.Addrs[i] = a
	}
	p, err := rocev2.New(cfg)
	if err != nil {
		return nil, nil, rocev2Error(spec, err)
	}
	rules, err := ParseFaults(spec.Faults)
	if err != nil {
		p.Close()
		return nil, nil, &SpecError{err}
	}
	if len(rules) == 0 {
		return p, func() { p.Close() }, nil
	}
	t := p.Transport(0)
	counters, err := injectFaults(t, rules)
	if err != nil {
		p.Close()
		return nil, nil, err
	}
	w := spec.FaultLog
	if w == nil {
		w = os.Stderr
	}
	return p, func() {
		p.Close()
		reportFaults(w, "rocev2_0", t, counters)
	}, nil
}

// rocev2Error explains why the rocev2 provider could not bind its socket.
func rocev2Error(spec Spec, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("rocev2: UDP port %d of %s is taken (another process binds it: give another -rocev2-port, or 0 for a free one): %w", spec.Port, spec.Addr, err)
	case errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, rocev2.ErrNotSupported):
		return fmt.Errorf("rocev2: cannot bind %s (-rocev2-addr must be an IPv6 address of this host; ::1 needs IPv6 on the loopback): %w", spec.Addr, err)
	}
	return fmt.Errorf("rocev2: %w", err)
}

// WithHint adds to err, when the ibv provider found no RDMA support on
// this machine, that rocev2 needs none.
func WithHint(name string, err error) error {
	if err != nil && name == "ibv" && errors.Is(err, verbs.ErrNotSupported) {
		return fmt.Errorf("%w; without RDMA hardware or rxe, -provider rocev2 (RoCE v2 over UDP, no root) connects processes and hosts", err)
	}
	return err
}

// CheckRocev2Reach refuses a peer at remote, the address of the TCP
// connection to it, on another host when this end's rocev2 device is
// bound to a loopback address: the peer's packets would never arrive,
// and the QPs would fail only after their retries.
func CheckRocev2Reach(spec Spec, remote net.Addr) error {
	a, err := spec.Rocev2Addr()
	tcp, ok := remote.(*net.TCPAddr)
	if spec.Name != "rocev2" || err != nil || !ok || !a.IsLoopback() || tcp.IP.IsLoopback() || isLocalIP(tcp.IP) {
		return nil
	}
	return fmt.Errorf("the peer at %s is on another host, and this end's rocev2 device is bound to %s, which only this host reaches: "+
		"give -rocev2-addr an IPv6 address of this host that the peer reaches", tcp.IP, spec.Addr)
}

// isLocalIP says whether ip is an address of this host's interfaces.
func isLocalIP(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unknown: let the connection try
	}
	return slices.ContainsFunc(addrs, func(a net.Addr) bool {
		n, ok := a.(*net.IPNet)
		return ok && n.IP.Equal(ip)
	})
}
