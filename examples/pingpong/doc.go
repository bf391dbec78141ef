// Pingpong is the runtime's version of rdma-core's ibv_rc_pingpong: a
// server endpoint and a client endpoint in one process, on the pure-Go soft
// provider. The client sends -n messages of -s bytes; the server echoes
// each back with Send; the client checks every byte of every reply and
// prints the throughput and latency lines ibv_rc_pingpong prints:
//
//	$ go run ./examples/pingpong -n 1000 -s 4096
//	  local address:  QPN 0x000011 (client)
//	  remote address: QPN 0x000012 (server)
//	8192000 bytes in 0.23 seconds = 290.64 Mbit/sec
//	1000 iters in 0.23 seconds = 225.49 usec/iter
//	verified 1000 replies of 4096 bytes: OK
//
// Every message carries a pattern that depends on its iteration, so a
// reply that is stale, short or corrupted is caught; the program exits
// non-zero on any mismatch or error.
//
// Both sides Release each received message as soon as they are done with
// it, so its buffer goes back to the endpoint's receive pool at once. The
// runtime re-posts receives from that pool when completions arrive and
// returns the credits to the peer, so neither side ever sends into an empty
// receive queue (no RNR NAKs).
//
// Nothing is exposed: SEND and receive need no remote key, so neither side
// grants the other any access to its memory (the runtime's arena is
// registered for local access only). One-sided operations need an
// exposure (Buffer.Expose); see examples/kv.
package main
