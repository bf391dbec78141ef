package runtime

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/verbsrt/verbsrt/verbs"
)

// The environment a deployment sets to point a runtime at a device without
// changing code. Each one, when set, overrides the option of the same
// role (WithDevice, the port of WithDevice, WithGIDIndex): the operator
// fixing a deployment knows its machine better than the code does.
const (
	envDevice   = "VERBSRT_DEVICE"
	envPort     = "VERBSRT_PORT"
	envGIDIndex = "VERBSRT_GID_INDEX"
)

// deviceSpec is a device as WithDevice or VERBSRT_DEVICE names it, parsed:
// at most one of name, pci, addr and prefix is set.
type deviceSpec struct {
	raw    string
	name   string // a provider device name, else a netdev name
	port   uint8  // 0: any
	pci    string // long form, lower case
	addr   netip.Addr
	netdev string // the zone of an IPv6 address (fe80::1%eth1)
	prefix netip.Prefix
}

// pciRE matches a PCI address, the domain optional: 0000:3b:00.0, 3b:00.0.
var pciRE = regexp.MustCompile(`^(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$`)

// parseDeviceSpec parses s: a PCI address, a subnet, an IP address, a
// device name with a port (mlx5_0:2), or a name (a device's or a netdev's).
func parseDeviceSpec(s string) (deviceSpec, error) {
	d := deviceSpec{raw: s}
	if s == "" {
		return d, nil
	}
	if m := pciRE.FindStringSubmatch(s); m != nil {
		dom := cmp.Or(m[1], "0000")
		d.pci = strings.ToLower(dom + ":" + m[2] + ":" + m[3] + "." + m[4])
		return d, nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		d.prefix = p.Masked()
		return d, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		d.addr, d.netdev = a.WithZone("").Unmap(), a.Zone()
		return d, nil
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		n, err := strconv.Atoi(s[i+1:])
		if err != nil || n < 1 || n > 255 || i == 0 {
			return d, fmt.Errorf("%q is neither a device, a device:port (port 1 to 255), a netdev, an IP address, a subnet nor a PCI address", s)
		}
		d.name, d.port = s[:i], uint8(n)
		return d, nil
	}
	if strings.ContainsAny(s, " /%") {
		return d, fmt.Errorf("%q is neither a device, a netdev, an IP address, a subnet nor a PCI address", s)
	}
	d.name = s
	return d, nil
}

// selection is what the runtime opened and uses: the device, the port and
// the GID, and why.
type selection struct {
	dev   verbs.Device
	ctx   verbs.Context
	port  uint8
	attr  verbs.PortAttr
	entry verbs.GIDEntry
	typed bool   // the provider reported the GID's type and netdev
	why   string // why this GID, for the start-up log line
}

// gidType names the chosen GID's type, "" when the provider cannot tell.
func (s *selection) gidType() string {
	if !s.typed {
		return ""
	}
	return s.entry.Type.String()
}

// want is what the configuration and the environment ask of the selection.
type want struct {
	spec      deviceSpec
	port      uint8 // 0: any
	gidIndex  int   // -1: the default rule
	specFrom  string
	portFrom  string
	indexFrom string
}

// resolveWant reads the options and, over them, the environment (getenv),
// each value checked with an error naming where it came from.
func resolveWant(cfg config, getenv func(string) string) (want, error) {
	w := want{gidIndex: cfg.gidIndex, specFrom: "WithDevice", portFrom: "WithDevice", indexFrom: "WithGIDIndex"}
	raw := cfg.device
	if v := getenv(envDevice); v != "" {
		raw, w.specFrom, w.portFrom = v, envDevice, envDevice
	}
	spec, err := parseDeviceSpec(raw)
	if err != nil {
		return w, fmt.Errorf("verbsrt: %s: %v: %w", w.specFrom, err, verbs.ErrInvalidArgument)
	}
	w.spec, w.port = spec, spec.port
	if v := getenv(envPort); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 255 {
			return w, fmt.Errorf("verbsrt: %s=%q: a port number from 1 to 255: %w", envPort, v, verbs.ErrInvalidArgument)
		}
		w.port, w.portFrom = uint8(n), envPort
	}
	if v := getenv(envGIDIndex); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 255 {
			return w, fmt.Errorf("verbsrt: %s=%q: a GID table index from 0 to 255: %w", envGIDIndex, v, verbs.ErrInvalidArgument)
		}
		w.gidIndex, w.indexFrom = n, envGIDIndex
	}
	return w, nil
}

