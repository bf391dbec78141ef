package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	vrt "github.com/verbsrt/verbsrt/runtime"
)

// BenchmarkSend measures messages through the runtime on the soft
// provider, one op being one Send whose future resolved: N callers each
// send a message from a slot of their own and wait for it, while one
// goroutine on the other end receives and releases every message. The
// sends are flow-controlled by the receiver's credits, so the run also
// carries the credit reports going back. size=64 is the small-message
// case where anything the runtime adds per message shows; size=4096 the
// default largest message. The callerThreadVariants other than the
// default run at size=64 beside it. pipelined/size=64/callers=1 is one
// goroutine keeping 128 sends in flight, waiting for the oldest before it
// issues the next, and direct/size=64/callers=1 its Go floor (directSend).
func BenchmarkSend(b *testing.B) {
	for _, size := range []int{64, 4096} {
		for _, v := range callerThreadVariants {
			if v.name != defaultVariant && size != 64 {
				continue
			}
			prefix := ""
			if v.name != defaultVariant {
				prefix = v.name + "/"
			}
			for _, n := range []int{1, 16} {
				b.Run(fmt.Sprintf("%ssize=%d/callers=%d", prefix, size, n), func(b *testing.B) {
					s := newSendPair(b, n, size, v.opts...)
					b.ReportAllocs()
					before := s.stats()
					if err := drive(b, n, b.N, s.send); err != nil {
						b.Fatal(err)
					}
					report(b, s.stats().sub(before))
				})
			}
		}
	}
	for _, v := range pipelineModes {
		b.Run(v.prefix+"pipelined/size=64/callers=1", func(b *testing.B) {
			depth := pipelineDepths[0]
			s := newSendPair(b, depth, 64, v.opts...)
			timedRun(b, s.stats, func() error { return s.pipeline(b.N, depth) })
		})
	}
	b.Run("direct/size=64/callers=1", func(b *testing.B) {
		d := newDirectSend(b)
		timedRun(b, d.stats, func() error { return d.run(b.N) })
	})
}

// sendPair is a runtime on its own soft provider with two connected
// endpoints: callers send from cli's slots, a goroutine receives on srv.
type sendPair struct {
	rt     *vrt.Runtime
	cli    *vrt.Endpoint
	locals []vrt.Local
}

func newSendPair(tb testing.TB, callers, size int, opts ...vrt.Option) *sendPair {
	tb.Helper()
	rt := softRuntime(tb, append(runtimeOpts(), opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	received := make(chan struct{})
	tb.Cleanup(func() {
		cancel() // stops the receiver before its endpoint closes
		<-received
	})
	cli, srv := connectPair(tb, rt)
	s := &sendPair{rt: rt, cli: cli}
	go func() {
		defer close(received)
		for {
			m, err := srv.Recv(ctx)
			if err != nil {
				return
			}
			m.Release()
		}
	}()
	src, err := rt.Alloc(callers * size)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range callers {
		s.locals = append(s.locals, src.Slice(i*size, size))
	}
	return s
}

// connectPair returns two connected endpoints of rt, the dialing and the
// accepting end.
func connectPair(tb testing.TB, rt *vrt.Runtime) (cli, srv *vrt.Endpoint) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if cli, srv, err = vrt.Pipe(ctx, rt, rt); err != nil {
		tb.Fatal(err)
	}
	return cli, srv
}

// send sends the caller's slot as one message and waits for its future.
func (s *sendPair) send(ctx context.Context, caller int) error {
	if _, err := s.cli.Send(ctx, s.locals[caller]).Wait(ctx); err != nil {
		st := s.cli.Stats()
		return fmt.Errorf("send: %w (endpoint: %d PostSends, %d WRs posted, %d outstanding, %d peer credits)",
			err, st.PostCalls, sum(st.WRsPosted[:]), st.InflightWRs, st.RecvCredits)
	}
	return nil
}

// pipeline sends ops messages from one goroutine with up to depth of
// them in flight (pipelined).
func (s *sendPair) pipeline(ops, depth int) error {
	return pipelined(ops, depth, "send", func(ctx context.Context, slot int) vrt.Future {
		return s.cli.Send(ctx, s.locals[slot])
	})
}

func (s *sendPair) stats() postStats {
	st := s.cli.Stats()
	return postStats{calls: st.PostCalls, wrs: sum(st.WRsPosted[:]), runs: s.rt.Stats().ActorRuns}
}
