// Package lockrank holds the module's lock order, written once (rank.go),
// and Mutex, a mutex whose type names its place in that order.
//
// A lock's rank is a type argument, so a field declares it where the lock
// lives and the zero value is ready to use:
//
//	mu lockrank.Mutex[lockrank.CQOwner]
//
// The rule: a goroutine that holds locks may Lock one only if it ranks
// above every lock it holds. Locks are released in any order. Two locks of
// one rank, two instances of one field among them, never nest through
// Lock: the order says nothing about which of them comes first, so nesting
// them is how two goroutines deadlock. TryLock never waits, so it may take
// any lock, whatever the goroutine holds; what it took counts like any
// other lock for the Locks that follow.
//
// Built without the lockrank tag, Mutex is a sync.Mutex and nothing else:
// its methods inline to sync.Mutex's, and the rank costs nothing. Built
// with it (go test -race -tags lockrank, as the Makefile's race targets
// do), every Lock, TryLock and Unlock records which goroutine holds which
// ranked lock, and a Lock that breaks the rule panics, before it waits,
// with a message that names the lock taken and every lock held, with their
// ranks. That makes every test that runs a chain of locks a test of the
// order, not only the ones that happen to deadlock.
//
// The record is process-wide (a table keyed by goroutine id) and exists
// only under the tag. The id is read from the runtime's goroutine
// structure, at an offset found at init by comparing a few goroutines'
// structures with their stack traces; where that fails, from a stack
// trace per call. Under the race detector too, it adds no
// happens-before edge between the goroutines that take ranked locks, so it
// hides none of the races the detector would otherwise report.
package lockrank
