//go:build linux && cgo

package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

// The tests in this file run the runtime on the ibv provider, against a
// real RDMA stack: in the rxevm guest (verbs/ibv/rxevm/test-rxe), Soft-RoCE
// with rxe0 and rxe1 on the two ends of a veth wire. Where there is no RDMA
// device they skip.

// ibvHosts returns two runtimes on the ibv provider, one on the first
// device and one on the second (the first again on a host with one).
func ibvHosts(t *testing.T, opts ...runtime.Option) (rtA, rtB *runtime.Runtime) {
	t.Helper()
	p := ibv.New()
	devs, err := p.Devices()
	if err != nil || len(devs) == 0 {
		t.Skipf("no RDMA device (%v): the runtime's ibv tests run in the rxevm guest, verbs/ibv/rxevm/test-rxe", err)
	}
	devB := devs[0]
	if len(devs) > 1 {
		devB = devs[1]
	}
	newRT := func(dev verbs.Device) *runtime.Runtime {
		base := append([]runtime.Option{runtime.WithProvider(p), runtime.WithDevice(dev.Name()),
			runtime.WithMemoryLimit(8 << 20)}, actorOnlyOpts()...)
		rt, err := runtime.New(append(base, opts...)...)
		if err != nil {
			t.Fatalf("runtime.New on %s: %v", dev.Name(), err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := rt.Close(ctx); err != nil {
				t.Errorf("Close of the runtime on %s: %v", dev.Name(), err)
			}
		})
		return rt
	}
	return newRT(devs[0]), newRT(devB)
}

