// Package direct is the Go floor: verbs posted and polled with no runtime
// between the caller and the QP, what "verbsrt bench -direct" measures the
// runtime against.
//
// One goroutine per end owns its QP and CQs. In a bandwidth test the
// client posts chains of WRs itself, signalling every CQMod'th and the
// run's last, and polls its send CQ; the server of send posts receives
// and polls its receive CQ. No runtime, no actor, no future: what remains
// is the provider's cost and Go's. The ends meet over perftest's own
// protocol (internal/perftest), so either may be ib_write_bw, ib_read_bw,
// ib_send_bw or ib_atomic_bw.
package direct
