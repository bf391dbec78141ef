package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
)

// maxAttempts bounds the CAS attempts of one update: a client that keeps
// losing a hot slot gives the update up (and counts it) instead of
// spinning on it.
const maxAttempts = 16

// client is one client goroutine with a connection of its own, as a client
// process would have. Its methods other than the Then callback run on the
// goroutine that calls run.
type client struct {
	id   int
	ep   *runtime.Endpoint
	info regionInfo
	cfg  config
	rng  *rand.Rand

	// buf holds cfg.batch slot images for the batched reads, then the
	// image read under a lock, then the image an update writes.
	buf       *runtime.Buffer
	lockedOff int
	valueOff  int

	seen  []uint64 // highest committed version read per slot: reads never go back
	stats stats

	publishing sync.WaitGroup // Then callbacks still to run
	published  atomic.Uint64
	mu         sync.Mutex
	pubErr     error
}

type stats struct {
	reads      uint64 // slot images read in batches
	consistent uint64 // of which showed a committed value
	skipped    uint64 // of which were locked or torn by a concurrent update
	committed  uint64 // CASes won: each commits exactly one increment
	casLost    uint64 // CASes that found another version
	gaveUp     uint64 // updates abandoned after maxAttempts lost CASes
	published  uint64 // versions published, counted by Then callbacks
}

func (s *stats) add(o stats) {
	s.reads += o.reads
	s.consistent += o.consistent
	s.skipped += o.skipped
	s.committed += o.committed
	s.casLost += o.casLost
	s.gaveUp += o.gaveUp
	s.published += o.published
}

// dialClient connects to the server and receives the region info it sends
// to every new connection.
func dialClient(ctx context.Context, rt *runtime.Runtime, addr string, id int, cfg config) (*client, error) {
	ep, err := rt.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("client %d: dial: %w", id, err)
	}
	m, err := ep.Recv(ctx)
	if err != nil {
		return nil, fmt.Errorf("client %d: region info: %w", id, err)
	}
	var info regionInfo
	err = info.UnmarshalBinary(m.Bytes())
	m.Release()
	if err != nil {
		return nil, fmt.Errorf("client %d: %w", id, err)
	}
	if cfg.hot > int(info.Slots) {
		return nil, fmt.Errorf("client %d: %d hot slots, but the server has %d", id, cfg.hot, info.Slots)
	}
	ss := int(info.SlotSize)
	buf, err := rt.Alloc((cfg.batch + 2) * ss)
	if err != nil {
		return nil, err
	}
	return &client{id: id, ep: ep, info: info, cfg: cfg, rng: rand.New(rand.NewPCG(uint64(id), 0x6b76)),
		buf: buf, lockedOff: cfg.batch * ss, valueOff: (cfg.batch + 1) * ss, seen: make([]uint64, info.Slots)}, nil
}

// run plays cfg.rounds rounds of one batch of reads followed by
// cfg.updates updates, then waits for its publications to complete.
func (c *client) run(ctx context.Context) (stats, error) {
	if err := c.rounds(ctx); err != nil {
		return c.stats, err
	}
	done := make(chan struct{})
	go func() { c.publishing.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return c.stats, ctx.Err()
	}
	c.stats.published = c.published.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats, c.pubErr
}

