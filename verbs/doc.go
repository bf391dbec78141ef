// Package verbs is the provider-neutral RDMA verbs contract of verbsrt:
// libibverbs in Go spelling.
//
// The types mirror <infiniband/verbs.h> one for one (opcodes, send flags, QP
// types and states, access flags, work requests and work completions) and keep
// their numeric values, so a cgo provider converts them without tables. The
// interfaces (Provider, Device, Context, PD, QP, CQ, SRQ, XRCD, MR, AH,
// CompChannel) are what every provider implements: verbs/soft in pure Go and
// verbs/ibv over rdma-core.
//
// # Semantics kept from libibverbs
//
//   - A batch of work requests is a slice. QP.PostSend(wrs) keeps the bad_wr
//     contract of ibv_post_send(3): the WRs before the returned count are on
//     the send queue, wrs[count] failed with the returned error, and none
//     after it was posted.
//   - Validate checks a WR list against the opcode x QP-type table of
//     ibv_post_send(3) and its send-flag rules before anything reaches a
//     queue; its errors name the WR index, its wr_id and the rule
//     (*WRError).
//   - A failed completion is reported as a *WCError, which matches the
//     sentinel for its status with errors.Is (ErrFlushed for WR_FLUSH_ERR and
//     so on). On a failed WC only WRID, Status, QPNum and VendorErr are
//     meaningful, as ibv_poll_cq(3) documents.
//   - Errnos from a provider are wrapped so that errors.Is matches both the
//     package sentinel and the syscall.Errno.
//   - Immediate data (SendWR.Imm, WC.Imm) is carried bit for bit; no provider
//     swaps bytes, exactly like imm_data in libibverbs.
//
// # Registered memory
//
// The device reads and writes registered memory after the posting call has
// returned, so it must not live in memory the Go collector owns. Arena is an
// mmap'd region outside the Go heap for that purpose; PD.RegMR registers a
// slice of it. Every provider's RegMR refuses Go memory (the heap and
// package-level variables) with ErrGoMemory, which CheckRegistrable tells
// beforehand.
//
// # Extensions
//
// Optional capabilities are optional interfaces that a provider's objects may
// implement, found by type assertion as io.WriterTo is. For each one this
// package has a function that uses the extension when present and falls back
// to the core verbs otherwise, the Go form of libibverbs' compatibility layer
// for providers built without extensions:
//
//   - DeviceExQuerier (ibv_query_device_ex): QueryDeviceEx falls back to
//     QueryDevice and reports the extended fields as unknown.
//   - PostCounter: the number of doorbells (provider post calls) a QP has
//     rung; PostCalls reports ok=false where the provider does not count.
//   - GIDTabler (ibv_query_gid_table): the GID table with each entry's type
//     (IB, RoCE v1, RoCE v2) and network device; QueryGIDTable falls back
//     to QueryGID and reports the types and devices as unknown.
//   - PCIAddresser: a device's PCI address; PCIAddress reports "" where
//     the provider cannot tell.
//
// # Concurrency
//
// Unless a method says otherwise, objects are safe for concurrent use, as
// their libibverbs counterparts are. Closing an object while another goroutine
// uses it is a programming error, as destroying one is in C.
package verbs
