package main

import (
	"errors"
	"flag"
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

// providerNames are the providers the commands open, in the order their
// help lists them.
var providerNames = []string{"soft", "rocev2", "ibv"}

// providerEnv names the environment variable that chooses the provider of
// every command that opens one; a -provider flag wins over it.
const providerEnv = "VERBSRT_PROVIDER"

// faultCommands are the commands that hand their provider flags to
// openProvider whole, and so honour -rocev2-faults.
var faultCommands = []string{"pingpong", "devices", "demo"}

// rocev2DefaultAddr is the address a rocev2 device binds without
// -rocev2-addr: the IPv6 loopback, which reaches every process of this
// host and no other.
const rocev2DefaultAddr = "::1"

// providerSpec is what the -provider, -rocev2-addr, -rocev2-port and
// -rocev2-faults flags of a command say.
type providerSpec struct {
	name string
	// addr is the IPv6 address the rocev2 devices bind; port the UDP port
	// of the first device (0: the kernel picks one, and the connection
	// handshake announces it as the port's LID).
	addr string
	port int
	// faults are the packet drops to inject into the first rocev2
	// device (rocev2faults.go), a testing aid; faultLog is where the
	// provider's release reports them (nil: stderr).
	faults   string
	faultLog io.Writer
	// clock drives the rocev2 provider's timers; nil: the system's
	// (tests set a rocev2.ManualClock).
	clock rocev2.Clock
}

// providerUsage is the help line of -provider; def describes the default.
func providerUsage(def string) string {
	return fmt.Sprintf("verbs provider: %s (default: %s; $%s sets it when the flag is absent). "+
		"soft is an in-memory device that reaches runtimes of this process only; rocev2 speaks RoCE v2 "+
		"over UDP from an unprivileged socket, between processes and hosts, with no NIC and no kernel module; "+
		"ibv is rdma-core's libibverbs (NICs, the kernel's rxe)",
		strings.Join(providerNames, ", "), def, providerEnv)
}

// addProviderFlags adds -provider, -rocev2-addr, -rocev2-port and
// -rocev2-faults to fs, parsed into spec; def describes the default
// provider for the help, which resolveProvider applies.
func addProviderFlags(fs *flag.FlagSet, spec *providerSpec, def string) {
	fs.StringVar(&spec.name, "provider", spec.name, providerUsage(def))
	spec.addr = rocev2DefaultAddr
	fs.StringVar(&spec.addr, "rocev2-addr", spec.addr, "with -provider rocev2: the IPv6 address its devices bind, whose GID it is (IPv4 is not supported: a plain socket cannot check the ICRC of an IPv4 packet)")
	fs.IntVar(&spec.port, "rocev2-port", spec.port, "with -provider rocev2: the UDP port of its first device (0: the kernel picks a free one; the connection handshake announces it as the port's LID; rxe and RoCE NICs send to 4791)")
	fs.StringVar(&spec.faults, "rocev2-faults", spec.faults, "testing aid, with -provider rocev2: packets its first device loses on purpose, to prove the peer's retransmission and its own: "+
		"comma-separated drop-DIR-KIND:N or :N-M, DIR out (sent) or in (received, lost before the QP sees them), KIND data (requests) or ack (ACKs, NAKs, responses), "+
		"N-M counting that direction's packets of that kind from 1, retransmissions included (e.g. drop-out-ack:1,drop-in-data:2-3); "+
		"how many each rule dropped goes to stderr at exit")
}

// resolveProvider completes spec once fs has parsed: when -provider was
// not given, the provider is $VERBSRT_PROVIDER's, else def. It returns an
// error naming the valid values when a value is wrong, and one when the
// rocev2 flags are given for another provider or out of range.
func resolveProvider(fs *flag.FlagSet, spec *providerSpec, def string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["provider"] {
		spec.name = def
		if env := os.Getenv(providerEnv); env != "" {
			if !slices.Contains(providerNames, env) {
				return fmt.Errorf("$%s=%s: unknown provider (the providers are %s)", providerEnv, env, strings.Join(providerNames, ", "))
			}
			spec.name = env
		}
	}
	if spec.name != "" && !slices.Contains(providerNames, spec.name) {
		return fmt.Errorf("-provider %s: unknown provider (the providers are %s)", spec.name, strings.Join(providerNames, ", "))
	}
	if spec.name != "rocev2" && spec.name != "" && (set["rocev2-addr"] || set["rocev2-port"] || set["rocev2-faults"]) {
		return fmt.Errorf("-rocev2-addr, -rocev2-port and -rocev2-faults are for -provider rocev2, not %s", spec.name)
	}
	if spec.faults != "" && !slices.Contains(faultCommands, fs.Name()) {
		// bench and serve-metrics keep their own copy of the provider
		// flags, without the faults: refused rather than ignored.
		return fmt.Errorf("-rocev2-faults is not available to %s (%s take it)", fs.Name(), strings.Join(faultCommands, ", "))
	}
	if _, err := parseFaults(spec.faults); err != nil {
		return err
	}
	if _, err := spec.rocev2Addr(); err != nil {
		return err
	}
	if spec.port < 0 || spec.port > 65535 {
		return fmt.Errorf("-rocev2-port %d: a UDP port is 0 to 65535 (0: the kernel picks one)", spec.port)
	}
	return nil
}

// rocev2Addr parses -rocev2-addr: an IPv6 address of this host (with or
// without brackets), not the unspecified one, whose source address the
// ICRC would cover unseen.
func (spec providerSpec) rocev2Addr() (netip.Addr, error) {
	s := strings.TrimSuffix(strings.TrimPrefix(spec.addr, "["), "]")
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return a, fmt.Errorf("-rocev2-addr %q: not an IP address (an IPv6 address of this host, such as %s)", spec.addr, rocev2DefaultAddr)
	case a.Is4() || a.Is4In6():
		return a, fmt.Errorf("-rocev2-addr %s: the rocev2 provider speaks IPv6 only (over IPv4 the ICRC covers the identification field, which a plain socket cannot read); give an IPv6 address of this host, such as %s", spec.addr, rocev2DefaultAddr)
	case a.IsUnspecified():
		return a, fmt.Errorf("-rocev2-addr %s: give a specific IPv6 address of this host, such as %s (the ICRC covers the source address, which an unbound socket leaves to the kernel)", spec.addr, rocev2DefaultAddr)
	}
	return a, nil
}

