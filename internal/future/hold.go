package future

import "github.com/verbsrt/verbsrt/internal/uses"

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
