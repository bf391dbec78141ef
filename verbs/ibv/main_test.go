package ibv_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

// missingLibsEnv asks a child test process (TestMain) to load these
// sonames, "libibverbs,librdmacm", and report what the provider says
// (reportMissingLibs, in builds with cgo).
const missingLibsEnv = "VERBSRT_IBV_TEST_LIBS"

var reportMissingLibs func(libs string)

// TestMain fails the run when a goroutine or a file descriptor outlives the
// tests: every context must stop its asynchronous event reader when closed,
// and every completion channel, context and rdma_cm event channel must close
// the descriptors it duplicated for the netpoller.
func TestMain(m *testing.M) {
	if libs := os.Getenv(missingLibsEnv); libs != "" && reportMissingLibs != nil {
		reportMissingLibs(libs) // a child of TestMissingLibraries
		os.Exit(0)
	}
	// Open the netpoller's own descriptors (epoll, eventfd) before counting,
	// and librdmacm's contexts (one per device, kept until the process
	// exits, opened at the first rdma_cm use).
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	ibv.CMInit()
	before := openFDs()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
			code = 1
		}
		if after := openFDs(); before >= 0 && after > before {
			fmt.Fprintf(os.Stderr, "%d file descriptors leaked (%d open before the tests, %d after)\n",
				after-before, before, after)
			code = 1
		}
	}
	os.Exit(code)
}

// openFDs counts the process's open file descriptors, -1 where /proc does
// not tell.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents) - 1 // the directory ReadDir itself had open
}

const (
	// port and the GID picked on it: RoCEv2 over IPv4 (the IPv4-mapped GID,
	// index 1 on rxe) where there is one.
	port = 1
	// waitFor bounds every wait for a completion or event. Soft-RoCE runs
	// under TCG emulation in the rxevm guest: generous.
	waitFor = 10 * time.Second
)

// devices returns the devices of the ibv provider, or skips the test where
// there is none (any machine without an RDMA NIC or rdma_rxe, such as a
// plain CI host).
func devices(t *testing.T) []verbs.Device {
	t.Helper()
	devs, err := ibv.New().Devices()
	if err != nil || len(devs) == 0 {
		t.Skipf("no RDMA device (%v): run through verbs/ibv/rxevm/run", err)
	}
	return devs
}

// side is one end of a test: a context with a PD, a CQ and registered
// memory, on device 0 (A) or device 1 (B; device 0 again on a host with one).
type side struct {
	t     *testing.T
	name  string
	ctx   verbs.Context
	pd    verbs.PD
	cq    verbs.CQ
	mem   []byte // registered, outside the Go heap
	mr    verbs.MR
	gid   verbs.GID
	gidIx int
	mtu   verbs.MTU
}

// pair opens the two sides a test needs.
func pair(t *testing.T) (a, b *side) {
	devs := devices(t)
	dev := devs[0]
	a = open(t, "A", dev)
	if len(devs) > 1 {
		dev = devs[1]
	}
	b = open(t, "B", dev)
	return a, b
}

func open(t *testing.T, name string, dev verbs.Device) *side {
	t.Helper()
	// The arena first: cleanups run last-in first-out, and the context (with
	// the MR over the arena) must be closed before the memory is unmapped.
	arena, err := verbs.NewArena(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arena.Close() })
	ctx, err := dev.Open()
	if err != nil {
		t.Fatalf("%s: Open(%s): %v", name, dev.Name(), err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Errorf("%s: Context.Close: %v", name, err)
		}
	})
	s := &side{t: t, name: name, ctx: ctx}
	pa, err := ctx.QueryPort(port)
	if err != nil {
		t.Fatalf("%s: QueryPort: %v", name, err)
	}
	s.mtu = min(pa.ActiveMTU, verbs.MTU1024)
	s.gidIx, s.gid = pickGID(t, ctx, pa.GIDTblLen)
	if s.pd, err = ctx.AllocPD(); err != nil {
		t.Fatalf("%s: AllocPD: %v", name, err)
	}
	if s.cq, err = ctx.CreateCQ(verbs.CQSpec{CQE: 256}); err != nil {
		t.Fatalf("%s: CreateCQ: %v", name, err)
	}
	s.mem = arena.Bytes()
	if s.mr, err = s.pd.RegMR(s.mem, verbs.AccessAllRemote); err != nil {
		t.Fatalf("%s: RegMR: %v", name, err)
	}
	return s
}

// pickGID returns the first IPv4-mapped non-zero GID (RoCEv2 over IPv4, as
// rxevm sets rxe up), else index 0.
func pickGID(t *testing.T, ctx verbs.Context, n int) (int, verbs.GID) {
	t.Helper()
	for i := range min(n, 16) {
		g, err := ctx.QueryGID(port, i)
		if err != nil || g.IsZero() {
			continue
		}
		if g[10] == 0xff && g[11] == 0xff && [10]byte(g[:10]) == [10]byte{} && [4]byte(g[12:]) != [4]byte{} {
			return i, g
		}
	}
	g, err := ctx.QueryGID(port, 0)
	if err != nil {
		t.Fatalf("QueryGID(%d, 0): %v", port, err)
	}
	return 0, g
}

// sgl is one SGE over n bytes of s's registered memory at off.
func (s *side) sgl(off, n int) []verbs.SGE {
	return []verbs.SGE{{Addr: s.mr.Addr() + uint64(off), Length: uint32(n), LKey: s.mr.LKey()}}
}

func (s *side) rdma(off int) verbs.RDMA {
	return verbs.RDMA{RemoteAddr: s.mr.Addr() + uint64(off), RKey: s.mr.RKey()}
}

