package qpactor

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// runOwner says who may post to the actor's QP and where the actor is in
// its life, in one state word, as internal/poll's fdMutex keeps an fd's.
//
// A run is the right to be the actor: to take from the inbox, post to the
// QP and fail what is queued. One goroutine at a time holds it: the actor
// goroutine, a submitter or a completion handler that posts inline
// (runInline), or a submitter sweeping a stopped actor's inbox
// (sweepStopped). Whoever finds the run free while there is work takes it
// (kick): what was published before a kick is seen by a run that holds the
// run after it.
//
// A holder with nothing to do gives the run up in three steps, in the
// manner of a lock whose release processes what queued meanwhile:
//
//	o.prepareLeave()              // 1. runLeaving: a kick now clears it
//	if <work, looked at again> {
//		o.cancelLeave()        // 2. work came in meanwhile: go on
//	} else if !o.leave() {        // 3. give the run up, unless a kick
//		// go on                //    cleared runLeaving since 1
//	}
//
// The race it closes: a kick publishes work just after the holder's first
// look and reads the state just before the holder sets runLeaving. The
// second look after runLeaving is set, and the kick's read of the state
// after it published, are sequentially consistent: either the second look
// sees the work, or the kick sees runLeaving and clears it, and then the
// leave fails and the holder goes on. A kick that finds the run free takes
// it (acquired), and its caller starts the next run. With Park set the
// holder never gives the run up: it parks in step 3 until a kick clears
// runLeaving and sends it a token.
//
// While a holder runs, a kick is one atomic load that finds runHeld alone:
// no write to a shared line, no channel operation.
//
// Misuse (leaving or parking without the run, taking a run twice) panics
// with the state it found.
type runOwner struct {
	state atomic.Uint32
	// parks is Config.Park: a holder parks instead of leaving, on tokens
	// (one buffer slot keeps one sent early).
	parks  bool
	tokens chan struct{}
	// tokensSent counts the tokens kicks sent, for tests of the fast path.
	tokensSent atomic.Uint64
	// bound is wakeAfter's timer, made on first use; boundArmed says one
	// is set and neither called off nor fired. onBound is what it calls.
	bound      atomic.Pointer[time.Timer]
	boundArmed atomic.Bool
	onBound    func()
}

// The state word's bits.
const (
	// runHeld: a goroutine holds the run.
	runHeld uint32 = 1 << iota
	// runLeaving: the holder is about to give the run up or park
	// (prepareLeave); a kick clears it to keep the holder going.
	runLeaving
	// lifeStarted: Start or Close ran. Until then no kick takes a run:
	// Start's goroutine is the first.
	lifeStarted
	// lifeClosing: Close was called; nothing new is queued.
	lifeClosing
	// lifeStopped: the actor made its last sweep. No run starts after it;
	// a submitter that queued late fails what it queued (sweepStopped).
	lifeStopped
	// lifeBroken: the QP takes no more work (Break).
	lifeBroken
)

var stateNames = [...]string{"runHeld", "runLeaving", "lifeStarted", "lifeClosing", "lifeStopped", "lifeBroken"}

// stateString names the bits of s.
func stateString(s uint32) string {
	var names []string
	for i, n := range stateNames {
		if s&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "0"
	}
	return strings.Join(names, "|")
}

func newRunOwner(parks bool, onBound func()) *runOwner {
	o := &runOwner{parks: parks, onBound: onBound}
	if parks {
		o.tokens = make(chan struct{}, 1)
	}
	return o
}

func (o *runOwner) misuse(what string, s uint32) {
	panic(fmt.Sprintf("qpactor: %s in state %s", what, stateString(s)))
}

// has reports whether every bit of bits is set.
func (o *runOwner) has(bits uint32) bool { return o.state.Load()&bits == bits }

// hasAny reports whether any bit of bits is set.
func (o *runOwner) hasAny(bits uint32) bool { return o.state.Load()&bits != 0 }

// set sets lifecycle bits.
func (o *runOwner) set(bits uint32) { o.state.Or(bits) }

// start takes the first run and sets lifeStarted, unless Start or Close
// already did.
func (o *runOwner) start() bool {
	for {
		s := o.state.Load()
		if s&lifeStarted != 0 {
			return false
		}
		if s&runHeld != 0 {
			o.misuse("start", s)
		}
		if o.state.CompareAndSwap(s, s|lifeStarted|runHeld) {
			return true
		}
	}
}

