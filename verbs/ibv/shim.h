// C helpers of verbs/ibv. Each one does what would otherwise take several cgo
// crossings, or calls a libibverbs verb that is a static inline or a macro in
// <infiniband/verbs.h> (which cgo cannot call). The comment of each says what
// it saves. None of them keeps a pointer it was given beyond the call, except
// the C objects libibverbs owns.
#ifndef VERBSRT_IBV_SHIM_H
#define VERBSRT_IBV_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include "lib.h"

// vrt_devinfo is one entry of vrt_list_devices.
struct vrt_devinfo {
	char name[IBV_SYSFS_NAME_MAX];
	uint64_t guid; // host byte order
};

// vrt_list_devices copies the names and GUIDs of up to max devices into out
// and returns how many there are (possibly more than max), or -errno. One
// crossing instead of 2 + 2 per device.
int vrt_list_devices(struct vrt_devinfo *out, int max);

// vrt_open_device opens the device called name (NULL and errno ENODEV when
// there is none). One crossing instead of 3 + 1 per device.
struct ibv_context *vrt_open_device(const char *name);

// vrt_query_port wraps ibv_query_port, a macro over a static inline.
int vrt_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);

// vrt_query_gid checks index against the port's GID table length and reads
// the GID: 0, ENOENT for an index outside the table, or the errno. One
// crossing instead of two.
int vrt_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);

// vrt_reg_mr wraps ibv_reg_mr, a macro.
struct ibv_mr *vrt_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access);

// vrt_create_cq creates a CQ whose cq_context is the Go handle h.
struct ibv_cq *vrt_create_cq(struct ibv_context *ctx, int cqe, uintptr_t h,
			     struct ibv_comp_channel *ch, int vector);

// vrt_create_qp creates a QP whose qp_context is the Go handle h, through
// ibv_create_qp_ex (XRC needs it, and it serves every type), then queries the
// capacities the device granted into *cap: ibv_create_qp leaves max_send_wr
// and max_recv_wr at the requested values where the device rounds them up
// (rxe does). One crossing instead of two.
struct ibv_qp *vrt_create_qp(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr,
			     uintptr_t h, struct ibv_qp_cap *cap);

// vrt_create_srq creates a basic or XRC SRQ whose srq_context is the Go handle
// h and queries the granted attributes into *got. One crossing instead of two.
struct ibv_srq *vrt_create_srq(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr,
			       uintptr_t h, struct ibv_srq_attr *got);

// vrt_get_srq_num wraps ibv_get_srq_num, a static inline.
int vrt_get_srq_num(struct ibv_srq *srq, uint32_t *num);

// vrt_open_xrcd opens a new XRC domain (fd -1, O_CREAT) through
// ibv_open_xrcd, a static inline.
struct ibv_xrcd *vrt_open_xrcd(struct ibv_context *ctx);

// vrt_post_send links wrs[0..n) into one chain, copies the payload of every
// IBV_SEND_INLINE WR into scratch (max_inline bytes per WR; the SGE addresses
// may be Go memory, which the device must not be handed) and rings the
// doorbell once with ibv_post_send. *bad is the index of bad_wr, -1 when
// libibverbs left it NULL. One crossing instead of one per WR.
int vrt_post_send(struct ibv_qp *qp, struct ibv_send_wr *wrs, int n, char *scratch,
		  int max_inline, int *bad);

// vrt_post_recv is vrt_post_send for ibv_post_recv (srq NULL) or
// ibv_post_srq_recv (qp NULL).
int vrt_post_recv(struct ibv_qp *qp, struct ibv_srq *srq, struct ibv_recv_wr *wrs, int n,
		  int *bad);

// vrt_poll_cq wraps ibv_poll_cq, a static inline.
int vrt_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);

// vrt_req_notify_cq wraps ibv_req_notify_cq, a static inline.
int vrt_req_notify_cq(struct ibv_cq *cq, int solicited_only);

// vrt_get_cq_event reads one completion event from a non-blocking channel:
// 0 with *cq and its Go handle, EAGAIN when there is none, or the errno.
int vrt_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, uintptr_t *h);

// vrt_async is one asynchronous event with its object's Go handle.
struct vrt_async {
	struct ibv_async_event ev;
	int type;
	int port;
	uintptr_t h; // qp_context, cq_context or srq_context; 0 for port and device events
};

// vrt_get_async_events reads up to max events from the context's
// non-blocking async fd: how many (0: none pending), or -errno (-EIO when
// libibverbs set none). An error after the first event ends the batch and
// comes back from the next call. One crossing per burst (rxe raises one
// CQ_ERR per lost completion).
int vrt_get_async_events(struct ibv_context *ctx, struct vrt_async *out, int max);

// vrt_ack_async_events acknowledges n events read by vrt_get_async_events.
void vrt_ack_async_events(struct vrt_async *evs, int n);

// vrt_pollable_dup puts fd (a completion channel's or the async fd) in
// non-blocking mode and returns a close-on-exec duplicate for Go's netpoller,
// or -errno. The duplicate shares the open file, so its readiness is fd's;
// os.File can own and close it while libibverbs keeps closing fd itself. One
// crossing instead of three.
int vrt_pollable_dup(int fd);

// Offsets of the union members of struct ibv_send_wr that Go writes into
// directly (post.go checks its views of them against these at compile
// time).
enum {
	VRT_SEND_WR_SIZE = sizeof(struct ibv_send_wr),
	VRT_OFF_WR = offsetof(struct ibv_send_wr, wr),
	VRT_OFF_IMM = offsetof(struct ibv_send_wr, imm_data),
	VRT_OFF_RDMA_RKEY = offsetof(struct ibv_send_wr, wr.rdma.rkey),
	VRT_OFF_ATOMIC_COMPARE = offsetof(struct ibv_send_wr, wr.atomic.compare_add),
	VRT_OFF_ATOMIC_SWAP = offsetof(struct ibv_send_wr, wr.atomic.swap),
	VRT_OFF_ATOMIC_RKEY = offsetof(struct ibv_send_wr, wr.atomic.rkey),
	VRT_OFF_UD_QPN = offsetof(struct ibv_send_wr, wr.ud.remote_qpn),
	VRT_OFF_UD_QKEY = offsetof(struct ibv_send_wr, wr.ud.remote_qkey),
	VRT_OFF_XRC_SRQN = offsetof(struct ibv_send_wr, qp_type.xrc.remote_srqn),
};

#endif
