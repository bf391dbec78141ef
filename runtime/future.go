package runtime

import (
	"context"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/verbs"
)

// Future is the result of an asynchronous operation (Write, Read, Send,
// Post, ...). It is a small value: copy it freely, but consume it once,
// with exactly one of Wait (once it returned a result), Then or Release;
// after that its state is recycled and every method returns ErrReleased
// (Done a closed channel).
//
// One goroutine consumes a Future; Done, Err and Result may be called from
// any goroutine at any time, also while it is being consumed. A misuse
// stays with the call that makes it: a Wait or Then on a copy while
// another Wait or Then consumes the future fails at once with an error
// matching ErrReleased, and changes nothing of the operation or of any
// other. The zero Future, which no operation returned, fails with an
// error that says so, matching ErrInvalidArgument.
//
// A Future resolves exactly once: with the operation's completion, with the
// error of a work completion or a flush, with the error of a rule broken
// before it reached the device, with its context's error if that ended
// while it was still queued, or with an error matching ErrClosed when the
// endpoint or runtime closed first. Its error is an *OpError.
type Future struct{ f future.Future }

// Completion is what a successful operation reports.
type Completion struct {
	// Opcode is the work completion's opcode.
	Opcode verbs.WCOpcode
	// ByteLen is the number of bytes moved (for a batch: the sum).
	ByteLen uint32
	// Value is what an atomic found at the remote address before it acted
	// (FETCH_AND_ADD, CMP_AND_SWP); a compare-and-swap succeeded when
	// Value equals the compare operand.
	Value uint64
	// WRs is the number of work requests the future covered: 1, or the
	// batch size.
	WRs int
}

// Wait blocks until the operation completes or ctx ends. A result (success
// or failure of the operation) consumes the future; ctx ending does not, and
// Wait may be called again. Waiting allocates nothing.
func (f Future) Wait(ctx context.Context) (Completion, error) {
	if ctx == nil {
		return Completion{}, future.ErrNilContext
	}
	return future.Wait(f.f, ctx, completionOf)
}

// completionOf reads the Completion of a successful operation's state.
func completionOf(s *future.State) Completion {
	return Completion{Opcode: s.Opcode(), ByteLen: s.ByteLen(), Value: s.Value(), WRs: s.WRs()}
}

// Done returns a channel closed when the operation completes. The channel
// is made on the first call only.
func (f Future) Done() <-chan struct{} { return f.f.Done() }

// Err returns ErrPending while the operation runs, then nil or its error.
// It does not consume the future.
func (f Future) Err() error { return f.f.Err() }

// Result returns the outcome without consuming the future: ErrPending while
// the operation runs.
func (f Future) Result() (Completion, error) {
	return future.Result(f.f, completionOf)
}

// Then arranges for fn to run, on the runtime's worker pool
// (Tuning.CallbackWorkers), once the operation completes (at once if it has). It
// consumes the future. fn must not wait for another future's Then
// callback.
func (f Future) Then(fn func(Completion, error)) {
	future.Then(f.f, completionOf, fn)
}

// Release consumes the future without waiting: use it after Done and
// Result, or to drop an operation's outcome. Releasing a pending future is
// allowed.
func (f Future) Release() { f.f.Release() }
