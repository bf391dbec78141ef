package runtime_test

import (
	"testing"
)

// TestSteadyStateAllocs: once pools are warm, a Write and a Send with their
// Wait allocate nothing on the sending side (averaged: the receiver's
// occasional credit-only message may allocate).
func TestSteadyStateAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts under -short are not meaningful")
	}
	rt, cli, srv := pair(t)
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
	if write > 0.1 || send > 0.1 {
		t.Fatalf("allocations per op: write %.3f, send %.3f; want about 0", write, send)
	}
}