// openProvider returns the provider spec names, with devices devices
// where the provider makes them (soft, rocev2), and what releases it.
func openProvider(spec providerSpec, devices int) (verbs.Provider, func(), error) {
	switch spec.name {
	case "soft":
		p := soft.New(soft.Config{Devices: devices})
		return p, func() { p.Close() }, nil
	case "ibv":
		return ibv.New(), func() {}, nil
	case "rocev2":
		a, err := spec.rocev2Addr()
		if err != nil {
			return nil, nil, usageError{err}
		}
		// One socket per device on the same address: the first on
		// -rocev2-port, the others on ports the kernel picks.
		cfg := rocev2.Config{Addrs: make([]netip.Addr, devices), Ports: []uint16{uint16(spec.port)}, Clock: spec.clock}
		for i := range cfg.Addrs {
			cfg.Addrs[i] = a
		}
		p, err := rocev2.New(cfg)
		if err != nil {
			return nil, nil, rocev2Error(spec, err)
		}
		rules, err := parseFaults(spec.faults)
		if err != nil {
			p.Close()
			return nil, nil, usageError{err}
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
		w := spec.faultLog
		if w == nil {
			w = os.Stderr
		}
		return p, func() {
			p.Close()
			reportFaults(w, "rocev2_0", t, counters)
		}, nil
	}
	return nil, nil, usageErrorf("unknown provider %q (the providers are %s)", spec.name, strings.Join(providerNames, ", "))
}

// rocev2Error explains why the rocev2 provider could not bind its socket.
func rocev2Error(spec providerSpec, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("rocev2: UDP port %d of %s is taken (another process binds it: give another -rocev2-port, or 0 for a free one): %w", spec.port, spec.addr, err)
	case errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, rocev2.ErrNotSupported):
		return fmt.Errorf("rocev2: cannot bind %s (-rocev2-addr must be an IPv6 address of this host; ::1 needs IPv6 on the loopback): %w", spec.addr, err)
	}
	return fmt.Errorf("rocev2: %w", err)
}

// withProviderHint adds to err, when the ibv provider found no RDMA
// support on this machine, that rocev2 needs none.
func withProviderHint(provider string, err error) error {
	if err != nil && provider == "ibv" && errors.Is(err, verbs.ErrNotSupported) {
		return fmt.Errorf("%w; without RDMA hardware or rxe, -provider rocev2 (RoCE v2 over UDP, no root) connects processes and hosts", err)
	}
	return err
}

// checkRocev2Reach refuses a peer at remote, the address of the TCP
// connection to it, on another host when this end's rocev2 device is
// bound to a loopback address: the peer's packets would never arrive,
// and the QPs would fail only after their retries.
func checkRocev2Reach(spec providerSpec, remote net.Addr) error {
	a, err := spec.rocev2Addr()
	tcp, ok := remote.(*net.TCPAddr)
	if spec.name != "rocev2" || err != nil || !ok || !a.IsLoopback() || tcp.IP.IsLoopback() || isLocalIP(tcp.IP) {
		return nil
	}
	return fmt.Errorf("the peer at %s is on another host, and this end's rocev2 device is bound to %s, which only this host reaches: "+
		"give -rocev2-addr an IPv6 address of this host that the peer reaches", tcp.IP, spec.addr)
}

// isLocalIP says whether ip is an address of this host's interfaces.
func isLocalIP(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unknown: let the connection try
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}
