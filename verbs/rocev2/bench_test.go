package rocev2_test

import (
	"net/netip"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// benchPair connects an RC QP on each of two devices on ::1.
func benchPair(b testing.TB) (a, z *end) {
	a, z, _ = benchProvider(b)
	return a, z
}

// benchProvider is benchPair, with the provider.
func benchProvider(b testing.TB) (a, z *end, p *rocev2.Provider) {
	lo := netip.IPv6Loopback()
	p, err := rocev2.New(rocev2.Config{Addrs: []netip.Addr{lo, lo}})
	if err != nil {
		b.Skipf("no IPv6 loopback: %v", err)
	}
	b.Cleanup(func() { p.Close() })
	devs, _ := p.Devices()
	a, z = newEnd(b, devs[0]), newEnd(b, devs[1])
	connect(b, a, z)
	return a, z, p
}

// emptyReads is the socket reads that found nothing, of both transports.
func emptyReads(p *rocev2.Provider) uint64 {
	return p.Transport(0).Stats().EmptyReads + p.Transport(1).Stats().EmptyReads
}

// spin polls cq until it has one completion.
func spin(b *testing.B, cq verbs.CQ, wc []verbs.WC) verbs.WC {
	for {
		n, err := cq.Poll(wc[:1])
		if err != nil {
			b.Fatal(err)
		}
		if n == 1 {
			if wc[0].Status != verbs.WCSuccess {
				b.Fatalf("completion %+v", wc[0])
			}
			return wc[0]
		}
	}
}

// BenchmarkPingPong is a 64-byte SEND/RECV round trip between two
// devices of one process over the loopback: one op is one round trip.
func BenchmarkPingPong(b *testing.B) {
	a, z := benchPair(b)
	// The WRs are made once, so that what allocates per op is the
	// provider's (the -benchmem figures).
	sge := func(e *end, off int) []verbs.SGE {
		return []verbs.SGE{{Addr: e.mr.Addr() + uint64(off), Length: 64, LKey: e.mr.LKey()}}
	}
	recvWR := map[*end][]verbs.RecvWR{a: {{ID: 1, SGL: sge(a, 4096)}}, z: {{ID: 1, SGL: sge(z, 4096)}}}
	sendWR := map[*end][]verbs.SendWR{
		a: {{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: sge(a, 0)}},
		z: {{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: sge(z, 0)}}}
	recv := func(e *end) {
		if _, err := e.qp.PostRecv(recvWR[e]); err != nil {
			b.Fatal(err)
		}
	}
	send := func(e *end) {
		if _, err := e.qp.PostSend(sendWR[e]); err != nil {
			b.Fatal(err)
		}
	}
	wa, wz := make([]verbs.WC, 1), make([]verbs.WC, 1)
	recv(a)
	recv(z)
	b.ResetTimer()
	for range b.N {
		send(a)
		spin(b, z.cq, wz) // z's receive
		recv(z)
		send(z)
		spin(b, z.cq, wz) // z's send
		spin(b, a.cq, wa)
		spin(b, a.cq, wa)
		recv(a)
	}
}

// stream drives a stream of 64-byte messages from a to z on one
// goroutine, as BenchmarkWriteRate and BenchmarkSendRate do: every 8th WR
// signaled and at most 3 signaled in flight (24 WRs; the send queue holds
// 31), and for SENDs the receives on z reposted as they complete, never
// fewer posted than the SENDs in flight, so no SEND meets an empty
// receive queue. Its WRs are made once, so that what allocates per op is
// the provider's.
type stream struct {
	a, z     *end
	p        *rocev2.Provider
	send     bool
	wrs      []verbs.SendWR
	recv     []verbs.RecvWR
	wc       []verbs.WC
	n        int // WRs posted
	inflight int // signaled sends not completed
	recvd    int // SENDs received
}

// streamRecvs is how many receives z keeps posted (its queue holds 16).
const streamRecvs = 16

func newStream(tb testing.TB, send bool) *stream {
	a, z, p := benchProvider(tb)
	s := &stream{a: a, z: z, p: p, send: send, wrs: make([]verbs.SendWR, 1), wc: make([]verbs.WC, 8)}
	s.wrs[0] = verbs.SendWR{Opcode: verbs.OpWrite,
		SGL:  []verbs.SGE{{Addr: a.mr.Addr(), Length: 64, LKey: a.mr.LKey()}},
		RDMA: verbs.RDMA{RemoteAddr: z.mr.Addr(), RKey: z.mr.RKey()}}
	if send {
		s.wrs[0].Opcode, s.wrs[0].RDMA = verbs.OpSend, verbs.RDMA{}
		s.recv = []verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: z.mr.Addr(), Length: 64, LKey: z.mr.LKey()}}}}
		for range streamRecvs {
			s.postRecv(tb)
		}
	}
	return s
}

func (s *stream) postRecv(tb testing.TB) {
	if _, err := s.z.qp.PostRecv(s.recv); err != nil {
		tb.Fatal(err)
	}
}

// poll polls a's CQ, and z's for SENDs, once each.
func (s *stream) poll(tb testing.TB) {
	n, err := s.a.cq.Poll(s.wc)
	if err != nil {
		tb.Fatal(err)
	}
	for _, wc := range s.wc[:n] {
		if wc.Status != verbs.WCSuccess {
			tb.Fatalf("completion %+v", wc)
		}
	}
	s.inflight -= n
	if !s.send {
		return
	}
	n, err = s.z.cq.Poll(s.wc)
	if err != nil {
		tb.Fatal(err)
	}
	for _, wc := range s.wc[:n] {
		if wc.Status != verbs.WCSuccess {
			tb.Fatalf("completion %+v", wc)
		}
		s.recvd++
		s.postRecv(tb)
	}
}

// post posts one WR, signaled if last or every 8th, once there is room.
func (s *stream) post(tb testing.TB, last bool) {
	for s.inflight >= 3 || (s.send && s.n-s.recvd >= streamRecvs) {
		s.poll(tb)
	}
	w := &s.wrs[0]
	w.ID, w.Flags = uint64(s.n), 0
	if s.n%8 == 7 || last {
		w.Flags = verbs.SendSignaled
	}
	if _, err := s.a.qp.PostSend(s.wrs); err != nil {
		tb.Fatal(err)
	}
	s.n++
	if w.Flags != 0 {
		s.inflight++
	}
}

// finish waits for every WR posted to complete, and every SEND to arrive.
func (s *stream) finish(tb testing.TB) {
	for s.inflight > 0 || (s.send && s.recvd < s.n) {
		s.poll(tb)
	}
}

// run is the benchmark's loop; besides the allocations it reports the
// socket reads that found nothing per message (empty-reads/op), of both
// ends.
func (s *stream) run(b *testing.B) {
	b.ReportAllocs()
	b.ResetTimer()
	before := emptyReads(s.p)
	for i := range b.N {
		s.post(b, i == b.N-1)
	}
	s.finish(b)
	b.ReportMetric(float64(emptyReads(s.p)-before)/float64(b.N), "empty-reads/op")
}

// BenchmarkWriteRate streams 64-byte RDMA WRITEs (stream): one op is one
// WRITE.
func BenchmarkWriteRate(b *testing.B) { newStream(b, false).run(b) }

// BenchmarkSendRate streams 64-byte SENDs onto receives that the same
// goroutine reposts (stream): one op is one SEND received.
func BenchmarkSendRate(b *testing.B) { newStream(b, true).run(b) }
