package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/verbsrt/verbsrt/internal/rlimit"
	vrt "github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

// runDoctor is "verbsrt doctor": it checks, on the ibv provider, what a
// deployment gets wrong (libraries, device files, devices and ports, the
// GID the runtime would choose, the memlock and open-file limits) and
// prints one line per check; it fails when a check does.
func runDoctor(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("doctor", "usage: verbsrt doctor [-device SPEC] [-memory-limit BYTES]\n\n"+
		"Checks what an RDMA deployment needs, on the ibv provider (rdma-core), and prints one line\n"+
		"per check, \"ok|FAIL|warn  CHECK: FINDING\", and for each FAIL or warn the fix: libibverbs\n"+
		"and librdmacm loadable; /dev/infiniband and its uverbs devices readable and writable;\n"+
		"each device's ports with state, link layer, MTU and GID table (types, netdevs); the\n"+
		"device, port and GID a runtime would choose, and why (VERBSRT_DEVICE, VERBSRT_PORT and\n"+
		"VERBSRT_GID_INDEX apply as they do to the runtime); the locked-memory limit against\n"+
		"the memory limit the runtime registers up to; the open-file limit; rdma_cm.\n"+
		"Exits 1 when a check FAILs.")
	device := fs.String("device", "", "the device as runtime.WithDevice takes it: a name (mlx5_0), name:port, a netdev, an IP address or subnet, or a PCI address (default: the runtime's choice)")
	fs.StringVar(device, "d", "", "same as -device")
	memLimit := fs.Int("memory-limit", rlimit.DefaultMemoryLimit, "the runtime's WithMemoryLimit in bytes: what the locked-memory limit must allow")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	if *memLimit <= 0 {
		return usageErrorf("-memory-limit %d: the limit must be positive", *memLimit)
	}
	d := &doctor{
		provider:  ibv.New(),
		libraries: ibv.Libraries,
		devDir:    "/dev/infiniband",
		device:    *device,
		memLimit:  *memLimit,
		memlock:   func() rlimit.Limit { return rlimit.Read(rlimit.Memlock) },
		nofile:    readNofile,
		ipcLock:   hasIPCLock,
		present:   netdevPresent,
	}
	if failed, total := d.run(stdout); failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, total)
	}
	return nil
}

// doctor is one run of the checks, with what they read from the system
// given, so that tests run them against a soft device model.
type doctor struct {
	provider  verbs.Provider
	libraries func() []ibv.Library // nil: the provider loads no library
	devDir    string               // /dev/infiniband
	device    string               // -device: WithDevice's argument, "" for none
	memLimit  int                  // the runtime's WithMemoryLimit
	memlock   func() rlimit.Limit  // RLIMIT_MEMLOCK
	nofile    func() rlimit.Limit  // RLIMIT_NOFILE
	ipcLock   func() bool          // the process has CAP_IPC_LOCK
	present   func(netdev string) bool
}

// status is a check's verdict.
type status int

const (
	statusOK status = iota
	statusWarn
	statusFail
)

func (s status) String() string { return [...]string{"ok", "warn", "FAIL"}[s] }

// result is one check's outcome: its line, the lines under it (a GID
// table) and, on FAIL or warn, the fix in words.
type result struct {
	status  status
	check   string
	finding string
	detail  []string
	fix     string
}

func (r result) print(w io.Writer) {
	fmt.Fprintf(w, "%-4s  %s: %s\n", r.status, r.check, r.finding)
	for _, l := range r.detail {
		fmt.Fprintf(w, "        %s\n", l)
	}
	if r.fix != "" && r.status != statusOK {
		fmt.Fprintf(w, "      fix: %s\n", r.fix)
	}
}

// run runs every check, printing each result as it comes, and returns how
// many failed of how many ran.
func (d *doctor) run(w io.Writer) (failed, total int) {
	emit := func(rs ...result) {
		for _, r := range rs {
			r.print(w)
			total++
			if r.status == statusFail {
				failed++
			}
		}
	}
	libsOK := true
	if d.libraries != nil {
		rs, ok := libraryChecks(d.libraries())
		emit(rs...)
		libsOK = ok
	}
	emit(d.devFiles()...)
	if libsOK {
		rs, found := d.devices()
		emit(rs...)
		if found {
			emit(d.selection())
		}
	}
	emit(memlockCheck(d.memlock(), d.memLimit, d.ipcLock()))
	emit(nofileCheck(d.nofile()))
	return failed, total
}

