package qpactor_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestCancelQueuedNeverPosted: of 1,000 writes queued before the actor
// runs, the 500 whose contexts are cancelled fail with context.Canceled and
// never reach the QP (its post counters see 500 WRs); the other 500
// complete.
func TestCancelQueuedNeverPosted(t *testing.T) {
	r := newRig(t, 256)
	const n = 1000
	fs := make([]future.Future, n)
	cancels := make([]context.CancelFunc, n)
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cancels[i] = cancel
		op := r.write(i % 64)
		f, err := r.actor.Submit(ctx, &op)
		if err != nil {
			t.Fatal(err)
		}
		fs[i] = f
	}
	for i := 0; i < n; i += 2 {
		cancels[i]()
	}
	r.actor.Start()
	for i := 0; i < n; i += 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := future.Wait(fs[i], ctx, byteLen)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled write %d: %v, want context.Canceled", i, err)
		}
	}
	var rest []future.Future
	for i := 1; i < n; i += 2 {
		rest = append(rest, fs[i])
	}
	r.poll(t, rest...)
	for i, f := range rest {
		if _, err := future.Wait(f, context.Background(), byteLen); err != nil {
			t.Fatalf("write %d: %v", 2*i+1, err)
		}
	}
	st := r.actor.Stats()
	if got := st.WRsPosted.Load(); got != n/2 {
		t.Errorf("%d WRs posted, want %d: cancelled writes reached the QP", got, n/2)
	}
	if got := st.Ops.Cancelled.Load(); got != n/2 {
		t.Errorf("Cancelled counts %d, want %d", got, n/2)
	}
}

// TestCancelledHeadReleasesTheRest: a write at the head of the inbox
// waiting for send-queue credits is cancelled: it fails at once, never
// posts, and the write queued behind it goes out when credits return.
func TestCancelledHeadReleasesTheRest(t *testing.T) {
	r := newRig(t, 4) // granted 7
	r.actor.Start()
	var posted []future.Future
	for i := range 7 { // posted, not polled: no credit comes back
		op := r.write(i)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		posted = append(posted, f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	head, behind := r.write(7), r.write(8)
	fHead, err := r.actor.Submit(ctx, &head)
	if err != nil {
		t.Fatal(err)
	}
	fBehind, err := r.actor.Submit(context.Background(), &behind)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := future.Wait(fHead, wctx, byteLen); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled head: %v, want context.Canceled", err)
	}
	r.poll(t, append(posted, fBehind)...)
	if _, err := future.Wait(fBehind, context.Background(), byteLen); err != nil {
		t.Fatalf("the write behind the cancelled one: %v", err)
	}
	if got := r.actor.Stats().WRsPosted.Load(); got != 8 {
		t.Errorf("%d WRs posted, want 8 (the cancelled one never)", got)
	}
}

// TestCancelRacesTake: contexts cancelled at random moments while the
// actor takes and posts: every future resolves exactly once, either with
// its completion or with context.Canceled, and exactly the ones that
// succeeded were posted.
func TestCancelRacesTake(t *testing.T) {
	r := newRig(t, 64)
	r.actor.Start()
	const n = 4000
	fs := make([]future.Future, n)
	var wg sync.WaitGroup
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		op := r.write(i % 64)
		f, err := r.actor.Submit(ctx, &op)
		if err != nil {
			t.Fatal(err)
		}
		fs[i] = f
		if rand.IntN(2) == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if rand.IntN(2) == 0 {
					runtime.Gosched()
				}
				cancel()
			}()
		} else {
			defer cancel()
		}
		if i%256 == 255 {
			r.poll(t, fs[i-255:i+1]...)
		}
	}
	wg.Wait()
	r.poll(t, fs...)
	ok := 0
	for i, f := range fs {
		_, err := future.Wait(f, context.Background(), byteLen)
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, context.Canceled):
			t.Fatalf("write %d: %v", i, err)
		}
		if _, err := future.Wait(f, context.Background(), byteLen); !errors.Is(err, future.ErrReleased) {
			t.Fatalf("write %d resolved twice? second Wait: %v", i, err)
		}
	}
	st := r.actor.Stats()
	if got := st.WRsPosted.Load(); got != uint64(ok) {
		t.Errorf("%d WRs posted, %d succeeded", got, ok)
	}
	if got := st.Ops.Cancelled.Load(); got != uint64(n-ok) {
		t.Errorf("Cancelled counts %d, %d futures failed with context.Canceled", got, n-ok)
	}
	t.Logf("%d of %d writes cancelled before the actor took them", n-ok, n)
}

// TestSubmitWaitsForRoomOnASignal: a Submit that finds the inbox full
// waits on a signal the actor gives when it takes something, ends with
// its context, and fails with ErrClosed when the actor closes.
func TestSubmitWaitsForRoomOnASignal(t *testing.T) {
	r := newRig(t, 64, func(c *qpactor.Config) { c.RingSize = 2 })
	var fs []future.Future
	for i := range 2 {
		op := r.write(i)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	op := r.write(2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.actor.Submit(ctx, &op); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit to a full inbox with a deadline: %v", err)
	}
	type result struct {
		f   future.Future
		err error
	}
	got := make(chan result, 1)
	go func() {
		f, err := r.actor.Submit(context.Background(), &op)
		got <- result{f, err}
	}()
	waitForStack(t, "qpactor.(*Actor).waitRoom", "[select")
	r.actor.Start()
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	r.poll(t, append(fs, res.f)...)

	// Full again, with the actor closing: the waiting Submit fails.
	r2 := newRig(t, 64, func(c *qpactor.Config) { c.RingSize = 2 })
	for i := range 2 {
		op := r2.write(i)
		if _, err := r2.actor.Submit(context.Background(), &op); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r2.actor.Submit(context.Background(), &op)
		errc <- err
	}()
	waitForStack(t, "qpactor.(*Actor).waitRoom", "[select")
	go r2.actor.Close(context.Background())
	if err := <-errc; !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("Submit waiting for room while the actor closes: %v, want ErrClosed", err)
	}
}

// waitForStack waits until some goroutine's stack holds fn, its header
// saying state (e.g. "[select": parked on channels, not sleeping).
func waitForStack(t *testing.T, fn, state string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, fn) && strings.Contains(strings.SplitN(g, "\n", 2)[0], state) {
				return
			}
		}
	}
	t.Fatalf("no goroutine in %s in state %s", fn, state)
}
