package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// ErrLeaseExpired is returned by Exposure.Lease once the exposure's lease
// ran out and its key was revoked, and matches the error of a peer's
// access with that key afterwards: the failed operation's, once the
// peer's endpoint is over (Done), and the endpoint's Err. ErrKeyRevoked
// takes its place for a key revoked by Close.
var ErrLeaseExpired = errors.New("verbsrt: the exposure's lease expired")

// leaseTimer arms a lease's end: it calls f after d and returns the stop
// that disarms it (time.AfterFunc's, or a test's clock).
type leaseTimer func(d time.Duration, f func()) (stop func() bool)

func realLeaseTimer(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// lease is an exposure's lease (Exposure.Lease). Guarded by mu.
type lease struct {
	gen     uint64      // counts the arms: a timer of an earlier one does nothing
	stop    func() bool // disarms the current one; nil before the first
	expired bool        // the lease ran out and revoked the key
}

// Lease gives the exposure a lease of ttl from now: unless Lease is called
// again before it ends (a renewal, for ttl from then), the exposure ends
// with it, its key revoked as by Close. Only the owner renews: a peer
// holds the RemoteRef alone, and its access after the end fails as after
// Close (REM_ACCESS_ERR at the peer, matching verbs.ErrRemoteAccess,
// which ends its connection by RC's rule), so a peer should stop using
// the reference before the lease it was told of ends. Over a connection
// made by Dial and Listen the two sides then tell each other the key and
// why it was revoked, and the peer's error matches ErrLeaseExpired (once
// its endpoint is over); through the connection manager it does not
// tell. ttl must be
// positive. Lease fails with ErrLeaseExpired once the lease ran out, and
// with ErrClosed once the exposure was closed (or its buffer freed).
func (e *Exposure) Lease(ttl time.Duration) error {
	if e == nil {
		return fmt.Errorf("verbsrt: Lease of a nil *Exposure: %w", verbs.ErrInvalidArgument)
	}
	if ttl <= 0 {
		return fmt.Errorf("verbsrt: Lease(%v) of the exposure %v: the lease must be positive: %w", ttl, e.RemoteRef(), verbs.ErrInvalidArgument)
	}
	e.leaseMu.Lock()
	defer e.leaseMu.Unlock()
	switch {
	case e.lease.expired:
		return fmt.Errorf("verbsrt: Lease of the exposure %v: %w", e.RemoteRef(), ErrLeaseExpired)
	case e.revoked.Load():
		return fmt.Errorf("verbsrt: Lease of the exposure %v: %w", e.RemoteRef(), ErrClosed)
	}
	if e.lease.stop != nil {
		e.lease.stop()
	}
	e.lease.gen++
	gen := e.lease.gen
	e.lease.stop = e.b.a.leaseTimer(ttl, func() { e.expire(gen) })
	return nil
}

// expire ends the lease armed as gen, unless a renewal came since.
func (e *Exposure) expire(gen uint64) {
	e.leaseMu.Lock()
	if gen != e.lease.gen || e.lease.expired || e.revoked.Load() {
		e.leaseMu.Unlock()
		return
	}
	e.lease.expired = true
	e.leaseMu.Unlock()
	if err := e.Close(); err != nil {
		e.b.a.log.Warn("verbsrt: revoking an exposure whose lease expired", "exposure", e.RemoteRef().String(), "err", err)
	}
}
