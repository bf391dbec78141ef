package future

import (
	"slices"

	"github.com/verbsrt/verbsrt/internal/uses"
)

// Hold counts the operations that use a piece of registered memory, so its
// owner learns when the device is done with it. The owner closes the hold
// when it wants the memory back; its idle function runs once, as soon as
// the hold is closed and no operation uses the memory any more. An
// operation takes a use (Acquire) before it is submitted and gives it back
// when its future resolves: after its last completion or flush, or at once
// if it never reached the device. The memory's owner never has to guess
// whether a device still writes into it (a READ whose waiter gave up, for
// one).
type Hold = uses.Count

// holdAll returns one hold standing for uses of several holds, taken
// already: given back once, it gives back each.
func holdAll(hs []*Hold) *Hold {
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

// Holds gathers the uses one operation took, to hand the actor as the one
// hold standing for them all (One). The first is kept apart, so that an
// operation of one hold, the common case, makes no slice.
type Holds struct {
	first *Hold
	more  []*Hold
}

// Add adds a use taken of h.
func (hs *Holds) Add(h *Hold) {
	if hs.first == nil {
		hs.first = h
	} else {
		hs.more = append(hs.more, h)
	}
}

// Has reports whether a use of h was added.
func (hs *Holds) Has(h *Hold) bool { return hs.first == h || slices.Contains(hs.more, h) }

// Release gives back every use added: for an operation refused before it
// was submitted.
func (hs *Holds) Release() {
	if hs.first != nil {
		hs.first.Release()
	}
	for _, h := range hs.more {
		h.Release()
	}
}

// One returns the hold standing for every use added (nil for none).
func (hs *Holds) One() *Hold {
	if hs.more == nil {
		return hs.first
	}
	return holdAll(append(hs.more, hs.first))
}
