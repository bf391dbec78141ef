// Package direct is the Go floor: verbs posted and polled with no runtime
// between the caller and the QP, what the runtime is measured against.
//
// Two shapes of it live here. Loop is the floor of the benchmarks of
// bench/: one goroutine owns a connected pair of QPs of one process and
// streams chains of WRITEs or SENDs, or one WRITE at a time, over them.
// RunEnd and RunPair are the ends of "verbsrt bench -direct": one
// goroutine per end owns its QP and CQs. In a bandwidth test the client
// posts chains of WRs itself, signalling every CQMod'th and the run's
// last, and polls its send CQ; the server of send posts receives and
// polls its receive CQ. No runtime, no actor, no future: what remains is
// the provider's cost and Go's. The ends meet over perftest's own
// protocol (internal/perftest), so either may be ib_write_bw, ib_read_bw,
// ib_send_bw or ib_atomic_bw.
package direct
