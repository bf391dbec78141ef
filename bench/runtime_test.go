package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	vrt "github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// runtimeOpts are the runtime settings the benchmarks run with: the send
// queue of the other variants, and otherwise the defaults, what a user
// gets.
func runtimeOpts() []vrt.Option {
	return []vrt.Option{vrt.WithSendQueueDepth(sqDepth)}
}

// viaRuntime is a runtime on its own soft provider with two connected
// endpoints; callers write from cli's slots into srv's memory.
type viaRuntime struct {
	rt      *vrt.Runtime
	cli     *vrt.Endpoint
	src     *vrt.Buffer // the callers' 64-byte slots, one each
	dst     *vrt.Buffer // their targets, on the server's side
	locals  []vrt.Local
	remotes []vrt.RemoteRef
}

// softRuntime returns a runtime on a soft provider of its own, with one
// device; tb's cleanup closes both, after the cleanups registered later.
func softRuntime(tb testing.TB, opts ...vrt.Option) *vrt.Runtime {
	tb.Helper()
	prov := soft.New(soft.Config{Devices: 1})
	tb.Cleanup(func() { prov.Close() })
	rt, err := vrt.New(append([]vrt.Option{vrt.WithProvider(prov)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			tb.Errorf("runtime Close: %v", err)
		}
	})
	return rt
}

func newViaRuntime(tb testing.TB, slots int, opts ...vrt.Option) *viaRuntime {
	tb.Helper()
	rt := softRuntime(tb, opts...)
	v := &viaRuntime{rt: rt}
	v.cli = v.connect(tb)
	var err error
	if v.src, err = rt.Alloc(slots * opSize); err != nil {
		tb.Fatal(err)
	}
	if v.dst, err = rt.Alloc(slots * opSize); err != nil {
		tb.Fatal(err)
	}
	exp, err := v.dst.Expose(vrt.RemoteRead | vrt.RemoteWrite)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range slots {
		v.locals = append(v.locals, v.src.Slice(i*opSize, opSize))
		v.remotes = append(v.remotes, exp.RemoteRef().Slice(i*opSize, opSize))
	}
	return v
}

// connect returns the dialing end of a connection made through the
// runtime's own listener; the accepting end stays open until the runtime
// closes.
func (v *viaRuntime) connect(tb testing.TB) *vrt.Endpoint {
	tb.Helper()
	cli, _ := connectPair(tb, v.rt)
	return cli
}

// write copies slot's 64 bytes to the server and waits for the future.
// Only a stall cancels ctx: the error then says whether the actor posted
// the write.
func (v *viaRuntime) write(ctx context.Context, slot int) error {
	_, err := v.cli.Write(ctx, v.locals[slot], v.remotes[slot]).Wait(ctx)
	if err != nil {
		st := v.cli.Stats()
		return fmt.Errorf("write: %w (endpoint: %d PostSends, %d WRs posted, %d outstanding)",
			err, st.PostCalls, sum(st.WRsPosted[:]), st.InflightWRs)
	}
	return nil
}

// stats returns the endpoint actor's doorbells and WRs so far.
func (v *viaRuntime) stats() postStats {
	s := v.cli.Stats()
	return postStats{calls: s.PostCalls, wrs: sum(s.WRsPosted[:]), runs: v.rt.Stats().ActorRuns}
}

// sum adds counters up.
func sum(counts []uint64) uint64 {
	var n uint64
	for _, c := range counts {
		n += c
	}
	return n
}

// pipelineDepths are how many writes the pipelined variants keep in
// flight: a deep pipeline of 128, and a short one.
var pipelineDepths = []int{128, 8}

// pipeline issues ops writes from one goroutine with up to depth of them
// in flight (pipelined).
func (v *viaRuntime) pipeline(ops, depth int) error {
	return pipelined(ops, depth, "write", func(ctx context.Context, slot int) vrt.Future {
		return v.cli.Write(ctx, v.locals[slot], v.remotes[slot])
	})
}

// postBatch is how many writes the pipelined-post variant gives each
// Post.
const postBatch = 16

// pipelinePosts issues ops writes from one goroutine as Posts of up to
// postBatch writes, one future each, with up to depth writes in flight
// (pipelined-post).
func (v *viaRuntime) pipelinePosts(ops, depth int) error {
	batches := make([][]vrt.Op, depth/postBatch)
	for i := range batches {
		batches[i] = make([]vrt.Op, postBatch)
		for j := range batches[i] {
			k := i*postBatch + j
			batches[i][j] = vrt.Op{Opcode: verbs.OpWrite, Local: []vrt.Local{v.locals[k]}, Remote: v.remotes[k]}
		}
	}
	left := ops
	return pipelined((ops+postBatch-1)/postBatch, len(batches), "post", func(ctx context.Context, slot int) vrt.Future {
		n := min(left, postBatch)
		left -= n
		return v.cli.Post(ctx, batches[slot][:n])
	})
}

// pipelined issues ops operations from one goroutine with up to depth of
// them in flight, slot i%depth's operation (issue) waiting for that
// slot's previous one, and returns once all have completed.
func pipelined(ops, depth int, what string, issue func(ctx context.Context, slot int) vrt.Future) error {
	// Generous: an operation on soft completes far sooner than 10 µs, so
	// a run past this lost one.
	ctx, cancel := context.WithTimeout(context.Background(), stallLimit+time.Duration(ops)*10*time.Microsecond)
	defer cancel()
	inflight := make([]vrt.Future, depth)
	for i := range ops + depth {
		slot := i % depth
		if i >= depth {
			if _, err := inflight[slot].Wait(ctx); err != nil {
				return fmt.Errorf("pipelined %s %d: %w", what, i-depth, err)
			}
		}
		if i < ops {
			inflight[slot] = issue(ctx, slot)
		}
	}
	return nil
}

// pipelineModes are the runtimes the pipelined variants run on: the
// default, and the one with the caller-thread options off.
var pipelineModes = []struct {
	prefix string
	opts   []vrt.Option
}{{"", nil}, {"actor-only-", actorOnlyOpts}}

// timedRun runs one measured section, run, and reports the doorbells
// that stats counted over it.
func timedRun(b *testing.B, stats func() postStats, run func() error) {
	b.ReportAllocs()
	before := stats()
	stop := timeSection(b)
	if err := run(); err != nil {
		b.Fatal(err)
	}
	stop()
	report(b, stats().sub(before))
}
