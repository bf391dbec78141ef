//go:build linux && cgo

#include <errno.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include "cm_shim.h"

// err returns errno, or fallback where a failed call left it 0.
static int err(int fallback) {
	return errno ? errno : fallback;
}

static socklen_t to_sockaddr(const struct vrt_cm_addr *a, struct sockaddr_storage *ss) {
	memset(ss, 0, sizeof *ss);
	if (a->family == 4) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(a->port);
		memcpy(&s->sin_addr, a->ip, 4);
		return sizeof *s;
	}
	if (a->family == 6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons(a->port);
		memcpy(&s->sin6_addr, a->ip, 16);
		return sizeof *s;
	}
	return 0;
}

static void from_sockaddr(const struct sockaddr *sa, struct vrt_cm_addr *a) {
	memset(a, 0, sizeof *a);
	if (!sa)
		return;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
		a->family = 4;
		a->port = ntohs(s->sin_port);
		memcpy(a->ip, &s->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
		a->family = 6;
		a->port = ntohs(s->sin6_port);
		memcpy(a->ip, &s->sin6_addr, 16);
	}
}

static void to_conn_param(const struct vrt_cm_param *p, struct rdma_conn_param *c) {
	memset(c, 0, sizeof *c);
	c->private_data = p->private_data_len ? p->private_data : NULL;
	c->private_data_len = p->private_data_len;
	c->responder_resources = p->responder_resources;
	c->initiator_depth = p->initiator_depth;
	c->retry_count = p->retry_count;
	c->rnr_retry_count = p->rnr_retry_count;
	c->qp_num = p->qp_num;
}

int vrt_cm_listen(const struct vrt_cm_addr *addr, int backlog, struct rdma_event_channel **ch,
		  struct rdma_cm_id **id, uint16_t *port) {
	if (!vrt_rdmacm_loaded)
		return ENOSYS;
	struct sockaddr_storage ss;
	int ret;
	*ch = NULL;
	*id = NULL;
	if (!to_sockaddr(addr, &ss))
		return EAFNOSUPPORT;
	errno = 0;
	*ch = vrt_cm.create_event_channel();
	if (!*ch)
		return err(ENODEV);
	if (vrt_cm.create_id(*ch, id, NULL, RDMA_PS_TCP)) {
		ret = err(ENOMEM);
		goto fail;
	}
	if (vrt_cm.bind_addr(*id, (struct sockaddr *)&ss) || vrt_cm.listen(*id, backlog)) {
		ret = err(EINVAL);
		goto fail;
	}
	*port = ntohs(vrt_cm.get_src_port(*id));
	return 0;
fail:
	vrt_cm_destroy(*id, *ch);
	*id = NULL;
	*ch = NULL;
	return ret;
}

int vrt_cm_resolve(const struct vrt_cm_addr *src, const struct vrt_cm_addr *dst, int timeout_ms,
		   struct rdma_event_channel **ch, struct rdma_cm_id **id) {
	if (!vrt_rdmacm_loaded)
		return ENOSYS;
	struct sockaddr_storage s, d;
	int ret;
	*ch = NULL;
	*id = NULL;
	if (!to_sockaddr(dst, &d))
		return EAFNOSUPPORT;
	socklen_t slen = to_sockaddr(src, &s);
	errno = 0;
	*ch = vrt_cm.create_event_channel();
	if (!*ch)
		return err(ENODEV);
	if (vrt_cm.create_id(*ch, id, NULL, RDMA_PS_TCP)) {
		ret = err(ENOMEM);
		goto fail;
	}
	if (vrt_cm.resolve_addr(*id, slen ? (struct sockaddr *)&s : NULL, (struct sockaddr *)&d,
			      timeout_ms)) {
		ret = err(EINVAL);
		goto fail;
	}
	return 0;
fail:
	vrt_cm_destroy(*id, *ch);
	*id = NULL;
	*ch = NULL;
	return ret;
}

int vrt_cm_get_event(struct rdma_event_channel *ch, struct vrt_cm_event *out) {
	struct rdma_cm_event *ev;
	errno = 0;
	if (vrt_cm.get_cm_event(ch, &ev))
		return err(EIO);
	memset(out, 0, sizeof *out);
	out->event = ev->event;
	out->status = ev->status;
	out->id = ev->id;
	out->listen_id = ev->listen_id;
	// param.conn is filled for the connection events and zero otherwise
	// (librdmacm clears the event); UD ids are not created here.
	const struct rdma_conn_param *c = &ev->param.conn;
	if (c->private_data && c->private_data_len) {
		memcpy(out->param.private_data, c->private_data, c->private_data_len);
		out->param.private_data_len = c->private_data_len;
	}
	out->param.responder_resources = c->responder_resources;
	out->param.initiator_depth = c->initiator_depth;
	out->param.retry_count = c->retry_count;
	out->param.rnr_retry_count = c->rnr_retry_count;
	out->param.qp_num = c->qp_num;
	struct rdma_cm_id *id = ev->id;
	if (id && id->verbs && id->verbs->device) {
		const char *name = vrt_ibv.get_device_name(id->verbs->device);
		strncpy(out->dev_name, name ? name : "", sizeof out->dev_name - 1);
		out->port_num = id->port_num;
	}
	if (id) {
		from_sockaddr(&id->route.addr.src_addr, &out->src);
		from_sockaddr(&id->route.addr.dst_addr, &out->dst);
	}
	vrt_cm.ack_cm_event(ev);
	return 0;
}

