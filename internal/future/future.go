package future

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	stdatomic "sync/atomic"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/internal/sched"
	"github.com/verbsrt/verbsrt/verbs"
)

// Errors of futures.
var (
	// ErrPending is returned by Err and Result while the operation is
	// still in flight.
	ErrPending = errors.New("verbsrt: operation pending")
	// ErrReleased is returned when a Future is used after it was consumed
	// (by Wait returning a result, by Then or by Release): its state went
	// back to the pool and may belong to another operation now.
	ErrReleased = errors.New("verbsrt: future already consumed")
	// ErrNilContext refuses a call given a nil context.Context instead
	// of a context, as net/http refuses one, before the call changes
	// anything. It matches verbs.ErrInvalidArgument.
	ErrNilContext = fmt.Errorf("verbsrt: nil Context: %w", verbs.ErrInvalidArgument)
	// ErrZero is returned by a zero Future, which no operation returned.
	// It matches verbs.ErrInvalidArgument.
	ErrZero = fmt.Errorf("verbsrt: the zero Future, which no operation returned: %w", verbs.ErrInvalidArgument)
	// ErrInUse is returned by a Wait or Then given a copy of a future
	// that another Wait or Then is consuming at the same time (a misuse:
	// one goroutine consumes a Future). It matches ErrReleased.
	ErrInUse = fmt.Errorf("verbsrt: future being consumed by another Wait or Then (one goroutine consumes a Future): %w", ErrReleased)
)

// genConsuming, set in State.gen, says that a consumer (Wait, Then,
// Release) holds the handle of the generation in the other bits: it
// alone may release the state, and another consumer of a copy of that
// handle is refused before it reads or releases anything. Readers (Done,
// Err, Result) compare the generation without it.
const genConsuming = 1 << 63

// Executor runs Then callbacks off the poller goroutines. Submit must not
// block: an executor bounds its goroutines by queueing what it cannot run
// yet (as the runtime's does). On error (the executor closed) the callback
// runs on a new goroutine instead, so it still runs exactly once.
type Executor interface {
	Submit(task func()) error
}

