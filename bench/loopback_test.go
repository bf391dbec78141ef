package bench

import (
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// loopback is what the variants without the runtime write over: a soft
// provider of one device, one RC QP connected to a second QP on the same
// device, one CQ for the sender and one registered arena whose first half
// is the source of the writes and second half their target.
type loopback struct {
	cq       verbs.CQ
	qp       verbs.QP
	peer     verbs.QP // the QP lb.qp is connected to
	peerCQ   verbs.CQ // its send and receive CQ
	mr       verbs.MR
	capacity int // max_send_wr as granted
	slots    int // 64-byte slots in each half of the MR
}

// newLoopback builds the fixture for up to slots distinct writes at once;
// everything is closed when tb ends, the provider (and its engine
// goroutine) last.
func newLoopback(tb testing.TB, slots, cqe int) *loopback {
	tb.Helper()
	return newLoopbackRecv(tb, slots, cqe, 1)
}

// newLoopbackRecv is newLoopback whose peer QP takes up to recvDepth
// posted receives, its CQ room for their completions.
func newLoopbackRecv(tb testing.TB, slots, cqe, recvDepth int) *loopback {
	tb.Helper()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	// Cleanups run last-in first-out: the arena is unmapped after the
	// context, its MR and the provider's engine are gone.
	arena, err := verbs.NewArena(2 * slots * opSize)
	must(err)
	tb.Cleanup(func() { arena.Close() })
	prov := soft.New(soft.Config{Devices: 1})
	tb.Cleanup(func() { prov.Close() })
	devs, err := prov.Devices()
	must(err)
	vctx, err := devs[0].Open()
	must(err)
	tb.Cleanup(func() { vctx.Close() })
	gid, err := vctx.QueryGID(1, 1)
	must(err)
	pd, err := vctx.AllocPD()
	must(err)
	lb := &loopback{slots: slots}
	lb.cq, err = vctx.CreateCQ(verbs.CQSpec{CQE: cqe})
	must(err)
	lb.peerCQ, err = vctx.CreateCQ(verbs.CQSpec{CQE: max(16, recvDepth)})
	must(err)
	caps := verbs.QPCaps{MaxSendWR: sqDepth, MaxRecvWR: recvDepth, MaxSendSGE: 1, MaxRecvSGE: 1}
	lb.qp, err = pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: lb.cq, RecvCQ: lb.cq, Caps: caps})
	must(err)
	peer, err := pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: lb.peerCQ, RecvCQ: lb.peerCQ, Caps: caps})
	must(err)
	lb.peer = peer
	spec := verbs.ConnectSpec{GIDIndex: 1, PathMTU: verbs.MTU4096}
	must(verbs.Connect(lb.qp, spec, verbs.PeerInfo{QPN: peer.QPN(), GID: gid}))
	must(verbs.Connect(peer, spec, verbs.PeerInfo{QPN: lb.qp.QPN(), GID: gid}))
	attr, err := lb.qp.Query()
	must(err)
	lb.capacity = attr.Cap.MaxSendWR
	lb.mr, err = pd.RegMR(arena.Bytes(), verbs.AccessAllRemote)
	must(err)
	return lb
}

// local returns the source of the writes of slot i.
func (lb *loopback) local(i int) verbs.SGE {
	return verbs.SGE{Addr: lb.mr.Addr() + uint64(i%lb.slots*opSize), Length: opSize, LKey: lb.mr.LKey()}
}

// remote returns the target of the writes of slot i.
func (lb *loopback) remote(i int) verbs.RDMA {
	return verbs.RDMA{RemoteAddr: lb.mr.Addr() + uint64((lb.slots+i%lb.slots)*opSize), RKey: lb.mr.RKey()}
}

// halves returns the sources and the targets of the writes.
func (lb *loopback) halves() (src, dst []byte) {
	b := lb.mr.Bytes()
	return b[:lb.slots*opSize], b[lb.slots*opSize : 2*lb.slots*opSize]
}
