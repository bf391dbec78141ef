package soft_test

import (
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// side is one end of a test connection: a context, PD, CQ, QP and an MR.
type side struct {
	ctx verbs.Context
	pd  verbs.PD
	cq  verbs.CQ
	qp  verbs.QP
	mr  verbs.MR
	gid verbs.GID
}

type pairOpts struct {
	typ      verbs.QPType
	sigAll   bool
	sendWR   int
	rnrRetry uint8
	retry    uint8
	timeout  uint8
	minRNR   uint8
	cqe      int
}

// newPair builds a provider with two devices and a connected QP pair, A on
// soft0 and B on soft1, each with a 64 KiB MR of every access.
func newPair(t testing.TB, o pairOpts) (a, b *side) {
	t.Helper()
	if o.typ == 0 {
		o.typ = verbs.QPTypeRC
	}
	if o.sendWR == 0 {
		o.sendWR = 256
	}
	if o.cqe == 0 {
		o.cqe = 1024
	}
	if o.timeout == 0 {
		o.timeout = 10
	}
	p := soft.New(soft.Config{Devices: 2})
	devs, _ := p.Devices()
	a, b = newSide(t, devs[0], o), newSide(t, devs[1], o)
	// Cleanups run last-in first-out: the devices stop before the arenas
	// under their MRs are unmapped.
	t.Cleanup(func() { p.Close() })
	connect(t, a, b, o)
	connect(t, b, a, o)
	return a, b
}

func newSide(t testing.TB, d verbs.Device, o pairOpts) *side {
	t.Helper()
	s := &side{}
	var err error
	must := func(e error) {
		t.Helper()
		if e != nil {
			t.Fatal(e)
		}
	}
	s.ctx, err = d.Open()
	must(err)
	s.gid, err = s.ctx.QueryGID(1, 1)
	must(err)
	s.pd, err = s.ctx.AllocPD()
	must(err)
	s.cq, err = s.ctx.CreateCQ(verbs.CQSpec{CQE: o.cqe})
	must(err)
	s.qp, err = s.pd.CreateQP(verbs.QPSpec{Type: o.typ, SendCQ: s.cq, RecvCQ: s.cq, SigAll: o.sigAll,
		Caps: verbs.QPCaps{MaxSendWR: o.sendWR, MaxRecvWR: 256, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
	must(err)
	arena, err := verbs.NewArena(64 << 10)
	must(err)
	t.Cleanup(func() { arena.Close() })
	s.mr, err = s.pd.RegMR(arena.Bytes(), verbs.AccessAllRemote)
	must(err)
	return s
}

func connect(t testing.TB, s, peer *side, o pairOpts) {
	t.Helper()
	spec := verbs.ConnectSpec{GIDIndex: 1, Explicit: true, Timeout: o.timeout, RetryCnt: o.retry,
		RNRRetry: o.rnrRetry, MinRNRTimer: o.minRNR}
	if err := verbs.Connect(s.qp, spec, verbs.PeerInfo{QPN: peer.qp.QPN(), GID: peer.gid}); err != nil {
		t.Fatal(err)
	}
}

// pollN polls cq until n completions arrived or the deadline passed.
func pollN(t testing.TB, cq verbs.CQ, n int) []verbs.WC {
	t.Helper()
	out := make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, 32)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("got %d of %d completions before the deadline: %+v", len(out), n, out)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return out
}

func sge(mr verbs.MR, off, n int) []verbs.SGE {
	return []verbs.SGE{{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}}
}