// State is the pooled, recycled state behind a Future. gen changes each
// time the state is recycled, so a stale Future handle is detected.
//
// The submitting goroutine and the resolving one (poller or actor) run on
// different cores, so every cache line they both write moves twice per
// operation. The fields every operation touches therefore share the first
// line; the second holds what is set once per state or only when asked
// for (Done, Then), and release and New leave it alone unless it
// changed. The size is padded to 128 bytes: the allocator's size class
// for it aligns each state to 128, so the first line is one line.
//
// No lock guards a state. Who may touch what, and when:
//
// status is one word of bits. The resolver (the goroutine completing the
// last WR) publishes the outcome by setting statusDone. The slow paths of
// the consumer and of Done ask the resolver for a side effect by setting
// a bit (statusParked: send a token on wake; statusHasDone: close done;
// statusHasThen: run then), after writing the field the bit points to;
// they change the word only by compare-and-swap, and only while neither
// statusResolving nor statusDone is set. While the word is 0, nobody
// asked for anything, and the resolver swaps it to statusDone in one
// compare-and-swap. Otherwise it sets statusResolving, which freezes the
// other bits, reads the fields they point to, and then stores
// statusDone. A slow path that finds statusResolving yields until
// statusDone: the window is a few instructions.
//
// A consumer that sees statusDone may recycle the state at once, so the
// resolver touches nothing of it after storing statusDone, but for what
// cannot race with recycling. It closes the Done channel it read before:
// a channel is never reused, release forgets it. It sends the wake token
// if statusParked was set: the waiter is then parked, and whether it
// wakes on the token or on its context's end it receives that token
// before it goes on (see Wait), so no token outlives the wait it was sent
// to and release has no channel to drain. And it runs the callback if
// statusHasThen was set: Then consumed the future, and only the
// callback's task recycles the state.
//
// Done, Err and Result may run on any goroutine, with any handle, also
// while the state is being recycled and reused. Each announces itself in
// readers and then checks the handle's generation, and leaves when it is
// done reading; release bumps gen first and then waits until readers is
// zero before it clears a field. The two are sequentially consistent
// atomics, so either the reader sees the new generation and reads nothing
// more, or release sees the reader and waits for it: a reader that found
// its generation reads that operation's fields until it leaves. The
// watch on a queued operation's context (cancel) is such a reader too.
// Done calls, which may run at once, take turns making the channel
// through statusMakingDone.
type State struct {
	// First line: every operation. The 4-byte counters are sync/atomic's:
	// go.uber.org/atomic's carry a zero-size func array that pads each to
	// 8 bytes, and the line has no room for that.
	gen     atomic.Uint64
	status  stdatomic.Uint32 // status bits, see State and the status constants
	pending stdatomic.Int32  // WRs not yet completed
	value   uint64           // Value
	byteLen uint32           // ByteLen
	readers stdatomic.Int32  // Done, Err, Result and cancel calls reading the state
	failed  stdatomic.Bool   // err is set (first error wins)
	opcode  verbs.WCOpcode
	// unpooled: cancellation resolved the state while the actor may still
	// hold its submission, so release leaves it to the collector instead
	// of recycling it under the actor. (Here for the room.)
	unpooled bool
	err      error
	// giveBack gives back what the submitter lent the operation for as
	// long as it might be read (SetGiveBack): release calls it for a
	// state that succeeded. (Here for the room: the first line ends
	// here.)
	giveBack func()

	// Second line: per state, or on demand.
	// hold is the use of the operation's memory given back when its last
	// WR is done (Op.Hold), before the future resolves.
	hold *Hold
	done chan struct{} // Done's channel, set before statusHasDone
	wake chan int64    // one slot, made once per state: Wait's parking spot; holds the resolver's WakeStamp
	then func(*State)  // Then's callback, set before statusHasThen
	exec Executor
	// claim decides, for a queued operation whose context's end is
	// watched (stopCancel set), who resolves it: the actor taking it
	// (claimTaken) or the context's end (claimCancelled), whichever comes
	// first.
	claim      stdatomic.Uint32
	wrs        int32       // beside claim, for the room
	stopCancel func() bool // unwatches the context (context.AfterFunc's stop)
}

// Bits of State.status. A pooled state's status is 0.
const (
	// statusDone: the outcome is published; the consumer may recycle
	// the state.
	statusDone uint32 = 1 << iota
	// statusResolving: the resolver is reading what the bits below ask of
	// it; they no longer change, and statusDone follows.
	statusResolving
	// statusParked: Wait is parked on wake and wants a token.
	statusParked
	// statusMakingDone: a Done call is making the channel; other Done
	// calls wait for it.
	statusMakingDone
	// statusHasDone: done is set and is to be closed.
	statusHasDone
	// statusHasThen: then is set and is to be run.
	statusHasThen
)

// awaitDone yields until the resolver, which set statusResolving,
// publishes statusDone.
func (s *State) awaitDone() {
	for s.status.Load()&statusDone == 0 {
		runtime.Gosched()
	}
}

// enterRead announces a reader of the state for the handle generation
// gen and reports whether the state still has that generation; if so the
// state is not recycled until leaveRead. On false the reader has left.
// A handle already stale is turned away before it counts itself: readers
// of old handles do not write the state's first line, and a release
// waits only for calls that found the generation current just before it
// changed.
func (s *State) enterRead(gen uint64) bool {
	if s.gen.Load()&^genConsuming != gen {
		return false
	}
	s.readers.Add(1)
	if s.gen.Load()&^genConsuming != gen {
		s.readers.Add(-1)
		return false
	}
	return true
}

func (s *State) leaveRead() { s.readers.Add(-1) }

// Claims of a queued operation (State.claim).
const (
	claimOpen uint32 = iota
	claimTaken
	claimCancelled
)

var futPool = sync.Pool{New: func() any { return &State{wake: make(chan int64, 1)} }}

