package rtbench

import (
	"context"
	"fmt"
	"time"

	vrt "github.com/verbsrt/verbsrt/runtime"
)

// SteadyMix is what each caller of Steady (serve-metrics) issues, in turn: mostly
// WRITEs, as storage traffic is, and every other kind.
var SteadyMix = []string{"write", "write", "write", "write", "read", "send", "atomic", "write"}

// Steady issues SteadyMix on QP q, operations of size bytes, one at a
// time, at its share (one of callers) of rate operations a second (0: as
// fast as they complete), until ctx ends.
func (p *Pair) Steady(ctx context.Context, q, size, callers, rate int) error {
	ops := make([]func() vrt.Future, len(SteadyMix))
	for i, t := range SteadyMix {
		ops[i] = p.op(t, q, size)
	}
	var tick <-chan time.Time
	if rate > 0 {
		every := time.Duration(float64(time.Second) * float64(callers) / float64(rate))
		t := time.NewTicker(max(every, time.Microsecond))
		defer t.Stop()
		tick = t.C
	}
	for i := 0; ; i++ {
		if tick != nil {
			select {
			case <-ctx.Done():
				return nil
			case <-tick:
			}
		} else if ctx.Err() != nil {
			return nil
		}
		if _, err := ops[i%len(ops)]().Wait(context.Background()); err != nil {
			return fmt.Errorf("%s: %w", SteadyMix[i%len(ops)], err)
		}
	}
}
