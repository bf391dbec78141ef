// Command connstream is rstream's test (librdmacm's rsocket benchmark) over
// runtime/rdmanet's net.Conn, or over TCP, so that the three compare line
// for line: the same flags, the same exchange, the same report.
//
// Each of -I iterations, the client writes -C transfers of -S bytes and
// reads as many back, and the server reads them and writes them back;
// the client reports rstream's line: bytes moved both ways, Gb/s, and
// µs per transfer (the time over iterations x transfers x 2). -C 1 is
// rstream's latency test (half a round trip), a large -C its bandwidth
// test.
//
//	connstream -server -provider ibv -d rxe1 -b 198.18.0.2     # the server
//	connstream -provider ibv -d rxe0 -s 198.18.0.2 -S 64 -C 1 -I 1000
//	connstream -S 64 -C 1 -I 1000                              # both ends in this process, soft
//	connstream -T s ...                                        # TCP instead, as rstream -T s
//
// -stats prints, on stderr at the end, each end's runtime counters (PostSend
// calls and WRs, actor runs, inline posts, parked waits, poller sleeps,
// polls) and the process's CPU time and context switches: a stream bound
// by the device leaves its CPUs idle, one bound by its own work does not.
//
// bench/rxe-rstream runs it next to rstream in the rxevm guest.
package main
