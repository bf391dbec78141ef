// Package future is the state behind every operation's future: one pooled
// State per operation, resolved exactly once (by its last WR's completion,
// its flush, a failure before it reached the device, or its context's end
// while it was queued), and the handle (Future) that reads it, checked by
// generation so a stale handle never sees the next operation's outcome.
//
// The actor (qpactor) makes and resolves states; the runtime wraps Future
// in its own documented type and reads a success into its own Completion
// (Wait, Result and Then take the reader). Nothing here blocks a
// resolver: Wait parks on the state's own one-slot channel, Done's
// channel is made on demand, and Then callbacks run on the runtime's
// executor.
package future
