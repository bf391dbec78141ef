// Package opstats holds the counters a QP actor keeps for metrics: its
// doorbells and WRs, WRs by opcode, PostSend batch sizes, futures taken
// and resolved, and a sparse sample of operation latencies. Each counter
// has one writer (the actor, the poller or a parked waiter) and is read
// with Load from any goroutine; the runtime sums them into its Stats.
package opstats
