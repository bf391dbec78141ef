// Package rocev2 is a pure-Go RoCE v2 transport: the InfiniBand transport
// layer (BTH and its extension headers, PSNs, ACKs and NAKs, the ICRC)
// carried in UDP from an ordinary unprivileged socket, so that processes
// without an RDMA NIC or the kernel's rxe module can speak RDMA to each
// other, and in principle to rxe and RoCE NICs.
//
// # What works
//
// The packet codec is package wire: the IB transport headers, the opcode
// table, PSN arithmetic and the ICRC, encoded and decoded without a
// socket. The HCA objects it shares with the soft provider (the context's
// registry, CQs, PDs, MRs and AHs, the QP attribute rules) are the
// module's software HCA (verbs/internal/swhca); this package is the engine
// that carries work requests as packets.
//
// The transport (Transport): one UDP socket on a specific IPv6 address,
// the ICRC sealed on send and checked on receive (a bad one is counted and
// dropped, as rxe drops it), packets routed to a Receiver by destination
// QP and taken only from the source the QP was registered with (see
// "Strangers on the wire"), and after each burst the socket held, one
// Flush per Receiver that got packets, where a responder sends one ACK for
// the whole burst. The
// socket asks for a receive buffer of DefaultReadBuffer (4 MiB), forced
// past net.core.rmem_max with SO_RCVBUFFORCE where the process has
// CAP_NET_ADMIN, capped at rmem_max otherwise; Stats.ReadBuffer reports
// what the kernel granted. Fault
// injection (Inject) drops, duplicates, reorders, delays or corrupts the
// packets a predicate over their decoded headers chooses, as they leave;
// InjectInbound drops, duplicates or corrupts received packets before
// their QP sees them, so one side alone can make its peer recover from a
// lost request or ACK in either direction (cmd/verbsrt's -rocev2-faults
// does, against rxe). Timers run on a Clock; tests use ManualClock.
//
// Two readers take turns on the socket, one at a time (a mutex held while
// the packets are handed over and flushed, so they reach their QPs in the
// order the socket received them): the transport's receive goroutine,
// which waits in Go's network poller, and a poll of a CQ of the device
// that finds it empty, which reads without waiting what the socket holds
// (on every eighth empty poll, to bound the system calls, and only if the
// lock is free). The second reader is there because the scheduler
// consults the network poller only when it runs out of goroutines to run,
// or from sysmon every 10 ms or so, and the runtime's pollers and waiters
// spin (runtime.Gosched loops, locked threads), so it may never run out:
// completions then come as fast as something polls. Where a read cannot
// tell "nothing queued" without waiting (platforms that are not unix),
// the receive goroutine alone reads.
//
// The RC transport (rcQP, internal: the Provider wraps it), requester and
// responder in one object under one lock: SEND and SEND with
// immediate, RDMA WRITE and WRITE with immediate, RDMA READ, CMP_AND_SWP
// and FETCH_AND_ADD (8 aligned bytes, in the responder's host byte order,
// with the CPU's atomic instructions; the responder keeps its last 16
// results and answers a duplicate atomic with its first result instead of
// executing it again). Messages are cut into path-MTU packets with
// FIRST/MIDDLE/LAST/ONLY opcodes; PSNs wrap at 2^24; at most 64 KiB of
// packets (and at most 64) are unacknowledged, and at most max_rd_atomic
// READs and atomics await their response. The requester asks for an
// ACK on the last packet of each message, every quarter window and on the
// packet that fills the window; an ACK acknowledges every PSN up to its
// own, and the responder sends one per burst (Receiver.Flush). The
// requester resends the oldest unacknowledged packet, alone, when the
// local ACK timeout passes, up to retry_cnt times in a row without
// progress, then fails the WR with RETRY_EXC_ERR and flushes the rest; a
// NAK for a PSN sequence error sends it back to the NAK's PSN (go-back-N)
// and spends a retry too, as a timeout does. Below its window the
// requester keeps a smaller one: a timeout shrinks it to one packet and a
// sequence NAK halves it; each ACK that shows progress grows it by the
// packets it acknowledged (at most doubling it) and resets the retry
// count. An ACK for packets sent before a go-back and not sent again shows
// they are reaching the responder, so sending resumes with new packets
// after them instead of resending them (with nothing new to send, at the
// oldest unacknowledged packet, within that smaller window). A
// timeout thus costs one packet, not a window: a receiver slower than the
// timeout (rxe under emulation), which still has the window on its way,
// is not buried under duplicates of it (TestRCSlowReceiver). The
// responder NAKs a gap once and drops what follows until the expected PSN
// comes; it acknowledges duplicates again without executing them, except
// a duplicate READ or atomic, which it answers only when it repeats one of
// the last 16 of each it executed (a READ the same key and the range from
// its PSN on, the tail a READ resumed after a lost response packet asks
// for; an atomic the same PSN, key and address), the READ from memory as
// it is now and the atomic with its first result, and drops otherwise, as
// rxe's duplicate_request does. The requester asks for a READ a window at
// a time (one request per window of response packets, the next once the
// last one's response arrived), since a response has no ACK to pace it:
// asked for at once, a large READ's response would overrun the socket
// buffers on its way, and again when resent whole; the requester drops a
// late packet of an earlier answer. With no
// receive posted it sends an RNR NAK with its min_rnr_timer; the
// requester waits that long and retries, rnr_retry times (7: forever),
// then fails with RNR_RETRY_EXC_ERR. A bad rkey or right (REMOTE ACCESS
// ERROR NAK), a message longer than the receive buffer (INVALID REQUEST
// NAK, LOC_LEN_ERR at the responder) and an opcode out of order (INVALID
// REQUEST) move both QPs to ERR, flushing what is queued.
//
// UC rides on the same object (rcConfig.UC): UC opcodes, no ACK and no
// retransmission, a send WQE complete once its last packet is sent; the
// responder drops silently a message that finds no receive or no right to
// the memory, and a message a lost packet cut short, whose receive WQE
// then takes the next message.
//
// The UD transport (udQP, internal too): SEND ONLY with or without
// immediate data, with a DETH; the receiver drops silently a datagram with
// another Q_Key (a Q_Key with the high bit set stands for the sender's
// own), one larger than its MTU, or one with no receive posted, and
// places the rest after a 40-byte GRH: the datagram's IPv6 header with
// traffic class, flow label and hop limit zero, which a plain socket does
// not learn. A receive too short for its datagram completes with
// LOC_LEN_ERR and moves the QP to ERR, as on rxe.
//
// # Strangers on the wire
//
// RoCE carries no authentication, and the transport's socket is an
// ordinary UDP socket: every process of the host, and every host that
// routes to its address, can send it datagrams. The provider makes a third
// party's packets miss, as rxe and NICs do, and a stranger's attempt
// invisible to the connection:
//
//   - Only the peer is heard. A connected (RC, UC) QP takes a packet only
//     from its peer's address, and from the peer's UDP port where the
//     peer announced one (a verbsrt peer, whose port is its LID; rxe and
//     NICs choose their source ports, so toward them the address alone).
//     The transport drops everything else before any QP state is touched,
//     cheapest check first (a runt, an unknown QP, not the peer, then the
//     ICRC and the decoder), and counts each in Stats: a stranger's
//     datagram costs a map lookup. UD QPs take any sender and check the
//     Q_Key, as IB does.
//   - Nothing to aim at. QPNs and memory keys are drawn from crypto/rand,
//     not counted up; verbs.RandomPSN draws first PSNs, which the runtime,
//     cmd/verbsrt and the conformance suite use.
//   - No amplification. Duplicate READs and atomics are answered only from
//     saved requests, and READ responses are at most a window: a forged
//     request cannot make the responder send memory again or at once.
//
// What it does not defend against: an attacker who can read the traffic
// on the path and send packets with the peer's source address and port
// (raw sockets on a host of the path, or a spoofing router) can learn the
// QPNs, PSNs and keys and act as the peer, as against any RoCE stack.
// Keep such traffic on an isolated network, or encrypt and authenticate
// it below (IPsec). A peer itself can of course do whatever its QP's
// access and its keys let it.
//
// # The provider
//
// Provider (New) implements verbs.Provider and passes the conformance
// suite of verbs/verbstest with two devices on ::1 in one process, except
// the XRC case, which it skips: OpenXRCD, XRC QPs and XRC SRQs return
// verbs.ErrNotSupported, and so do memory windows, SQD and SQE (Modify),
// resizing an SRQ and RAW_PACKET QPs. SEND with invalidate (RC; on UC,
// which has no opcode for it, it fails at the head of the queue with
// LOC_QP_OP_ERR) invalidates the responder's rkey, which its receive
// reports (WITH_INV); LOCAL_INV runs once the WQEs before it have
// completed and invalidates one of the QP's own keys. Basic
// SRQs work for RC, UC and UD QPs, with the limit event; the runtime
// receives through them, and runs over the provider (runtime_test.go). Each device binds one
// configured IPv6 address (default ::1) and port (default: the kernel
// picks); its one GID is that address. PDs, MRs over memory that is not
// Go's, lkeys and rkeys (rkey 0 without remote access), remote access
// checked against the QP's PD, the MR's rights and bounds and the QP's
// access flags, CQs with completion channels and solicited events, the QP
// state machine through verbs.CheckModify (the rcQP or udQP is created at
// RTR, its requester started at RTS), PostSend and PostRecv with gather
// and scatter lists, inline data and verbs.Validate, flush with
// WR_FLUSH_ERR in ERR, async events for CQ overruns and for a responder
// that NAKs its peer fatally (QP_REQ_ERR, QP_ACCESS_ERR).
//
// How a QP learns its peer's UDP port: a device's port LID is the UDP port
// it is bound to (LIDs mean nothing on RoCE; rxe and NICs report 0). The
// exchange of LID, QPN, PSN and GID that ibv_rc_pingpong, the conformance
// suite and cmd/verbsrt do thus announces the port, and the DLID of the
// address vector (ibv_modify_qp at RTR, ibv_create_ah) carries it: packets
// go to [DGID]:DLID. A DLID of 0 means port 4791, what rxe and NICs
// listen on, unless a device of the same provider has the DGID and holds
// the destination QPN (QPNs are unique across a provider's devices), as
// between two runtimes of one process. TestTwoProcesses connects two
// processes this way, each with a provider of its own on ::1.
//
// # IPv6 first; IPv4 is not supported
//
// Over IPv6 the ICRC covers, of the IP header, the payload length, next
// header and the two addresses; the traffic class, flow label and hop
// limit are masked. A sender knows all of the covered fields when it binds
// a specific address, and a receiver reads them from recvfrom and its own
// bound address. Listen therefore refuses the unspecified address: the
// source address the kernel would pick is covered.
//
// Over IPv4 the ICRC also covers the total length, the identification
// field and the flags and fragment offset (only TOS, TTL and the header
// checksum are masked). A plain socket's receiver cannot read the
// identification field of a packet it receives (no socket option returns
// it), so it cannot check the ICRC of a packet from rxe or a NIC: rxe
// fills the field per packet with __ip_select_ident (prepare_ipv4_hdr in
// drivers/infiniband/sw/rxe/rxe_net.c). Sending a correct ICRC looks
// possible on Linux: for a socket that is not connected and sets
// don't-fragment (IP_MTU_DISCOVER = IP_PMTUDISC_DO), ip_select_ident_segs
// in include/net/ip.h writes identification 0; this is not implemented
// or tested. Listen refuses IPv4 addresses with ErrNotSupported; an IPv4
// mode that sends a correct ICRC and accepts received packets on the UDP
// checksum alone is the way to reach IPv4-only rxe peers, with the caveat
// that rxe sends a zero UDP checksum, so nothing but Ethernet's FCS would
// then protect what it sends.
//
// rxe writes a zero UDP checksum on IPv6 too (prepare_udp_hdr in
// rxe_net.c), which a plain IPv6 socket drops; on Linux the transport sets
// UDP_NO_CHECK6_RX so that it accepts them, relying on the ICRC.
//
// # Sharing port 4791
//
// RoCE v2 sends to UDP port 4791 and only one socket of a host address
// can own it. Between verbsrt processes each transport binds a port of its
// own (port 0: the kernel picks one) and the connection handshake
// announces address and port (the GID and the port's LID, above); a QP
// sends requests and responses alike to the port its address vector
// named. Toward rxe and RoCE NICs, which send every packet,
// responses included, to port 4791, one transport of the host address
// binds 4791 (a process can, without privileges); processes that share a
// host and all talk to rxe need an address each (IPv6 gives a host many).
//
// # Against rxe
//
// make test-rxe-2host runs verbsrt pingpong on this provider, in a guest
// without rxe, against ibv_rc_pingpong on another guest's rxe, both ways,
// with 64 KiB, 4 KiB and 1-byte messages and the data checked, at path
// MTU 1024 and 4096 (verbs/ibv/rxevm, cross); and with this side losing
// its own ACKs or requests, or rxe's before its QP sees them, which rxe's
// retransmission (timeout, or this side's sequence NAK) or this side's
// recovers, as rxe's counters show. rxe treats retry_cnt 7 as no limit; this
// provider counts it as seven timeouts in a row without progress, as the
// IB specification does, which a receiver slower than the ACK timeout
// reaches only if each timeout adds a window of duplicates to what it has
// to work through: hence one packet per timeout. It also runs perftest's
// ib_write_bw, ib_read_bw, ib_send_bw and ib_atomic_bw on rxe against
// `verbsrt bench -direct` on this provider, either side serving, with
// the bytes checked where they land (perftest's side through a preload
// library, ptcheck.c), and prints each figure beside rxe's against rxe.
//
// # What does not work yet
//
// XRC; end-to-end credits; one sendmmsg for a UD chain (RC and UC send
// what one PostSend, ACK or timer lets out, and a READ's response, with
// one sendmmsg on Linux: Transport.SendBatch); IPv4; rdma_cm's
// connection MADs (so rping, and the runtime's ListenCM and DialCM, need
// the ibv provider); holding back received packets (Transport.InjectInbound
// drops, duplicates and corrupts; reordering and delay are for sent ones).
package rocev2