// libraryChecks reports each of rdma-core's libraries, and whether
// libibverbs, without which nothing else can be checked, loaded.
func libraryChecks(libs []ibv.Library) (rs []result, verbsOK bool) {
	verbsOK = true
	install := "install rdma-core's libraries where the program runs (in its container image: the host's are not " +
		"visible inside it): Debian, Ubuntu: apt install libibverbs1 ibverbs-providers librdmacm1; Fedora, RHEL: " +
		"dnf install libibverbs librdmacm; and the NIC's provider library (ibverbs-providers has mlx5, rxe, efa, ...)"
	for _, l := range libs {
		r := result{check: l.Name}
		switch {
		case l.Err == nil && l.Path != "":
			r.finding = "loaded " + l.Path
		case l.Err == nil:
			r.finding = "loaded " + l.Soname
		case l.Name == "libibverbs":
			verbsOK = false
			r.status, r.fix = statusFail, install
			r.finding = strings.TrimSuffix(l.Err.Error(), "; "+ibv.InstallHint)
		case !verbsOK:
			r.status, r.fix = statusFail, install
			r.finding = "not loaded: it needs libibverbs"
		default:
			// The runtime's TCP handshake needs no librdmacm; only the
			// rdma_cm connection setup (DialCM, ListenCM) does.
			r.status, r.fix = statusWarn, install
			r.finding = strings.TrimSuffix(l.Err.Error(), "; "+ibv.InstallHint) +
				" (needed by rdma_cm connection setup only: DialCM, ListenCM)"
		}
		rs = append(rs, r)
	}
	return rs, verbsOK
}

// devFiles checks /dev/infiniband: the uverbs devices the verbs open,
// readable and writable by this process, and rdma_cm.
func (d *doctor) devFiles() []result {
	uv := result{check: d.devDir}
	ents, err := os.ReadDir(d.devDir)
	if err != nil {
		uv.status, uv.finding = statusFail, err.Error()
		uv.fix = "on a host, load the NIC's RDMA driver and ib_uverbs (modprobe mlx5_ib ib_uverbs; Soft-RoCE: " +
			"modprobe rdma_rxe; rdma link add rxe0 type rxe netdev eth0); in a container, pass the devices in: " +
			"docker run --device=/dev/infiniband/uverbs0 --device=/dev/infiniband/rdma_cm, or in Kubernetes " +
			"request the RDMA device plugin's resource (e.g. rdma/hca_shared_devices_a: 1)"
		cm := result{status: statusWarn, check: "rdma_cm", finding: "not checked: no " + d.devDir,
			fix: "see " + d.devDir}
		return []result{uv, cm}
	}
	var ok, denied []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		if err := syscall.Access(filepath.Join(d.devDir, e.Name()), 6); err != nil { // R_OK|W_OK
			denied = append(denied, e.Name()+" ("+err.Error()+")")
		} else {
			ok = append(ok, e.Name())
		}
	}
	switch {
	case len(ok) == 0 && len(denied) == 0:
		uv.status, uv.finding = statusFail, "no uverbs device"
		uv.fix = "load ib_uverbs (modprobe ib_uverbs) and the NIC's RDMA driver; in a container, pass " +
			"/dev/infiniband/uverbsN in (docker run --device, or the RDMA device plugin's resource)"
	case len(denied) > 0:
		uv.status = statusFail
		uv.finding = fmt.Sprintf("not readable and writable by uid %d: %s", os.Getuid(), strings.Join(denied, ", "))
		if len(ok) > 0 {
			uv.finding += "; usable: " + strings.Join(ok, ", ")
		}
		uv.fix = "rdma-core's udev rules make them mode 0666; else chmod 0666 them, or run in their group"
	default:
		uv.finding = strings.Join(ok, ", ") + " readable and writable"
	}
	cm := result{check: "rdma_cm"}
	path := filepath.Join(d.devDir, "rdma_cm")
	if err := syscall.Access(path, 6); err != nil {
		cm.status, cm.finding = statusWarn, path+": "+err.Error()
		cm.fix = "only the rdma_cm connection setup (DialCM, ListenCM) needs it, not Dial and Listen: modprobe " +
			"rdma_ucm, and in a container pass --device=" + path
	} else {
		cm.finding = path + " readable and writable"
	}
	return []result{uv, cm}
}

