package verbstest

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// This file holds the set-up helpers: opening the two sides, creating QPs,
// CQs and registered memory, and connecting QPs in memory the way
// ibv_rc_pingpong does after it has exchanged LID, QPN, PSN and GID.

// udQKey is the Q_Key of every UD QP of the suite (the one rxevm used).
const udQKey = 0x11111111

// maxPathMTU caps the path MTU of connected QPs, as in the rxevm runs.
const maxPathMTU = verbs.MTU1024

// closer is anything the suite closes.
type closer interface{ Close() error }

// owned closes an object once: explicitly, or when the test ends. A Close
// that fails (say with ErrBusy, on purpose) leaves it open for a later try.
type owned struct {
	what string
	c    closer
	done bool
}

// Close closes the object unless it already was.
func (o *owned) Close() error {
	if o.done {
		return nil
	}
	err := o.c.Close()
	if err == nil {
		o.done = true
	}
	return err
}

// own registers c to be closed when t ends (cleanups run last in, first
// out, so objects close before what they were made from). A failing Close
// fails the test.
func own(t *testing.T, what string, c closer) *owned {
	t.Helper()
	o := &owned{what: what, c: c}
	t.Cleanup(func() {
		if err := o.Close(); err != nil {
			t.Errorf("closing %s: %v", o.what, err)
		}
	})
	return o
}

// side is one end of a case: a context on a device, its PD, and the port and
// GID the suite uses there.
type side struct {
	t        *testing.T
	name     string // "A" or "B"
	ctx      verbs.Context
	pd       verbs.PD
	port     uint8
	devAttr  verbs.DeviceAttr
	portAttr verbs.PortAttr
	gidIndex int
	gid      verbs.GID
}

// env is a case's pair of sides.
type env struct {
	t    *testing.T
	cfg  Config
	a, b *side
	// mtu is the path MTU of connected QPs: the smaller active MTU of the
	// two ports, at most 1024.
	mtu verbs.MTU
}

// newEnv opens a context and a PD on each device.
func (s *suite) newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, cfg: s.cfg}
	e.a = s.openSide(t, s.devA, "A")
	e.b = s.openSide(t, s.devB, "B")
	e.mtu = min(e.a.portAttr.ActiveMTU, e.b.portAttr.ActiveMTU, maxPathMTU)
	if e.mtu.Bytes() == 0 {
		t.Fatalf("no usable path MTU: active MTU %v on A, %v on B",
			e.a.portAttr.ActiveMTU, e.b.portAttr.ActiveMTU)
	}
	return e
}

// openSide opens dev and queries what connecting needs.
func (s *suite) openSide(t *testing.T, dev verbs.Device, name string) *side {
	t.Helper()
	ctx, err := dev.Open()
	if err != nil {
		t.Fatalf("%s: Open(%s): %v", name, dev.Name(), err)
	}
	own(t, name+"'s context", ctx)
	sd := &side{t: t, name: name, ctx: ctx, port: s.cfg.Port}
	if sd.devAttr, err = ctx.QueryDevice(); err != nil {
		t.Fatalf("%s: QueryDevice: %v", name, err)
	}
	if sd.portAttr, err = ctx.QueryPort(sd.port); err != nil {
		t.Fatalf("%s: QueryPort(%d): %v", name, sd.port, err)
	}
	sd.gidIndex, sd.gid, err = pickGID(s.cfg.GIDIndex, sd.portAttr.GIDTblLen,
		func(i int) (verbs.GID, error) { return ctx.QueryGID(sd.port, i) })
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatalf("%s: AllocPD: %v", name, err)
	}
	own(t, name+"'s PD", pd)
	sd.pd = pd
	return sd
}

// pickGID returns the GID at index want, or with want < 0 the first
// IPv4-mapped GID whose address is not 0.0.0.0 among the first n entries,
// else the one at index 0. Entries that fail to read are skipped (rdma-core
// reports unpopulated entries as errors).
func pickGID(want, n int, query func(int) (verbs.GID, error)) (int, verbs.GID, error) {
	if want < 0 {
		for i := range n {
			g, err := query(i)
			if err != nil {
				continue
			}
			if a := netip.AddrFrom16(g); a.Is4In6() && !a.Unmap().IsUnspecified() {
				return i, g, nil
			}
		}
		want = 0
	}
	g, err := query(want)
	if err != nil {
		return 0, g, fmt.Errorf("QueryGID(index %d): %w", want, err)
	}
	return want, g, nil
}