// New takes a state from the pool for an operation of n WRs.
func New(n int, exec Executor) (*State, Future) {
	s := futPool.Get().(*State)
	s.pending.Store(int32(n))
	if s.exec != exec {
		s.exec = exec
	}
	if int(s.wrs) != n {
		s.wrs = int32(n)
	}
	return s, Future{s: s, gen: s.gen.Load()}
}

// Failed returns a future already failed with err: for operations rejected
// before they reach a queue.
func Failed(err error, exec Executor) Future {
	s, f := New(1, exec)
	s.CompleteOne(verbs.WC{}, err, 0)
	return f
}

// Promise is the resolving side of a Future made before its operation is
// submitted: a layer that queues operations itself (as the runtime queues
// sends waiting for receive credits) hands the Future out at once and
// submits the Promise later, or fails it.
type Promise struct{ s *State }

// NewPromise returns a promise for an operation of n WRs and its future.
func NewPromise(n int, exec Executor) (Promise, Future) {
	s, f := New(n, exec)
	return Promise{s}, f
}

// Fail resolves every WR of the promise with err. Use it only for a promise
// that was never submitted.
func (p Promise) Fail(err error) { p.s.FailN(err, int(p.s.pending.Load())) }

// cancel resolves a still-queued operation of the handle generation gen
// with err, unless the actor took it first (or the handle was released),
// and reports whether it did. The state is then never recycled: the
// actor's submission still points at it, and finds it cancelled.
//
// It reads the state as Result does (enterRead): a watch that fires late,
// after the state went on to another operation, finds the generation
// changed, and release does not reopen the claim under it.
func (s *State) cancel(gen uint64, err error) bool {
	if !s.enterRead(gen) {
		return false
	}
	if !s.claim.CompareAndSwap(claimOpen, claimCancelled) {
		s.leaveRead()
		return false
	}
	s.unpooled = true
	s.leaveRead()
	s.FailN(err, int(s.pending.Load()))
	return true
}

// CompleteOne records the completion of one WR of the operation; the last
// one resolves the future, and reports true (for the futures-pending
// count). It is called exactly once per WR, by the poller that owns the
// QP's completions or by the actor for a WR it never posted.
func (s *State) CompleteOne(wc verbs.WC, err error, value uint64) bool {
	return s.CompleteCounted(wc, err, value, nil)
}

// CompleteCounted is CompleteOne that, when it resolves the future, adds
// one to resolved first, before anyone can learn of the outcome: a caller
// whose Wait returned reads a count that includes its future.
func (s *State) CompleteCounted(wc verbs.WC, err error, value uint64, resolved *atomic.Uint64) bool {
	if err != nil {
		if s.failed.CompareAndSwap(false, true) {
			s.err = err
		}
	} else {
		// Only the goroutine completing the last WR reads these, after the
		// pending counter orders the writes before it.
		s.byteLen += wc.ByteLen
		s.opcode = wc.Opcode
		if value != 0 {
			s.value = value
		}
	}
	if s.pending.Add(-1) != 0 {
		return false
	}
	if resolved != nil {
		resolved.Inc()
	}
	// The device is done with the memory: its owner may have it back
	// before anyone learns of the outcome.
	if h := s.hold; h != nil {
		s.hold = nil
		h.Release()
	}
	// Publish the outcome. A waiter that sees statusDone may recycle the
	// state at once: what the side-effect bits ask for is read before
	// (see State).
	if s.status.CompareAndSwap(0, statusDone) {
		return true
	}
	asked := s.status.Or(statusResolving)
	var done chan struct{}
	if asked&statusHasDone != 0 {
		done = s.done
	}
	var then func(*State)
	if asked&statusHasThen != 0 {
		then = s.then
	}
	s.status.Store(statusDone)
	if done != nil {
		close(done)
	}
	if asked&statusParked != 0 {
		// Never blocks: one waiter, one slot. The waiter takes the token
		// before it recycles the state.
		s.wake <- sched.WakeStamp()
	}
	if then != nil {
		// Then consumed the future: only the callback's task recycles it.
		s.runThen(then)
	}
	return true
}