// devices reports each device's ports: state, link layer, MTUs, and the
// GID table with types and netdevs, each netdev marked when it is not in
// this network namespace; found says whether there is a device to choose
// from.
func (d *doctor) devices() (rs []result, found bool) {
	devs, err := d.provider.Devices()
	if err != nil {
		return []result{{status: statusFail, check: "devices", finding: err.Error(),
			fix: "see the checks above: libraries, " + d.devDir}}, false
	}
	if len(devs) == 0 {
		return []result{{status: statusFail, check: "devices", finding: "no RDMA device (provider " + d.provider.Name() + ")",
			fix: "load the NIC's RDMA driver (mlx5_ib, irdma, bnxt_re, ...) or make a Soft-RoCE device (rdma link add " +
				"rxe0 type rxe netdev eth0); in a container, request the RDMA device plugin's resource"}}, false
	}
	for _, dev := range devs {
		rs = append(rs, d.deviceChecks(dev)...)
	}
	return rs, true
}

func (d *doctor) deviceChecks(dev verbs.Device) []result {
	name := dev.Name()
	if pci := verbs.PCIAddress(dev); pci != "" {
		name += " (" + pci + ")"
	}
	ctx, err := dev.Open()
	if err != nil {
		return []result{{status: statusFail, check: "device " + name, finding: err.Error(),
			fix: "check " + d.devDir + "'s uverbs devices above"}}
	}
	defer ctx.Close()
	attr, err := ctx.QueryDevice()
	if err != nil {
		return []result{{status: statusFail, check: "device " + name, finding: err.Error()}}
	}
	var rs []result
	for port := 1; port <= attr.PhysPortCnt; port++ {
		r := result{check: fmt.Sprintf("device %s port %d", name, port)}
		pa, err := ctx.QueryPort(uint8(port))
		if err != nil {
			r.status, r.finding = statusFail, err.Error()
			rs = append(rs, r)
			continue
		}
		entries, typed, err := verbs.QueryGIDTable(ctx, uint8(port))
		if err != nil {
			r.status, r.finding = statusFail, err.Error()
			rs = append(rs, r)
			continue
		}
		r.finding = fmt.Sprintf("%s, link layer %s, active MTU %d (max %d), %d GIDs",
			pa.State, pa.LinkLayer, pa.ActiveMTU.Bytes(), pa.MaxMTU.Bytes(), len(entries))
		if pa.LinkLayer == verbs.LinkLayerInfiniBand {
			r.finding += fmt.Sprintf(", LID %d", pa.LID)
		}
		if !typed {
			r.finding += " (the provider reports no GID types or netdevs)"
		}
		if pa.State != verbs.PortActive {
			r.status = statusWarn
			if pa.LinkLayer == verbs.LinkLayerInfiniBand {
				r.fix = "an InfiniBand port becomes PORT_ACTIVE once a subnet manager (opensm, or the switch's) configures it; check the cable and the SM"
			} else {
				r.fix = "bring the port's netdev up (ip link set NETDEV up) and check its link (cable, switch port)"
			}
		}
		for _, e := range entries {
			l := fmt.Sprintf("GID[%3d] %s", e.Index, e.GID)
			if typed {
				l += ", " + e.Type.String()
				if e.Netdev != "" {
					l += ", " + e.Netdev
					if !d.present(e.Netdev) {
						l += " (not in this network namespace)"
					}
				}
			}
			r.detail = append(r.detail, l)
		}
		rs = append(rs, r)
	}
	return rs
}