// av is the address vector from s to peer: always global (RoCE needs the
// GRH), hop limit 64.
func (s *side) av(peer *side) verbs.AHAttr {
	return verbs.AHAttr{
		IsGlobal: true,
		GRH: verbs.GlobalRoute{
			DGID:      peer.gid,
			SGIDIndex: uint8(s.gidIndex),
			HopLimit:  64,
		},
		DLID:    peer.portAttr.LID,
		PortNum: s.port,
	}
}

// rdAtomic is how many outstanding RDMA READs and atomics the suite asks
// for (the rxevm runs used 16), within what the device allows.
func rdAtomic(limit int) uint8 { return uint8(min(16, max(limit, 0))) }

// link holds the per-connection transport settings a case may change.
type link struct {
	Timeout     uint8 // local ACK timeout, 4.096 µs * 2^Timeout
	RetryCnt    uint8
	RNRRetry    uint8 // 7 = forever
	MinRNRTimer uint8 // what this side puts in its RNR NAKs
}

// defaultLink is generous, for emulated devices: a 67 ms ACK timeout, 7
// transport retries, RNR retries forever; it is what cases use unless they
// are about those settings.
var defaultLink = link{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12}

// qpAccess is the QP access flags the suite gives each transport: every
// remote access on RC and XRC, remote write on UC (rxevm's setup).
func qpAccess(t verbs.QPType) verbs.Access {
	if t == verbs.QPTypeUC {
		return verbs.AccessLocalWrite | verbs.AccessRemoteWrite
	}
	return verbs.AccessAllRemote
}

// initAttr returns the RESET -> INIT modification of a QP of type t.
func initAttr(t verbs.QPType, port uint8) (*verbs.QPAttr, verbs.QPAttrMask) {
	a := &verbs.QPAttr{State: verbs.QPStateInit, PKeyIndex: 0, PortNum: port}
	mask := verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort
	if t == verbs.QPTypeUD {
		a.QKey = udQKey
		mask |= verbs.QPAttrQKey
	} else {
		a.AccessFlags = qpAccess(t)
		mask |= verbs.QPAttrAccessFlags
	}
	return a, mask
}

// path is what a connected QP learns about its peer.
type path struct {
	av      verbs.AHAttr
	mtu     verbs.MTU
	destQPN uint32
	rqPSN   uint32 // the peer's SQ PSN
}

// rtrAttr returns the INIT -> RTR modification of a QP of type t.
func rtrAttr(t verbs.QPType, p path, l link, maxDestRdAtomic uint8) (*verbs.QPAttr, verbs.QPAttrMask) {
	a := &verbs.QPAttr{State: verbs.QPStateRTR}
	mask := verbs.QPAttrState
	if !t.Connected() {
		return a, mask
	}
	a.AH = p.av
	a.PathMTU = p.mtu
	a.DestQPN = p.destQPN
	a.RQPSN = p.rqPSN
	mask |= verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN
	if t == verbs.QPTypeRC || t == verbs.QPTypeXRCRecv {
		a.MaxDestRdAtomic = maxDestRdAtomic
		a.MinRNRTimer = l.MinRNRTimer
		mask |= verbs.QPAttrMaxDestRdAtomic | verbs.QPAttrMinRNRTimer
	}
	return a, mask
}

// rtsAttr returns the RTR -> RTS modification of a QP of type t.
func rtsAttr(t verbs.QPType, sqPSN uint32, l link, maxRdAtomic uint8) (*verbs.QPAttr, verbs.QPAttrMask) {
	a := &verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: sqPSN}
	mask := verbs.QPAttrState | verbs.QPAttrSQPSN
	switch t {
	case verbs.QPTypeRC, verbs.QPTypeXRCSend:
		a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRdAtomic = l.Timeout, l.RetryCnt, l.RNRRetry, maxRdAtomic
		mask |= verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRdAtomic
	case verbs.QPTypeXRCRecv:
		a.Timeout = l.Timeout
		mask |= verbs.QPAttrTimeout
	}
	return a, mask
}

