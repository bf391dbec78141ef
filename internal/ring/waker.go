package ring

import (
	"time"

	"go.uber.org/atomic"
)

// Waker parks a consumer whose ring stays empty and lets producers wake it.
// It is apart from Ring so that the ring knows nothing of waiting: the actor
// decides when to stop spinning and park (parking a goroutine locked to its
// OS thread costs microseconds to undo, so it spins first). Make one with
// NewWaker.
//
// Protocol. The consumer, having found nothing to do:
//
//	w.PrepareSleep()              // 1. sleeping = true
//	if ring.Peek() != nil || closing.Load() {
//		w.CancelSleep()        // 2. look again: work came in meanwhile
//	} else {
//		w.Sleep(stop)          // 3. block until a Wake or stop
//	}
//
// A producer, after a successful TryPush (and anyone who changes what the
// consumer looks at in step 2, such as a closing flag):
//
//	w.Wake()                      // 4. if sleeping: sleeping = false, send a token
//
// The race it closes: a producer publishes just after the consumer's last
// look and checks the flag just before the consumer sets it; the consumer
// would then sleep on a value nobody wakes it for. With the second look in
// step 2, after the flag is set, one of the two always sees the other:
// publishing (a store to the slot's seq) and the flag are sequentially
// consistent atomics, so either the consumer's second look sees the value,
// or the producer's load in Wake sees sleeping == true. A token sent before
// the consumer blocks waits in the channel's one buffer slot, so a wake-up
// that comes early is not lost either. The second look must cover all that
// a Wake may announce; a flag that is not checked there can be missed.
//
// Cost. While the consumer runs, Wake is one atomic load that finds false:
// no channel operation, no write to a shared line. Only a Wake that finds
// the flag set does a compare-and-swap, and only the goroutine that wins it
// sends, without blocking, on the channel.
//
// Sleep may return with nothing new to do (a token left by a Wake that
// raced with CancelSleep): the consumer must look again, as it does anyway.
//
// Concurrency: PrepareSleep, CancelSleep and Sleep belong to the one
// consumer goroutine; any number of goroutines may call Wake at once.
type Waker struct {
	sleeping atomic.Bool
	ch       chan struct{} // wake-up tokens; its one buffer slot keeps an early one
	// restart, when set, starts the consumer again: it ends (Leave)
	// instead of sleeping (NewRestartingWaker). gone is set while it has
	// ended or is ending; the Wake that clears it restarts it.
	restart func()
	gone    atomic.Bool
	// sends counts channel operations by Wake, for tests that check the
	// fast path does none.
	sends atomic.Uint64
	// later is WakeAfter's timer, made on its first use; laterArmed says
	// a WakeAfter is set and neither called off nor fired.
	later      atomic.Pointer[time.Timer]
	laterArmed atomic.Bool
}

// NewWaker returns a Waker whose consumer is not sleeping.
func NewWaker() *Waker {
	return &Waker{ch: make(chan struct{}, 1)}
}

// NewRestartingWaker returns a Waker for a consumer that ends instead of
// sleeping: where the protocol says Sleep, it calls Leave, and ends if
// Leave says so; the Wake that finds it gone calls restart, once, to start
// it again. Until Leave the consumer still owns everything (its second
// look included): no Wake restarts it before.
func NewRestartingWaker(restart func()) *Waker {
	return &Waker{restart: restart}
}

// Leave is Sleep for a restarting consumer: it reports whether the
// consumer must end now (a Wake will start it again, or already has), or
// go on, when a Wake came since PrepareSleep and left it to carry on.
// After Leave returns true the consumer must touch nothing it shares with
// the next run.
//
// Against wake: the consumer sets gone, then looks at sleeping; a Wake
// clears sleeping, then looks at gone. One of the two sees the other (the
// same argument as PrepareSleep's), and whoever then clears gone owns the
// next run: the Wake by starting it, the consumer by going on.
func (w *Waker) Leave() bool {
	w.gone.Store(true)
	if w.sleeping.Load() {
		return true // no Wake yet: the next one restarts
	}
	return !w.gone.CompareAndSwap(true, false)
}

