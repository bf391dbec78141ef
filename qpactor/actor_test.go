package qpactor_test

import (
	"context"
	"errors"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/internal/wrid"
	"github.com/verbsrt/verbsrt/qpactor"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// rig is an actor over an RC QP connected to a peer QP on another soft
// device, with a goroutine-free poll loop the test drives itself.
type rig struct {
	actor *qpactor.Actor
	qp    verbs.QP
	cq    verbs.CQ
	local verbs.MR
	peer  verbs.MR
}

func newRig(t *testing.T, sqDepth int, configure ...func(*qpactor.Config)) *rig {
	t.Helper()
	p := soft.New(soft.Config{Devices: 2})
	devs, _ := p.Devices()
	arena, err := verbs.NewArena(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); arena.Close() })
	mem := arena.Bytes()
	type end struct {
		qp verbs.QP
		cq verbs.CQ
		mr verbs.MR
		pi verbs.PeerInfo
	}
	mk := func(d verbs.Device, buf []byte) end {
		c, _ := d.Open()
		pd, _ := c.AllocPD()
		cq, _ := c.CreateCQ(verbs.CQSpec{CQE: 4096})
		qp, err := pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Caps: verbs.QPCaps{MaxSendWR: sqDepth, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		mr, _ := pd.RegMR(buf, verbs.AccessAllRemote)
		gid, _ := c.QueryGID(1, 1)
		return end{qp, cq, mr, verbs.PeerInfo{QPN: qp.QPN(), GID: gid}}
	}
	a, b := mk(devs[0], mem[:512<<10]), mk(devs[1], mem[512<<10:])
	spec := verbs.ConnectSpec{GIDIndex: 1}
	if err := verbs.Connect(a.qp, spec, b.pi); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(b.qp, spec, a.pi); err != nil {
		t.Fatal(err)
	}
	attr, _ := a.qp.Query()
	scratch := a.mr.Bytes()[:qpactor.ScratchSize(attr.Cap.MaxSendWR)]
	cfg := qpactor.Config{QP: a.qp, ID: 7,
		Scratch: qpactor.Scratch{Bytes: scratch, Addr: a.mr.Addr(), LKey: a.mr.LKey()}}
	for _, c := range configure {
		c(&cfg)
	}
	act, err := qpactor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { act.Close(context.Background()) })
	return &rig{actor: act, qp: a.qp, cq: a.cq, local: a.mr, peer: b.mr}
}

// poll hands completions to the actor until every future in fs resolved.
func (r *rig) poll(t *testing.T, fs ...future.Future) {
	t.Helper()
	wcs := make([]verbs.WC, 32)
	deadline := time.Now().Add(10 * time.Second)
	for _, f := range fs {
		for {
			if _, err := future.Result(f, byteLen); !errors.Is(err, future.ErrPending) {
				break
			}
			n, _ := r.cq.Poll(wcs)
			for i := range wcs[:n] {
				r.actor.Complete(&wcs[i])
			}
			r.actor.Polled()
			if time.Now().After(deadline) {
				t.Fatal("a future never resolved")
			}
			if n == 0 {
				backOff()
			}
		}
	}
}

// byteLen reads the bytes a successful operation moved: what the tests
// read of an outcome (future.Wait) when they read no value.
func byteLen(s *future.State) uint32 { return s.ByteLen() }

// backOff is what a test's poll loop does when the CQ is empty: yield, so
// that the actor and the soft device it waits for run even on one P,
// instead of spinning until the scheduler preempts it.
func backOff() { runtime.Gosched() }

func (r *rig) write(i int) qpactor.Op {
	return qpactor.Op{Opcode: verbs.OpWrite,
		Local:  verbs.SGE{Addr: r.local.Addr() + 65536 + uint64(64*i), Length: 64, LKey: r.local.LKey()},
		Remote: verbs.RDMA{RemoteAddr: r.peer.Addr() + uint64(64*i), RKey: r.peer.RKey()}}
}

