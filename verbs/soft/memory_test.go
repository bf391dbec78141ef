package soft_test

import (
	"runtime"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// TestQueuesAllocatedByUse: a QP and a CQ allocate room for the WRs and
// completions they hold, not for what they may hold: 200 of them with
// queues of 1,024 requested (2,047 granted, as rxe rounds; a CQ of 2,048
// gets 4,095) take a few KiB each while empty (1.6 MiB each before), and
// still report and accept what was granted (the full-queue cases:
// TestSendQueueFullUnsignaled, verbstest).
func TestQueuesAllocatedByUse(t *testing.T) {
	const n = 200
	p := soft.New(soft.Config{Devices: 1})
	t.Cleanup(func() { p.Close() })
	devs, _ := p.Devices()
	c, err := devs[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	qps := make([]verbs.QP, 0, n)
	cqs := make([]verbs.CQ, 0, n)
	before := heap()
	for range n {
		cq, err := c.CreateCQ(verbs.CQSpec{CQE: 2048})
		if err != nil {
			t.Fatal(err)
		}
		qp, err := pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Caps: verbs.QPCaps{MaxSendWR: 1024, MaxRecvWR: 1024, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 256}})
		if err != nil {
			t.Fatal(err)
		}
		cqs, qps = append(cqs, cq), append(qps, qp)
	}
	per := float64(heap()-before) / n / 1024
	attr, err := qps[0].Query()
	if err != nil {
		t.Fatal(err)
	}
	if attr.Cap.MaxSendWR != 2047 || attr.Cap.MaxRecvWR != 2047 || cqs[0].CQE() != 4095 {
		t.Errorf("granted max_send_wr %d, max_recv_wr %d, cqe %d; want 2047, 2047, 4095 (SEMANTICS 8a)",
			attr.Cap.MaxSendWR, attr.Cap.MaxRecvWR, cqs[0].CQE())
	}
	t.Logf("Go heap per empty QP and CQ: %.1f KiB", per)
	if per > 8 {
		t.Errorf("Go heap per empty QP and CQ: %.1f KiB, want at most 8", per)
	}
	for i := range qps {
		qps[i].Close()
		cqs[i].Close()
	}
}
