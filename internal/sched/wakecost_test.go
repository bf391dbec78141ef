package sched

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestLearnWakeUp: the learned wake-up starts at the first one measured,
// settles near the median of those measured, and a rare slow one moves it
// little.
func TestLearnWakeUp(t *testing.T) {
	defer SetWakeUpCost(0)()
	learnWakeUp(300 * time.Microsecond)
	if got, _ := WakeUpCost(); got != 300*time.Microsecond {
		t.Fatalf("after one wake-up of 300µs: learned %v", got)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		d := time.Duration(50+rng.IntN(100)) * time.Microsecond // median 100 µs
		if i%50 == 0 {
			d = 50 * time.Millisecond // a time slice lost now and then
		}
		learnWakeUp(d)
	}
	if got, _ := WakeUpCost(); got < 85*time.Microsecond || got > 120*time.Microsecond {
		t.Errorf("learned %v from wake-ups uniform in [50µs, 150µs) and 2%% of 50ms, want about 100µs", got)
	}
}

// TestLearnNetpoll: the netpoller's learned wake-up starts at the first
// sample and settles near their 90th percentile: where one wake-up in
// five takes 2 ms, a park pays that as surely as the fast ones, and the
// figure covers it; where one in fifty does, it stays near the rest.
func TestLearnNetpoll(t *testing.T) {
	for _, c := range []struct {
		slowEvery int
		lo, hi    time.Duration
	}{{5, time.Millisecond, 4 * time.Millisecond}, {50, 30 * time.Microsecond, 60 * time.Microsecond}} {
		freshNetpoll(t)
		learnNetpoll(30 * time.Microsecond)
		if got := NetpollCost(); got != 30*time.Microsecond {
			t.Fatalf("after one wake-up of 30µs: learned %v", got)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		for i := range 5000 {
			d := time.Duration(20+rng.IntN(20)) * time.Microsecond
			if i%c.slowEvery == 0 {
				d = 2 * time.Millisecond
			}
			learnNetpoll(d)
		}
		if got := NetpollCost(); got < c.lo || got > c.hi {
			t.Errorf("learned %v from wake-ups in [20µs, 40µs) and one in %d of 2ms, want %v to %v", got, c.slowEvery, c.lo, c.hi)
		}
	}
}

// TestParkCostCountsTheNetpoller: a park costs the two stamped wake-ups
// and the netpoller's as the probe measured it; before the probe has
// measured one, the netpoller's is taken to cost as much as the others.
func TestParkCostCountsTheNetpoller(t *testing.T) {
	defer SetWakeUpCost(30 * time.Microsecond)()
	if got := ParkCost(); got != 90*time.Microsecond {
		t.Errorf("wake-ups of 30µs, the netpoller's not measured: park cost %v, want 90µs", got)
	}
	defer SetNetpollCost(time.Millisecond)()
	if got := ParkCost(); got != 1060*time.Microsecond {
		t.Errorf("wake-ups of 30µs, the netpoller's of 1ms: park cost %v, want 1.06ms", got)
	}
	defer SetNetpollCost(time.Second)()
	if got := ParkCost(); got != maxParkWindow {
		t.Errorf("the netpoller's wake-up of 1s: park cost %v, want at most %v", got, maxParkWindow)
	}
}

// TestProbeNetpoll: probing measures a wake-up by the netpoller, and the
// probe's reader ends once no probe came for a while, closing its pipe,
// so an idle process keeps no goroutine or file for it.
func TestProbeNetpoll(t *testing.T) {
	freshNetpoll(t)
	// Generous bounds: a way out if the probe is broken, not a
	// measurement.
	deadline := time.Now().Add(10 * time.Second)
	for NetpollCost() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no wake-up by the netpoller measured after 10 s of probes")
		}
		ProbeNetpoll()
		time.Sleep(netpollProbeEvery / 4)
	}
	waitForProbeReaderEnd(t)
}

// freshNetpoll starts the test with no netpoller wake-up learned, and
// puts the process's figure back after it.
func freshNetpoll(t *testing.T) {
	old := netpollHop.Swap(0)
	t.Cleanup(func() { netpollHop.Store(old) })
}

// TestProbeNetpollOnlyWhenQuiet: a process where a waiter polls, or one
// yields, does not probe: the probe would measure the P the spinner
// holds, not the netpoller.
func TestProbeNetpollOnlyWhenQuiet(t *testing.T) {
	freshNetpoll(t)
	waitForProbeReaderEnd(t)
	for _, busy := range []struct {
		name       string
		begin, end func()
	}{
		{"a polling waiter", func() { AcquirePollingWaiter() }, ReleasePollingWaiter},
		{"a yielding waiter", func() { spinners.Add(1) }, func() { spinners.Add(-1) }},
	} {
		busy.begin()
		netpollProbe.mu.Lock()
		netpollProbe.last = time.Time{} // due
		netpollProbe.mu.Unlock()
		ProbeNetpoll()
		netpollProbe.mu.Lock()
		reading := netpollProbe.reading
		netpollProbe.mu.Unlock()
		busy.end()
		if reading {
			t.Errorf("with %s, ProbeNetpoll started a probe", busy.name)
			waitForProbeReaderEnd(t)
		}
	}
}

// waitForProbeReaderEnd waits until no probe's reader runs.
func waitForProbeReaderEnd(t *testing.T) {
	deadline := time.Now().Add(10 * time.Second) // a way out, not a measurement
	for {
		netpollProbe.mu.Lock()
		reading, pipe := netpollProbe.reading, netpollProbe.r != nil
		netpollProbe.mu.Unlock()
		if !reading {
			if pipe {
				t.Error("the probe's reader ended, and its pipe is still open")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the probe's reader still runs 10 s after the last probe")
		}
		time.Sleep(netpollReaderIdle / 4)
	}
}
