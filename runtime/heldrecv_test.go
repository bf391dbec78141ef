package runtime_test

import (
	"errors"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
)

// TestRecvFailsWhenEveryBufferIsHeld: an application that keeps every
// message it received (no Release) holds all the receive buffers its
// endpoint may have, and no message can arrive any more: Recv then fails
// at once with ErrMessagesHeld, counted in Stats, instead of waiting for
// its context; a Release lets the next message in.
func TestRecvFailsWhenEveryBufferIsHeld(t *testing.T) {
	const depth = 4
	rt, cli, srv := pair(t, runtime.WithRecvDepth(depth))
	ctx := ctxT(t)
	buf := alloc(t, rt, 8)
	const sends = 2 * depth
	futures := make([]runtime.Future, sends)
	for i := range futures {
		futures[i] = cli.Send(ctx, buf.Local())
	}
	var held []runtime.Message
	for i := range 2*depth - 1 {
		m, err := srv.Recv(ctx)
		if err != nil {
			t.Fatalf("message %d: %v; %s", i, err, runtime.RecvStateForTest(srv))
		}
		held = append(held, m)
	}
	if _, err := srv.Recv(ctx); !errors.Is(err, runtime.ErrMessagesHeld) {
		t.Fatalf("Recv with every buffer held: %v, want ErrMessagesHeld", err)
	}
	if n := rt.Stats().RecvAllHeld; n != 1 {
		t.Errorf("Stats.RecvAllHeld %d, want 1", n)
	}
	held[0].Release()
	m, err := srv.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv after a Release: %v", err)
	}
	m.Release()
	for _, m := range held[1:] {
		m.Release()
	}
	for _, f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