// ibvPair returns ibvHosts' two runtimes and an endpoint of each connected
// to the other: cli on A, srv on B.
func ibvPair(t *testing.T, opts ...runtime.Option) (rtA, rtB *runtime.Runtime, cli, srv *runtime.Endpoint) {
	t.Helper()
	rtA, rtB = ibvHosts(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, srv, err := runtime.Pipe(ctx, rtA, rtB)
	if err != nil {
		t.Fatalf("Pipe: %v", err)
	}
	t.Logf("QP %#x on %s <-> QP %#x on %s", cli.QPN(), rtA.Stats().Device, srv.QPN(), rtB.Stats().Device)
	return rtA, rtB, cli, srv
}

// TestIBVExposureIsEnforcedByTheDevice is TestExposureIsEnforcedByTheDevice
// on rxe: the device, not the runtime, refuses each access outside an
// exposure.
func TestIBVExposureIsEnforcedByTheDevice(t *testing.T) {
	rtA, rtB := ibvHosts(t)
	testExposureEnforced(t, ibvCtx(t), rtA, rtB)
}

// TestIBVRevokedKeyStopsWorking is TestRevokedKeyStopsWorking on rxe.
func TestIBVRevokedKeyStopsWorking(t *testing.T) {
	rtA, rtB := ibvHosts(t)
	testRevokedKey(t, ibvCtx(t), rtA, rtB)
}

// ibvCtx bounds a test's waits: Soft-RoCE under emulation is slow.
func ibvCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// postCalls returns both doorbell counters: the provider's ibv_post_send
// calls and the actor's PostSend calls.
func postCalls(t *testing.T, ep *runtime.Endpoint) (provider, actor uint64) {
	t.Helper()
	n, ok := verbs.PostCalls(ep.QP())
	if !ok {
		t.Fatal("the ibv QP does not count its ibv_post_send calls")
	}
	return n, ep.Actor().Stats().PostCalls.Load()
}

// TestIBVExactlyOnce is TestExactlyOnceUnderLoad scaled down for
// emulated Soft-RoCE and across two devices: 16 goroutines issue mixed
// operations (write then read back, send, CAS, FAA) from A into B's
// memory. Every future resolves once with success; memory, counters and
// messages add up; no completion is stale and nothing stays outstanding.
func TestIBVExactlyOnce(t *testing.T) {
	ops := 200
	if testing.Short() {
		ops = 50
	}
	rtA, rtB, cli, srv := ibvPair(t, runtime.WithRecvDepth(64))
	mixedLoad(t, ibvCtx(t), rtA, rtB, cli, srv, 16, ops)
}

// TestIBVRemoteAccessErrorFlushesLaterOps: a write with a bad rkey in the
// middle of a stream fails with REM_ACCESS_ERR; the writes behind it fail
// with WR_FLUSH_ERR; those before it succeed. rxe moves both QPs to ERR
// and raises no asynchronous event (rxevm SEMANTICS 2-3a, 9c).
func TestIBVRemoteAccessErrorFlushesLaterOps(t *testing.T) {
	rtA, rtB, cli, _ := ibvPair(t)
	ctx := ibvCtx(t)
	local, remote := alloc(t, rtA, 4096), alloc(t, rtB, 4096)
	for i := range local.Bytes() {
		local.Bytes()[i] = byte(i)
	}
	var fs []runtime.Future
	for i := range 30 {
		ref := refOf(t, remote).At(8 * i)
		if i == 10 {
			ref.RKey ^= 0xff00 // a key the peer never issued
		}
		fs = append(fs, cli.Write(ctx, local.Slice(8*i, 8), ref))
	}
	for i, f := range fs {
		_, err := f.Wait(ctx)
		var wce *verbs.WCError
		switch {
		case i < 10 && err != nil:
			t.Errorf("write %d before the bad one: %v", i, err)
		case i == 10 && (!errors.Is(err, verbs.ErrRemoteAccess) || !errors.As(err, &wce)):
			t.Errorf("bad write: %v, want a *verbs.WCError for REM_ACCESS_ERR", err)
		case i > 10 && !errors.Is(err, verbs.ErrFlushed) && !errors.Is(err, runtime.ErrConnFailed):
			// Posted before the failure: flushed by the device; still
			// queued (nothing holds the stream here): refused at once.
			t.Errorf("write %d after the bad one: %v, want a flush or ErrConnFailed", i, err)
		}
	}
	if got, want := remote.Bytes()[:80], local.Bytes()[:80]; !bytes.Equal(got, want) {
		t.Errorf("the 10 good writes left %x, want %x", got, want)
	}
	if got := remote.Bytes()[80:88]; !bytes.Equal(got, make([]byte, 8)) {
		t.Errorf("the bad write changed the memory it did not address: %x", got)
	}
	// The connection is gone (both QPs in ERR): the endpoint says so, and
	// later operations fail with the same.
	<-cli.Done()
	if err := cli.Err(); !errors.Is(err, runtime.ErrConnFailed) || !errors.Is(err, verbs.ErrRemoteAccess) {
		t.Errorf("Err: %v, want ErrConnFailed with the REM_ACCESS_ERR that caused it", err)
	}
	if _, err := cli.Write(ctx, local.Slice(0, 8), refOf(t, remote)).Wait(ctx); !errors.Is(err, runtime.ErrConnFailed) {
		t.Errorf("write after the error: %v, want ErrConnFailed", err)
	}
}

// TestIBVOneDoorbellPerBatch: 64 writes given to an endpoint as one batch
// reach the device in one ibv_post_send (one doorbell: a write system call
// on rxe), and all land.
func TestIBVOneDoorbellPerBatch(t *testing.T) {
	rtA, rtB, cli, _ := ibvPair(t)
	ctx := ibvCtx(t)
	const n = 64
	local, remote := alloc(t, rtA, 8*n), alloc(t, rtB, 8*n)
	for i := range local.Bytes() {
		local.Bytes()[i] = byte(i*3 + 1)
	}
	ops := make([]runtime.Op, n)
	for i := range ops {
		ref := refOf(t, remote).At(8 * i)
		ops[i] = runtime.Op{Opcode: verbs.OpWrite, Local: []runtime.Local{local.Slice(8*i, 8)},
			Remote: ref}
	}
	dev0, act0 := postCalls(t, cli)
	c, err := cli.Post(ctx, ops).Wait(ctx)
	if err != nil {
		t.Fatalf("Post of %d writes: %v", n, err)
	}
	dev1, act1 := postCalls(t, cli)
	t.Logf("%d WRs: %d ibv_post_send call(s), %d actor PostSend call(s)", c.WRs, dev1-dev0, act1-act0)
	if c.WRs != n || dev1-dev0 != 1 || act1-act0 != 1 {
		t.Errorf("%d WRs took %d ibv_post_send and %d PostSend calls, want %d WRs in 1 and 1", c.WRs, dev1-dev0, act1-act0, n)
	}
	if !bytes.Equal(remote.Bytes(), local.Bytes()) {
		t.Errorf("remote memory after the batch differs")
	}
}

// TestIBVBadInput: work requests that break a rule of ibv_post_send(3) are
// refused by the runtime before ibv_post_send is called; a write whose
// local key is wrong reaches the device and completes with a local error
// (LOC_PROT_ERR by the spec; rxe says LOC_QP_OP_ERR), which its future
// reports as a *verbs.WCError.
func TestIBVBadInput(t *testing.T) {
	rtA, rtB, cli, _ := ibvPair(t)
	ctx := ibvCtx(t)
	local, remote := alloc(t, rtA, 4096), alloc(t, rtB, 4096)
	for _, tc := range []struct {
		name string
		f    func() runtime.Future
		// wrError: refused by ibv_post_send(3)'s rules (a *verbs.WRError);
		// else by the runtime's own (an error matching
		// verbs.ErrInvalidArgument), such as an atomic's alignment.
		wrError bool
	}{
		{"misaligned atomic", func() runtime.Future { return cli.FetchAdd(ctx, refOf(t, remote).At(4), 1) }, false},
		{"inline READ", func() runtime.Future {
			ref := refOf(t, remote)
			return cli.Post(ctx, []runtime.Op{{Opcode: verbs.OpRead, Flags: verbs.SendInline,
				Local: []runtime.Local{local.Slice(0, 8)}, Remote: ref}})
		}, true},
		{"batch with a misaligned atomic", func() runtime.Future {
			ref := refOf(t, remote)
			return cli.Post(ctx, []runtime.Op{
				{Opcode: verbs.OpWrite, Local: []runtime.Local{local.Slice(0, 8)}, Remote: ref},
				{Opcode: verbs.OpAtomicCmpSwp, Remote: ref.At(12)},
			})
		}, false},
	} {
		dev0, act0 := postCalls(t, cli)
		_, err := tc.f().Wait(ctx)
		var we *verbs.WRError
		if tc.wrError && (!errors.As(err, &we) || !errors.Is(err, verbs.ErrInvalidWR)) {
			t.Errorf("%s: %v, want a *verbs.WRError", tc.name, err)
		} else if !tc.wrError && !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want an error matching verbs.ErrInvalidArgument", tc.name, err)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
		if dev1, act1 := postCalls(t, cli); dev1 != dev0 || act1 != act0 {
			t.Errorf("%s: %d ibv_post_send and %d PostSend calls, want none", tc.name, dev1-dev0, act1-act0)
		}
	}
	// The endpoint still works.
	if _, err := cli.Write(ctx, local.Slice(0, 8), refOf(t, remote)).Wait(ctx); err != nil {
		t.Fatalf("write after the refused ones: %v", err)
	}

	dev0, _ := postCalls(t, cli)
	bad := runtime.WithLKey(local.Slice(0, 8), 0x5a5a00) // a key this side never issued
	_, err := cli.Write(ctx, bad, refOf(t, remote)).Wait(ctx)
	var wce *verbs.WCError
	if !errors.As(err, &wce) || (wce.Status != verbs.WCLocProtErr && wce.Status != verbs.WCLocQPOpErr) ||
		!errors.Is(err, verbs.ErrQPError) {
		t.Fatalf("write with a bad lkey: %v, want a *verbs.WCError with LOC_PROT_ERR or LOC_QP_OP_ERR", err)
	}
	t.Logf("bad lkey: %v", err)
	if dev1, _ := postCalls(t, cli); dev1 != dev0+1 {
		t.Errorf("the bad-lkey write took %d ibv_post_send calls, want 1 (the device finds the key bad)", dev1-dev0)
	}
}

// TestIBVSendImmArrivesWhole is TestSendImmArrivesWhole between two devices:
// the immediate data of SEND_WITH_IMMs arrives whole (bits 31 and 30 too)
// among Sends and WriteImms, with credits reported under load both ways
// and no SEND meeting an empty receive queue (no RNR retry), up to a
// graceful close. rxe gathers each SEND's header and data from two places
// and scatters them into two.
func TestIBVSendImmArrivesWhole(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 60
	}
	rtA, rtB, cli, srv := ibvPair(t, runtime.WithRecvDepth(4), runtime.WithRNRRetry(0))
	immTraffic(t, ibvCtx(t), rtA, rtB, cli, srv, n)
}
