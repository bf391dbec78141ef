// Scale measures what idle endpoints cost and what they do to an active
// one (thousands of connected endpoints in one process, idle ones nearly
// free, active ones unaffected), so that every change to it is measured by
// the same command:
//
//	go run ./bench/scale -pairs 1,100,1000,5000 -memlimit 3GiB
//
// For each number of pairs N in -pairs, the program runs a child process
// of its own (it starts itself again), so that a process that dies (of
// "fatal error: thread exhaustion", say, where every endpoint keeps an OS
// thread) takes only its own row down: the parent prints that N died, how
// far it got and why (from the child's stderr), and goes on with the next.
//
// A child makes two runtimes with default options (the default soft
// provider, which runtimes of one process share), connects N endpoint
// pairs through Listen on one and Dial on the other, and measures:
//
//   - heap/ep, stack/ep: HeapInuse and StackInuse after runtime.GC() with
//     the N pairs idle, minus the same before the first pair, over the 2N
//     endpoints;
//   - reg/ep: the registered memory both runtimes mapped (Stats.ArenaBytes), the
//     same delta over 2N. The arena grows 4 MiB at a time, so small N
//     show that step rather than the endpoints;
//   - threads: the process's OS threads (/proc/self/status) once every
//     endpoint has been idle for -pause, past the actors' and pollers'
//     spin windows; goroutines likewise;
//   - idle CPU: user and system time (getrusage) over -idlecpu of
//     idleness, as a share of one core;
//   - WRITE+Wait: the latency of a -size byte WRITE on one pair, the last
//     connected, while the other N-1 stay idle, waited for one at a time
//     (median and 99th percentile of -ops, after -warmup);
//   - SEND/Recv: a round trip on that pair: one side Sends and waits for
//     its future, the other Recvs, Releases and Sends back, and the first
//     Recvs and Releases the reply;
//   - 1st pair, alone -> now: the p50s of both on the first pair, measured
//     right after it connected (with N > 1) and again at the end with the
//     other N-1 idle: the same pair in the same process, so that nothing
//     but the idle endpoints differs (the ratios against the baseline row
//     compare two processes, whose round trips differ from one run to the
//     next). Its time is not counted as setup; what its operations grew
//     (the first pair's arrays) is in heap/ep, a negligible share at large
//     N;
//   - setup: the time of each pair's Dial and Accept together; the mean of
//     the first and of the last tenth of the pairs, and their ratio;
//   - close/pair: the time both runtimes' Close took, over N;
//   - load: the machine's load average over the minute before the
//     latencies, since other work on the machine shows in all of them;
//   - core-to-core: a cache line's round trip between two locked threads
//     (benchkit.CoreToCore) before and after the latencies. A virtual
//     machine may have two modes, fast and slow, that change between runs,
//     and the runtime's SEND/Recv round trip moves with them: a ratio
//     between rows in different modes measures the machine.
//
// The first N of -pairs is the baseline of the latency ratios printed
// beside each latency: run it with 1 first to compare against one pair.
// -rounds K runs the whole list K times, round-robin, each round's first N
// the baseline of its round, and ends with a table of each N's medians over
// the rounds, every round's SEND/Recv ratio sorted, and those of the rounds
// whose two rows ran in one core-to-core mode. The tables are markdown,
// for bench/README.md.
//
// -interleave B measures the latencies another way, for a machine whose
// speed drifts between runs. The children of a round start one after
// another, each once the one before has connected its pairs and measured
// its idleness, and stay alive together; then they take turns, one block
// each (-warmup and -ops of WRITE+Wait, then of SEND/Recv, on the active
// pair), the order reversed from block to block, B blocks in all. Blocks
// side by side ran milliseconds apart, on the same machine, while the
// other children idled. The run ends with each N's
// block-by-block ratios to the baseline: their median and 10th-90th
// percentiles. Listing an N twice (-pairs 1,5000,1) shows how far two
// children of the same N differ by this measure:
//
//	go run ./bench/scale -pairs 1,5000,1 -interleave 100 -rounds 3
//
// An idle endpoint takes its actor's scratch and the 3 receive buffers of
// 4 KiB that back its peer's initial credits in the runtime's shared
// receive pool, and each runtime maps at most 1 GiB unless told otherwise
// (-memlimit sets the WithMemoryLimit of both runtimes).
// -trace writes an execution trace per N and phase, named as -cpuprofile's.
// -cpuprofile writes a CPU profile per N and phase, named with both before
// the extension (cpu.out becomes cpu.5000.setup.out, cpu.5000.idle.out,
// cpu.5000.write.out, cpu.5000.roundtrip.out and cpu.5000.close.out), so that what connecting
// costs, what idleness costs and what slows the active pair are seen
// apart; -memprofile writes a heap profile per N (heap.5000.out), taken
// with the pairs idle.
//
// A child that fails or dies (or outlives -timeout) gets a row saying so
// and the run goes on; the program exits 0 unless it could not run at
// all. Run the large N once, on a machine as quiet as can be had.
package main
