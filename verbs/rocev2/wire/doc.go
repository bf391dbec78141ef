// Package wire is the codec of the InfiniBand transport layer as RoCE v2
// carries it in UDP: the BTH; the RETH, AETH (ACK with credits, RNR NAK
// with its timer code, the NAK codes), ImmDt, IETH, AtomicETH,
// AtomicAckETH and DETH; the opcode table of RC, UC and UD with the
// headers each opcode carries and its place in a message (first, middle,
// last, only); the CNP. Encoding and decoding check every length and
// return errors, never panic: the wire is hostile. PSN arithmetic is
// 24-bit with the IB half-window comparison. The ICRC follows IBA Annex
// A17.3.3 (icrc.go lists the masked fields and why) and matches a packet
// captured from a ConnectX-4 Lx.
//
// The package holds no state and opens no socket: package rocev2 runs the
// transport over it, and a fault filter or a test reads packets with it.
// Its types may be used from any number of goroutines; a Packet is a
// value owned by whoever decodes or builds it.
package wire