int vrt_cm_resolve_route(struct rdma_cm_id *id, int timeout_ms) {
	errno = 0;
	return vrt_cm.resolve_route(id, timeout_ms) ? err(EINVAL) : 0;
}

int vrt_cm_migrate(struct rdma_cm_id *id, struct rdma_event_channel **ch) {
	errno = 0;
	*ch = vrt_cm.create_event_channel();
	if (!*ch)
		return err(ENODEV);
	if (vrt_cm.migrate_id(id, *ch)) {
		int ret = err(EINVAL);
		vrt_cm.destroy_event_channel(*ch);
		*ch = NULL;
		return ret;
	}
	return 0;
}

// modify_qp is vrt_cm_modify_qp with the overrides librdmacm's rdma_accept
// applies to a QP it manages: max_dest_rd_atomic in RTR and max_rd_atomic in
// RTS from the accept's parameters (-1: the connection manager's value).
static int modify_qp(struct rdma_cm_id *id, struct ibv_qp *qp, int last, int resp_res,
		     int init_depth, int *failed) {
	for (int s = IBV_QPS_INIT; s <= last; s++) {
		struct ibv_qp_attr a;
		int mask = 0;
		memset(&a, 0, sizeof a);
		a.qp_state = s;
		*failed = s;
		errno = 0;
		if (vrt_cm.init_qp_attr(id, &a, &mask))
			return err(EINVAL);
		// Only the standard attributes: librdmacm masks bits 21-24, which
		// old kernels used for RoCE, off before ibv_modify_qp on IB.
		mask &= (1 << 21) - 1;
		if (s == IBV_QPS_RTR && resp_res >= 0)
			a.max_dest_rd_atomic = resp_res;
		if (s == IBV_QPS_RTS && init_depth >= 0)
			a.max_rd_atomic = init_depth;
		int ret = vrt_ibv.modify_qp(qp, &a, mask);
		if (ret)
			return ret;
	}
	*failed = -1;
	return 0;
}

int vrt_cm_modify_qp(struct rdma_cm_id *id, struct ibv_qp *qp, int last, int *failed) {
	return modify_qp(id, qp, last, -1, -1, failed);
}

int vrt_cm_accept(struct rdma_cm_id *id, struct ibv_qp *qp, const struct vrt_cm_param *p,
		  int *failed) {
	int ret = modify_qp(id, qp, IBV_QPS_RTS, p->responder_resources, p->initiator_depth, failed);
	if (ret)
		return ret;
	struct rdma_conn_param c;
	to_conn_param(p, &c);
	errno = 0;
	return vrt_cm.accept(id, &c) ? err(EINVAL) : 0;
}

int vrt_cm_connect(struct rdma_cm_id *id, struct ibv_qp *qp, const struct vrt_cm_param *p,
		   int *failed) {
	*failed = -1;
	if (qp) {
		int ret = modify_qp(id, qp, IBV_QPS_INIT, -1, -1, failed);
		if (ret)
			return ret;
	}
	struct rdma_conn_param c;
	to_conn_param(p, &c);
	errno = 0;
	return vrt_cm.connect(id, &c) ? err(EINVAL) : 0;
}

int vrt_cm_establish(struct rdma_cm_id *id, struct ibv_qp *qp, int *failed) {
	int ret = modify_qp(id, qp, IBV_QPS_RTS, -1, -1, failed);
	if (ret)
		return ret;
	errno = 0;
	return vrt_cm.establish(id) ? err(EINVAL) : 0;
}

int vrt_cm_reject(struct rdma_cm_id *id, const uint8_t *private_data, uint8_t len) {
	errno = 0;
	return vrt_cm.reject(id, len ? private_data : NULL, len) ? err(EINVAL) : 0;
}

int vrt_cm_disconnect(struct rdma_cm_id *id, struct ibv_qp *qp) {
	if (qp) {
		struct ibv_qp_attr a;
		memset(&a, 0, sizeof a);
		a.qp_state = IBV_QPS_ERR;
		int ret = vrt_ibv.modify_qp(qp, &a, IBV_QP_STATE);
		if (ret)
			return ret;
	}
	errno = 0;
	return vrt_cm.disconnect(id) ? err(EINVAL) : 0;
}

void vrt_cm_destroy(struct rdma_cm_id *id, struct rdma_event_channel *ch) {
	if (id)
		vrt_cm.destroy_id(id);
	if (ch)
		vrt_cm.destroy_event_channel(ch);
}
