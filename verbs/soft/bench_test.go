package soft_test

import (
	"fmt"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// BenchmarkPostWrite measures the soft engine under 64-byte RDMA WRITEs
// posted in batches of 1, 16 and 64 WRs (one PostSend per batch, the last
// WR signaled), keeping up to a full send queue in flight. One op is one WR.
func BenchmarkPostWrite(b *testing.B) {
	for _, batch := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			const sqDepth = 1024
			a, r := newPair(b, pairOpts{sendWR: sqDepth, cqe: sqDepth})
			wrs := make([]verbs.SendWR, batch)
			sges := make([]verbs.SGE, batch)
			for i := range wrs {
				sges[i] = verbs.SGE{Addr: a.mr.Addr() + uint64(i*64), Length: 64, LKey: a.mr.LKey()}
				wrs[i] = verbs.SendWR{Opcode: verbs.OpWrite, SGL: sges[i : i+1],
					RDMA: verbs.RDMA{RemoteAddr: r.mr.Addr() + uint64(i*64), RKey: r.mr.RKey()}}
			}
			wrs[batch-1].Flags = verbs.SendSignaled
			attr, _ := a.qp.Query()
			capacity := attr.Cap.MaxSendWR
			wcs := make([]verbs.WC, 32)
			inflight := 0
			b.ReportAllocs()
			b.ResetTimer()
			for posted := 0; posted < b.N; {
				if inflight+batch <= capacity {
					n := min(batch, b.N-posted)
					wrs[n-1].Flags = verbs.SendSignaled
					if _, err := a.qp.PostSend(wrs[:n]); err != nil {
						b.Fatal(err)
					}
					wrs[n-1].Flags = 0
					wrs[batch-1].Flags = verbs.SendSignaled
					posted += n
					inflight += n
					continue
				}
				inflight -= reap(b, a.cq, wcs, batch)
			}
			for inflight > 0 {
				inflight -= reap(b, a.cq, wcs, batch)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "WR/s")
		})
	}
}

// reap polls once and returns how many WRs the signaled completions it got
// retire (each signaled WC retires its whole batch).
func reap(b *testing.B, cq verbs.CQ, wcs []verbs.WC, batch int) int {
	n, err := cq.Poll(wcs)
	if err != nil {
		b.Fatal(err)
	}
	done := 0
	for _, wc := range wcs[:n] {
		if wc.Status != verbs.WCSuccess {
			b.Fatalf("%+v", wc)
		}
		done += batch
	}
	return done
}