// selection asks the runtime which device, port and GID it would use, with
// the options a program given -device and -memory-limit would pass and the
// environment it would see: runtime.New makes the choice, its start-up log
// line says why, and Close ends it.
func (d *doctor) selection() result {
	r := result{check: "runtime's choice"}
	logs := &upLog{}
	opts := []vrt.Option{vrt.WithProvider(d.provider), vrt.WithMemoryLimit(d.memLimit), vrt.WithLogger(slog.New(logs))}
	if d.device != "" {
		opts = append(opts, vrt.WithDevice(d.device))
	}
	var env []string
	for _, k := range []string{"VERBSRT_DEVICE", "VERBSRT_PORT", "VERBSRT_GID_INDEX"} {
		// What runtime.New reads: shown, so that a choice the
		// environment made is not taken for the code's.
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	if len(env) > 0 {
		r.detail = append(r.detail, "from the environment: "+strings.Join(env, " "))
	}
	rt, err := vrt.New(opts...)
	if err != nil {
		r.status, r.finding = statusFail, err.Error()
		r.fix = "name the device, port or GID (-device here; WithDevice, WithGIDIndex, or VERBSRT_DEVICE, " +
			"VERBSRT_PORT, VERBSRT_GID_INDEX in the program's environment): see the devices above"
		return r
	}
	st := rt.Stats()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt.Close(ctx)
	r.finding = fmt.Sprintf("device %s port %d, GID[%d]", st.Device, st.Port, st.GIDIndex)
	if !st.GID.IsZero() { // zero: a made-up GID, which the runtime does not show
		r.finding += " " + netipString(st.GID)
	}
	var attrs []string
	if st.GIDType != "" {
		attrs = append(attrs, st.GIDType)
	}
	if st.Netdev != "" {
		attrs = append(attrs, "netdev "+st.Netdev)
	}
	attrs = append(attrs, "link layer "+st.LinkLayer.String(), fmt.Sprintf("MTU %d", st.MTU))
	r.finding += " (" + strings.Join(attrs, ", ") + ")"
	if why := logs.why(); why != "" {
		r.finding += ": " + why
	}
	return r
}

// netipString renders a GID as the runtime's addresses do: IPv4 for an
// IPv4-mapped GID.
func netipString(g verbs.GID) string {
	return verbs.GIDEntry{GID: g}.Addr().String()
}

// upLog is a slog.Handler that keeps the "why" of the runtime's start-up
// line ("verbsrt: runtime up"), and drops everything else.
type upLog struct {
	mu sync.Mutex
	w  string
}

func (h *upLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *upLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "why" {
			h.mu.Lock()
			h.w = a.Value.String()
			h.mu.Unlock()
			return false
		}
		return true
	})
	return nil
}

func (h *upLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *upLog) WithGroup(string) slog.Handler      { return h }

func (h *upLog) why() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.w
}

// readNofile returns RLIMIT_NOFILE, whose soft limit Go's syscall package
// raised to one below the hard limit at start.
func readNofile() rlimit.Limit {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return rlimit.Limit{}
	}
	return rlimit.Limit{Cur: uint64(l.Cur), Max: uint64(l.Max), Known: true} // int64 on freebsd
}

// capIPCLock is CAP_IPC_LOCK's bit in the capability sets.
const capIPCLock = 14

// hasIPCLock reports whether the kernel lets this process pin registered
// memory past RLIMIT_MEMLOCK: its effective capabilities (/proc/self/status
// CapEff) hold CAP_IPC_LOCK, and it runs in the initial user namespace.
// The kernel asks for the capability there (capable()), so a rootless
// container's root, whose capabilities are its own namespace's, is held to
// the limit.
func hasIPCLock() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	m, err := os.ReadFile("/proc/self/uid_map")
	if err != nil || !initialUserNS(string(m)) {
		return false
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<capIPCLock) != 0
		}
	}
	return false
}

// initialUserNS reports whether uidMap (/proc/self/uid_map) is the initial
// user namespace's: one line mapping every uid to itself.
func initialUserNS(uidMap string) bool {
	f := strings.Fields(uidMap)
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}

