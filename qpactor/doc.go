// Package qpactor runs one actor goroutine per queue pair: callers enqueue
// work requests on a lock-free inbox ring, and the actor, the only code that
// posts to its QP, drains the ring and chains what it found into one
// PostSend.
package qpactor
