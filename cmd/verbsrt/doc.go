// Command verbsrt is verbsrt's command-line tool.
//
//	verbsrt help [COMMAND]
//	verbsrt version
//	verbsrt bench [write|read|send|atomic] [-lat] [-s SIZE|-a] [-n ITERS|-D SECS] [-q QPS] [-callers N] [-t DEPTH] [--provider soft|ibv] [-d DEV] [--json]
//	verbsrt bench [TEST] [flags] -server [-p PORT]     (perftest's server: waits for one client)
//	verbsrt bench TEST [flags] [-p PORT] HOST          (perftest's client)
//	verbsrt demo [-s SIZE] [-b BATCH]
//	verbsrt devices [--provider soft|ibv] [-d DEVICE] [-gids N]
//	verbsrt doctor [-device SPEC] [-memory-limit BYTES]
//	verbsrt pingpong [--provider ibv|soft] [-d DEV] [-i PORT] [-g GIDX] [-s SIZE] [-n ITERS] [-m MTU] [-r RXDEPTH] [-p TCPPORT] [-e] [-c] [HOST]
//	verbsrt serve-metrics [-listen ADDR] [--provider soft|ibv] [-d DEV] [-q QPS] [-callers N] [-rate OPS] [-s SIZE]
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
// demo runs the main job on the soft provider: it connects an RC QP on
// soft0 to one on soft1, runs an RDMA WRITE, a READ, a SEND with immediate
// data, a FETCH_AND_ADD, a CMP_AND_SWP and a batch of WRITEs posted with one
// doorbell, checks the memory each touched and prints what happened.
package main
