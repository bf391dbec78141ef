// Package ring holds the inbox of a QP actor: Ring, a bounded lock-free
// multi-producer single-consumer queue of values. It never blocks and
// knows nothing of waiting: how its consumer waits, and who that consumer
// is, is the actor's (qpactor's runOwner).
package ring