// outcome returns the resolved state's error, or what read makes of its
// success.
func outcome[C any](s *State, read func(*State) C) (c C, err error) {
	if s.failed.Load() {
		return c, s.err
	}
	return read(s), nil
}

// runThen runs fn, Then's callback, on the executor; the state is
// recycled once it returned.
func (s *State) runThen(fn func(*State)) {
	task := func() {
		defer s.release()
		fn(s)
	}
	if s.exec == nil || s.exec.Submit(task) != nil {
		go task()
	}
}

// release recycles the resolved state. A Done channel that was handed out
// is not reused: a new one is made the next time someone asks. The new
// generation turns readers away; those that came before it are waited
// for, as they may still read the outcome (see State).
func (s *State) release() {
	s.gen.Store(s.gen.Load()&^genConsuming + 1)
	if s.unpooled {
		return
	}
	if s.giveBack != nil {
		if s.Succeeded() {
			s.giveBack()
		}
		s.giveBack = nil
	}
	for s.readers.Load() != 0 {
		runtime.Gosched()
	}
	if s.stopCancel != nil {
		s.stopCancel = nil
		s.claim.Store(claimOpen)
	}
	// The second line is written only when it changed (see State).
	if s.done != nil {
		s.done = nil
	}
	if s.then != nil {
		s.then = nil
	}
	s.status.Store(0)
	if s.failed.Load() {
		s.failed.Store(false)
		s.err = nil
	}
	s.value, s.byteLen, s.opcode = 0, 0, 0
	futPool.Put(s)
}

// Future is the result of an asynchronous operation. It is a small value:
// copy it freely, but consume it once, with exactly one of Wait (once it
// returned a result), Then or Release; after that its state is recycled and
// every call returns ErrReleased (Done a closed channel). One goroutine
// consumes it; Done, Err and Result may be called from any goroutine at any
// time, also while it is being consumed: each checks the handle's
// generation as a registered reader of the state, which the recycling
// waits for (see State).
//
// Wait, Result and Then hand over a success as the consumer's own type,
// made by a reader function from the state (State.ByteLen and the
// others) before it is recycled: the runtime's Completion, which is
// defined once, where its users read its documentation.
type Future struct {
	s   *State
	gen uint64
	w   Waiter // polls the CQ while Wait waits; nil for a bare promise's
}

// consume claims the state for f's consumer: it reports nil, and the
// caller alone may release the state (or give the claim back, unclaim);
// or the error of a future that cannot be consumed: the zero Future, a
// handle consumed already, or one another consumer holds now.
func (f Future) consume() error {
	if f.s == nil {
		return ErrZero
	}
	if f.s.gen.CompareAndSwap(f.gen, f.gen|genConsuming) {
		return nil
	}
	if f.s.gen.Load() == f.gen|genConsuming {
		return ErrInUse
	}
	return ErrReleased
}

// unclaim gives back the claim of consume without consuming the future.
func (f Future) unclaim() { f.s.gen.Store(f.gen) }

// Wait blocks until f's operation completes or ctx ends, and returns its
// error or what read makes of its success. A result (success or failure
// of the operation) consumes the future; ctx ending does not, and Wait
// may be called again.
//
// Waiting allocates nothing: it parks on the state's own one-slot wake
// channel, which the resolver fills; Done's channel is made only for
// callers who ask for it.
func Wait[C any](f Future, ctx context.Context, read func(*State) C) (c C, err error) {
	if err := f.consume(); err != nil {
		return c, err
	}
	s := f.s
	var spun bool
	if f.w != nil {
		spun = f.w.WaitFor(s)
	} else {
		spun = sched.YieldUntil(s.Resolved)
	}
	if !spun && s.park() {
		select {
		case stamp := <-s.wake:
			sched.WokeUp(stamp)
		case <-ctx.Done():
			if s.unpark() {
				f.unclaim()
				return c, ctx.Err()
			}
			// The resolver saw statusParked: its token is sent or on its
			// way. Taking it leaves the channel empty for the state's next
			// operation.
			<-s.wake
		}
	}
	c, err = outcome(s, read)
	s.release()
	return c, err
}

