package main

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/internal/rlimit"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// doctorLine is the shape of every line doctor prints: a check's verdict,
// or, indented, what belongs to it (a GID, the fix).
var doctorLine = regexp.MustCompile(`^((ok|FAIL|warn) +[^ ].*: .+|        .+|      fix: .+)$`)

// checkLines fails t for each line of out that has neither shape.
func checkLines(t *testing.T, out string) {
	t.Helper()
	for l := range strings.Lines(out) {
		if l = strings.TrimSuffix(l, "\n"); !doctorLine.MatchString(l) {
			t.Errorf("line not in doctor's format: %q", l)
		}
	}
}

// softDoctor returns a doctor over fabric with a /dev/infiniband of its
// own holding uverbs0 and rdma_cm, and limits that pass, for tests to
// change; the runtime's VERBSRT_* variables are unset.
func softDoctor(t *testing.T, fabric *soft.Provider) *doctor {
	for _, k := range []string{"VERBSRT_DEVICE", "VERBSRT_PORT", "VERBSRT_GID_INDEX"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	for _, n := range []string{"uverbs0", "rdma_cm"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	return &doctor{
		provider: fabric,
		devDir:   dir,
		memLimit: rlimit.DefaultMemoryLimit,
		memlock:  func() rlimit.Limit { return rlimit.Limit{Cur: rlimit.Infinity, Max: rlimit.Infinity, Known: true} },
		nofile:   func() rlimit.Limit { return rlimit.Limit{Cur: 1 << 20, Max: 1 << 20, Known: true} },
		ipcLock:  func() bool { return false },
		present:  netdevPresent,
	}
}

func runDoctorChecks(t *testing.T, d *doctor) (string, int) {
	t.Helper()
	var out bytes.Buffer
	failed, _ := d.run(&out)
	t.Logf("doctor:\n%s", out.String())
	checkLines(t, out.String())
	return out.String(), failed
}

// TestDoctorLibibverbsMissing: where libibverbs does not load (the error
// the ibv provider gives on a machine without rdma-core), doctor reports
// it as FAIL with the packages to install, librdmacm as not loadable
// without it, and checks no device; the run fails.
func TestDoctorLibibverbsMissing(t *testing.T) {
	fabric := soft.New(soft.Config{})
	defer fabric.Close()
	d := softDoctor(t, fabric)
	d.libraries = func() []ibv.Library {
		err := verbs.Errorf("dlopen libibverbs.so.1", verbs.ErrNotSupported, "%s; %s",
			"libibverbs.so.1: cannot open shared object file: No such file or directory", ibv.InstallHint)
		return []ibv.Library{
			{Name: "libibverbs", Soname: "libibverbs.so.1", Err: err},
			{Name: "librdmacm", Soname: "librdmacm.so.1", Err: err},
		}
	}
	out, failed := runDoctorChecks(t, d)
	for _, want := range []string{
		"FAIL  libibverbs: verbs: dlopen libibverbs.so.1: not supported: libibverbs.so.1: cannot open shared object file",
		"      fix: install rdma-core's libraries where the program runs",
		"apt install libibverbs1 ibverbs-providers librdmacm1",
		"dnf install libibverbs librdmacm",
		"FAIL  librdmacm: not loaded: it needs libibverbs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output", want)
		}
	}
	for _, not := range []string{"device soft0", "runtime's choice"} {
		if strings.Contains(out, not) {
			t.Errorf("%q checked without libibverbs", not)
		}
	}
	if failed != 2 {
		t.Errorf("%d checks failed, want 2 (the libraries)", failed)
	}
}

// TestDoctorThisMachine runs verbsrt doctor as a user does, on the ibv
// provider: every line has doctor's shape, libibverbs is either loaded
// from a named file or a FAIL that says what to install, and the exit
// status is 1 exactly when a check FAILed.
func TestDoctorThisMachine(t *testing.T) {
	code, stdout, stderr := runArgs("doctor")
	t.Logf("exit %d\n%s%s", code, stdout, stderr)
	checkLines(t, stdout)
	loaded := regexp.MustCompile(`(?m)^ok    libibverbs: loaded /\S+`).MatchString(stdout)
	missing := regexp.MustCompile(`(?m)^FAIL  libibverbs: .*\n      fix: .*apt install libibverbs1`).MatchString(stdout)
	if loaded == missing {
		t.Errorf("libibverbs neither loaded from a file nor a FAIL with the install hint")
	}
	failed := regexp.MustCompile(`(?m)^FAIL  `).MatchString(stdout)
	if want := map[bool]int{true: exitFail, false: exitOK}[failed]; code != want {
		t.Errorf("exit %d, want %d (a FAIL printed: %t)", code, want, failed)
	}
	if failed && !strings.Contains(stderr, "checks failed") {
		t.Errorf("stderr does not say how many checks failed: %q", stderr)
	}
}

