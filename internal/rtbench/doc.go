// Package rtbench runs perftest's tests (ib_{write,read,send,atomic}_
// {bw,lat}) over the runtime: a pair of runtimes with endpoints between
// them, callers that keep a window of operations in flight or time one at
// a time, the rates and latencies of each size, and the control protocol
// by which a client and a server in two processes agree on a run. It is
// the engine of "verbsrt bench"; the command keeps the flags, the
// configuration a server adopts and the printing (a Reporter).
package rtbench