func (c *client) rounds(ctx context.Context) error {
	ss := int(c.info.SlotSize)
	picks := make([]int, c.cfg.batch)
	versions := make([]uint64, c.cfg.batch)
	futs := make([]runtime.Future, c.cfg.batch)
	for range c.cfg.rounds {
		// The slots to update come first, from the hot few that every
		// client fights over; the rest are spread over the region.
		for i := range picks {
			if i < c.cfg.updates {
				picks[i] = c.rng.IntN(c.cfg.hot)
			} else {
				picks[i] = c.rng.IntN(int(c.info.Slots))
			}
		}
		// Issue the whole batch, then wait for all of it: the reads are in
		// flight together, and the endpoint's actor chains what it finds
		// queued into one PostSend.
		for i, s := range picks {
			futs[i] = c.ep.Read(ctx, c.buf.Slice(i*ss, ss), c.info.slot(s))
		}
		if err := waitAll(ctx, futs); err != nil {
			return fmt.Errorf("client %d: read: %w", c.id, err)
		}
		for i, s := range picks {
			v, _, err := checkSlot(c.buf.Bytes()[i*ss:(i+1)*ss], s)
			versions[i] = v
			c.stats.reads++
			if err != nil {
				// Locked, or torn: a READ is not atomic, and an update
				// may have changed the slot while it ran. A reader that
				// needs the value reads again; this one moves on.
				c.stats.skipped++
				continue
			}
			if v < c.seen[s] {
				return fmt.Errorf("client %d: slot %d went back from version %d to %d", c.id, s, c.seen[s], v)
			}
			c.seen[s] = v
			c.stats.consistent++
		}
		for i := range c.cfg.updates {
			// The batch may be older than this client's own last commit
			// of the slot (hot slots come up often): start from the newer.
			s := picks[i]
			if err := c.update(ctx, s, max(versions[i], c.seen[s])); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitAll waits for every future and returns the first error. Each future
// is consumed, whatever happens to the others.
func waitAll(ctx context.Context, futs []runtime.Future) error {
	var first error
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			f.Release() // still pending if ctx ended; a no-op otherwise
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// update increments the counter of slot s, whose version a read found to
// be v, under a lock taken with CAS on the version word:
//
//	CAS version v -> v+1   (lock; v even)
//	READ the slot          (the value under the lock)
//	WRITE stamp, counter+1, fill
//	FETCH_ADD version +1   (publish v+2: unlocked)
//
// A reader that finds the same even version in the word and the stamp,
// and the fill of the counter, has read a committed value. Nothing on this
// path runs on the server's CPU.
func (c *client) update(ctx context.Context, s int, v uint64) error {
	ss := int(c.info.SlotSize)
	ref := c.info.slot(s)
	locked := c.buf.Bytes()[c.lockedOff : c.lockedOff+ss]
	for attempt := range maxAttempts {
		expect := v + v&1 // a locked slot is unlocked at its version+1
		// The READ goes out right behind the CAS on the same QP, and the
		// responder runs them in order: when the CAS wins, the READ has
		// seen the slot under our lock, and the update saves a round trip.
		cas := c.ep.CompareAndSwap(ctx, ref, expect, expect+1)
		rd := c.ep.Read(ctx, c.buf.Slice(c.lockedOff, ss), ref)
		// Done in a select rather than Wait: the select is where a client
		// would also watch its other channels. Here it gives up when the
		// run is cancelled (another client failed).
		select {
		case <-cas.Done():
		case <-ctx.Done():
			cas.Release()
			rd.Release()
			return ctx.Err()
		}
		comp, err := cas.Result()
		cas.Release()
		// The image is ours again only once the READ is done, won or lost.
		if rerr := waitAll(ctx, []runtime.Future{rd}); err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("client %d: lock slot %d: %w", c.id, s, err)
		}
		if comp.Value != expect {
			c.stats.casLost++
			v = comp.Value
			// The winner needs a few round trips before it publishes.
			time.Sleep(time.Duration(attempt+1) * 10 * time.Microsecond)
			continue
		}
		c.stats.committed++
		return c.commit(ctx, s, expect, locked)
	}
	c.stats.gaveUp++
	return nil
}

// commit writes the new value of slot s, locked at version v+1, whose
// image read under the lock is locked, and publishes version v+2.
func (c *client) commit(ctx context.Context, s int, v uint64, locked []byte) error {
	ss := int(c.info.SlotSize)
	ref := c.info.slot(s)
	if got := ne.Uint64(locked[offVersion:]); got != v+1 {
		return fmt.Errorf("client %d: slot %d: read version %d under our lock at %d", c.id, s, got, v+1)
	}
	if err := checkValue(locked, s, v); err != nil {
		return fmt.Errorf("client %d: under our lock: %w", c.id, err)
	}
	value := c.buf.Bytes()[c.valueOff : c.valueOff+ss]
	putValue(value, s, v+2, ne.Uint64(locked[offCounter:])+1)
	// Wait for the WRITE: the value must be in place before the version
	// says it is.
	if _, err := c.ep.Write(ctx, c.buf.Slice(c.valueOff+offStamp, ss-offStamp), ref.At(offStamp)).Wait(ctx); err != nil {
		return fmt.Errorf("client %d: write slot %d: %w", c.id, s, err)
	}
	// Publish with FETCH_ADD, not a WRITE: every change of the version
	// word is an atomic, and atomics are atomic only with respect to each
	// other. The client needs nothing from the result, so it does not
	// wait: a Then callback checks and counts it, and run waits for all
	// the callbacks before it reports.
	c.publishing.Add(1)
	c.ep.FetchAdd(ctx, ref, 1).Then(func(comp runtime.Completion, err error) {
		defer c.publishing.Done()
		switch {
		case err != nil:
			c.fail(fmt.Errorf("client %d: publish slot %d: %w", c.id, s, err))
		case comp.Value != v+1:
			c.fail(fmt.Errorf("client %d: slot %d: publishing found version %d under our lock at %d", c.id, s, comp.Value, v+1))
		default:
			c.published.Add(1)
		}
	})
	// Later reads go out behind the FETCH_ADD on this QP: they must see
	// at least this version.
	c.seen[s] = max(c.seen[s], v+2)
	return nil
}

func (c *client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pubErr = errors.Join(c.pubErr, err)
}
