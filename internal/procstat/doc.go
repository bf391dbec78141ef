// Package procstat reads what the process holds from the operating
// system: OS threads, open file descriptors, CPU time and the machine's
// load average. The benchmark programs (bench/scale, bench/soak) report
// them beside the Go runtime's own figures; they are known on Linux only
// and read as -1 (or "?") elsewhere.
package procstat
