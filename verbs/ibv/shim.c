//go:build linux && cgo

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <endian.h>
#include "shim.h"

int vrt_list_devices(struct vrt_devinfo *out, int max) {
	if (!vrt_verbs_loaded)
		return -ENOSYS;
	int n = 0;
	struct ibv_device **list = vrt_ibv.get_device_list(&n);
	if (!list)
		return errno ? -errno : -ENOSYS;
	for (int i = 0; i < n && i < max; i++) {
		const char *name = vrt_ibv.get_device_name(list[i]);
		strncpy(out[i].name, name ? name : "", sizeof out[i].name - 1);
		out[i].name[sizeof out[i].name - 1] = 0;
		out[i].guid = be64toh(vrt_ibv.get_device_guid(list[i]));
	}
	vrt_ibv.free_device_list(list);
	return n;
}

struct ibv_context *vrt_open_device(const char *name) {
	if (!vrt_verbs_loaded) {
		errno = ENOSYS;
		return NULL;
	}
	int n = 0;
	struct ibv_device **list = vrt_ibv.get_device_list(&n);
	struct ibv_context *ctx = NULL;
	int err = ENODEV;
	if (!list)
		return NULL; // errno set
	for (int i = 0; i < n; i++) {
		const char *dn = vrt_ibv.get_device_name(list[i]);
		if (dn && strcmp(dn, name) == 0) {
			ctx = vrt_ibv.open_device(list[i]);
			err = errno;
			break;
		}
	}
	// The open context holds its own reference to the device.
	vrt_ibv.free_device_list(list);
	if (!ctx)
		errno = err ? err : ENODEV;
	return ctx;
}

int vrt_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr) {
	// The exported ibv_query_port fills libibverbs 1.1's layout, a prefix
	// of abi.h's: zero the rest, as <infiniband/verbs.h>'s inline does.
	memset(attr, 0, sizeof *attr);
	return vrt_ibv.query_port(ctx, port, attr);
}

int vrt_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid) {
	struct ibv_port_attr pa;
	int ret = vrt_query_port(ctx, port, &pa);
	if (ret)
		return ret;
	if (index < 0 || index >= pa.gid_tbl_len)
		return ENOENT;
	if (vrt_ibv.query_gid(ctx, port, index, gid))
		return errno ? errno : EINVAL;
	return 0;
}

struct ibv_mr *vrt_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
	return vrt_ibv.reg_mr(pd, addr, len, access);
}

struct ibv_cq *vrt_create_cq(struct ibv_context *ctx, int cqe, uintptr_t h,
			     struct ibv_comp_channel *ch, int vector) {
	return vrt_ibv.create_cq(ctx, cqe, (void *)h, ch, vector);
}

struct ibv_qp *vrt_create_qp(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr,
			     uintptr_t h, struct ibv_qp_cap *cap) {
	attr->qp_context = (void *)h;
	struct ibv_qp *qp = vrt_create_qp_ex(ctx, attr);
	if (!qp) {
		if (!errno)
			errno = EINVAL;
		return NULL;
	}
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	memset(&qa, 0, sizeof qa);
	if (vrt_ibv.query_qp(qp, &qa, IBV_QP_CAP, &ia) == 0) {
		*cap = qa.cap;
	} else {
		// Fall back on what create wrote back: still a lower bound.
		*cap = attr->cap;
	}
	return qp;
}

struct ibv_srq *vrt_create_srq(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr,
			       uintptr_t h, struct ibv_srq_attr *got) {
	attr->srq_context = (void *)h;
	struct ibv_srq *srq = vrt_create_srq_ex(ctx, attr);
	if (!srq) {
		if (!errno)
			errno = EINVAL;
		return NULL;
	}
	if (vrt_ibv.query_srq(srq, got))
		*got = attr->attr;
	return srq;
}

int vrt_get_srq_num(struct ibv_srq *srq, uint32_t *num) {
	return vrt_get_srq_num_ex(srq, num);
}

struct ibv_xrcd *vrt_open_xrcd(struct ibv_context *ctx) {
	struct ibv_xrcd_init_attr a;
	memset(&a, 0, sizeof a);
	a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	a.fd = -1;
	a.oflags = O_CREAT;
	errno = 0;
	struct ibv_xrcd *x = vrt_open_xrcd_ex(ctx, &a);
	if (!x && !errno)
		errno = EOPNOTSUPP;
	return x;
}