// TestDoctorSoftChoice: on an mlx5-like table whose first pair belongs to
// a netdev outside the namespace, doctor lists the table with types and
// netdevs, marks the absent one, and reports the runtime's own choice,
// the RoCE v2 GID of lo, and why; with -device naming port 2 of a
// two-port device, that port's GID; with VERBSRT_GID_INDEX, the entry it
// names and where that came from. Nothing fails.
func TestDoctorSoftChoice(t *testing.T) {
	a1, a2 := netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.2.0.1")
	table := append(soft.RoCEPairs("vrt-absent0", netip.MustParseAddr("10.9.0.1")), soft.RoCEPairs("lo", a1)...)
	fabric := soft.New(soft.Config{Models: []soft.DeviceModel{{
		PCIAddress: "0000:3b:00.0",
		Ports:      []soft.PortModel{{GIDs: table, ActiveMTU: 1024}, {GIDs: soft.RoCEPairs("lo", a2)}},
	}}})
	defer fabric.Close()

	d := softDoctor(t, fabric)
	out, failed := runDoctorChecks(t, d)
	for _, want := range []string{
		"ok    device soft0 (0000:3b:00.0) port 1: PORT_ACTIVE, link layer Ethernet, active MTU 1024 (max 4096), 4 GIDs\n",
		"        GID[  1] ::ffff:10.9.0.1, RoCE v2, vrt-absent0 (not in this network namespace)\n",
		"        GID[  2] ::ffff:10.1.0.1, RoCE v1, lo\n",
		"        GID[  3] ::ffff:10.1.0.1, RoCE v2, lo\n",
		"ok    device soft0 (0000:3b:00.0) port 2: PORT_ACTIVE",
		"ok    runtime's choice: device soft0 port 1, GID[3] 10.1.0.1 (RoCE v2, netdev lo, link layer Ethernet, MTU 1024): " +
			"RoCE v2, netdev lo in this namespace, IPv4\n",
		"ok    memlock: RLIMIT_MEMLOCK unlimited\n",
		"ok    rdma_cm: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output", want)
		}
	}
	if failed != 0 {
		t.Errorf("%d checks failed", failed)
	}

	d.device = "soft0:2"
	out, _ = runDoctorChecks(t, d)
	if want := "ok    runtime's choice: device soft0 port 2, GID[1] 10.2.0.1 (RoCE v2, netdev lo"; !strings.Contains(out, want) {
		t.Errorf("-device soft0:2: no %q in the output", want)
	}

	// The environment applies as it does to any program's runtime, and
	// doctor says it did.
	d.device = ""
	t.Setenv("VERBSRT_GID_INDEX", "2")
	out, _ = runDoctorChecks(t, d)
	for _, want := range []string{
		"ok    runtime's choice: device soft0 port 1, GID[2] 10.1.0.1 (RoCE v1, netdev lo, link layer Ethernet, MTU 1024): " +
			"GID index 2 asked for (VERBSRT_GID_INDEX)\n        from the environment: VERBSRT_GID_INDEX=2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("VERBSRT_GID_INDEX=2: no %q in the output", want)
		}
	}
}

// TestDoctorSoftRefused: a port with RoCE v1 GIDs only is what the
// runtime refuses by default; doctor FAILs with the runtime's error, which
// lists the table, and says how to name a GID.
func TestDoctorSoftRefused(t *testing.T) {
	var v1 []verbs.GIDEntry
	for _, e := range soft.RoCEPairs("lo", netip.MustParseAddr("10.1.0.1")) {
		if e.Type == verbs.GIDTypeRoCEv1 {
			v1 = append(v1, e)
		}
	}
	fabric := soft.New(soft.Config{Models: []soft.DeviceModel{{Ports: []soft.PortModel{{GIDs: v1}}}}})
	defer fabric.Close()
	out, failed := runDoctorChecks(t, softDoctor(t, fabric))
	if !regexp.MustCompile(`(?m)^FAIL  runtime's choice: .*only RoCE v1 GIDs.*table \[0 ::ffff:10\.1\.0\.1 RoCE v1 lo\]`).MatchString(out) {
		t.Error("the refusal with the table is not reported as FAIL")
	}
	if !strings.Contains(out, "fix: name the device, port or GID") || !strings.Contains(out, "VERBSRT_GID_INDEX") {
		t.Error("no fix naming VERBSRT_GID_INDEX")
	}
	if failed != 1 {
		t.Errorf("%d checks failed, want 1", failed)
	}
}

