package credit

import (
	"math"

	"go.uber.org/atomic"
)

// Receiver is the receive side's share of the protocol for one
// connection: the window of credits it grants its peer, how many of them
// receives back, how many it owes and how many its peer has not been told
// of. Its caller posts the receives and holds a lock of its own across
// every method but Due, Take and Untake, which any goroutine may call.
type Receiver struct {
	initial int // the window the peer starts with
	depth   int // the largest window

	window int // credits the peer holds, owed or unreported
	want   int // what the peer asked the window to grow to
	backed int // credits backed by posted receives: the peer's and unreported
	owed   int // credits owed back, not yet backed by a posted receive

	unreported atomic.Int64 // credits backed and not yet reported
	// threshold is the unreported credits at which a report is due,
	// stored by every change of window or owed (setThreshold), so that Due
	// needs no lock.
	threshold atomic.Int64
}

// Join starts the window at initial credits, backed by receives the
// caller posted, which the peer holds from the handshake on (so they are
// not reported); it grows up to depth.
func (r *Receiver) Join(initial, depth int) {
	r.initial, r.depth = initial, max(depth, initial)
	r.window, r.want, r.backed, r.owed = initial, initial, initial, 0
	r.setThreshold()
}

// Window is the credits the peer holds, is owed or was not told of.
func (r *Receiver) Window() int { return r.window }

// Wanted is the window the peer asked for.
func (r *Receiver) Wanted() int { return r.want }

// Backed is the credits backed by posted receives.
func (r *Receiver) Backed() int { return r.backed }

// Owed is the credits owed back to the peer and not yet backed.
func (r *Receiver) Owed() int { return r.owed }

// Unreported is the credits backed and not yet reported.
func (r *Receiver) Unreported() int64 { return r.unreported.Load() }

// Consumed accounts for a receive that completed: the peer spent a credit,
// which is owed back.
func (r *Receiver) Consumed() {
	r.backed--
	r.owed++
	r.setThreshold()
}

// Adjust moves the window by what a received header said: backlog grows
// it by one, a window asked for to that size (both up to the depth, as
// receives can back them: Grow), credits given back shrink it at once, to
// no less than the initial window. It returns the credits given back:
// their receives are free for others. Nothing else shrinks the window: a
// busy sender's window shrunk on every SEND without backlog stays at the
// edge of starvation.
func (r *Receiver) Adjust(f Fields) (freed int) {
	switch {
	case f.Returned() > 0:
		n := max(0, min(f.Returned(), r.backed, r.window-r.initial))
		r.window -= n
		r.backed -= n
		r.want = min(r.want, r.window)
		r.setThreshold()
		return n
	case f.Asked() > 0:
		r.want = max(r.want, min(f.Asked(), r.depth))
	case f.Backlog:
		r.want = max(r.want, min(r.window+1, r.depth))
	}
	return 0
}

// Grow grows the window toward the size the peer asked for, by no more
// than receives can back: available is how many more credits the caller
// could back, before what is already owed. The growth is owed to the peer.
// A window no receive can ever back would keep the peer waiting for
// nothing.
func (r *Receiver) Grow(available int) {
	if r.window >= r.want {
		return
	}
	if grow := min(r.want-r.window, available-r.owed); grow > 0 {
		r.window += grow
		r.owed += grow
		r.setThreshold()
	}
}

// Grant records n owed credits that receives the caller posted now back:
// they are the peer's once reported. It reports whether a report is due.
func (r *Receiver) Grant(n int) (due bool) {
	if n > 0 {
		r.backed += n
		r.owed -= n
		r.unreported.Add(int64(n))
		r.setThreshold()
	}
	return r.Due()
}

// Leave ends the window: the connection is gone. It returns the credits
// that were backed, whose receives no one will use up.
func (r *Receiver) Leave() (freed int) {
	freed = r.backed
	r.backed, r.owed = 0, 0
	r.setThreshold()
	return freed
}

// Due reports whether enough credits are unreported to be worth a
// credit-only SEND: half the window receives back (the window less what
// is owed), at least one, and fewer than that window, so that the peer,
// which keeps one credit for reports, is told before it has spent what it
// may. Owed credits are left out: they wait for a receive, and until one
// is posted they are neither the peer's nor to be reported. Counted over
// the whole window, a receiver owing most of it would wait for a report
// threshold its unreported credits cannot reach, while its peer holds only
// the credit kept for reports.
func (r *Receiver) Due() bool {
	u := r.unreported.Load()
	return u > 0 && u >= r.threshold.Load()
}

func (r *Receiver) setThreshold() {
	w := int64(r.window - r.owed)
	r.threshold.Store(max(1, min(w-1, (w+1)/2)))
}

// Take takes the unreported credits into a header, at most what one header
// carries; the rest stays for the next report.
func (r *Receiver) Take() uint32 {
	n := r.unreported.Swap(0)
	if n > math.MaxUint32 {
		r.unreported.Add(n - math.MaxUint32)
		n = math.MaxUint32
	}
	return uint32(n)
}

// Untake gives back n credits taken into a header that was not sent.
func (r *Receiver) Untake(n uint32) { r.unreported.Add(int64(n)) }
