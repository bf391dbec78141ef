package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/verbsrt/verbsrt/internal/provider"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// providerNames are the providers the commands open, in the order their
// help lists them.
var providerNames = provider.Names

// providerEnv names the environment variable that chooses the provider of
// every command that opens one; a -provider flag wins over it.
const providerEnv = "VERBSRT_PROVIDER"

// faultCommands are the commands that hand their provider flags to
// openProvider whole, and so honour -rocev2-faults.
var faultCommands = []string{"pingpong", "devices", "demo"}

// rocev2DefaultAddr is the address a rocev2 device binds without
// -rocev2-addr.
const rocev2DefaultAddr = provider.DefaultRocev2Addr

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
	// device (provider.ParseFaults), a testing aid; faultLog is where the
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
	if _, err := provider.ParseFaults(spec.faults); err != nil {
		return err
	}
	if _, err := spec.provider().Rocev2Addr(); err != nil {
		return err
	}
	if spec.port < 0 || spec.port > 65535 {
		return fmt.Errorf("-rocev2-port %d: a UDP port is 0 to 65535 (0: the kernel picks one)", spec.port)
	}
	return nil
}

// provider returns spec as the provider package takes it.
func (spec providerSpec) provider() provider.Spec {
	return provider.Spec{Name: spec.name, Addr: spec.addr, Port: spec.port, Faults: spec.faults, FaultLog: spec.faultLog, Clock: spec.clock}
}

// openProvider returns the provider spec names, with devices devices
// where the provider makes them (soft, rocev2), and what releases it; a
// wrong spec is a usage error.
func openProvider(spec providerSpec, devices int) (verbs.Provider, func(), error) {
	p, release, err := provider.Open(spec.provider(), devices)
	if se := (*provider.SpecError)(nil); errors.As(err, &se) {
		return nil, nil, usageError{err}
	}
	return p, release, err
}

// withProviderHint adds to err, when the ibv provider found no RDMA
// support on this machine, that rocev2 needs none.
func withProviderHint(name string, err error) error { return provider.WithHint(name, err) }