// defaultCaps are the queue sizes a QP asks for unless a case says
// otherwise.
var defaultCaps = verbs.QPCaps{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4}

// qpOpt describes a QP (and its CQ) to create.
type qpOpt struct {
	typ     verbs.QPType
	caps    verbs.QPCaps // zero: defaultCaps
	sigAll  bool
	cqe     int      // CQ size when the QP gets its own CQ; 0: 128
	cq      verbs.CQ // a CQ to use instead of a new one
	channel verbs.CompChannel
	srq     verbs.SRQ
}

// endpoint is a QP with the CQ its send and receive completions go to.
type endpoint struct {
	s   *side
	qp  verbs.QP
	cq  verbs.CQ
	typ verbs.QPType
	psn uint32
}

func (ep *endpoint) String() string {
	return fmt.Sprintf("%s's %s QP %#x", ep.s.name, ep.typ, ep.qp.QPN())
}

// newCQ creates a CQ of at least cqe entries.
func (s *side) newCQ(cqe int, ch verbs.CompChannel) verbs.CQ {
	s.t.Helper()
	cq, err := s.ctx.CreateCQ(verbs.CQSpec{CQE: cqe, Channel: ch})
	if err != nil {
		s.t.Fatalf("%s: CreateCQ(%d): %v", s.name, cqe, err)
	}
	own(s.t, s.name+"'s CQ", cq)
	return cq
}

// newChannel creates a completion channel.
func (s *side) newChannel() verbs.CompChannel {
	s.t.Helper()
	ch, err := s.ctx.CreateCompChannel()
	if err != nil {
		s.t.Fatalf("%s: CreateCompChannel: %v", s.name, err)
	}
	own(s.t, s.name+"'s completion channel", ch)
	return ch
}

// newQP creates a QP in RESET, with its own CQ unless o.cq is set.
func (s *side) newQP(o qpOpt) *endpoint {
	s.t.Helper()
	ep, err := s.tryQP(o)
	if err != nil {
		s.t.Fatalf("%s: CreateQP(%s): %v", s.name, o.typ, err)
	}
	return ep
}

// tryQP is newQP returning the error of CreateQP.
func (s *side) tryQP(o qpOpt) (*endpoint, error) {
	s.t.Helper()
	caps := o.caps
	if caps == (verbs.QPCaps{}) {
		caps = defaultCaps
	}
	if o.srq != nil {
		caps.MaxRecvWR, caps.MaxRecvSGE = 0, 0
	}
	cq := o.cq
	if cq == nil {
		cqe := o.cqe
		if cqe == 0 {
			cqe = 128
		}
		cq = s.newCQ(cqe, o.channel)
	}
	qp, err := s.pd.CreateQP(verbs.QPSpec{Type: o.typ, SendCQ: cq, RecvCQ: cq, SRQ: o.srq,
		Caps: caps, SigAll: o.sigAll})
	if err != nil {
		return nil, err
	}
	own(s.t, fmt.Sprintf("%s's %s QP %#x", s.name, o.typ, qp.QPN()), qp)
	return &endpoint{s: s, qp: qp, cq: cq, typ: o.typ, psn: verbs.RandomPSN()}, nil
}

// modify applies a modification and fails the test when it is refused.
func (ep *endpoint) modify(a *verbs.QPAttr, mask verbs.QPAttrMask) {
	ep.s.t.Helper()
	if err := ep.qp.Modify(a, mask); err != nil {
		ep.s.t.Fatalf("%v: Modify(%v, mask %v): %v", ep, a.State, mask, err)
	}
}

// toInit moves ep from RESET to INIT.
func (ep *endpoint) toInit() {
	ep.s.t.Helper()
	ep.modify(initAttr(ep.typ, ep.s.port))
}

// pathTo is the path from ep to peer over a path MTU of mtu.
func (ep *endpoint) pathTo(peer *endpoint, mtu verbs.MTU) path {
	return path{av: ep.s.av(peer.s), mtu: mtu, destQPN: peer.qp.QPN(), rqPSN: peer.psn}
}