// TestDoctorDevFiles: a missing /dev/infiniband FAILs with how to pass
// the devices into a container; one without uverbs devices FAILs; no
// rdma_cm only warns, since Dial and Listen do not use it.
func TestDoctorDevFiles(t *testing.T) {
	d := &doctor{devDir: filepath.Join(t.TempDir(), "infiniband")}
	rs := d.devFiles()
	if rs[0].status != statusFail || !strings.Contains(rs[0].fix, "--device=/dev/infiniband/uverbs0") {
		t.Errorf("missing directory: %+v", rs[0])
	}
	if err := os.Mkdir(d.devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	rs = d.devFiles()
	if rs[0].status != statusFail || rs[0].finding != "no uverbs device" {
		t.Errorf("no uverbs: %+v", rs[0])
	}
	if rs[1].status != statusWarn || !strings.Contains(rs[1].fix, "rdma_ucm") {
		t.Errorf("no rdma_cm: %+v", rs[1])
	}
}

// TestMemlockCheck compares RLIMIT_MEMLOCK with the memory limit in bytes
// at the edges: equal passes, a byte short warns (the arena fails when it
// grows that far), below the first 4 MiB chunk FAILs; unlimited passes,
// CAP_IPC_LOCK passes whatever the limit; the fix says ulimit -l in KiB,
// rounded up, when the hard limit allows it, and privilege when not.
func TestMemlockCheck(t *testing.T) {
	const GiB = 1 << 30
	lim := func(cur, max uint64) rlimit.Limit { return rlimit.Limit{Cur: cur, Max: max, Known: true} }
	for _, tc := range []struct {
		name     string
		l        rlimit.Limit
		memLimit int
		ipcLock  bool
		want     status
		finding  string // in the finding
		fix      string // in the fix
	}{
		{"unlimited", lim(rlimit.Infinity, rlimit.Infinity), GiB, false, statusOK, "unlimited", ""},
		{"equal", lim(GiB, GiB), GiB, false, statusOK, "1073741824 bytes (1048576 KiB) allows the 1073741824 bytes", ""},
		{"one byte short", lim(GiB-1, rlimit.Infinity), GiB, false, statusWarn,
			"1073741823 bytes (1048575 KiB) is below the 1073741824 bytes", "ulimit -l 1048576 "},
		{"64 KiB, the common container default", lim(64<<10, 64<<10), GiB, false, statusFail,
			"65536 bytes (64 KiB) is below the 4194304 bytes (4096 KiB) the runtime registers at its first", "CAP_IPC_LOCK"},
		{"exactly the first chunk", lim(4<<20, 4<<20), GiB, false, statusWarn, "is below the 1073741824", "LimitMEMLOCK=infinity"},
		{"8 MiB, a small memory limit", lim(8<<20, 8<<20), 8 << 20, false, statusOK, "allows the 8388608 bytes", ""},
		{"memory limit below a chunk", lim(1<<20, 1<<20), 2 << 20, false, statusFail,
			"below the 2097152 bytes (2048 KiB) the runtime registers at its first", "at most 1048576 here"},
		{"KiB rounded up", lim(64<<10, rlimit.Infinity), 8<<20 + 1, false, statusFail, "", "ulimit -l 8193 "},
		{"hard limit exactly the need", lim(64<<10, 8<<20), 8 << 20, false, statusFail, "", "ulimit -l 8192 "},
		{"CAP_IPC_LOCK", lim(64<<10, 64<<10), GiB, true, statusOK, "CAP_IPC_LOCK", ""},
		{"unknown", rlimit.Limit{}, GiB, false, statusWarn, "unknown", "1073741824 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := memlockCheck(tc.l, tc.memLimit, tc.ipcLock)
			if r.status != tc.want || !strings.Contains(r.finding, tc.finding) || !strings.Contains(r.fix, tc.fix) {
				t.Errorf("%s: %s\nfix: %s\nwant %s, finding with %q, fix with %q", r.status, r.finding, r.fix, tc.want, tc.finding, tc.fix)
			}
			if (r.status == statusOK) != (r.fix == "") {
				t.Errorf("%s with fix %q", r.status, r.fix)
			}
		})
	}
}

// TestNofileCheck: at least 4096 open files passes, fewer warns.
func TestNofileCheck(t *testing.T) {
	for _, tc := range []struct {
		l    rlimit.Limit
		want status
	}{
		{rlimit.Limit{Cur: 4096, Max: 4096, Known: true}, statusOK},
		{rlimit.Limit{Cur: 4095, Max: 4095, Known: true}, statusWarn},
		{rlimit.Limit{Cur: rlimit.Infinity, Max: rlimit.Infinity, Known: true}, statusOK},
		{rlimit.Limit{}, statusWarn},
	} {
		if r := nofileCheck(tc.l); r.status != tc.want {
			t.Errorf("%+v: %s (%s), want %s", tc.l, r.status, r.finding, tc.want)
		}
	}
}

// TestInitialUserNS: CAP_IPC_LOCK lifts the memlock limit only in the
// initial user namespace, whose uid_map maps every uid to itself; a
// rootless container's maps a range.
func TestInitialUserNS(t *testing.T) {
	for _, tc := range []struct {
		uidMap string
		want   bool
	}{
		{"         0          0 4294967295\n", true},
		{"         0       1000          1\n         1     100000      65536\n", false},
		{"         0     100000      65536\n", false},
		{"", false},
	} {
		if got := initialUserNS(tc.uidMap); got != tc.want {
			t.Errorf("%q: %t, want %t", tc.uidMap, got, tc.want)
		}
	}
}
