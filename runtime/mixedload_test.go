package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// mixedLoad is the exactly-once workload: goroutines issue ops mixed
// operations each (write then read back, send, CAS, FAA) from cli, whose
// runtime is rtCli, into memory of srv's runtime rtSrv and at srv. Every
// future must resolve once with success; memory, counters and messages must
// add up; no completion may be stale and nothing may stay outstanding.
func mixedLoad(t *testing.T, ctx context.Context, rtCli, rtSrv *runtime.Runtime, cli, srv *runtime.Endpoint, goroutines, ops int) {
	t.Helper()
	remote := alloc(t, rtSrv, goroutines*mixedSlot+4096) // per-goroutine slots, then counters

	var tally mixedTally
	var received atomic.Int64
	recvDone := make(chan error, 1)
	go func() { recvDone <- receiveMixed(ctx, srv, &received, nil) }()

	runMixed(t, ctx, rtCli, cli, refOf(t, remote), goroutines, ops, &tally)
	sends, casWins := &tally.sends, &tally.casWins
	for received.Load() < sends.Load() {
		select {
		case err := <-recvDone:
			t.Fatalf("receiver stopped after %d of %d: %v", received.Load(), sends.Load(), err)
		case <-ctx.Done():
			t.Fatalf("%d of %d messages arrived", received.Load(), sends.Load())
		case <-time.After(time.Millisecond):
		}
	}
	checkMixedCounters(t, remote.Bytes()[goroutines*mixedSlot:], goroutines, &tally)
	if received.Load() != sends.Load() {
		t.Errorf("received %d messages, sent %d", received.Load(), sends.Load())
	}
	for role, ep := range map[string]*runtime.Endpoint{"client": cli, "server": srv} {
		// The receiver's credit-only messages may still be in flight.
		for deadline := time.Now().Add(10 * time.Second); ep.Actor().Outstanding() > 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		st := ep.Actor().Stats()
		if st.Stale.Load() != 0 || ep.Actor().Outstanding() != 0 {
			t.Errorf("%s QP %#x: %d stale completions, %d outstanding (%s)", role, ep.QPN(), st.Stale.Load(), ep.Actor().Outstanding(), runtime.StuckSendsForTest(ep))
		}
	}
	st := cli.Actor().Stats()
	doorbells, _ := verbs.PostCalls(cli.QP())
	t.Logf("%d ops by %d goroutines: %d PostSend calls (%d provider post calls) for %d WRs (%.1f WRs per call), %d messages, %d CAS wins",
		goroutines*ops, goroutines, st.PostCalls.Load(), doorbells, st.WRsPosted.Load(),
		float64(st.WRsPosted.Load())/float64(st.PostCalls.Load()), received.Load(), casWins.Load())
}

// mixedSlot is each goroutine's part of the server's memory; the counters
// follow the goroutines' slots: the fetch-add counter, then the CAS
// counters.
const mixedSlot = 64

// mixedTally is what the client of the mixed workload saw succeed.
type mixedTally struct {
	sends, faaTotal, casWins atomic.Int64
}

// runMixed runs the client side of the mixed workload from cli into the
// server's memory at remote (goroutines*mixedSlot bytes, then 8 bytes of
// fetch-add counter and 8 per CAS counter) and at the server's receives,
// adding to tally what succeeded; it fails t at the first error.
func runMixed(t *testing.T, ctx context.Context, rtCli *runtime.Runtime, cli *runtime.Endpoint,
	remote runtime.RemoteRef, goroutines, ops int, tally *mixedTally) {
	t.Helper()
	const slot = mixedSlot
	casCounters := min(goroutines, 32)
	counters := remote.At(goroutines * slot)
	faaRef, casBase := counters, counters.At(8)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local, err := rtCli.Alloc(2 * slot)
			if err != nil {
				errs <- err
				return
			}
			defer local.Free()
			mine := remote.At(g * slot)
			casRef := casBase.At(8 * (g % casCounters))
			for i := range ops {
				var err error
				switch i % 5 {
				case 0: // write a pattern, read it back
					p := local.Bytes()[:slot]
					for k := range p {
						p[k] = byte(g + i + k)
					}
					if _, err = cli.Write(ctx, local.Slice(0, slot), mine).Wait(ctx); err == nil {
						_, err = cli.Read(ctx, local.Slice(slot, slot), mine).Wait(ctx)
						if err == nil && !bytes.Equal(local.Bytes()[slot:2*slot], p) {
							err = fmt.Errorf("read back differs")
						}
					}
				case 1, 3:
					m := local.Bytes()[:16]
					for k := range m {
						m[k] = byte(g)
					}
					if _, err = cli.Send(ctx, local.Slice(0, 16)).Wait(ctx); err == nil {
						tally.sends.Inc()
					}
				case 2:
					if _, err = cli.FetchAdd(ctx, faaRef, uint64(g+1)).Wait(ctx); err == nil {
						tally.faaTotal.Add(int64(g + 1))
					}
				case 4:
					// Read the counter with a CAS that cannot match, then
					// try to increment it.
					var c runtime.Completion
					if c, err = cli.CompareAndSwap(ctx, casRef, ^uint64(0), 0).Wait(ctx); err == nil {
						old := c.Value
						if c, err = cli.CompareAndSwap(ctx, casRef, old, old+1).Wait(ctx); err == nil && c.Value == old {
							tally.casWins.Inc()
						}
					}
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d op %d: %w", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// receiveMixed is the server side of the mixed workload: it receives the
// client's 16-byte messages (each one byte repeated) until Recv fails,
// counting them in received; a message for which other (when not nil)
// returns true is the caller's and not counted.
func receiveMixed(ctx context.Context, srv *runtime.Endpoint, received *atomic.Int64, other func([]byte) bool) error {
	for {
		m, err := srv.Recv(ctx)
		if err != nil {
			return err
		}
		b := m.Bytes()
		if other != nil && other(b) {
			m.Release()
			continue
		}
		if len(b) != 16 || !bytes.Equal(b[1:], bytes.Repeat([]byte{b[0]}, 15)) {
			m.Release()
			return fmt.Errorf("message %x corrupt", b)
		}
		m.Release()
		received.Inc()
	}
}

// mixedCounterBytes is the size of the counters after the goroutines'
// slots: the fetch-add counter and up to 32 CAS counters.
const mixedCounterBytes = 8 + 8*32

// checkMixedCounters checks the server's counters, as read from its
// memory, against what the client saw succeed.
func checkMixedCounters(t *testing.T, counters []byte, goroutines int, tally *mixedTally) {
	t.Helper()
	if got := binary.LittleEndian.Uint64(counters); int64(got) != tally.faaTotal.Load() {
		t.Errorf("fetch-add counter %d, want %d", got, tally.faaTotal.Load())
	}
	var casSum uint64
	for k := range min(goroutines, 32) {
		casSum += binary.LittleEndian.Uint64(counters[8+8*k:])
	}
	if int64(casSum) != tally.casWins.Load() {
		t.Errorf("CAS counters sum to %d, %d CAS succeeded", casSum, tally.casWins.Load())
	}
}