// TestDoorbellBatching: 64 submissions queued before the actor runs go out
// in one PostSend, with selective signaling.
func TestDoorbellBatching(t *testing.T) {
	r := newRig(t, 256)
	var fs []future.Future
	for i := range 64 {
		op := r.write(i)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	r.actor.Start()
	r.poll(t, fs...)
	for i, f := range fs {
		if _, err := future.Wait(f, context.Background(), byteLen); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	st := r.actor.Stats()
	if st.PostCalls.Load() != 1 || st.WRsPosted.Load() != 64 {
		t.Fatalf("%d PostSend calls for %d WRs, want 1 for 64", st.PostCalls.Load(), st.WRsPosted.Load())
	}
	if r.actor.Outstanding() != 0 {
		t.Fatalf("%d WRs outstanding", r.actor.Outstanding())
	}
}

// TestCreditsBoundOutstanding: with a send queue of 7, no more than 7 WRs
// are ever outstanding; 100 submissions still all complete.
func TestCreditsBoundOutstanding(t *testing.T) {
	r := newRig(t, 4) // granted 7
	r.actor.Start()
	var fs []future.Future
	for i := range 100 {
		op := r.write(i % 64)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
		if o := r.actor.Outstanding(); o > 7 {
			t.Fatalf("%d outstanding with 7 credits", o)
		}
	}
	r.poll(t, fs...)
}

// TestBadOpFailsOnlyItsSubmission: a misaligned atomic fails its own future
// with the rule; the writes around it succeed.
func TestBadOpFailsOnlyItsSubmission(t *testing.T) {
	r := newRig(t, 64)
	op1, op3 := r.write(1), r.write(3)
	bad := qpactor.Op{Opcode: verbs.OpAtomicCmpSwp, Remote: verbs.RDMA{RemoteAddr: r.peer.Addr() + 3, RKey: r.peer.RKey()}}
	f1, _ := r.actor.Submit(context.Background(), &op1)
	f2, _ := r.actor.Submit(context.Background(), &bad)
	f3, _ := r.actor.Submit(context.Background(), &op3)
	r.actor.Start()
	r.poll(t, f1, f2, f3)
	var we *verbs.WRError
	if _, err := future.Wait(f2, context.Background(), byteLen); !errors.As(err, &we) || !errors.Is(err, verbs.ErrInvalidWR) {
		t.Fatalf("bad op: %v", err)
	}
	for _, f := range []future.Future{f1, f3} {
		if _, err := future.Wait(f, context.Background(), byteLen); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSubmitAfterClose(t *testing.T) {
	r := newRig(t, 16)
	r.actor.Start()
	if err := r.actor.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	op := r.write(0)
	if _, err := r.actor.Submit(context.Background(), &op); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("%v", err)
	}
}

// TestClosingActorWaitingForCreditsSleeps: an actor told to Close while a
// submission waits for send-queue credits that do not come back sleeps
// until they do or Close's context ends, instead of spinning through the
// whole wait.
func TestClosingActorWaitingForCreditsSleeps(t *testing.T) {
	r := newRig(t, 4) // granted 7
	r.actor.Start()
	var fs []future.Future
	for i := range 8 { // 7 posted, never polled: no credit comes back; 1 queued
		op := r.write(i)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	time.Sleep(10 * time.Millisecond) // the actor posts 7 and parks
	const wait = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	before := cpuTime(t)
	if err := r.actor.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close: %v, want the context's deadline (credits never came back)", err)
	}
	if used := cpuTime(t) - before; used > wait/3 {
		t.Errorf("the process used %v of CPU while Close waited %v for credits", used, wait)
	}
	if _, err := future.Wait(fs[7], context.Background(), byteLen); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("the queued submission: %v, want ErrClosed", err)
	}
	r.poll(t, fs[:7]...)
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// inline runs Then callbacks on the resolving goroutine, inside Complete.
type inline struct{}

func (inline) Submit(task func()) error { task(); return nil }

// TestOutstandingDropsBeforeFutureResolves: by the time a future resolves,
// its WRs are no longer outstanding: a caller woken by it (or a metrics
// scrape right after) sees the send queue slot free (the in-flight gauge
// read 1 after every future had resolved).
func TestOutstandingDropsBeforeFutureResolves(t *testing.T) {
	r := newRig(t, 4, func(c *qpactor.Config) { c.Executor = inline{} })
	r.actor.Start()
	for i := range 20 {
		op := r.write(i)
		f, err := r.actor.Submit(context.Background(), &op)
		if err != nil {
			t.Fatal(err)
		}
		seen := make(chan int, 1)
		future.Then(f, byteLen, func(_ uint32, err error) {
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
			seen <- r.actor.Outstanding()
		})
		deadline := time.Now().Add(10 * time.Second)
		for {
			if time.Now().After(deadline) {
				t.Fatalf("write %d never resolved", i)
			}
			wcs := make([]verbs.WC, 4)
			n, _ := r.cq.Poll(wcs)
			for j := range wcs[:n] {
				r.actor.Complete(&wcs[j])
			}
			r.actor.Polled()
			select {
			case o := <-seen:
				if o != 0 {
					t.Fatalf("write %d: %d WRs outstanding when its future resolved", i, o)
				}
			default:
				if n == 0 {
					backOff()
				}
				continue
			}
			break
		}
	}
}

func TestNewRefusesWideActorID(t *testing.T) {
	if _, err := qpactor.New(qpactor.Config{ID: wrid.MaxActorID + 1}); err == nil {
		t.Fatal("New took an actor ID that does not fit a wr_id")
	}
}
