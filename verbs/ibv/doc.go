// Package ibv is the verbsrt provider over rdma-core's libibverbs: real RDMA
// NICs and the kernel's Soft-RoCE (rdma_rxe). It implements the contract of
// package verbs; New returns it, named "ibv".
//
// It needs cgo and Linux to build, and nothing of rdma-core: the package
// declares the part of the libibverbs and librdmacm ABI it uses itself
// (abi.h) and loads libibverbs.so.1 and librdmacm.so.1 with dlopen at their
// first use (lib.h), as NCCL and tensorpipe do. To run it needs them and the
// device's provider library (Debian: libibverbs1 ibverbs-providers
// librdmacm1). Where they are missing, or in a build without cgo, every
// entry point returns an error matching verbs.ErrNotSupported that names
// the packages to install.
//
// # Loading at run time
//
// rdma-core keeps its ABI stable by only ever appending fields to its
// public structs and entries to the front of struct verbs_context, so
// abi.h declares the leading fields of what this package reads as rdma-core
// 22 and later lay them out, checked field by field against the installed
// headers where they exist (TestABIMatchesHeaders). The data-path verbs
// that <infiniband/verbs.h> defines as static inlines (ibv_post_send,
// ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) are, here as there, one
// indirect call through the provider's table in the ibv_context: loading at
// run time adds nothing to the data path. The extended verbs
// (ibv_create_qp_ex, ibv_create_srq_ex, ibv_open_xrcd, ibv_get_srq_num)
// find their entry in the provider's verbs_context as those inlines do.
// A function that only newer libraries export is optional: the load
// succeeds without it and its caller takes another path.
//
// # GID table
//
// QueryGIDTable gives each entry's type and netdev. It reads the device's
// whole table with ibv_query_gid_table (libibverbs 32 and later, optional),
// which asks the kernel's ioctl and so works in a container whose /sys does
// not show the device, and reads sysfs (gid_attrs/types, gid_attrs/ndevs)
// when that call fails for any reason. The kernel names an entry's netdev
// by ifindex, which is unique only within a network namespace: the name is
// sysfs' where sysfs can be read, else that of the ifindex in the process's
// namespace, else empty.
//
// # Connection setup
//
// Two ways, both of which rdma-core's own tools speak:
//
//   - Out of band over TCP, as ibv_rc_pingpong does: ClientExchangeDest and
//     ServerExchangeDest swap LID, QPN, PSN and GID in its exact text format
//     (MarshalDest, UnmarshalDest), the server connecting its QP before it
//     answers and the client closing with "done". verbs.Connect (or the
//     caller's own ibv_modify_qp attributes) then brings the QP to RTS.
//     This part is plain Go and works with any provider.
//   - Through the connection manager (librdmacm): ListenCM and
//     CMListener.GetRequest on the passive side, DialCM on the active side,
//     each giving a CMConn to Accept or Connect with a ConnParam whose
//     private data can carry what the peer needs (RemoteBuffer: a buffer's
//     address, rkey and length, in rping's layout). The QP is this
//     provider's own, created on the connection's device (CMConn.Device,
//     CMConn.OpenContext); the CMConn moves it to RTS with the attributes
//     rdma_init_qp_attr negotiated and hands its number to rdma_accept or
//     rdma_connect, as `rping -q` does, so PostSend, PostRecv and Poll work
//     on it as on any other. Every event is acknowledged as soon as it is
//     copied out; each connection has an event channel of its own
//     (rdma_migrate_id), non-blocking and waited on through the netpoller,
//     and after Accept or Connect a goroutine reads it until Close, closing
//     CMConn.Disconnected when the peer disconnects. The C helpers in
//     cm_shim.c do each setup step in one crossing.
//
// # Crossings
//
// A cgo call costs tens of nanoseconds and every ibv_post_send rings the
// doorbell once however long its chain is (an MMIO write on mlx5, a write
// system call on rxe), so the data path crosses into C once per batch, never
// per work request:
//
//   - PostSend validates the whole batch in Go (verbs.SendLimits built from
//     the capacities the QP was granted), writes the valid prefix into
//     struct ibv_send_wr and struct ibv_sge arrays malloc'd once per QP, and
//     hands it to ibv_post_send as one chain. A batch longer than the arrays
//     is posted in chunks. The bad_wr of libibverbs maps back to an index in
//     the caller's slice. PostCalls counts the ibv_post_send calls.
//   - PostRecv does the same with ibv_post_recv and ibv_post_srq_recv.
//   - Poll runs ibv_poll_cq once into a struct ibv_wc array malloc'd per CQ
//     and copies it into the caller's []verbs.WC. A negative return is no
//     errno (ibv_poll_cq(3): failure, nothing more; mlx5 returns -2): Poll
//     reports it as an error matching verbs.ErrPollFailed, with the value.
//
// The C helpers in shim.c each do the work of several crossings (or stand
// for a verb that verbs.h defines as a static inline or a macro); their
// comments in shim.h say what each saves.
//
// # Memory
//
// C never keeps a Go pointer. Registered memory must be outside the Go heap
// (verbs.Arena); its address is passed to ibv_reg_mr as is. Inline payloads,
// whose SGEs may point at Go memory, are copied into per-QP C scratch memory
// before ibv_post_send sees them. Where C must refer to a Go object (the
// qp_context, cq_context and srq_context that completion and asynchronous
// events carry) it holds a runtime/cgo.Handle, deleted only after the C
// object is destroyed, which libibverbs does only once the events naming it
// have been acknowledged.
//
// # Events
//
// The file descriptors of completion channels and of a context's
// asynchronous events are made non-blocking and waited on through Go's
// netpoller: no OS thread blocks in a read. GetCQEvent honours its
// context.Context. Each open context runs one goroutine that reads
// asynchronous events, acknowledges them and delivers them on AsyncEvents;
// Context.Close stops it. It reads again after EINTR (and EAGAIN); any
// other failure ends it, and it closes AsyncEvents with AsyncErr saying why
// (verbs.ErrEventsLost and the errno: EIO once the device is removed).
//
// # Where this provider adds rules to libibverbs
//
//   - PostSend before the QP reached RTS fails in Go with an error matching
//     verbs.ErrQPState and EINVAL, and nothing is posted. rxe returns EINVAL
//     for such a post but keeps the work requests and runs them once the QP
//     reaches RTS; hardware would not. The state is the one the QP was last
//     moved to through Modify (or seen in by Query). PostRecv in RESET fails
//     the same way.
//   - Modify checks the transition with verbs.CheckModify against the QP's
//     current state first, so an illegal transition is ErrQPState on every
//     provider rather than the kernel's bare EINVAL.
//   - QueryPort and QueryGID report verbs.ErrNotFound for a port or GID index
//     the device does not have.
//
// # Testing
//
// The tests need an RDMA device and skip without one. verbs/ibv/rxevm runs
// them against the kernel's Soft-RoCE (rdma_rxe) in a throwaway QEMU guest:
// verbs/ibv/rxevm/test-rxe from the repository root. They include the
// verbs/verbstest conformance suite, which the soft provider passes too.
//
// # Concurrency
//
// Every object is safe for concurrent use, as its libibverbs counterpart is.
// The data path serializes per queue: PostSend calls on one QP take its send
// lock, PostRecv calls its receive lock, Poll calls on one CQ the CQ's lock;
// posting and polling do not wait for each other. Closing an object while
// another goroutine uses it is a programming error, as destroying it is in C.
package ibv
