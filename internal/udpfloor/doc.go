// Package udpfloor is the UDP floor: a plain Go program moving over UDP
// the datagrams the rocev2 provider would move for the same exchange,
// between two processes of one machine, with nothing but the standard
// library and golang.org/x/net/ipv6's batched reads and writes
// (recvmmsg, sendmmsg on Linux). The rocev2 provider's cost is set by its
// socket; what this package measures on the same machine is what any Go
// program pays for those datagrams, the figure the provider is read
// against, as internal/direct is the Go floor on the soft provider.
//
// Two exchanges, each a Test:
//
//   - rr: a round trip. The client sends one datagram and waits for the
//     server's echo of it before it sends the next, as a ping-pong of
//     one-packet messages does.
//   - stream: one-way throughput. The client sends messages of Size bytes
//     cut into datagrams of at most Chunk bytes of payload (the provider's
//     path MTU, 4096: it cuts a message into path-MTU packets and sends
//     each as a datagram of its own), Batch datagrams a system call
//     (1: WriteTo and ReadFrom; more: WriteBatch and ReadBatch). The
//     server acknowledges the highest datagram it has seen every half
//     window, with one small datagram per read call at most, and the
//     client keeps at most Window datagrams unacknowledged: without such
//     a window a one-way UDP sender outruns its receiver and the figure
//     is the kernel's drops, and RC's ACKs are what the provider sends
//     back too. The default window is two batches of 64, so that the
//     client writes whole batches while the other half is on its way.
//
// Every datagram carries, beside its payload, the 32 bytes a RoCE v2
// WRITE ONLY packet adds to it (BTH, RETH, ICRC), so that the datagrams
// are the provider's in size; the payload's first 8 bytes number it.
// Reads block in Go's network poller, as a plain Go program's do; nothing
// spins.
//
// Each end measures its own CPU time (getrusage RUSAGE_SELF, user and
// system) over each test, and the server reports its figure and the
// datagrams it received to the client over the control connection: a TCP
// connection carrying one JSON object per line (see Serve and Run). A
// lost datagram is counted, not resent: a client whose window stays full
// past StallTimeout gives up on what is outstanding and goes on, and a
// round trip whose echo does not come within it counts as lost.
package udpfloor
