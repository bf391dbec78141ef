package qpactor_test

import (
	"context"
	"testing"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestOpStats: 128 writes and a bad atomic queued before the actor runs
// are counted by opcode and batch, sampled for latency (2 of 128), and
// every future taken is resolved once.
func TestOpStats(t *testing.T) {
	r := newRig(t, 256)
	var fs []future.Future
	for i := range 128 {
		op := r.write(i % 64)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	bad := qpactor.Op{Opcode: verbs.OpAtomicCmpSwp, Remote: verbs.RDMA{RemoteAddr: r.peer.Addr() + 3, RKey: r.peer.RKey()}}
	fb, _ := r.actor.Submit(context.Background(), &bad)
	if got := r.actor.Pending(); got != 129 {
		t.Errorf("Pending before start = %d, want 129", got)
	}
	r.actor.Start()
	r.poll(t, append(fs, fb)...)
	for _, f := range fs {
		if _, err := future.Wait(f, context.Background(), byteLen); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := future.Wait(fb, context.Background(), byteLen); err == nil {
		t.Fatal("misaligned atomic succeeded")
	}
	ops := &r.actor.Stats().Ops
	if n := ops.ByOpcode[verbs.OpWrite].Load(); n != 128 {
		t.Errorf("WRITEs counted: %d, want 128", n)
	}
	if n := ops.ByOpcode[verbs.OpAtomicCmpSwp].Load(); n != 0 {
		t.Errorf("refused atomic counted as posted: %d", n)
	}
	var calls, largest uint64
	for i := range ops.Batches {
		if n := ops.Batches[i].Load(); n > 0 {
			calls += n
			largest = uint64(i)
		}
	}
	if calls != r.actor.Stats().PostCalls.Load() || largest != 7 { // 128 WRs: bucket 1<<7
		t.Errorf("batches: %d calls (PostSend: %d), largest bucket %d, want 7", calls, r.actor.Stats().PostCalls.Load(), largest)
	}
	var samples uint64
	for i := range ops.Latency[verbs.OpWrite].Buckets {
		samples += ops.Latency[verbs.OpWrite].Buckets[i].Load()
	}
	if samples != 2 || ops.Latency[verbs.OpWrite].SumNanos.Load() == 0 {
		t.Errorf("latency samples: %d (sum %d ns), want 2 of 128 WRs", samples, ops.Latency[verbs.OpWrite].SumNanos.Load())
	}
	if ops.Taken.Load() != 129 || ops.ResolvedByActor.Load()+ops.ResolvedByPoller.Load() != 129 {
		t.Errorf("taken %d, resolved %d + %d, want 129", ops.Taken.Load(), ops.ResolvedByActor.Load(), ops.ResolvedByPoller.Load())
	}
	if got := r.actor.Pending(); got != 0 {
		t.Errorf("Pending after all resolved = %d", got)
	}
}