// Ended reports whether a restarting consumer has ended (Leave) and no
// Wake has started it again since.
func (w *Waker) Ended() bool { return w.gone.Load() }

// Restarts reports whether the consumer ends instead of sleeping.
func (w *Waker) Restarts() bool { return w.restart != nil }

// PrepareSleep announces that the consumer is about to sleep. The consumer
// must then look at its ring once more and call CancelSleep if it found
// work, or Sleep if it did not.
func (w *Waker) PrepareSleep() { w.sleeping.Store(true) }

// CancelSleep withdraws PrepareSleep when the second look found work.
func (w *Waker) CancelSleep() { w.sleeping.Store(false) }

// Sleep blocks until a Wake after PrepareSleep, or until stop is closed,
// and reports false in the second case. It may return true with nothing new
// to do; see the type's documentation. A nil stop never fires: a consumer
// may instead be stopped by a flag it checks in its second look, set before
// a Wake.
func (w *Waker) Sleep(stop <-chan struct{}) bool {
	select {
	case <-w.ch:
		// Normally Wake has cleared the flag; after a stale token it is
		// still set, and producers must not pay for it while we run.
		w.sleeping.Store(false)
		return true
	case <-stop:
		w.sleeping.Store(false)
		return false
	}
}

// Wake wakes the consumer if it sleeps or is about to. Call it after each
// successful push; it costs one atomic load while the consumer runs. Any
// goroutine may call Wake.
func (w *Waker) Wake() {
	if w.sleeping.Load() {
		w.wake()
	}
}

// WakeAfter arranges a Wake in d, which StopLater, or another WakeAfter,
// calls off: for work left for something that is usually a moment away
// (a consumer about to sleep on it, or a producer that leaves its work
// queued for another goroutine to take), as a bound. Any goroutine may
// call it; the last call's d wins.
func (w *Waker) WakeAfter(d time.Duration) {
	w.laterArmed.Store(true)
	if t := w.later.Load(); t != nil {
		t.Reset(d)
		return
	}
	t := time.AfterFunc(d, w.wakeLater)
	if !w.later.CompareAndSwap(nil, t) { // another call made one first
		t.Stop()
		w.later.Load().Reset(d)
	}
}

// StopLater calls off a WakeAfter not yet fired, once the Wake it bounded
// is no longer wanted. Any goroutine may call it.
func (w *Waker) StopLater() {
	if t := w.later.Load(); t != nil {
		w.laterArmed.Store(false)
		t.Stop()
	}
}

// LaterArmed reports whether a WakeAfter is set, not called off and not
// fired: for tests of who calls the wake-ups off.
func (w *Waker) LaterArmed() bool { return w.laterArmed.Load() }

// wakeLater is WakeAfter's timer firing.
func (w *Waker) wakeLater() {
	w.laterArmed.Store(false)
	w.Wake()
}

// wake is the slow path of Wake: the consumer sleeps or is about to.
func (w *Waker) wake() {
	if w.claim() {
		w.restart()
	}
}

// Claim is Wake for a producer that will run a restarting consumer's next
// run itself: it reports true when the consumer had ended and the caller
// now owns that run (restart is not called), as the Wake that restarts it
// would. Otherwise it wakes the consumer as Wake does and reports false.
func (w *Waker) Claim() bool {
	return w.sleeping.Load() && w.claim()
}

// claim wakes a sleeping consumer, or reports true when the consumer of a
// restarting waker is gone and the caller must start its next run.
func (w *Waker) claim() bool {
	if !w.sleeping.CompareAndSwap(true, false) {
		return false // another goroutine is waking it, or it woke
	}
	w.sends.Inc()
	if w.restart != nil {
		return w.gone.CompareAndSwap(true, false)
	}
	select {
	case w.ch <- struct{}{}:
	default: // a token is already waiting
	}
	return false
}