func netdevPresent(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// size renders n bytes with the units getrlimit (bytes) and ulimit -l
// (KiB) use.
func size(n uint64) string {
	if n == rlimit.Infinity {
		return "unlimited"
	}
	return fmt.Sprintf("%d bytes (%d KiB)", n, n/1024)
}

// memlockCheck compares the locked-memory limit l with what a runtime of
// memory limit memLimit registers: its arena grows a chunk at a time up to
// memLimit, and every byte of it is pinned, which the kernel counts against
// RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK. Below the first chunk
// nothing registers (FAIL); below memLimit, the arena fails when it grows
// past the limit (warn).
func memlockCheck(l rlimit.Limit, memLimit int, ipcLock bool) result {
	const check = "memlock"
	need := uint64(memLimit)
	first := uint64(min(rlimit.ArenaChunk, memLimit))
	kibUp := (need + 1023) / 1024
	r := result{check: check}
	switch {
	case !l.Known:
		r.status = statusWarn
		r.finding = "RLIMIT_MEMLOCK unknown (no /proc/self/limits)"
		r.fix = fmt.Sprintf("make sure ulimit -l allows %s", size(need))
	case l.Cur == rlimit.Infinity:
		r.finding = "RLIMIT_MEMLOCK unlimited"
	case l.Cur >= need:
		r.finding = fmt.Sprintf("RLIMIT_MEMLOCK %s allows the %s the runtime registers at most (WithMemoryLimit)",
			size(l.Cur), size(need))
	case ipcLock:
		r.finding = fmt.Sprintf("RLIMIT_MEMLOCK %s, below the %s the runtime registers at most, but the process has "+
			"CAP_IPC_LOCK, so the kernel does not enforce it", size(l.Cur), size(need))
	default:
		r.status = statusWarn
		if l.Cur < first {
			r.status = statusFail
			r.finding = fmt.Sprintf("RLIMIT_MEMLOCK %s is below the %s the runtime registers at its first Alloc or "+
				"connection (and the %s it may register in all, WithMemoryLimit): registration fails with ENOMEM",
				size(l.Cur), size(first), size(need))
		} else {
			r.finding = fmt.Sprintf("RLIMIT_MEMLOCK %s is below the %s the runtime may register (WithMemoryLimit): "+
				"registration fails with ENOMEM once its arena grows past the limit", size(l.Cur), size(need))
		}
		if l.Max == rlimit.Infinity || l.Max >= need {
			r.fix = fmt.Sprintf("raise the soft limit before starting the program, up to the hard limit (%s): "+
				"ulimit -l %d (or unlimited)", size(l.Max), kibUp)
		} else {
			r.fix = fmt.Sprintf("the hard limit (%s) is below it too: raise both where the process is started "+
				"(docker run --ulimit memlock=-1, systemd LimitMEMLOCK=infinity, limits.conf memlock, "+
				"the container runtime's default ulimits for Kubernetes pods), or grant CAP_IPC_LOCK", size(l.Max))
		}
		r.fix += fmt.Sprintf("; or run with a lower WithMemoryLimit (at most %d here)", l.Cur)
	}
	return r
}

// minNofile is the open-file limit below which doctor warns: each
// endpoint keeps its handshake's TCP connection (or its rdma_cm ID) open
// for its life, so the limit bounds the connections a process holds.
const minNofile = 4096

// nofileCheck checks RLIMIT_NOFILE.
func nofileCheck(l rlimit.Limit) result {
	r := result{check: "open files"}
	switch {
	case !l.Known:
		r.status, r.finding = statusWarn, "RLIMIT_NOFILE unknown"
	case l.Cur == rlimit.Infinity || l.Cur >= minNofile:
		r.finding = fmt.Sprintf("RLIMIT_NOFILE %s: each endpoint holds one descriptor (its peer link)", limitString(l.Cur))
	default:
		r.status = statusWarn
		r.finding = fmt.Sprintf("RLIMIT_NOFILE %d (hard %s): each endpoint holds one descriptor (its peer link), "+
			"so a process holds fewer than %d connections", l.Cur, limitString(l.Max), l.Cur)
		r.fix = "raise the hard limit where the process is started (docker run --ulimit nofile=1048576, systemd " +
			"LimitNOFILE=1048576); Go raises the soft limit to the hard one itself"
	}
	return r
}

func limitString(n uint64) string {
	if n == rlimit.Infinity {
		return "unlimited"
	}
	return strconv.FormatUint(n, 10)
}
