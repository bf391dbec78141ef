package runtime_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// leaseClock arms the ends of leases for the test to fire (SetLeaseTimer).
type leaseClock struct {
	mu    sync.Mutex
	armed []*armedLease
}

type armedLease struct {
	d       time.Duration
	f       func()
	stopped bool
}

func (c *leaseClock) after(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := &armedLease{d: d, f: f}
	c.armed = append(c.armed, l)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !l.stopped
		l.stopped = true
		return was
	}
}

// fire runs the end of the i-th lease armed, stopped or not: a timer that
// fires as it is stopped runs too.
func (c *leaseClock) fire(t *testing.T, i int) {
	t.Helper()
	c.mu.Lock()
	if i >= len(c.armed) {
		c.mu.Unlock()
		t.Fatalf("lease %d fired, %d armed", i, len(c.armed))
	}
	l := c.armed[i]
	c.mu.Unlock()
	l.f()
}

func (c *leaseClock) stopped(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armed[i].stopped
}

// leasedPair returns a client endpoint, an exposure of 64 bytes it may
// write, with a lease of a minute, and the clock that ends the lease.
func leasedPair(t *testing.T) (*runtime.Endpoint, runtime.Local, *runtime.Exposure, *leaseClock) {
	t.Helper()
	rt, cli, _ := pair(t)
	clock := &leaseClock{}
	runtime.SetLeaseTimer(rt, clock.after)
	exp, err := alloc(t, rt, 64).Expose(runtime.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exp.Close() })
	if err := exp.Lease(time.Minute); err != nil {
		t.Fatal(err)
	}
	return cli, alloc(t, rt, 64).Local(), exp, clock
}

// TestLeaseEndsTheExposure: at the end of its lease an exposure's key is
// revoked: the peer's WRITE fails with REM_ACCESS_ERR, and Lease then
// fails with ErrLeaseExpired.
func TestLeaseEndsTheExposure(t *testing.T) {
	cli, local, exp, clock := leasedPair(t)
	ctx := ctxT(t)
	if _, err := cli.Write(ctx, local, exp.RemoteRef()).Wait(ctx); err != nil {
		t.Fatalf("a WRITE during the lease: %v", err)
	}
	clock.fire(t, 0)
	if _, err := cli.Write(ctx, local, exp.RemoteRef()).Wait(ctx); !errors.Is(err, verbs.ErrRemoteAccess) {
		t.Fatalf("a WRITE after the lease: %v, want REM_ACCESS_ERR", err)
	}
	if err := exp.Lease(time.Minute); !errors.Is(err, runtime.ErrLeaseExpired) {
		t.Errorf("Lease after the end: %v, want ErrLeaseExpired", err)
	}
	if err := exp.Close(); err != nil {
		t.Errorf("Close after the end: %v", err)
	}
}

// TestLeaseRenewed: a renewal replaces the lease: the end of the one it
// replaced, even should its timer fire, revokes nothing; the renewed
// lease's end does.
func TestLeaseRenewed(t *testing.T) {
	cli, local, exp, clock := leasedPair(t)
	ctx := ctxT(t)
	if err := exp.Lease(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if !clock.stopped(0) || clock.armed[1].d != 2*time.Minute {
		t.Fatalf("the renewal left the first lease armed, or armed %v", clock.armed[1].d)
	}
	clock.fire(t, 0)
	if _, err := cli.Write(ctx, local, exp.RemoteRef()).Wait(ctx); err != nil {
		t.Fatalf("a WRITE after the replaced lease's end: %v", err)
	}
	clock.fire(t, 1)
	if _, err := cli.Write(ctx, local, exp.RemoteRef()).Wait(ctx); !errors.Is(err, verbs.ErrRemoteAccess) {
		t.Fatalf("a WRITE after the renewed lease's end: %v, want REM_ACCESS_ERR", err)
	}
}

// TestLeaseRefusals: Lease refuses a lease that is not positive and an
// exposure already closed; Close disarms the lease.
func TestLeaseRefusals(t *testing.T) {
	_, _, exp, clock := leasedPair(t)
	for _, ttl := range []time.Duration{0, -time.Second} {
		if err := exp.Lease(ttl); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("Lease(%v): %v, want ErrInvalidArgument", ttl, err)
		}
	}
	if err := exp.Close(); err != nil {
		t.Fatal(err)
	}
	if !clock.stopped(0) {
		t.Error("Close left the lease armed")
	}
	if err := exp.Lease(time.Minute); !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("Lease after Close: %v, want ErrClosed", err)
	}
	var none *runtime.Exposure
	if err := none.Lease(time.Minute); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("Lease of a nil exposure: %v, want ErrInvalidArgument", err)
	}
}

