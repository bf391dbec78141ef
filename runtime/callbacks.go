package runtime

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/panjf2000/ants/v2"
)

// callbackRunner runs Then callbacks: on the worker pool while it has a
// free worker, else in order on one overflow goroutine, so neither a burst
// of callbacks nor slow ones start more than poolSize+1 goroutines, and the
// poller resolving a future never blocks on a full pool. The overflow
// queue holds at most one callback per future with a Then, each allocated
// by the caller already: overload shows as callback latency, never as
// goroutines or as a stalled poller.
type callbackRunner struct {
	pool *ants.Pool
	log  *slog.Logger

	mu       sync.Mutex
	queue    []func()
	draining bool // the overflow goroutine runs
	closed   bool
	done     sync.WaitGroup
}

func newCallbackRunner(size int, log *slog.Logger) (*callbackRunner, error) {
	c := &callbackRunner{log: log}
	var err error
	c.pool, err = ants.NewPool(size, ants.WithNonblocking(true),
		ants.WithPanicHandler(c.panicked), ants.WithLogger(slogAnts{log}))
	return c, err
}

func (c *callbackRunner) panicked(p any) {
	c.log.Error("verbsrt: Then callback panicked", "panic", p)
}

// Submit runs task on a pool worker, or queues it for the overflow
// goroutine; it fails only once the runner is closed.
func (c *callbackRunner) Submit(task func()) error {
	err := c.pool.Submit(task)
	if err == nil || !errors.Is(err, ants.ErrPoolOverload) {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.queue = append(c.queue, task)
	if !c.draining {
		c.draining = true
		c.done.Add(1)
		go c.drainOverflow()
	}
	return nil
}

// drainOverflow runs the queued callbacks one after another and exits
// when the queue is empty.
func (c *callbackRunner) drainOverflow() {
	defer c.done.Done()
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.draining = false
			c.queue = nil // the backing array of a burst goes too
			c.mu.Unlock()
			return
		}
		task := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		c.mu.Unlock()
		c.run(task)
	}
}

func (c *callbackRunner) run(task func()) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked(p)
		}
	}()
	task()
}

// close stops taking callbacks and waits, up to timeout each, for the
// overflow queue to empty and for the pool's running callbacks; a callback
// stuck past that is logged, not waited for.
func (c *callbackRunner) close(timeout time.Duration) {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	drained := make(chan struct{})
	go func() { c.done.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(timeout):
		c.log.Warn("verbsrt: Then callbacks still queued at Close", "timeout", timeout)
	}
	if err := c.pool.ReleaseTimeout(timeout); err != nil {
		c.log.Warn("verbsrt: worker pool did not stop", "err", err)
	}
}