// netdevPresent reports whether the network device name is in the
// process's network namespace: a RoCE GID of a netdev elsewhere (another
// pod's, on a shared RDMA device) cannot carry this process's traffic,
// and the QP's move to RTR fails with ENODEV.
func netdevPresent(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// pickDevice opens the device, port and GID w asks for on p: the first
// device, in the provider's order, whose port has a GID the rule of
// pickGID accepts. The error of a failed search names each device and
// port looked at and why it did not fit.
func pickDevice(p verbs.Provider, w want, present func(string) bool) (*selection, error) {
	devs, err := p.Devices()
	if err != nil {
		return nil, err
	}
	spec := w.spec
	byName := false
	for _, d := range devs {
		byName = byName || (spec.name != "" && d.Name() == spec.name)
	}
	var reasons []string
	looked, sawNetdev := 0, false
	for _, d := range devs {
		switch {
		case byName && d.Name() != spec.name:
			continue
		case spec.pci != "" && !strings.EqualFold(verbs.PCIAddress(d), spec.pci):
			continue
		}
		looked++
		sel, why, saw := tryDevice(d, w, byName, gidViewOf(p), present)
		if sel != nil {
			return sel, nil
		}
		reasons = append(reasons, why...)
		sawNetdev = sawNetdev || saw
	}
	names := make([]string, len(devs))
	for i, d := range devs {
		names[i] = d.Name()
		if pci := verbs.PCIAddress(d); pci != "" {
			names[i] += " (" + pci + ")"
		}
	}
	what := "a device"
	if spec.raw != "" {
		what = fmt.Sprintf("%s %q", w.specFrom, spec.raw)
	}
	if looked == 0 || (spec.name != "" && !byName && !sawNetdev) {
		nor := ""
		if spec.name != "" {
			nor = ", nor has a GID of a netdev so named"
		}
		return nil, fmt.Errorf("verbsrt: no device of provider %s matches %s%s (it has %s): %w",
			p.Name(), what, nor, cmp.Or(strings.Join(names, ", "), "no device"), verbs.ErrNotFound)
	}
	return nil, fmt.Errorf("verbsrt: no port of provider %s fits %s: %s: %w",
		p.Name(), what, strings.Join(reasons, "; "), verbs.ErrNotFound)
}

// tryDevice opens d and looks for a port and GID that fit w; it returns
// the selection, or why each port did not fit and whether any GID of d
// belongs to the netdev w names.
func tryDevice(d verbs.Device, w want, byName bool, v gidView, present func(string) bool) (_ *selection, reasons []string, sawNetdev bool) {
	ctx, err := d.Open()
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", d.Name(), err)}, false
	}
	attr, err := ctx.QueryDevice()
	if err != nil {
		ctx.Close()
		return nil, []string{fmt.Sprintf("%s: %v", d.Name(), err)}, false
	}
	ports := make([]uint8, 0, attr.PhysPortCnt)
	if w.port != 0 {
		ports = append(ports, w.port)
	} else {
		for n := 1; n <= attr.PhysPortCnt; n++ {
			ports = append(ports, uint8(n))
		}
	}
	filter := w.spec
	if byName {
		filter.name = "" // the name was the device's, not a netdev's
	}
	for _, port := range ports {
		if int(port) > attr.PhysPortCnt {
			reasons = append(reasons, fmt.Sprintf("%s has no port %d (%s; it has %d)", d.Name(), port, w.portFrom, attr.PhysPortCnt))
			continue
		}
		pa, err := ctx.QueryPort(port)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s port %d: %v", d.Name(), port, err))
			continue
		}
		if w.port == 0 && pa.State != verbs.PortActive {
			reasons = append(reasons, fmt.Sprintf("%s port %d: %s", d.Name(), port, pa.State))
			continue
		}
		entries, typed, err := verbs.QueryGIDTable(ctx, port)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s port %d: %v", d.Name(), port, err))
			continue
		}
		for _, e := range entries {
			sawNetdev = sawNetdev || (filter.name != "" && e.Netdev == filter.name)
		}
		e, why, err := pickGID(entries, typed, pa.LinkLayer, filter, w.gidIndex, w.indexFrom, v, present)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s port %d: %v", d.Name(), port, err))
			continue
		}
		return &selection{dev: d, ctx: ctx, port: port, attr: pa, entry: e, typed: typed, why: why}, nil, true
	}
	ctx.Close()
	return nil, reasons, sawNetdev
}