// TestPeerTellsLeaseExpiryFromRevoke: a peer's WRITE with the key of an
// exposure whose lease ended fails (REM_ACCESS_ERR, the connection with
// it), and once the peer's endpoint is over its error and the endpoint's
// Err match ErrLeaseExpired, not ErrKeyRevoked; with the key of an
// exposure closed, ErrKeyRevoked, not ErrLeaseExpired. On the soft
// provider and on rocev2, over the handshake's TCP connection.
func TestPeerTellsLeaseExpiryFromRevoke(t *testing.T) {
	for _, p := range []struct {
		name    string
		runtime func(*testing.T) *runtime.Runtime
	}{
		{"soft", func(t *testing.T) *runtime.Runtime { return newRuntime(t) }},
		{"rocev2", rocev2Runtime},
	} {
		for _, c := range []struct {
			name      string
			end       func(t *testing.T, exp *runtime.Exposure, clock *leaseClock)
			want, not error
		}{
			{"lease", func(t *testing.T, _ *runtime.Exposure, clock *leaseClock) { clock.fire(t, 0) }, runtime.ErrLeaseExpired, runtime.ErrKeyRevoked},
			{"close", func(t *testing.T, exp *runtime.Exposure, _ *leaseClock) {
				if err := exp.Close(); err != nil {
					t.Fatal(err)
				}
			}, runtime.ErrKeyRevoked, runtime.ErrLeaseExpired},
		} {
			t.Run(p.name+"/"+c.name, func(t *testing.T) {
				owner, peer := p.runtime(t), p.runtime(t)
				clock := &leaseClock{}
				runtime.SetLeaseTimer(owner, clock.after)
				exp, err := alloc(t, owner, 64).Expose(runtime.RemoteWrite)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { exp.Close() })
				if err := exp.Lease(time.Minute); err != nil {
					t.Fatal(err)
				}
				cli, _ := connectRuntimes(t, peer, owner)
				local := alloc(t, peer, 64).Local()
				ctx := ctxT(t)
				if _, err := cli.Write(ctx, local, exp.RemoteRef()).Wait(ctx); err != nil {
					t.Fatalf("a WRITE before the end: %v", err)
				}
				c.end(t, exp, clock)
				_, err = cli.Write(ctx, local, exp.RemoteRef()).Wait(ctx)
				if !errors.Is(err, verbs.ErrRemoteAccess) {
					t.Fatalf("a WRITE after the end: %v, want REM_ACCESS_ERR", err)
				}
				select {
				case <-cli.Done():
				case <-ctx.Done():
					t.Fatal("the peer's endpoint is not over after REM_ACCESS_ERR")
				}
				for what, e := range map[string]error{"the WRITE's error": err, "the endpoint's Err": cli.Err()} {
					if !errors.Is(e, c.want) || errors.Is(e, c.not) || !errors.Is(e, runtime.ErrConnFailed) {
						t.Errorf("%s: %v; want it to match %v and ErrConnFailed, not %v", what, e, c.want, c.not)
					}
				}
				if want := strings.TrimPrefix(c.want.Error(), "verbsrt: "); !strings.Contains(err.Error(), want) {
					t.Errorf("the WRITE's error %q does not say %q", err, want)
				}
			})
		}
	}
}
