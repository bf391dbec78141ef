// Package rocev2 is a pure-Go RoCE v2 transport: the InfiniBand transport
// layer (BTH and its extension headers, PSNs, ACKs and NAKs, the ICRC)
// carried in UDP from an ordinary unprivileged socket, so that processes
// without an RDMA NIC or the kernel's rxe module can speak RDMA to each
// other, and in principle to rxe and RoCE NICs.
//
// # What works
//
// The packet codec: the BTH; the RETH, AETH (ACK with credits, RNR NAK
// with its timer code, the NAK codes), ImmDt, IETH, AtomicETH,
// AtomicAckETH and DETH; the opcode table of RC, UC and UD with the
// headers each opcode carries and its place in a message (first, middle,
// last, only); the CNP. Encoding and decoding check every length and
// return errors, never panic. PSN arithmetic is 24-bit with the IB
// half-window comparison. The ICRC follows IBA Annex A17.3.3 (icrc.go
// lists the masked fields and why) and matches a packet captured from a
// ConnectX-4 Lx.
//
// # What does not work yet
//
// Everything above the codec: the UDP transport, the RC requester and
// responder, UD, and the verbs.Provider implementation.
package rocev2
