package bench

import (
	"context"
	"testing"

	vrt "github.com/verbsrt/verbsrt/runtime"
)

// callerThreadVariants are the runtime's options that move work onto the
// caller's goroutine, each alone, both (the default) and neither (issue
// 13): the post of an operation that finds its actor idle
// (Tuning.NoInlinePost unset), the handling of the completion a waiter waits for
// (Tuning.WaitPoll).
var callerThreadVariants = []struct {
	name string
	opts []vrt.Option
}{
	{"actor-only", actorOnlyOpts},
	{"inline-post", []vrt.Option{vrt.WithTuning(vrt.Tuning{NoWaitPoll: true})}},
	{"wait-poll", []vrt.Option{vrt.WithTuning(vrt.Tuning{NoInlinePost: true, WaitPoll: waitPoll})}},
	{defaultVariant, callerThreadOpts},
}

// defaultVariant is the runtime's default among callerThreadVariants.
const defaultVariant = "inline-post+wait-poll"

// waitPoll is how long the variants' waiters poll (Tuning.WaitPoll).
var waitPoll = vrt.DefaultTuning().WaitPoll

var callerThreadOpts = []vrt.Option{vrt.WithTuning(vrt.Tuning{WaitPoll: waitPoll})}

// actorOnlyOpts turn the caller-thread options off: posting only on the
// actor's goroutine, completions only on the poller's and the actor's.
var actorOnlyOpts = []vrt.Option{vrt.WithTuning(vrt.Tuning{NoInlinePost: true, NoWaitPoll: true})}

// BenchmarkPingPong measures a request/response round trip of 64-byte
// messages through Send and Recv, one op being one round trip: the client
// Sends and waits for the future, then Recvs the reply; a goroutine on the
// other endpoint Recvs each request and Sends it back. It is
// ib_send_lat's exchange (request/response) on soft, for
// each of callerThreadVariants.
func BenchmarkPingPong(b *testing.B) {
	for _, v := range callerThreadVariants {
		b.Run("size=64/"+v.name, func(b *testing.B) {
			p := newPingPong(b, 64, v.opts...)
			b.ReportAllocs()
			ctx := context.Background()
			before := p.rt.Stats()
			b.ResetTimer()
			for range b.N {
				if err := p.roundTrip(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			after := p.rt.Stats()
			b.ReportMetric(float64(after.ActorRuns-before.ActorRuns)/float64(b.N), "runs/op")
			b.ReportMetric(float64(after.InlineRuns-before.InlineRuns)/float64(b.N), "inline/op")
		})
	}
}

// pingPong is a runtime on its own soft provider with two connected
// endpoints: the client's round trips, and an echo goroutine on the
// server's end.
type pingPong struct {
	rt  *vrt.Runtime
	cli *vrt.Endpoint
	msg vrt.Local
}

func newPingPong(tb testing.TB, size int, opts ...vrt.Option) *pingPong {
	tb.Helper()
	rt := softRuntime(tb, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	echoed := make(chan error, 1)
	tb.Cleanup(func() {
		cancel() // stops the echo before its endpoint closes
		if err := <-echoed; err != nil && ctx.Err() == nil {
			tb.Errorf("echo: %v", err)
		}
	})
	cli, srv := connectPair(tb, rt)
	bufs, err := rt.Alloc(2 * size)
	if err != nil {
		tb.Fatal(err)
	}
	reply, replyBytes := bufs.Slice(size, size), bufs.Bytes()[size:]
	go func() { echoed <- echo(ctx, srv, reply, replyBytes) }()
	return &pingPong{rt: rt, cli: cli, msg: bufs.Slice(0, size)}
}

// echo answers each message srv receives with reply, until ctx ends or
// the endpoint fails, and returns why it stopped. replyBytes, the reply's
// memory, takes each message's bytes first; nil sends reply as it is.
func echo(ctx context.Context, srv *vrt.Endpoint, reply vrt.Local, replyBytes []byte) error {
	for {
		m, err := srv.Recv(ctx)
		if err != nil {
			return err
		}
		copy(replyBytes, m.Bytes())
		m.Release()
		if _, err := srv.Send(ctx, reply).Wait(ctx); err != nil {
			return err
		}
	}
}

// roundTrip sends one request and receives its reply.
func (p *pingPong) roundTrip(ctx context.Context) error {
	if _, err := p.cli.Send(ctx, p.msg).Wait(ctx); err != nil {
		return err
	}
	m, err := p.cli.Recv(ctx)
	if err != nil {
		return err
	}
	m.Release()
	return nil
}
