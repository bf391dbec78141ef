// Package benchkit is what the benchmark programs (bench/scale, bench/soak,
// bench/connstream and verbsrt bench) and the runtime/rdmanet tests share:
// a benchmark's result line and its latency statistics, opening a runtime
// on a provider by name, connecting an endpoint pair through a listener,
// CPU profiles and execution traces, the Go heap after the collector
// settled, and what the process holds by the operating system's count (OS
// threads, open file descriptors, CPU time, the machine's load average;
// known on Linux only, -1 or "?" elsewhere).
package benchkit