// pickGID chooses the GID of a port whose table is entries (typed: with
// types and netdevs) for the filter spec (a netdev name, an address or a
// subnet, none set for any):
//   - index >= 0 (asked for): the entry at index, whatever its type, if it
//     matches the filter;
//   - an InfiniBand port: index 0, the port GID (addressing by LID);
//   - a typed RoCE table: a RoCE v2 entry whose netdev is in the process's
//     network namespace (present), IPv4-mapped before global IPv6 before
//     link-local, the lowest index first; a table with none is refused
//     with an error that lists it;
//   - an untyped table: the first IPv4-mapped GID that matches, else
//     index 0.
//
// Its errors show the GIDs as v has them.
func pickGID(entries []verbs.GIDEntry, typed bool, ll verbs.LinkLayer, spec deviceSpec, index int,
	indexFrom string, v gidView, present func(string) bool) (verbs.GIDEntry, string, error) {
	match := func(e verbs.GIDEntry) bool {
		switch {
		case spec.name != "":
			return e.Netdev == spec.name
		case spec.addr.IsValid():
			return e.Addr() == spec.addr && (spec.netdev == "" || e.Netdev == spec.netdev)
		case spec.prefix.IsValid():
			return spec.prefix.Contains(e.Addr())
		}
		return true
	}
	netdevFilter := spec.name != "" || spec.netdev != ""
	if netdevFilter && !typed {
		return verbs.GIDEntry{}, "", errors.New("the provider does not report the GIDs' netdevs: name the device, its PCI address or an IP address")
	}
	if index >= 0 {
		for _, e := range entries {
			if e.Index == index {
				if !match(e) {
					return verbs.GIDEntry{}, "", fmt.Errorf("GID index %d (%s) is %s, not %s", index, indexFrom, v.entry(e, true), spec.raw)
				}
				return e, "GID index " + strconv.Itoa(index) + " asked for (" + indexFrom + ")", nil
			}
		}
		return verbs.GIDEntry{}, "", fmt.Errorf("GID index %d (%s) is empty or outside the table %s", index, indexFrom, tableString(v, entries, typed, nil))
	}
	if ll == verbs.LinkLayerInfiniBand {
		for _, e := range entries {
			if e.Index == 0 && match(e) {
				return e, "InfiniBand: the port GID (index 0), addressed by LID", nil
			}
		}
		return verbs.GIDEntry{}, "", fmt.Errorf("InfiniBand port without a port GID at index 0 that matches: table %s", tableString(v, entries, typed, nil))
	}
	var cands []verbs.GIDEntry
	for _, e := range entries {
		if match(e) {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		what := "no GID"
		if spec.raw != "" {
			what = "no GID of " + spec.raw
		}
		return verbs.GIDEntry{}, "", fmt.Errorf("%s in the table %s", what, tableString(v, entries, typed, nil))
	}
	slices.SortStableFunc(cands, func(a, b verbs.GIDEntry) int { return cmp.Compare(addrClass(a), addrClass(b)) })
	if !typed {
		e := cands[0]
		if !spec.addr.IsValid() && !spec.prefix.IsValid() && addrClass(e) != 0 {
			// The rule for a provider that cannot tell the types:
			// RoCEv2 over IPv4 where there is such a GID, else index 0.
			e = entries[0]
		}
		return e, "the provider reports no GID types: first IPv4-mapped GID, else index 0", nil
	}
	absent := map[int]bool{}
	for _, e := range cands {
		if e.Type != verbs.GIDTypeRoCEv2 {
			continue
		}
		if e.Netdev != "" && !present(e.Netdev) {
			absent[e.Index] = true
			continue
		}
		return e, fmt.Sprintf("RoCE v2, %s, %s", netdevWhy(e.Netdev), classWhy(addrClass(e))), nil
	}
	var v1 bool
	for _, e := range cands {
		v1 = v1 || e.Type == verbs.GIDTypeRoCEv1
	}
	var why string
	switch {
	case len(absent) > 0:
		why = "its RoCE v2 GIDs belong to netdevs not in this network namespace (marked *)"
	case v1:
		why = "it has only RoCE v1 GIDs, which are not routable and miss a RoCE v2 fabric's ECN/PFC class; " +
			"to use one anyway, set WithGIDIndex or " + envGIDIndex
	default:
		why = "it has no RoCE v2 GID"
	}
	return verbs.GIDEntry{}, "", fmt.Errorf("no usable GID: %s; table %s", why, tableString(v, entries, typed, absent))
}

// addrClass orders GIDs: IPv4-mapped (0), global IPv6 (1), link-local
// and the rest (2).
func addrClass(e verbs.GIDEntry) int {
	a := e.Addr()
	switch {
	case a.Is4():
		return 0
	case a.IsGlobalUnicast():
		return 1
	}
	return 2
}

func classWhy(c int) string {
	return [...]string{"IPv4", "IPv6", "link-local IPv6"}[c]
}

func netdevWhy(nd string) string {
	if nd == "" {
		return "no netdev reported"
	}
	return "netdev " + nd + " in this namespace"
}

// tableString lists a GID table as show_gids does, one entry per
// bracket (gidView.entry), marked * when absent says so.
func tableString(v gidView, entries []verbs.GIDEntry, typed bool, absent map[int]bool) string {
	if len(entries) == 0 {
		return "(empty)"
	}
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("[")
		b.WriteString(v.entry(e, typed))
		if absent[e.Index] {
			b.WriteString("*")
		}
		b.WriteString("]")
	}
	return b.String()
}