// toRTR moves ep from INIT to RTR towards peer.
func (ep *endpoint) toRTR(peer *endpoint, mtu verbs.MTU, l link) {
	ep.s.t.Helper()
	ep.modify(rtrAttr(ep.typ, ep.pathTo(peer, mtu), l, rdAtomic(ep.s.devAttr.MaxQPRdAtom)))
}

// toRTS moves ep from RTR to RTS.
func (ep *endpoint) toRTS(l link) {
	ep.s.t.Helper()
	ep.modify(rtsAttr(ep.typ, ep.psn, l, rdAtomic(ep.s.devAttr.MaxQPInitRdAtom)))
}

// toState moves ep to ERR or RESET (the transitions every state allows).
func (ep *endpoint) toState(st verbs.QPState) {
	ep.s.t.Helper()
	ep.modify(&verbs.QPAttr{State: st}, verbs.QPAttrState)
}

// connect brings a and b to RTS towards each other; la and lb are their
// settings.
func (e *env) connect(a, b *endpoint, la, lb link) {
	e.t.Helper()
	a.toInit()
	b.toInit()
	a.toRTR(b, e.mtu, la)
	b.toRTR(a, e.mtu, lb)
	a.toRTS(la)
	b.toRTS(lb)
}

// pair creates a QP on each side and connects them with defaultLink.
func (e *env) pair(oa, ob qpOpt) (a, b *endpoint) {
	e.t.Helper()
	return e.pairLink(oa, ob, defaultLink, defaultLink)
}

// pairLink is pair with the settings of each side.
func (e *env) pairLink(oa, ob qpOpt, la, lb link) (a, b *endpoint) {
	e.t.Helper()
	a, b = e.a.newQP(oa), e.b.newQP(ob)
	e.connect(a, b, la, lb)
	return a, b
}

// rcPair is pair of two RC QPs with default sizes.
func (e *env) rcPair() (a, b *endpoint) {
	e.t.Helper()
	return e.pair(qpOpt{typ: verbs.QPTypeRC}, qpOpt{typ: verbs.QPTypeRC})
}

// udPair creates a UD QP on each side, both in RTS, and an AH on A towards
// B.
func (e *env) udPair() (a, b *endpoint, ah verbs.AH) {
	e.t.Helper()
	a = e.a.newQP(qpOpt{typ: verbs.QPTypeUD})
	b = e.b.newQP(qpOpt{typ: verbs.QPTypeUD})
	for _, ep := range []*endpoint{a, b} {
		ep.toInit()
		ep.modify(rtrAttr(verbs.QPTypeUD, path{}, defaultLink, 0))
		ep.toRTS(defaultLink)
	}
	ah, err := e.a.pd.CreateAH(e.a.av(e.b))
	if err != nil {
		e.t.Fatalf("A: CreateAH: %v", err)
	}
	own(e.t, "A's AH", ah)
	return a, b, ah
}

// ud is the UD member of a send from A to b.
func ud(ah verbs.AH, b *endpoint) verbs.UD {
	return verbs.UD{AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: udQKey}
}

// guard is how many bytes of arena lie on each side of a registered
// region, to catch writes outside it.
const guard = 64

// fillByte is what fresh memory holds, so that writes show.
const fillByte byte = 0xee

// mem is a registered region with unregistered bytes on both sides, all in
// one Arena.
type mem struct {
	mr   verbs.MR
	all  []byte // lead bytes | buf | the rest of the arena
	buf  []byte // the registered bytes
	lead int    // where buf starts in all: guard, unless newMemRange said
}

// newMem registers size bytes of fresh Arena memory filled with fillByte.
func (s *side) newMem(size int, access verbs.Access) *mem {
	s.t.Helper()
	return s.newMemPD(s.pd, size, access)
}

// newMemPD is newMem on another PD of the side.
func (s *side) newMemPD(pd verbs.PD, size int, access verbs.Access) *mem {
	s.t.Helper()
	ar, err := verbs.NewArena(size + 2*guard)
	if err != nil {
		s.t.Fatalf("%s: NewArena(%d): %v", s.name, size+2*guard, err)
	}
	own(s.t, s.name+"'s arena", ar)
	all := ar.Bytes()[:size+2*guard]
	for i := range all {
		all[i] = fillByte
	}
	buf := all[guard : guard+size]
	mr, err := pd.RegMR(buf, access)
	if err != nil {
		s.t.Fatalf("%s: RegMR(%d bytes, %v): %v", s.name, size, access, err)
	}
	own(s.t, s.name+"'s MR", mr)
	return &mem{mr: mr, all: all, buf: buf, lead: guard}
}