// kick makes sure a run sees what the caller published before it: a
// holder keeps going (a leaving one is stopped from leaving, a parked one
// gets a token), and a free run of a started actor that has not stopped
// is taken, reported as true: the caller then holds it and must run it or
// hand it to a goroutine that does.
func (o *runOwner) kick() (acquired bool) {
	for {
		s := o.state.Load()
		switch {
		case s&runHeld == 0:
			if s&lifeStarted == 0 || s&lifeStopped != 0 {
				return false
			}
			if o.state.CompareAndSwap(s, s|runHeld) {
				return true
			}
		case s&runLeaving != 0:
			if o.state.CompareAndSwap(s, s&^runLeaving) {
				if o.parks {
					o.tokensSent.Add(1)
					select {
					case o.tokens <- struct{}{}:
					default: // one is already waiting
					}
				}
				return false
			}
		default:
			return false // the holder runs: it looks again before it leaves
		}
	}
}

// sweep takes the run of a stopped actor, free, for one more sweep of its
// inbox (sweepStopped).
func (o *runOwner) sweep() bool {
	for {
		s := o.state.Load()
		if s&lifeStopped == 0 {
			o.misuse("sweep before the last one", s)
		}
		if s&runHeld != 0 {
			return false // the holder sweeps, and looks again after release
		}
		if o.state.CompareAndSwap(s, s|runHeld) {
			return true
		}
	}
}

// mustHold panics unless a goroutine holds the run: what only a holder may
// do (drain, post, failQueued) checks it.
func (o *runOwner) mustHold(what string) {
	if s := o.state.Load(); s&runHeld == 0 {
		o.misuse(what+" without the run", s)
	}
}

// prepareLeave is step 1 of giving the run up.
func (o *runOwner) prepareLeave() {
	for {
		s := o.state.Load()
		if s&runHeld == 0 || s&runLeaving != 0 {
			o.misuse("prepareLeave", s)
		}
		if o.state.CompareAndSwap(s, s|runLeaving) {
			return
		}
	}
}

// cancelLeave withdraws prepareLeave when the second look found work.
func (o *runOwner) cancelLeave() {
	s := o.state.And(^runLeaving)
	if s&runHeld == 0 {
		o.misuse("cancelLeave", s)
	}
}

// leave gives the run up and reports true, unless a kick came since
// prepareLeave: then the caller keeps the run and goes on (false). After
// true the caller must touch nothing the next run uses.
func (o *runOwner) leave() bool {
	for {
		s := o.state.Load()
		if s&runHeld == 0 || o.parks {
			o.misuse("leave", s)
		}
		if s&runLeaving == 0 {
			return false
		}
		if o.state.CompareAndSwap(s, s&^(runHeld|runLeaving)) {
			return true
		}
	}
}

// park is leave for a holder that parks (Config.Park): it blocks until a
// kick since prepareLeave, keeping the run. It may return with nothing new
// to do (a token sent by a kick that raced with cancelLeave): the holder
// looks again, as it does anyway.
func (o *runOwner) park() {
	if s := o.state.Load(); s&runHeld == 0 || !o.parks {
		o.misuse("park", s)
	}
	<-o.tokens
	o.state.And(^runLeaving) // after a stale token it is still set
}

// release gives up the run for good or for a moment: the holder of a
// stopped actor's run (sweepStopped) and tests.
func (o *runOwner) release() {
	s := o.state.And(^(runHeld | runLeaving))
	if s&runHeld == 0 {
		o.misuse("release", s)
	}
}

// idle reports whether the actor started, has not stopped and no
// goroutine holds its run.
func (o *runOwner) idle() bool {
	return o.state.Load()&(lifeStarted|lifeStopped|runHeld) == lifeStarted
}

// wakeAfter arranges onBound in d, which stopBound, or another wakeAfter,
// calls off: a bound on work left for something usually a moment away (a
// completion that posts what coalesced, credits about to come). Any
// goroutine may call it; the last call's d wins.
func (o *runOwner) wakeAfter(d time.Duration) {
	o.boundArmed.Store(true)
	if t := o.bound.Load(); t != nil {
		t.Reset(d)
		return
	}
	t := time.AfterFunc(d, o.boundFired)
	if !o.bound.CompareAndSwap(nil, t) { // another call made one first
		t.Stop()
		o.bound.Load().Reset(d)
	}
}

// stopBound calls off a wakeAfter not yet fired.
func (o *runOwner) stopBound() {
	if t := o.bound.Load(); t != nil {
		o.boundArmed.Store(false)
		t.Stop()
	}
}

func (o *runOwner) boundFired() {
	o.boundArmed.Store(false)
	o.onBound()
}
