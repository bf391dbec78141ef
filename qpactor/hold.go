package qpactor

import stdatomic "sync/atomic"

// Hold counts the operations that use a piece of registered memory, so its
// owner learns when the device is done with it. The owner closes the hold
// when it wants the memory back; idle runs once, as soon as the hold is
// closed and no operation uses the memory any more. An operation takes a
// use (Acquire) before it is submitted and gives it back when its future
// resolves: after its last completion or flush, or at once if it never
// reached the device. The memory's owner never has to guess whether a
// device still writes into it (a READ whose waiter gave up, for one).
//
// The zero Hold is open and has no idle function; Init sets one.
type Hold struct {
	// state is 2 per use, plus 1 once closed: one word, so Acquire and
	// Close agree on who saw the last use.
	state stdatomic.Int64
	idle  func()
}

const holdClosed = 1

// Init sets the function run once the hold is closed and idle. Call it
// before the hold is shared.
func (h *Hold) Init(idle func()) { h.idle = idle }

// Acquire takes a use of the memory; it fails once the hold is closed.
func (h *Hold) Acquire() bool {
	for {
		s := h.state.Load()
		if s&holdClosed != 0 {
			return false
		}
		if h.state.CompareAndSwap(s, s+2) {
			return true
		}
	}
}

// Release gives back a use Acquire took.
func (h *Hold) Release() {
	if h.state.Add(-2) == holdClosed && h.idle != nil {
		h.idle()
	}
}

// Close closes the hold: no use can be taken any more, and idle runs when
// the last one is given back (at once when there is none). It reports
// whether this call closed it.
func (h *Hold) Close() bool {
	old := h.state.Or(holdClosed)
	if old&holdClosed != 0 {
		return false
	}
	if old == 0 && h.idle != nil {
		h.idle()
	}
	return true
}

// Closed reports whether Close was called.
func (h *Hold) Closed() bool { return h.state.Load()&holdClosed != 0 }

// Uses returns the uses taken and not yet given back.
func (h *Hold) Uses() int { return int(h.state.Load() >> 1) }

// HoldAll returns one hold standing for uses of several holds, taken
// already: given back once, it gives back each.
func HoldAll(hs []*Hold) *Hold {
	all := &Hold{}
	all.Init(func() {
		for _, h := range hs {
			h.Release()
		}
	})
	all.Acquire()
	all.Close()
	return all
}