// newMemRange registers bytes [off, off+n) of a fresh Arena of size bytes
// filled with fillByte: the MR's neighbours, in the same pages, are the
// rest of the arena, which no remote access may touch.
func (s *side) newMemRange(size, off, n int, access verbs.Access) *mem {
	s.t.Helper()
	ar, err := verbs.NewArena(size)
	if err != nil {
		s.t.Fatalf("%s: NewArena(%d): %v", s.name, size, err)
	}
	own(s.t, s.name+"'s arena", ar)
	all := ar.Bytes()[:size]
	for i := range all {
		all[i] = fillByte
	}
	buf := all[off : off+n]
	mr, err := s.pd.RegMR(buf, access)
	if err != nil {
		s.t.Fatalf("%s: RegMR(bytes %d to %d of an arena, %v): %v", s.name, off, off+n, access, err)
	}
	own(s.t, s.name+"'s MR", mr)
	return &mem{mr: mr, all: all, buf: buf, lead: off}
}

// addr is the address of byte off of the region.
func (m *mem) addr(off int) uint64 { return m.mr.Addr() + uint64(off) }

// sgl is a one-entry gather or scatter list over n bytes at off.
func (m *mem) sgl(off, n int) []verbs.SGE {
	return []verbs.SGE{{Addr: m.addr(off), Length: uint32(n), LKey: m.mr.LKey()}}
}

// rdma addresses byte off of the region remotely.
func (m *mem) rdma(off int) verbs.RDMA {
	return verbs.RDMA{RemoteAddr: m.addr(off), RKey: m.mr.RKey()}
}

// recvWR is a receive of n bytes at off.
func (m *mem) recvWR(id uint64, off, n int) verbs.RecvWR {
	return verbs.RecvWR{ID: id, SGL: m.sgl(off, n)}
}

// pattern returns n bytes that differ from fillByte and from the pattern
// of another seed at most offsets.
func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) ^ seed
		if p[i] == fillByte {
			p[i] = ^byte(fillByte)
		}
	}
	return p
}

// post posts wrs on ep and fails the test unless all were posted.
func (ep *endpoint) post(wrs ...verbs.SendWR) {
	ep.s.t.Helper()
	n, err := ep.qp.PostSend(wrs)
	if err != nil || n != len(wrs) {
		ep.s.t.Fatalf("%v: PostSend of %d WRs: posted %d, err %v", ep, len(wrs), n, err)
	}
}

// recv posts receive WRs on ep and fails the test unless all were posted.
func (ep *endpoint) recv(wrs ...verbs.RecvWR) {
	ep.s.t.Helper()
	n, err := ep.qp.PostRecv(wrs)
	if err != nil || n != len(wrs) {
		ep.s.t.Fatalf("%v: PostRecv of %d WRs: posted %d, err %v", ep, len(wrs), n, err)
	}
}

// srqRecv posts receive WRs on srq and fails the test unless all were
// posted.
func srqRecv(t *testing.T, srq verbs.SRQ, wrs ...verbs.RecvWR) {
	t.Helper()
	n, err := srq.PostRecv(wrs)
	if err != nil || n != len(wrs) {
		t.Fatalf("SRQ PostRecv of %d WRs: posted %d, err %v", len(wrs), n, err)
	}
}

// caps returns the sizes ep's QP was granted.
func (ep *endpoint) caps() verbs.QPCaps {
	ep.s.t.Helper()
	a, err := ep.qp.Query()
	if err != nil {
		ep.s.t.Fatalf("%v: Query: %v", ep, err)
	}
	return a.Cap
}

// state returns ep's QP state.
func (ep *endpoint) state() verbs.QPState {
	ep.s.t.Helper()
	a, err := ep.qp.Query()
	if err != nil {
		ep.s.t.Fatalf("%v: Query: %v", ep, err)
	}
	return a.State
}
