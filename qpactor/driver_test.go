package qpactor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/verbs"
)

// recordingDriver polls the rig's CQ for the actor and records how the
// actor drives it.
type recordingDriver struct {
	r *rig

	mu       sync.Mutex
	driving  bool
	handOffs int // Drive(false) calls
	handled  int // completions Progress handled
	polled   int // completions Poll handled (waiters)
	yielded  int // of those, the ones PollUndriven handled
	polls    int // Poll calls, whatever they found
	wcs      []verbs.WC

	waiters, maxWaiters int  // between WaitBegin and WaitEnd, now and at most
	stalled             bool // Poll and Progress find nothing
}

// stall makes Poll and Progress find nothing (on) or the CQ's completions
// again.
func (d *recordingDriver) stall(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stalled = on
}

func (d *recordingDriver) WaitBegin() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.waiters++
	d.maxWaiters = max(d.maxWaiters, d.waiters)
}

func (d *recordingDriver) WaitEnd(bool, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.waiters--
}

func (d *recordingDriver) Poll() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.polls++
	if d.stalled {
		return 0
	}
	n, _ := d.r.cq.Poll(d.wcs)
	for i := range d.wcs[:n] {
		d.r.actor.Complete(&d.wcs[i])
	}
	d.r.actor.Polled()
	d.polled += n
	return n
}

// PollUndriven is Poll unless the actor drives the CQ or a waiter polls
// it; it counts the completions it handled in yielded.
func (d *recordingDriver) PollUndriven() int {
	d.mu.Lock()
	driven := d.driving || d.waiters > 0
	d.mu.Unlock()
	if driven {
		return 0
	}
	n := d.Poll()
	d.mu.Lock()
	d.yielded += n
	d.mu.Unlock()
	return n
}

func (d *recordingDriver) Drive(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.driving = on
	if !on {
		d.handOffs++
	}
}

func (d *recordingDriver) Progress() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.driving {
		panic("Progress called while not driving")
	}
	if d.stalled {
		return 0
	}
	n, _ := d.r.cq.Poll(d.wcs)
	for i := range d.wcs[:n] {
		d.r.actor.Complete(&d.wcs[i])
	}
	d.r.actor.Polled()
	d.handled += n
	return n
}

func (d *recordingDriver) state() (driving bool, handOffs, handled int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.driving, d.handOffs, d.handled
}

// awaitDriving waits up to 5 s until the actor drives its CQ (on) or has
// handed it back (!on).
func (d *recordingDriver) awaitDriving(t *testing.T, on bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if driving, _, _ := d.state(); driving == on {
			return
		}
		if time.Now().After(deadline) {
			if on {
				t.Fatal("the actor never drove its CQ")
			}
			t.Fatal("the idle actor never handed its CQ back")
		}
	}
}

// TestDriverCompletesOnActor: an actor with a Driver resolves its futures
// itself, with no poller; it hands the CQ back (Drive(false)) when it parks
// and when it exits.
func TestDriverCompletesOnActor(t *testing.T) {
	r := newRig(t, 64)
	d := &recordingDriver{r: r, wcs: make([]verbs.WC, 32)}
	r.actor.SetDriver(d)
	r.actor.Start()
	var fs []future.Future
	for i := range 40 {
		op := r.write(i)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, f := range fs {
		if _, err := future.Wait(f, ctx, byteLen); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if _, _, handled := d.state(); handled == 0 {
		t.Fatal("the futures resolved without the driver handling a completion")
	}
	// Idle past its spin (50 µs by default), the actor parks and hands
	// the CQ back.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if driving, handOffs, _ := d.state(); !driving && handOffs > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle actor never handed its CQ back")
		}
	}
	// Woken by a submission, it drives again, and hands back on exit.
	op := r.write(0)
	f, err := r.actor.Submit(ctx, &op)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := future.Wait(f, ctx, byteLen); err != nil {
		t.Fatal(err)
	}
	if err := r.actor.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if driving, _, _ := d.state(); driving {
		t.Fatal("the actor exited still driving its CQ")
	}
	if r.actor.Outstanding() != 0 {
		t.Fatalf("%d WRs outstanding", r.actor.Outstanding())
	}
}
