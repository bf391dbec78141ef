package rocev2_test

import (
	"net/netip"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// benchPair connects an RC QP on each of two devices on ::1.
func benchPair(b *testing.B) (a, z *end) {
	lo := netip.IPv6Loopback()
	p, err := rocev2.New(rocev2.Config{Addrs: []netip.Addr{lo, lo}})
	if err != nil {
		b.Skipf("no IPv6 loopback: %v", err)
	}
	b.Cleanup(func() { p.Close() })
	devs, _ := p.Devices()
	a, z = newEnd(b, devs[0]), newEnd(b, devs[1])
	connect(b, a, z)
	return a, z
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
	sge := func(e *end, off int) []verbs.SGE {
		return []verbs.SGE{{Addr: e.mr.Addr() + uint64(off), Length: 64, LKey: e.mr.LKey()}}
	}
	recv := func(e *end) {
		if _, err := e.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: sge(e, 4096)}}); err != nil {
			b.Fatal(err)
		}
	}
	send := func(e *end) {
		if _, err := e.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: sge(e, 0)}}); err != nil {
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

// BenchmarkWriteRate streams 64-byte RDMA WRITEs, every 8th signaled and
// 24 in flight at most (the send queue holds 31): one op is one WRITE.
func BenchmarkWriteRate(b *testing.B) {
	a, z := benchPair(b)
	wr := verbs.SendWR{Opcode: verbs.OpWrite,
		SGL:  []verbs.SGE{{Addr: a.mr.Addr(), Length: 64, LKey: a.mr.LKey()}},
		RDMA: verbs.RDMA{RemoteAddr: z.mr.Addr(), RKey: z.mr.RKey()}}
	wc := make([]verbs.WC, 4)
	inflight := 0
	b.ResetTimer()
	for i := range b.N {
		w := wr
		w.ID = uint64(i)
		if i%8 == 7 || i == b.N-1 {
			w.Flags = verbs.SendSignaled
		}
		for inflight >= 3 { // signaled WRs in flight, each standing for up to 8
			n, err := a.cq.Poll(wc)
			if err != nil {
				b.Fatal(err)
			}
			inflight -= n
		}
		if _, err := a.qp.PostSend([]verbs.SendWR{w}); err != nil {
			b.Fatal(err)
		}
		if w.Flags != 0 {
			inflight++
		}
	}
	for inflight > 0 {
		n, _ := a.cq.Poll(wc)
		inflight -= n
	}
}
