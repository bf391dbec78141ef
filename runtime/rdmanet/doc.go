// Package rdmanet is net.Conn and net.Listener over a runtime's endpoints,
// so that gRPC, net/http and any Go protocol written against net.Conn run
// over RDMA unchanged, on every provider:
//
//	ln, _ := rdmanet.Listen(rt, "0.0.0.0:7471")
//	go grpcServer.Serve(ln)
//
//	conn, _ := grpc.NewClient("passthrough:///"+addr, grpc.WithContextDialer(
//		func(ctx context.Context, addr string) (net.Conn, error) { return rdmanet.Dial(ctx, rt, addr) }),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//
// # The stream
//
// A Conn carries its bytes in SENDs, the runtime's messages, each at most
// the peer's message size (WithMessageSize, 4 KiB by default), and reads
// them from Endpoint.Recv. The runtime's receive credits are the flow
// control: a message waits for one of the peer's posted receives, so a
// writer never overruns its reader, and a reader that stops reading stops
// the grants (the runtime counts the messages the application holds). So
// a slow reader slows the writer down; neither side's memory grows:
//
//   - Write copies into the conn's registered send buffers, at most 64
//     messages (256 KiB at the default size), allocated as the stream needs
//     them (fewer once the runtime's WithMemoryLimit is reached), and
//     returns once its bytes are copied, as a socket's Write returns once
//     the kernel has them. With all of them in flight it waits for one to
//     complete.
//   - Small writes are coalesced: while 4 or more messages are in flight,
//     a Write's tail shorter than a message stays in the current buffer,
//     the next Write appends to it, and the next completion sends it.
//     With fewer in flight it goes at once, so a request and its response
//     pay no delay.
//   - Large writes are split into messages of the peer's size.
//   - Read returns the bytes of at most one message; it copies them out
//     and gives the receive buffer back when the message is read.
//
// Why SEND/RECV and not RDMA WRITE into a ring the reader exposed, as
// rsocket does: Write's bytes come from the Go heap, which cannot be
// registered, so a copy into registered memory is paid either way; the
// runtime's credits and shared receive pool already give flow control and
// memory bounded per runtime, not per conn; and a ring would cost every
// conn its exposure and a second round of credit messages.
//
// # The net.Conn contract
//
//   - Deadlines: a Read or Write blocked when its deadline passes, or
//     started after it, returns an error matching os.ErrDeadlineExceeded
//     (a net.Error whose Timeout is true). Moving the deadline affects a
//     call already blocked; the conn stays usable. A Write that times out
//     returns how much of p it took.
//   - Close unblocks every Read and Write on this side at once (net.ErrClosed).
//     Bytes written before it, and then the end of the stream, still reach
//     a peer that reads them, for up to 10 s; the peer's Read returns
//     io.EOF after the last byte. Then the endpoint closes.
//   - A connection that ends without the end of the stream (the peer's
//     runtime or endpoint closed under its conn, or the linger ran out with
//     bytes unsent) fails the peer's Read with an error matching
//     io.ErrUnexpectedEOF: a stream cut short never passes for a whole one.
//   - CloseWrite (half-close) sends the end of the stream after the bytes
//     before it: the peer's Read returns io.EOF, and this side may still
//     read.
//   - A peer that dies or becomes unreachable ends the conn as it ends the
//     endpoint (runtime package, "Endpoint lifecycle"): blocked and later
//     calls fail with an error matching runtime.ErrPeerLost.
//   - LocalAddr and RemoteAddr are runtime.Addr (network "rdma": GID and
//     QP number). Listener.Addr is the TCP address of the handshake, what
//     Dial takes.
//   - Errors are *net.OpError, as the net package's are; io.EOF is
//     returned as itself.
//
// Both ends must be Conns: the stream's end (Close, CloseWrite) travels as
// a SEND with immediate data, which a Conn never sends otherwise.
//
// Tests that need modules the library does not (golang.org/x/net/nettest's
// conformance suite, gRPC, net/http) are in the examples/rdmanet module,
// so that a user of verbsrt does not depend on them.
package rdmanet
