package uses

import "sync/atomic"

// Count counts the uses of something its owner wants back: uses are
// taken (Acquire) and given back (Release) from any goroutine; the owner
// closes the count when it wants the thing back, after which no use can
// be taken, and idle runs once, as soon as the count is closed and no use
// is left. Lock-free: one atomic word.
//
// The zero Count is open and has no idle function; Init sets one.
type Count struct {
	// state is 2 per use, plus 1 once closed: one word, so Acquire and
	// Close agree on who saw the last use.
	state atomic.Int64
	idle  func()
}

const closedBit = 1

// Init sets the function run once the count is closed and idle. Call it
// before the count is shared.
func (c *Count) Init(idle func()) { c.idle = idle }

// Acquire takes a use; it fails once the count is closed.
func (c *Count) Acquire() bool {
	for {
		s := c.state.Load()
		if s&closedBit != 0 {
			return false
		}
		if c.state.CompareAndSwap(s, s+2) {
			return true
		}
	}
}

// Release gives back a use Acquire took.
func (c *Count) Release() {
	if c.state.Add(-2) == closedBit && c.idle != nil {
		c.idle()
	}
}

// Close closes the count: no use can be taken any more, and idle runs when
// the last one is given back (at once when there is none). It reports
// whether this call closed it.
func (c *Count) Close() bool {
	old := c.state.Or(closedBit)
	if old&closedBit != 0 {
		return false
	}
	if old == 0 && c.idle != nil {
		c.idle()
	}
	return true
}

// Closed reports whether Close was called.
func (c *Count) Closed() bool { return c.state.Load()&closedBit != 0 }

// Uses returns the uses taken and not yet given back.
func (c *Count) Uses() int { return int(c.state.Load() >> 1) }
