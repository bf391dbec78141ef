// Package rcpingpong is rdma-core's ibv_rc_pingpong in Go: the exchange
// of LID, QPN, PSN and GID in its text format, the RC QPs it connects and
// its loop of SENDs bounced between the ends, with the lines it prints,
// so that either end of "verbsrt pingpong" may be the C program.
package rcpingpong
