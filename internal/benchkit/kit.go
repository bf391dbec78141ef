package benchkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"github.com/verbsrt/verbsrt/internal/provider"
	"github.com/verbsrt/verbsrt/runtime"
)

// Connect returns an endpoint pair through ln: cliRT's Dial and ln's
// Accept, within 30 s. When either fails, the other's endpoint is closed.
func Connect(ctx context.Context, cliRT *runtime.Runtime, ln *runtime.Listener) (cli, srv *runtime.Endpoint, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	type accepted struct {
		ep  *runtime.Endpoint
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		ep, err := ln.Accept(ctx)
		ch <- accepted{ep, err}
	}()
	cli, err = cliRT.Dial(ctx, ln.Addr().String())
	if err != nil {
		cancel() // ends the Accept that waits for this Dial
	}
	a := <-ch
	if err != nil {
		if a.err == nil {
			a.ep.Close(ctx)
		}
		return nil, nil, fmt.Errorf("dial: %w", err)
	}
	if a.err != nil {
		cli.Close(ctx)
		return nil, nil, fmt.Errorf("accept: %w", a.err)
	}
	return cli, a.ep, nil
}

// Settle collects garbage twice and returns the memory statistics: the
// first collection runs the cleanups (runtime.AddCleanup) that free what
// the second one then finds unreachable.
func Settle() goruntime.MemStats {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms
}

// Profiles is a CPU profile and an execution trace being written.
type Profiles struct {
	cpu, trace *os.File
}

// StartProfiles writes a CPU profile to the file cpuProfile and an
// execution trace to the file traceFile, each unless its name is empty,
// until Stop.
func StartProfiles(cpuProfile, traceFile string) (*Profiles, error) {
	p := &Profiles{}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		p.cpu = f
	}
	if traceFile != "" {
		f, err := os.Create(traceFile)
		if err == nil {
			if err = trace.Start(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			p.Stop()
			return nil, err
		}
		p.trace = f
	}
	return p, nil
}

// Stop ends what StartProfiles started and closes the files. A nil
// Profiles stops nothing.
func (p *Profiles) Stop() error {
	if p == nil {
		return nil
	}
	var errs []error
	if p.cpu != nil {
		pprof.StopCPUProfile()
		errs = append(errs, p.cpu.Close())
		p.cpu = nil
	}
	if p.trace != nil {
		trace.Stop()
		errs = append(errs, p.trace.Close())
		p.trace = nil
	}
	return errors.Join(errs...)
}

// OpenRuntime opens a runtime on the provider called name: "soft" (the
// runtime's default, one soft fabric that the runtimes of this process
// share, so that they reach each other), or "ibv" (provider.Open) on the
// device dev, or when dev is "" on the nth of its devices, counted round
// (on a host with one, always that one), from the last when nth < 0 (-1:
// the last).
func OpenRuntime(name, dev string, nth int, opts ...runtime.Option) (*runtime.Runtime, error) {
	switch name {
	case "soft":
		return runtime.New(opts...)
	case "ibv":
	default:
		return nil, fmt.Errorf("provider %q: want soft or ibv", name)
	}
	p, _, err := provider.Open(provider.Spec{Name: name}, 1) // ibv holds nothing to release
	if err != nil {
		return nil, err
	}
	if dev == "" {
		devs, err := p.Devices()
		if err != nil || len(devs) == 0 {
			return nil, fmt.Errorf("no RDMA device: %v", err)
		}
		i := nth % len(devs)
		if i < 0 {
			i += len(devs)
		}
		dev = devs[i].Name()
	}
	return runtime.New(append([]runtime.Option{runtime.WithProvider(p), runtime.WithDevice(dev)}, opts...)...)
}

// CPUPerOp returns the CPU time, user and system, in ns, that the process
// used since start (a CPUTime reading) per operation of ops; false where
// getrusage is not available or there were no operations.
func CPUPerOp(start time.Duration, ops uint64) (float64, bool) {
	now := CPUTime()
	if start < 0 || now < 0 || ops == 0 {
		return 0, false
	}
	return float64(now-start) / float64(ops), true
}
