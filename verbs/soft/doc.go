// Package soft is verbsrt's software RDMA provider: a pure-Go HCA that runs
// anywhere, with no NIC and no privileges. It is the default provider.
// The HCA's objects it shares with rocev2 (the context's registry, CQs,
// PDs, MRs and AHs, the QP attribute rules) are package swhca's; this
// package is the engine that executes work requests in memory.
//
// New(Config{Devices: n}) builds a fabric of n devices, soft0 ... soft(n-1),
// that reach each other. QPs are addressed by (GID, QPN) as on a RoCE
// network: by default a device has one port whose table holds a link-local
// GID (index 0) and an IPv4-mapped one (index 1), both RoCE v2, and
// connected QPs find their peer through the GID and destination QPN set in
// RTR.
//
// Config.Models gives devices what real NICs show instead: several ports,
// an InfiniBand link layer with a LID, per-port MTUs, a PCI address, and
// GID tables with types and network devices (verbs.GIDTabler): mlx5's RoCE
// v1/v2 pair per address (RoCEPairs), empty slots, entries of a netdev in
// another network namespace, IPv4 and IPv6, and read/atomic depths
// (max_qp_rd_atom, max_qp_init_rd_atom). Every GID of the fabric routes
// to its device, whatever its type. On an InfiniBand port an address
// vector may also go without a global route (is_global 0): its DLID then
// routes to the port with that LID, and only QPs of that port receive;
// RoCE ports refuse such a vector. A destination that answers to nothing
// (an unknown GID or LID, a QP not on the port) is a path no packet comes
// back from: RC sends retry and fail with RETRY_EXC_ERR. A packet larger
// than the receiving port's active MTU is lost, as a NIC drops it: a UD
// message above it, and an RC or UC message sent at a path MTU above it
// (RETRY_EXC_ERR on RC).
//
// # What it implements
//
// The verbs contract with hardware semantics: the QP state machine with the
// kernel's attribute-mask checks; RC (SEND, SEND_WITH_IMM, RDMA WRITE,
// WRITE_WITH_IMM, READ, CMP_AND_SWP, FETCH_AND_ADD, SEND_WITH_INV,
// LOCAL_INV), in order; UC (no READ or atomics; a message without a receive
// is dropped); UD (address handles, Q_Key check, the 40-byte GRH at the head
// of the receive buffer, messages above the active MTU dropped); SRQs with
// the limit event; XRC (XRCD, XRC SRQs with numbers, XRC_SEND and XRC_RECV
// QPs); RNR NAK retried per rnr_retry (7 = forever) after the responder's
// min_rnr_timer; transport retries per retry_cnt after the ACK timeout;
// remote access errors (REM_ACCESS_ERR, both QPs to ERR) for a bad or
// deregistered rkey, a right the MR does not grant, or a range crossing
// either end of the MR by a byte; rkey 0 for an MR with no remote right, as
// on rxe; Go memory refused by RegMR (verbs.ErrGoMemory); bad local keys
// (LOC_PROT_ERR); selective signaling with unsignaled WRs holding their SQ
// slots until a later signaled (or failed) completion, as mlx5 does; CQ
// overrun (the completion is lost and IBV_EVENT_CQ_ERR raised, as rxe does);
// inline data copied at post time; flush with WR_FLUSH_ERR when a QP enters
// ERR; completion channels with solicited-only arming.
//
// Each open Context has an engine, the "HCA", that executes the WQEs of its
// QPs and writes completions, one WQE of the context at a time. PostSend
// copies the WRs into the send queue's slots and rings the doorbell: when no
// other WQE of the context is executing, the poster's goroutine executes
// the new WQEs itself before PostSend returns, as rxe runs its requester
// task in the poster's context; otherwise, and for what waits on a timer
// (RNR and retry delays, injected delays), the context's engine goroutine
// does. A completion may therefore be ready before PostSend returns, as on
// a fast NIC. Config.EngineOnly makes every doorbell a hand-off to the
// engine goroutine instead. The requester also performs the responder's
// part of each transfer (key and access checks, receive consumption, data
// movement), so a transfer costs no extra goroutine hand-off. Executing a
// WQE allocates nothing.
//
// Queue sizes are rounded up to 2^n - 1, as rxe rounds them; read the
// granted sizes back with QP.Query and CQ.CQE. The memory behind a queue
// follows its use, not its size: send and receive queues and CQs start
// with room for a few entries and double it when it fills, up to the
// granted size, so an idle QP costs a few KiB whatever its caps, and a
// send queue of 256 granted 511 never holds (or allocates) more than the
// 256 its user keeps in it. Posting allocates only while a queue grows.
//
// # Where it differs from rxe, and why
//
// The edge cases measured on rdma_rxe (Linux 6.1, rdma-core 44) are what soft
// follows, except where the IB spec and hardware say otherwise:
//   - PostSend before RTS fails and queues nothing (rxe keeps the WRs and
//     runs them later).
//   - rnr_retry = 7 retries forever, as the spec says (rxe gives up with
//     RETRY_EXC_ERR after retry_cnt ACK timeouts).
//   - A message longer than the receive buffer completes LOC_LEN_ERR at the
//     responder and REM_INV_REQ_ERR at the requester (rxe: LOC_QP_OP_ERR and
//     REM_OP_ERR). Both match verbs.ErrLocalLength / verbs.ErrRemoteOp.
//   - Receives posted to a QP in ERR complete at once with WR_FLUSH_ERR (rxe
//     never completes them).
//   - Unsignaled WRs keep their SQ slots until a signaled completion, as on
//     mlx5 (rxe frees them as soon as they execute).
//   - Any MR may be invalidated by LOCAL_INV or SEND_WITH_INV (hardware
//     requires a fast-registration MR or a memory window).
//   - A receive-CQ overrun loses the completion like a send-CQ overrun
//     (rxe also moves the responder QP to ERR).
//
// # Fault injection
//
// Inject and InjectCQ arm deterministic faults for tests: delays, lost
// packets (retransmitted, then RETRY_EXC_ERR), forced RNR NAKs, a QP forced
// to ERR, CQ overruns. EndDelay ends a delay when the test says, so a test
// can hold a stream for as long as its own steps take.
//
// # Concurrency
//
// Every object is safe for concurrent use. Closing a Context stops its
// engine and destroys what is still open on it.
package soft
