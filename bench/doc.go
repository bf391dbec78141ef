// Package bench holds verbsrt's side-by-side benchmarks: the same 64-byte
// RDMA WRITEs on the soft provider, issued through the runtime (actors and
// pollers), through the obvious hand-written alternative (a mutex around
// one QP, one signaled PostSend and one channel per operation, one polling
// goroutine), and by a single goroutine that posts and polls with no
// synchronization at all, the limit of the provider.
//
// The package has no API; its tests are the harness. README.md gives the
// commands, what each variant measures and the results table.
package bench
