package runtime_test

import (
	"sync/atomic"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestSteadyStateAllocs: once pools are warm, a Write, a Send and a Post
// of a batch (one op of it gathering) with their Wait allocate nothing on
// the sending side (averaged: the receiver's occasional credit-only
// message may allocate), with an Observer too.
func TestSteadyStateAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts under -short or -race are not meaningful: the race detector empties pools at random (make allocs runs this)")
	}
	t.Run("plain", func(t *testing.T) { steadyStateAllocs(t) })
	t.Run("observed", func(t *testing.T) {
		var obs countingObserver
		steadyStateAllocs(t, runtime.WithObserver(&obs))
		if obs.completed.Load() == 0 {
			t.Error("the observer saw no operation complete")
		}
	})
}

// countingObserver counts the operations it sees complete.
type countingObserver struct{ completed atomic.Int64 }

func (o *countingObserver) ObserveOp(e runtime.OpEvent) {
	if e.Phase == runtime.OpCompleted {
		o.completed.Add(1)
	}
}

func steadyStateAllocs(t *testing.T, opts ...runtime.Option) {
	rt, cli, srv := pair(t, opts...)
	ctx := ctxT(t)
	local, remote := alloc(t, rt, 64), refOf(t, alloc(t, rt, 64))
	go func() {
		for {
			m, err := srv.Recv(ctx)
			if err != nil {
				return
			}
			m.Release()
		}
	}()
	for range 1000 { // warm the pools
		cli.Write(ctx, local.Local(), remote).Wait(ctx)
		cli.Send(ctx, local.Slice(0, 8)).Wait(ctx)
	}
	write := testing.AllocsPerRun(2000, func() {
		if _, err := cli.Write(ctx, local.Local(), remote).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	})
	send := testing.AllocsPerRun(2000, func() {
		if _, err := cli.Send(ctx, local.Slice(0, 8)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	})
	batch := make([]runtime.Op, 8)
	for i := range batch {
		batch[i] = runtime.Op{Opcode: verbs.OpWrite, Local: []runtime.Local{local.Slice(i*8, 8)}, Remote: remote.Slice(i*8, 8)}
	}
	batch[7].Local = []runtime.Local{local.Slice(0, 4), local.Slice(60, 4)}
	post := testing.AllocsPerRun(2000, func() {
		if _, err := cli.Post(ctx, batch).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if write > 0.1 || send > 0.1 || post > 0.1 {
		t.Fatalf("allocations per op: write %.3f, send %.3f, post %.3f; want about 0", write, send, post)
	}
}
