// Package ring holds the inbox of a QP actor and the way its consumer
// waits: Ring, a bounded lock-free multi-producer single-consumer queue of
// values, and Waker, which parks (or ends) the consumer when the ring stays
// empty and lets producers wake it with one atomic load on the fast path.
//
// The two are apart on purpose: the ring never blocks, and the wait
// strategy (sleep on a channel, or end and be restarted) is the consumer's
// choice, made through the Waker it pairs with the ring.
package ring