// qpCaps are the capacities the tests ask for.
var qpCaps = verbs.QPCaps{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}

func (s *side) newQP(typ verbs.QPType, srq verbs.SRQ) verbs.QP {
	s.t.Helper()
	q, err := s.pd.CreateQP(verbs.QPSpec{Type: typ, SendCQ: s.cq, RecvCQ: s.cq, SRQ: srq, Caps: qpCaps})
	if err != nil {
		s.t.Fatalf("%s: CreateQP(%s): %v", s.name, typ, err)
	}
	return q
}

func modify(t *testing.T, q verbs.QP, a *verbs.QPAttr, mask verbs.QPAttrMask) {
	t.Helper()
	if err := q.Modify(a, mask); err != nil {
		t.Fatalf("Modify(%s, %v) of QP %#x: %v", a.State, mask, q.QPN(), err)
	}
}

func toInit(t *testing.T, q verbs.QP) {
	t.Helper()
	a := &verbs.QPAttr{State: verbs.QPStateInit, PortNum: port}
	mask := verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort
	if q.Type() == verbs.QPTypeUD {
		a.QKey = udQKey
		mask |= verbs.QPAttrQKey
	} else {
		a.AccessFlags = verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
		mask |= verbs.QPAttrAccessFlags
	}
	modify(t, q, a, mask)
}

// av is the address vector from s to peer: RoCE needs the GRH.
func (s *side) av(peer *side) verbs.AHAttr {
	return verbs.AHAttr{IsGlobal: true, PortNum: port,
		GRH: verbs.GlobalRoute{DGID: peer.gid, SGIDIndex: uint8(s.gidIx), HopLimit: 64}}
}

// toRTR and toRTS use what rxevm's SEMANTICS.md runs used, with retries
// generous enough for emulation.
func toRTR(t *testing.T, s *side, q verbs.QP, peer *side, pq verbs.QP) {
	t.Helper()
	a := &verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: min(s.mtu, peer.mtu), DestQPN: pq.QPN(),
		RQPSN: 0x100, MaxDestRdAtomic: 16, MinRNRTimer: 12, AH: s.av(peer)}
	modify(t, q, a, verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
		verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer)
}

func toRTS(t *testing.T, q verbs.QP) {
	t.Helper()
	a := &verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: 0x100, Timeout: 14, RetryCnt: 7,
		RNRRetry: 7, MaxRdAtomic: 16}
	modify(t, q, a, verbs.QPAttrState|verbs.QPAttrSQPSN|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
		verbs.QPAttrRNRRetry|verbs.QPAttrMaxQPRdAtomic)
}

const udQKey = 0x11111111

// rcPair returns two connected RC QPs in RTS, qa on a and qb on b.
func rcPair(t *testing.T, a, b *side) (qa, qb verbs.QP) {
	t.Helper()
	qa, qb = a.newQP(verbs.QPTypeRC, nil), b.newQP(verbs.QPTypeRC, nil)
	connect(t, a, qa, b, qb)
	return qa, qb
}

// connect brings qa on a and qb on b from RESET to RTS, each towards the
// other.
func connect(t *testing.T, a *side, qa verbs.QP, b *side, qb verbs.QP) {
	t.Helper()
	toInit(t, qa)
	toInit(t, qb)
	toRTR(t, a, qa, b, qb)
	toRTR(t, b, qb, a, qa)
	toRTS(t, qa)
	toRTS(t, qb)
}

// post posts wrs and fails the test unless every one was posted.
func post(t *testing.T, q verbs.QP, wrs ...verbs.SendWR) {
	t.Helper()
	if n, err := q.PostSend(wrs); n != len(wrs) || err != nil {
		t.Fatalf("PostSend of %d WRs: posted %d, %v", len(wrs), n, err)
	}
}

func postRecv(t *testing.T, q verbs.QP, wrs ...verbs.RecvWR) {
	t.Helper()
	if n, err := q.PostRecv(wrs); n != len(wrs) || err != nil {
		t.Fatalf("PostRecv of %d WRs: posted %d, %v", len(wrs), n, err)
	}
}

// waitWCs polls cq until it has n completions or waitFor has passed. A
// deadline, not a sleep, decides: between empty polls it yields briefly so
// that the kernel's rxe threads get the emulated CPUs.
func waitWCs(t *testing.T, cq verbs.CQ, n int) []verbs.WC {
	t.Helper()
	got := make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, 16)
	deadline := time.Now().Add(waitFor)
	for len(got) < n {
		k, err := cq.Poll(buf[:min(len(buf), n-len(got))])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		got = append(got, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after %v: %+v", len(got), n, waitFor, got)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return got
}

// waitOK is waitWCs that also requires every completion to be a success.
func waitOK(t *testing.T, cq verbs.CQ, n int) []verbs.WC {
	t.Helper()
	wcs := waitWCs(t, cq, n)
	for _, wc := range wcs {
		if err := wc.Err(); err != nil {
			t.Fatalf("completion: %v", err)
		}
	}
	return wcs
}

// waitEvent waits for an asynchronous event of type typ on ctx.
func waitEvent(t *testing.T, ctx verbs.Context, typ verbs.EventType) verbs.AsyncEvent {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for {
		select {
		case ev, ok := <-ctx.AsyncEvents():
			if !ok {
				t.Fatalf("AsyncEvents closed while waiting for %v", typ)
			}
			if ev.Type == typ {
				return ev
			}
			t.Logf("async event %v (waiting for %v)", ev.Type, typ)
		case <-c.Done():
			t.Fatalf("no %v event within %v", typ, waitFor)
		}
	}
}

func wantErr(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Errorf("%s: err %v, want one matching %v", what, err, target)
		}
	}
}