// ask sets the bits set and clears the bits clear of the status, changing
// what it asks of the resolver (the side effects the bits stand for), and
// reports true; or, once the resolver has begun, waits for the outcome to
// be published and reports false: the resolver did what the bits said
// before the change, and the caller does the rest itself.
func (s *State) ask(set, clear uint32) bool {
	for {
		st := s.status.Load()
		switch {
		case st&statusDone != 0:
			return false
		case st&statusResolving != 0:
			s.awaitDone()
			return false
		}
		if s.status.CompareAndSwap(st, st&^clear|set) {
			return true
		}
	}
}

// park sets statusParked, asking the resolver for a token on wake, and
// reports true; or false when the state is resolved.
func (s *State) park() bool { return s.ask(statusParked, 0) }

// unpark withdraws statusParked and reports true, unless the resolver
// already read it: then it reports false, and the resolver's token is
// the waiter's to take.
func (s *State) unpark() bool { return s.ask(0, statusParked) }

// Done returns a channel closed when the operation completes. The channel
// is made on the first call only.
func (f Future) Done() <-chan struct{} {
	s := f.s
	if s == nil || !s.enterRead(f.gen) {
		return closedChan
	}
	defer s.leaveRead()
	// Claim the making of the channel, or find it made.
	for {
		st := s.status.Load()
		switch {
		case st&statusDone != 0:
			return closedChan
		case st&statusHasDone != 0:
			return s.done
		case st&(statusResolving|statusMakingDone) != 0:
			runtime.Gosched()
			continue
		}
		if s.status.CompareAndSwap(st, st|statusMakingDone) {
			break
		}
	}
	ch := make(chan struct{})
	s.done = ch
	// Hand it to the resolver, unless it is resolving already.
	if s.ask(statusHasDone, statusMakingDone) {
		return ch
	}
	return closedChan
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Err returns ErrPending while the operation runs, then nil or its error.
// It does not consume the future.
func (f Future) Err() error {
	_, err := Result(f, noOutcome)
	return err
}

// noOutcome reads nothing of a success.
func noOutcome(*State) struct{} { return struct{}{} }

// Result returns f's outcome without consuming the future, a success as
// read makes it: ErrPending while the operation runs.
func Result[C any](f Future, read func(*State) C) (c C, err error) {
	s := f.s
	if s == nil {
		return c, ErrZero
	}
	if !s.enterRead(f.gen) {
		return c, ErrReleased
	}
	defer s.leaveRead()
	if !s.Resolved() {
		return c, ErrPending
	}
	return outcome(s, read)
}

// Then arranges for fn to run, on the runtime's worker pool, once f's
// operation completes (at once if it has), with its error or what read
// makes of its success. It consumes the future.
func Then[C any](f Future, read func(*State) C, fn func(C, error)) {
	if err := f.consume(); err != nil {
		var c C
		go fn(c, err)
		return
	}
	s := f.s
	then := func(s *State) { fn(outcome(s, read)) }
	// The claim is the consumer's, which alone recycles the state: the
	// generation holds without enterRead.
	s.then = then
	if s.ask(statusHasThen, 0) {
		return // the resolver runs it
	}
	s.runThen(then)
}

// Release consumes the future without waiting: use it after Done and
// Result. Releasing a pending future is allowed; its state is then left to
// the collector instead of the pool.
func (f Future) Release() {
	if f.consume() != nil {
		return
	}
	s := f.s
	if !s.Resolved() {
		// Stale from now on; the resolver still holds it, and nothing
		// recycles it.
		s.gen.Store(f.gen + 1)
		return
	}
	s.release()
}

// Waiter is what a Future's Wait polls while it waits, before it parks:
// the actor whose completions the future waits for (its WaitUntil).
type Waiter interface {
	// WaitFor polls until s is resolved or the wait window ends, and
	// reports whether s was resolved. It takes the state, not a closure,
	// so that a dynamic call lets nothing escape to the heap.
	WaitFor(s *State) bool
}

// Resolved reports whether the operation has completed.
func (s *State) Resolved() bool { return s.status.Load()&statusDone != 0 }

// Succeeded reports whether the operation has completed without an
// error.
func (s *State) Succeeded() bool { return s.Resolved() && !s.failed.Load() }

// WithWaiter returns f whose Wait polls through w.
func (f Future) WithWaiter(w Waiter) Future {
	f.w = w
	return f
}

// State returns the state behind a promise, for the actor that queues it.
func (p Promise) State() *State { return p.s }

// Recycle gives the state back to the pool: for a submission that never
// reached a queue, whose future nobody holds.
func (s *State) Recycle() { s.release() }

// SetHold sets the use of the operation's memory given back once its last
// WR is done.
func (s *State) SetHold(h *Hold) { s.hold = h }

// SetGiveBack sets what gives back memory the submitter lent the
// operation and pools, such as the ops of a batch: the resolver may read
// them until the operation has succeeded, and never after. The consumer
// calls fn when it consumes the state after the operation succeeded:
// Wait returning the result, the end of Then's callback, or Release of a
// resolved future. A state that failed, or that Release leaves pending,
// drops fn uncalled: a failed operation may have been failed while its
// resolver was still about to read what fn would give back. Set it
// before the state is submitted.
func (s *State) SetGiveBack(fn func()) { s.giveBack = fn }

// TakeHold returns the hold and clears it.
func (s *State) TakeHold() *Hold {
	h := s.hold
	s.hold = nil
	return h
}

// WRs returns how many WRs the operation has.
func (s *State) WRs() int { return int(s.wrs) }

// The outcome of a success, for the reader given Wait, Result or Then,
// which calls them while the state is the consumer's.

// Opcode returns the opcode of the operation's last work completion.
func (s *State) Opcode() verbs.WCOpcode { return s.opcode }

// ByteLen returns the bytes the operation's work requests moved.
func (s *State) ByteLen() uint32 { return s.byteLen }

// Value returns what an atomic found at the remote address.
func (s *State) Value() uint64 { return s.value }

// FailN fails n WRs of the operation that were never posted and reports
// whether that resolved the future.
func (s *State) FailN(err error, n int) (resolved bool) {
	return s.FailCounted(err, n, nil)
}

// FailCounted is FailN counting the resolution as CompleteCounted does.
func (s *State) FailCounted(err error, n int, resolved *atomic.Uint64) (ended bool) {
	for range n {
		ended = s.CompleteCounted(verbs.WC{}, err, 0, resolved)
	}
	return ended
}

// Watched reports whether the end of the operation's context is watched
// (WatchContext) while it is queued.
func (s *State) Watched() bool { return s.stopCancel != nil }

// Take claims a watched operation for the queue's consumer, which then
// posts or fails it, and stops the watch. It reports false when the
// context's end claimed it first: the watch resolves it, and the consumer
// only drops it.
func (s *State) Take() bool {
	taken := s.claim.CompareAndSwap(claimOpen, claimTaken)
	s.stopCancel()
	return taken
}

// CancelledWhileQueued reports whether the watch on a watched operation's
// context resolved it.
func (s *State) CancelledWhileQueued() bool { return s.claim.Load() == claimCancelled }

// WatchContext fails the queued operation when ctx ends, unless the
// consumer took it first (Take): with failure(ctx.Err()) as its error, and
// then calls cancelled (to wake the consumer, which drops it). The state
// is then never recycled: the consumer's queue still points at it.
func (s *State) WatchContext(ctx context.Context, failure func(error) error, cancelled func()) {
	gen := s.gen.Load() &^ genConsuming // a Wait may be in progress
	s.stopCancel = context.AfterFunc(ctx, func() {
		if s.cancel(gen, failure(ctx.Err())) {
			cancelled()
		}
	})
}
