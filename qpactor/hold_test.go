package qpactor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestHoldGivenBackBeforeFutureResolves: an op's hold is given back once
// the device is done with it, before its future resolves: a Then callback
// sees no use left. A queued op cancelled, and an op whose submit fails,
// give theirs back too.
func TestHoldGivenBackBeforeFutureResolves(t *testing.T) {
	r := newRig(t, 64)
	var h future.Hold
	idle := make(chan struct{})
	h.Init(func() { close(idle) })

	op := r.write(0)
	op.Hold = &h
	h.Acquire()
	f, err := r.actor.Submit(context.Background(), &op)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan int, 1)
	future.Then(f, byteLen, func(_ uint32, err error) {
		if err != nil {
			t.Error(err)
		}
		seen <- h.Uses()
	})
	if h.Uses() != 1 {
		t.Fatalf("%d uses while the op is queued, want 1", h.Uses())
	}
	r.actor.Start()
	r.poll(t, f)
	if n := <-seen; n != 0 {
		t.Fatalf("the callback saw %d uses, want 0: the hold was given back after the future resolved", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.Acquire()
	if _, err := r.actor.Submit(ctx, &op); !errors.Is(err, context.Canceled) {
		t.Fatalf("submit with an ended context: %v", err)
	}
	if h.Uses() != 0 {
		t.Fatal("a submit that failed kept its hold")
	}

	// A batch of two ops on the same hold gives back both uses.
	ops := []qpactor.Op{r.write(1), r.write(2)}
	for i := range ops {
		h.Acquire()
		ops[i].Hold = &h
	}
	bf, err := r.actor.SubmitBatch(context.Background(), ops, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.poll(t, bf)
	if h.Uses() != 0 {
		t.Fatalf("%d uses after the batch resolved", h.Uses())
	}

	// An op the QP refuses (a gather list too long) never reaches the
	// device: its use comes back with the failure.
	long := r.write(3)
	long.Gather = make([]verbs.SGE, qpactor.MaxGather+1)
	long.Hold = &h
	h.Acquire()
	lf, err := r.actor.Submit(context.Background(), &long)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := future.Wait(lf, context.Background(), byteLen); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("gather list of %d: %v, want ErrInvalidArgument", qpactor.MaxGather+1, err)
	}
	if h.Uses() != 0 {
		t.Fatal("a refused op kept its hold")
	}
	h.Close()
	<-idle
}
