package runtime_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestCancelTenThousandQueued: 10,000 sends and writes queued behind a send
// that waits for the peer's receive credits (the peer does not receive
// yet), half of them with their contexts then cancelled. The cancelled ones
// fail with context.Canceled while the queue is still blocked; the
// provider's count of posted WRs does not move, the peer never receives a
// cancelled send, and no cancelled write touches its memory. Once the peer
// receives, the other 5,000 complete, in order.
func TestCancelTenThousandQueued(t *testing.T) {
	const (
		depth = 8
		n     = 10000
	)
	rt, cli, srv := pair(t, runtime.WithTuning(runtime.Tuning{RingSize: 2 * n}), runtime.WithRecvDepth(depth))
	ctx := ctxT(t)
	src := alloc(t, rt, 8*n)
	dst := alloc(t, rt, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(src.Bytes()[8*i:], uint64(i)+1)
	}
	// Use up the peer's receive credits: the next send waits at the head
	// of the inbox, and everything queued after it waits behind it.
	base, _ := verbs.PostedWRs(cli.QP())
	var first []runtime.Future
	for range 4 * depth {
		first = append(first, cli.Send(ctx, src.Slice(0, 8)))
	}
	waitPosted(t, cli)
	posted, _ := verbs.PostedWRs(cli.QP())

	isSend := func(i int) bool { return i%4 < 2 }
	fs := make([]runtime.Future, n)
	cancels := make([]context.CancelFunc, n)
	for i := range n {
		opCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		cancels[i] = cancel
		if isSend(i) {
			fs[i] = cli.Send(opCtx, src.Slice(8*i, 8))
		} else {
			fs[i] = cli.Write(opCtx, src.Slice(8*i, 8), refOf(t, dst).At(8*i))
		}
	}
	for i := 0; i < n; i += 2 {
		cancels[i]()
	}
	for i := 0; i < n; i += 2 {
		if _, err := fs[i].Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled op %d: %v, want context.Canceled", i, err)
		}
	}
	if now, _ := verbs.PostedWRs(cli.QP()); now != posted {
		t.Fatalf("the provider's posted WRs went from %d to %d while everything waited", posted, now)
	}

	// The peer receives now: the first sends, then the uncancelled ones.
	got := make(chan []uint64, 1)
	go func() {
		var seen []uint64
		for range 4*depth + n/4 {
			m, err := srv.Recv(ctx)
			if err != nil {
				t.Errorf("Recv after %d messages: %v", len(seen), err)
				break
			}
			seen = append(seen, binary.LittleEndian.Uint64(m.Bytes()))
			m.Release()
		}
		got <- seen
	}()
	for _, f := range first {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < n; i += 2 {
		if _, err := fs[i].Wait(ctx); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	seen := <-got
	want := 4*depth + n/4
	if len(seen) != want {
		t.Fatalf("the peer received %d messages, want %d", len(seen), want)
	}
	next := 1
	for k, v := range seen[4*depth:] {
		for !isSend(next) {
			next += 2
		}
		if v != uint64(next)+1 {
			t.Fatalf("message %d after the first ones carries op %d, want op %d (only uncancelled sends, in order)", k, v-1, next)
		}
		next += 2
	}
	for i := range n {
		v := binary.LittleEndian.Uint64(dst.Bytes()[8*i:])
		switch {
		case isSend(i):
		case i%2 == 0 && v != 0:
			t.Fatalf("cancelled write %d reached the peer's memory", i)
		case i%2 == 1 && v != uint64(i)+1:
			t.Fatalf("write %d: the peer's memory holds %d", i, v)
		}
	}
	// Beside them, the actor's own credit-only SENDs: once the stream is
	// over, it gives back the credits its window grew by.
	own := cli.Actor().Stats().Ops.CreditOnly.Load()
	if now, _ := verbs.PostedWRs(cli.QP()); now-base != 4*depth+n/2+own {
		t.Errorf("the provider accepted %d WRs in all, want %d: the first sends, the uncancelled ops and %d credit-only SENDs", now-base, 4*depth+n/2+own, own)
	}
	if c := cli.Actor().Stats().Ops.Cancelled.Load(); c != n/2 {
		t.Errorf("the actor counted %d cancelled submissions, want %d", c, n/2)
	}
	if c := rt.Stats().Cancelled; c != n/2 {
		t.Errorf("the runtime's Stats count %d cancelled operations, want %d (verbsrt_ops_cancelled_total)", c, n/2)
	}
}

// waitPosted waits until ep's actor has posted everything it can and gone
// to sleep: nothing outstanding changes for a while.
func waitPosted(t *testing.T, ep *runtime.Endpoint) {
	t.Helper()
	last, stable := uint64(0), 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		n, _ := verbs.PostedWRs(ep.QP())
		if n == last && n > 0 {
			if stable++; stable == 20 {
				return
			}
			continue
		}
		last, stable = n, 0
	}
	t.Fatal("the endpoint's actor never settled")
}

// TestOperationWithEndedContext: an operation given a context that has
// already ended fails with its error at once and posts nothing.
func TestOperationWithEndedContext(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	buf := alloc(t, rt, 64)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	before, _ := verbs.PostedWRs(cli.QP())
	for name, f := range map[string]runtime.Future{
		"Write": cli.Write(ended, buf.Local(), refOf(t, buf)),
		"Read":  cli.Read(ended, buf.Local(), refOf(t, buf)),
		"Send":  cli.Send(ended, buf.Slice(0, 8)),
		"Post":  cli.Post(ended, []runtime.Op{{Opcode: verbs.OpWrite, Local: []runtime.Local{buf.Local()}, Remote: refOf(t, buf)}}),
	} {
		if _, err := f.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with an ended context: %v, want context.Canceled", name, err)
		}
	}
	if after, _ := verbs.PostedWRs(cli.QP()); after != before {
		t.Errorf("the provider accepted %d WRs", after-before)
	}
}