int vrt_post_send(struct ibv_qp *qp, struct ibv_send_wr *wrs, int n, char *scratch,
		  int max_inline, int *bad) {
	for (int i = 0; i < n; i++) {
		struct ibv_send_wr *w = &wrs[i];
		w->next = i + 1 < n ? &wrs[i + 1] : NULL;
		if ((w->send_flags & IBV_SEND_INLINE) && w->num_sge > 0 && scratch) {
			// Gather the payload into this WR's scratch slot and hand the
			// device one SGE over C memory. Go validated the total length
			// against max_inline_data. lkey is ignored for inline data.
			char *dst = scratch + (size_t)i * (size_t)max_inline;
			uint32_t off = 0;
			for (int j = 0; j < w->num_sge; j++) {
				memcpy(dst + off, (const void *)(uintptr_t)w->sg_list[j].addr,
				       w->sg_list[j].length);
				off += w->sg_list[j].length;
			}
			w->sg_list[0].addr = (uintptr_t)dst;
			w->sg_list[0].length = off;
			w->sg_list[0].lkey = 0;
			w->num_sge = 1;
		}
	}
	struct ibv_send_wr *b = NULL;
	// ibv_post_send: an indirect call into the provider, as the inline is.
	int ret = qp->context->ops.post_send(qp, wrs, &b);
	*bad = b ? (int)(b - wrs) : -1;
	return ret;
}

int vrt_post_recv(struct ibv_qp *qp, struct ibv_srq *srq, struct ibv_recv_wr *wrs, int n,
		  int *bad) {
	for (int i = 0; i < n; i++)
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
	struct ibv_recv_wr *b = NULL;
	int ret = srq ? srq->context->ops.post_srq_recv(srq, wrs, &b)
		      : qp->context->ops.post_recv(qp, wrs, &b);
	*bad = b ? (int)(b - wrs) : -1;
	return ret;
}

int vrt_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
	return cq->context->ops.poll_cq(cq, n, wc);
}

int vrt_req_notify_cq(struct ibv_cq *cq, int solicited_only) {
	return cq->context->ops.req_notify_cq(cq, solicited_only);
}

int vrt_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, uintptr_t *h) {
	void *cqctx = NULL;
	if (vrt_ibv.get_cq_event(ch, cq, &cqctx))
		return errno ? errno : EIO;
	*h = (uintptr_t)cqctx;
	return 0;
}

int vrt_get_async_events(struct ibv_context *ctx, struct vrt_async *out, int max) {
	int n = 0;
	while (n < max) {
		struct vrt_async *a = &out[n];
		// libibverbs fails a short read (or end of file) without setting
		// errno: a stale EAGAIN would pass for "none pending", and the
		// caller would wait on an fd that stays readable, spinning.
		errno = 0;
		if (vrt_ibv.get_async_event(ctx, &a->ev)) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || n > 0)
				break;
			return errno ? -errno : -EIO;
		}
		a->type = a->ev.event_type;
		a->port = 0;
		a->h = 0;
		switch (a->ev.event_type) {
		case IBV_EVENT_CQ_ERR:
			a->h = (uintptr_t)a->ev.element.cq->cq_context;
			break;
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_COMM_EST:
		case IBV_EVENT_SQ_DRAINED:
		case IBV_EVENT_PATH_MIG:
		case IBV_EVENT_PATH_MIG_ERR:
		case IBV_EVENT_QP_LAST_WQE_REACHED:
			a->h = (uintptr_t)a->ev.element.qp->qp_context;
			break;
		case IBV_EVENT_SRQ_ERR:
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			a->h = (uintptr_t)a->ev.element.srq->srq_context;
			break;
		case IBV_EVENT_PORT_ACTIVE:
		case IBV_EVENT_PORT_ERR:
		case IBV_EVENT_LID_CHANGE:
		case IBV_EVENT_PKEY_CHANGE:
		case IBV_EVENT_SM_CHANGE:
		case IBV_EVENT_CLIENT_REREGISTER:
		case IBV_EVENT_GID_CHANGE:
			a->port = a->ev.element.port_num;
			break;
		default:
			break;
		}
		n++;
	}
	return n;
}

void vrt_ack_async_events(struct vrt_async *evs, int n) {
	for (int i = 0; i < n; i++)
		vrt_ibv.ack_async_event(&evs[i].ev);
}

int vrt_pollable_dup(int fd) {
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return d < 0 ? -errno : d;
}
