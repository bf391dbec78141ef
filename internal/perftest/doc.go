// Package perftest speaks perftest's out-of-band protocol, the TCP
// exchange of ib_write_bw, ib_read_bw, ib_send_bw and ib_atomic_bw
// (perftest 6.06, Debian's 4.5-0.17, src/perftest_communication.c), so
// that either end of "verbsrt bench -direct" may be the C program. The client connects to
// the server's port (18515); every exchange below is symmetric: the client
// writes its value and then reads the server's, the server reads and then
// writes, each value a fixed number of bytes.
//
//	versions      16 bytes: the version as a NUL-terminated string
//	              ("6.06"; the peer refuses one older than 5.70)
//	sys data      from 5.32 on: the cycle buffer (page size) and then the
//	              cache line size, each a 32-bit big-endian int; both
//	              ends take the larger of each
//	MTU           from 5.1 on: the enum ibv_mtu of the port in decimal,
//	              NUL-terminated, 2 bytes from 5.31 on (4 before); both
//	              ends take the smaller
//	keys          one handshake: LID, out_reads, QPN, PSN, rkey, vaddr
//	              (and the GID when the ends use one) as text in
//	              KEY_PRINT_FMT or KEY_PRINT_FMT_GID, NUL-padded to 59 or
//	              108 bytes
//
// Then, for one QP, the keys handshake three times (before the QP is
// connected, after, and once more after RTR), and the client of write,
// read or atomic starts its run; send has a fourth, the sync before the
// run, once its server posted its receives. After the run:
//
//	write, read, atomic  a keys handshake (the server waits there for the
//	                     client's run), then the reports: size and iters as
//	                     64-bit, bw_peak, bw_avg and msgRate as 64-bit
//	                     big-endian IEEE doubles, each value exchanged on
//	                     its own; the server prints the client's
//	send                 each end prints its own result
//
// and last a keys handshake and "done" with its NUL (5 bytes), which
// neither end reads, before the ends close.
package perftest
