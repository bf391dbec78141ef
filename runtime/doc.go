// Package runtime is what verbsrt's users import: a Runtime opens an RDMA
// device (the soft provider unless told otherwise), and its Endpoints turn
// verbs into Go-native asynchronous operations.
//
//	rt, _ := runtime.New()
//	defer rt.Close(ctx)
//	ln, _ := rt.Listen("127.0.0.1:0")
//	go func() { srv, _ := ln.Accept(ctx); ... }()
//	ep, _ := rt.Dial(ctx, ln.Addr().String())
//	buf, _ := rt.Alloc(4096)                 // registered; no peer can reach it
//	f := ep.Write(ctx, buf.Local(), peerRef) // peerRef: from the peer's Exposure; returns once queued
//	_, err := f.Wait(ctx)                    // or <-f.Done(), or f.Then(fn)
//
// Underneath, every endpoint's QP is owned by an actor, a goroutine
// locked to its OS thread while it works (an idle endpoint's actor ends and
// holds no thread; the next operation starts it) that drains a lock-free
// inbox and chains what it
// finds into one PostSend (doorbell batching), and cqpoller goroutines turn
// completions into resolved futures; while an actor is awake it handles its
// own CQ's completions itself, so a busy endpoint keeps one spinning
// goroutine, not two (see package cqpoller). Sends are flow-controlled with
// receive credits, so they never meet an empty receive queue.
//
// Locked goroutines spin while there is traffic, since waking a parked one
// costs microseconds, and at most GOMAXPROCS-1 of them spin at once, so the
// goroutines waiting for futures always have a P: on a 2-core machine one
// busy endpoint's actor takes one core and its callers the other.
//
// # Connecting
//
// Two ways, between goroutines of one process, processes and hosts alike:
//
//   - Listen and Dial: a TCP connection carries the handshake below, then
//     stays open, silent, for the endpoint's life: its end tells the
//     endpoint that the peer is gone; any provider. The soft provider
//     reaches only runtimes of the same process (its device is in memory),
//     and of the same soft.Provider: the runtimes made without
//     WithProvider share one. The listener handshakes with many clients
//     at once, within a few seconds each, so a client that connects and
//     says nothing holds up no other; Accept returns only endpoints whose
//     handshake completed.
//   - ListenCM and DialCM: the provider's connection manager (rdma_cm on the
//     ibv provider) resolves the address to a device and path, carries the
//     hello in its private data and moves both QPs to RTS; no TCP. The
//     address is one of the runtime's device (on RoCE, the IP address of
//     its netdev), and the route to it must leave by the runtime's device.
//
// # Endpoint lifecycle
//
// An endpoint says when it is over: Done closes and Err says why. Close
// lets queued and in-flight work finish while its context allows, then
// sends the peer a goodbye: the peer's Recv returns what arrived before it,
// then io.EOF, and its Err is ErrPeerClosed. CloseWithError closes the same
// way and says why: the peer's Err is a *PeerCloseError with the
// application's code and reason (which matches ErrPeerClosed). A peer
// that goes away without closing ends the endpoint with ErrPeerLost, idle
// or not:
//
//   - its process killed: at once, when its kernel ends the connection the
//     endpoint keeps beside the QP (it closes the handshake's TCP
//     connection, or disconnects the rdma_cm one), also when an operation
//     in flight fails first (the dying kernel answers REM_ACCESS_ERR or
//     nothing): over TCP the endpoint then waits for that connection to
//     say whether the peer is alive (Endpoint.Done);
//   - its host unreachable: within 10 s of its last sign of life on an
//     endpoint of Dial or Listen, whose TCP connection has keepalive (a
//     probe after 5 s of silence, then every second; the fifth unanswered
//     ends it). An endpoint of rdma_cm learns it only from its own
//     traffic: an operation fails with RETRY_EXC_ERR after about half a
//     second of retries.
//
// A failure (an asynchronous event, a CQ overrun, a CQ that can no longer
// be polled: verbs.ErrPollFailed, an operation that failed on the wire:
// ErrConnFailed; a QP found in the error state with nothing in flight to
// say so, which the runtime checks for every 2 s per endpoint and at most
// 1,000 QPs a second, so within 10 s at 10,000 endpoints: ErrConnFailed)
// ends it with that error, and the endpoint hangs up the
// connection beside its QP at once, so its peer ends too (ErrPeerLost). In
// each case what was pending resolves and Recv returns. No future resolves
// before the device has given its WR back, except where the device's
// completions were lost (a CQ overrun, a failed poll, lost events): those
// futures fail at once, and their buffers should not be reused before the
// endpoint's Close returns. One failed operation moves an RC connection to
// error, which fails the operations after it (the RC transport's rule).
// Should the device's asynchronous events end before the runtime closes
// (verbs.ErrEventsLost, as when the device is removed), the runtime logs it
// at error level, fails every endpoint and starts no new one: nothing would
// report their failures any more.
//
// # Backpressure
//
// Every queue is bounded, and a full one makes the caller wait, under its
// context, or fails: none grows with load.
//
//   - An endpoint's inbox holds Tuning.RingSize submissions (1024). An
//     operation method that finds it full waits for room until its
//     context ends (the actor signals room as it takes submissions); the
//     operation then fails with ctx.Err().
//   - Sends waiting for the peer's receive credits wait in that inbox, in
//     order, and so do the operations behind them: a slow receiver slows
//     its senders down to the inbox's size, then blocks them.
//   - The send queue holds what the device accepted (WithSendQueueDepth);
//     what does not fit waits in the inbox.
//   - Then callbacks run on Tuning.CallbackWorkers workers; when all are busy, the
//     rest wait in a queue one more goroutine runs (at most one callback
//     per pending future, allocated by the caller), never on a goroutine
//     each and never on a poller.
//   - Received messages wait for Recv in buffers of the runtime's shared
//     receive pool (recvpool.go): an endpoint's peer holds credits for
//     receives posted for it, 3 to begin with, more while its sends are
//     held back by credits (up to WithRecvDepth), and gives back what it
//     does not use once its actor has been idle for 10 ms (a stream that
//     pauses keeps its window). An endpoint takes credits back
//     for at most 2 x WithRecvDepth buffers at once, counting the messages
//     its application holds: while it holds them, the peer's sends wait,
//     and a Recv that finds every one held fails with ErrMessagesHeld.
//     The pool grows 64 buffers at a time, within WithMemoryLimit; when it
//     cannot, a credit waits for a buffer another endpoint releases (an
//     application that holds messages while it waits for more can then
//     stall: size the limit for what it holds). It does not shrink.
//
// # Memory
//
// Who owns registered memory, and when:
//
//   - Alloc returns zeroed memory from the runtime's arena, registered for
//     local access only; Register registers memory of the application's
//     own (not Go-heap memory). Either way the application owns the
//     Buffer, and reads and writes its Bytes, until Free.
//   - A peer reaches nothing until the application exposes it:
//     Buffer.ExposeRange grants the rights it names (RemoteRead,
//     RemoteWrite, RemoteAtomic) over the bytes it names, under a key of
//     their own (one memory region each). The device refuses every other
//     access with that key, and every access with any other key of the
//     runtime: receive buffers, actor scratch, other exposures. Send the
//     RemoteRef as bytes (MarshalBinary). Exposure.Close revokes the key
//     at once, and Free revokes every exposure of the buffer before its
//     memory can be reused. Exposure.Lease bounds an exposure in time:
//     unless the owner renews it (Lease again), the key is revoked at the
//     lease's end, and the peer's access after it fails as after Close.
//   - An operation owns the memory it was given, from the call until its
//     future resolves: after its completion or flush, or at once if it
//     never reached the device (refused, cancelled while queued). Giving
//     up on Wait does not end it. Free while operations own a buffer
//     defers the release until the last one is done; the memory is never
//     handed out again under them. An operation given memory already
//     freed fails with ErrFreed.
//   - A received Message owns its receive buffer until Release, also after
//     its endpoint or runtime closed; Release gives it back once.
//   - After Free (or Release), Bytes and the other accessors panic with an
//     error matching ErrFreed, which recover can catch. A slice taken from
//     Bytes must not be used after Free or Release: the block may belong
//     to another Buffer or message by then.
//   - No slice Bytes returned ever faults, whatever the application does:
//     the arena is never unmapped, since Go cannot tell when a slice into
//     memory outside its heap is dropped. Runtime.Close ends every
//     registration (no device reaches the memory any more); the arena's
//     contents stay while a Buffer or Message that reaches them is
//     reachable, even in a Then callback still running. Once the runtime
//     is closed and none is left, the arena's pages go back to the system
//     and its addresses stay mapped for the rest of the process: a slice
//     kept past its Buffer or Message (never freed) then reads zeros, and
//     writes to it reach nothing else, as no memory is ever mapped there
//     again. A process that opens and closes many runtimes keeps their
//     arenas' address space, not their memory. Operations after Close
//     fail with ErrClosed.
//   - The arena grows 4 MiB at a time up to WithMemoryLimit; past it,
//     Alloc, Dial and Accept fail with ErrNoMemory naming the option (for
//     Dial and Accept, with how much is mapped and how much of it the
//     application's Buffers hold). Alloc rounds a block up to a power of
//     two while that is below 4 MiB, a larger one up to a page, and the
//     limit counts what it rounded to (Runtime.Alloc).
//
// # Observing operations
//
// WithObserver gives the runtime an Observer that sees each operation of
// its endpoints start, reach the device and complete, with its endpoint,
// opcode, bytes, latency since the start and status: per-operation
// telemetry (a latency histogram, a trace), where Stats and the metrics
// package count in aggregate and sample latency. The Observer runs on the
// data path, on whichever goroutine moves the operation on, and must not
// block; without one the data path pays a nil check, and with one it
// allocates nothing per operation.
//
// # Wire format
//
// The handshake is versioned, and its version covers what travels on the
// connection after it; a peer of another version is refused with
// ErrProtocol, never half-connected, and the error names both versions
// and which side is older. Version 4:
//
//   - Over TCP, each side writes one line of JSON, its hello, and reads the
//     peer's: {"version":4,"qpn":N,"psn":N,"lid":N,"gid":"IPv6 text",
//     "recv_depth":N,"window":N,"msg_size":N,"mtu":N,"max_rd_atomic":N,
//     "max_dest_rd_atomic":N,"provider":"name","transport":"name"}, the QP
//     number, first PSN (drawn at random
//     for each endpoint, as ibv_rc_pingpong draws it), LID (the port's;
//     0 on RoCE) and GID that ibv_rc_pingpong exchanges, plus the largest
//     window of receive credits the side grants, the credits the peer
//     starts with, the largest message the side accepts (its data,
//     without the header below), its port's active MTU in bytes (at most
//     4096), and how many RDMA READs and atomics its QP may have
//     outstanding as initiator and takes at once as responder (its
//     device's max_qp_init_rd_atom and max_qp_rd_atom, at most 16), and
//     the side's provider and what its QPs speak: "soft" (the soft
//     provider's in-process fabric), "roce" (RoCE v2: rocev2, or ibv on
//     RoCE) or "ib" (ibv on InfiniBand), each at most 32 letters, digits,
//     '-' and '_'. A side refuses a peer of another transport with
//     ErrProtocol naming both providers (the listener still answers with
//     its hello, so the dialer names the mismatch from its side); a hello
//     without them, of an earlier build, is not checked. The dialer
//     writes first; the listener reads the dialer's hello before it
//     makes an endpoint, and answers with its own. A line is at most 512
//     bytes, and a hello is refused unless qpn is 2 to 2^24-1, psn below
//     2^24, gid an IPv6 address's text, recv_depth 2 to 65536, window 2 to
//     recv_depth, msg_size 1 to 2^30, mtu one of 256, 512, 1024, 2048 and
//     4096, and max_rd_atomic and max_dest_rd_atomic 1 to 16; so is one
//     that names the reader's own QP. Each side then moves its QP to RTS
//     with what the two hellos negotiate: the path MTU is the smaller mtu
//     of the two (a port drops packets larger than its own), and the QP's
//     max_rd_atomic the smaller of its own and the peer's
//     max_dest_rd_atomic (its max_dest_rd_atomic stays its own). On an
//     InfiniBand port the peer is addressed by its LID, without a global
//     route, when its GID has the same subnet prefix (the first 8 bytes) as
//     the port's, and through the global route to its GID otherwise; RoCE
//     always takes the global route. Each side then writes the line
//     "ready", and waits for the peer's before it returns, so neither side
//     sends to a QP not yet ready to receive. A side that will not connect
//     writes, in place of its hello or of its "ready", a refusal:
//     {"version":4,"error":"text","cause":"name"}, the cause one of
//     no_memory, emfile, enfile, enomem, protocol and events_lost, or
//     absent (ErrRefused); a refusal is read whatever its version. Each
//     side keeps the connection open until its endpoint is over (closed,
//     after the goodbye's acknowledgement, or failed) or its process ends;
//     the only line written after "ready" is "bye", by an endpoint that
//     ends the connection itself, just before it does (it may half-close
//     first and read the peer's "bye"). A connection that ends without it
//     was ended by the peer's kernel: its process died. Before its "bye"
//     an endpoint whose READ, WRITE or atomic failed with REM_ACCESS_ERR
//     writes "rkey 0x1f", the key of the peer's memory it used, and the
//     peer answers, before its own "bye", "cause lease_expired" or "cause
//     revoked" when it revoked that key (its lease ended, or Close): the
//     first side's error then matches ErrLeaseExpired or ErrKeyRevoked.
//     Other lines, and lines longer than 64 bytes, are skipped.
//   - Through the connection manager, the hello is 20 bytes of private
//     data in the connect request and in the accept: "VRTH", the version
//     (2 bytes), the initial credits (2 bytes), the largest window (4
//     bytes), the largest message (4 bytes), the MTU (2 bytes), then
//     max_rd_atomic and max_dest_rd_atomic (1 byte each), big-endian,
//     checked as over TCP (the version first, so that a peer of another
//     version is told so whatever its layout). The QP numbers, PSNs and
//     path, the path MTU included, are the connection manager's. It takes
//     one read/atomic depth for both directions: the dialer offers the
//     smaller of its own two, the listener accepts with the smallest of
//     both sides' four, and the connection manager carries them in its own
//     request and reply.
//   - On the connection, every SEND (and SEND_WITH_IMM) starts with an
//     8-byte header: the receive credits its sender granted since its
//     last report (4 bytes, big-endian), the kind (1 byte: 0 a message, 1
//     a credit report, 2 the goodbye, which also reports credits), flags
//     (1 byte: bit 0, the sender was held back by credits, which grows the
//     window by one; bit 1, the next field returns credits) and 2 bytes,
//     big-endian: the window a credit report asks for (a batch that needs
//     it), or the credits it gives back, or 0. The message's data follows
//     the header; a credit report is the header alone, and the goodbye
//     too, or after CloseWithError the header, the code (4 bytes,
//     big-endian) and the reason (UTF-8, at most 256 bytes); neither
//     reaches Recv, and a receiver reads past the header of a goodbye
//     only for a code. A
//     SEND holds at most 8 + msg_size bytes (the receiver's msg_size). The
//     immediate data of a SEND_WITH_IMM or a WRITE_WITH_IMM is the
//     application's, untouched.
//
// Each Runtime has its own device context, arena, pollers and worker
// pool, and Close stops them all. What the runtimes of one process share
// is what they compete for, the process's cores: how many locked
// goroutines spin, how long waiters poll, and the measured cost of waking
// a parked goroutine are process-wide (and so is the default soft fabric
// of runtimes made without WithProvider).
package runtime
