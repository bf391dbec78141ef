// Command verbsrt is verbsrt's command-line tool.
//
//	verbsrt help [COMMAND]
//	verbsrt version
//	verbsrt bench [write|read|send|atomic] [-lat] [-s SIZE|-a] [-n ITERS|-D SECS] [-q QPS] [-callers N] [-t DEPTH] [-provider soft|rocev2|ibv] [-d DEV] [--json]
//	verbsrt bench [TEST] [flags] -server [-p PORT]     (perftest's server: waits for one client)
//	verbsrt bench TEST [flags] [-p PORT] HOST          (perftest's client)
//	verbsrt demo [-s SIZE] [-b BATCH] [-provider soft|rocev2]
//	verbsrt devices [-provider soft|rocev2|ibv] [-d DEVICE] [-gids N]
//	verbsrt doctor [-device SPEC] [-memory-limit BYTES]
//	verbsrt pingpong [-provider ibv|rocev2|soft] [-d DEV] [-i PORT] [-g GIDX] [-s SIZE] [-n ITERS] [-m MTU] [-r RXDEPTH] [-p TCPPORT] [-e] [-c] [HOST]
//	verbsrt serve-metrics [-listen ADDR] [-provider soft|rocev2|ibv] [-d DEV] [-q QPS] [-callers N] [-rate OPS] [-s SIZE]
//	verbsrt udpfloor [-tests LIST] [-n COUNT] [-window N] [-addr ADDR] [-p PORT] [-json] [-server | HOST]
//
// Each command prints its flags with -h, or through verbsrt help
// COMMAND, on stdout and exits 0. A command line that cannot run (an
// unknown command, flag or test, a value out of range) exits 2; a command
// that runs and fails exits 1.
//
// bench takes perftest's flag names where perftest has the flag (-s, -n,
// -d, -i, -x, -p, -c, -q, -t, -a, -D, -r, -F, --report_gbits); -c is the
// connection type, RC, the one the runtime connects; -callers is how many
// goroutines issue operations.
//
// bench with neither -server nor HOST runs both ends in this process.
//
// The provider: -provider, else $VERBSRT_PROVIDER, else the command's
// default (soft; ibv for bench's -server and client and for pingpong).
// soft reaches runtimes of its own process only. rocev2 speaks RoCE v2
// over UDP from an unprivileged socket bound to -rocev2-addr (an IPv6
// address, ::1 by default) and -rocev2-port (0 by default: a free port),
// so two processes of one host, or two hosts, connect without a NIC or a
// kernel module: each process binds a port of its own and the connection
// handshake announces it as the port's LID (package verbs/rocev2 says
// how). The commands that take -provider also take -rocev2-addr and
// -rocev2-port.
//
// demo runs the main job on the soft provider (or on rocev2, two sockets
// of this process): it connects an RC QP on its first device to one on its
// second, runs an RDMA WRITE, a READ, a SEND with immediate
// data, a FETCH_AND_ADD, a CMP_AND_SWP and a batch of WRITEs posted with one
// doorbell, checks the memory each touched and prints what happened.
//
// udpfloor is the UDP floor, what rocev2's figures are read against: plain
// Go moving the datagrams rocev2 would over UDP, round trips and one-way
// streams, as a server (-server), its client (HOST) or both in this
// process.
//
// The command holds the flags, the configuration and the printing; what
// the commands run lives in internal packages it shares with bench/ and
// the examples: internal/rtbench (bench over the runtime, and its
// two-process control protocol), internal/direct (the Go floor of
// -direct), internal/perftest (perftest's out-of-band exchange),
// internal/rcpingpong (pingpong), internal/rcdemo (demo),
// internal/udpfloor (udpfloor) and
// internal/provider (a provider by name, and -rocev2-faults).
package main
