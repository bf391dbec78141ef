//go:build linux && cgo

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "lib.h"

struct vrt_ibv_fns vrt_ibv;
struct vrt_cm_fns vrt_cm;
int vrt_verbs_loaded, vrt_rdmacm_loaded;

// sym names one function of a library and where its address goes.
struct sym {
	const char *name;
	void **slot;
};

#define SYM(table, prefix, field) { prefix #field, (void **)&table.field }

static const struct sym verbs_syms[] = {
	SYM(vrt_ibv, "ibv_", get_device_list),
	SYM(vrt_ibv, "ibv_", free_device_list),
	SYM(vrt_ibv, "ibv_", get_device_name),
	SYM(vrt_ibv, "ibv_", get_device_guid),
	SYM(vrt_ibv, "ibv_", open_device),
	SYM(vrt_ibv, "ibv_", close_device),
	SYM(vrt_ibv, "ibv_", query_device),
	SYM(vrt_ibv, "ibv_", query_port),
	SYM(vrt_ibv, "ibv_", query_gid),
	SYM(vrt_ibv, "ibv_", alloc_pd),
	SYM(vrt_ibv, "ibv_", dealloc_pd),
	SYM(vrt_ibv, "ibv_", reg_mr),
	SYM(vrt_ibv, "ibv_", dereg_mr),
	SYM(vrt_ibv, "ibv_", create_comp_channel),
	SYM(vrt_ibv, "ibv_", destroy_comp_channel),
	SYM(vrt_ibv, "ibv_", create_cq),
	SYM(vrt_ibv, "ibv_", destroy_cq),
	SYM(vrt_ibv, "ibv_", get_cq_event),
	SYM(vrt_ibv, "ibv_", ack_cq_events),
	SYM(vrt_ibv, "ibv_", create_qp),
	SYM(vrt_ibv, "ibv_", query_qp),
	SYM(vrt_ibv, "ibv_", modify_qp),
	SYM(vrt_ibv, "ibv_", destroy_qp),
	SYM(vrt_ibv, "ibv_", create_srq),
	SYM(vrt_ibv, "ibv_", query_srq),
	SYM(vrt_ibv, "ibv_", modify_srq),
	SYM(vrt_ibv, "ibv_", destroy_srq),
	SYM(vrt_ibv, "ibv_", create_ah),
	SYM(vrt_ibv, "ibv_", destroy_ah),
	SYM(vrt_ibv, "ibv_", get_async_event),
	SYM(vrt_ibv, "ibv_", ack_async_event),
};

// verbs_opt_syms are resolved once verbs_syms are; each one missing stays
// NULL and its wrapper says ENOSYS, so that the caller takes its own path.
static const struct sym verbs_opt_syms[] = {
	SYM(vrt_ibv, "_ibv_", query_gid_table),
};

static const struct sym rdmacm_syms[] = {
	SYM(vrt_cm, "rdma_", create_event_channel),
	SYM(vrt_cm, "rdma_", destroy_event_channel),
	SYM(vrt_cm, "rdma_", create_id),
	SYM(vrt_cm, "rdma_", destroy_id),
	SYM(vrt_cm, "rdma_", bind_addr),
	SYM(vrt_cm, "rdma_", listen),
	SYM(vrt_cm, "rdma_", get_src_port),
	SYM(vrt_cm, "rdma_", resolve_addr),
	SYM(vrt_cm, "rdma_", resolve_route),
	SYM(vrt_cm, "rdma_", get_cm_event),
	SYM(vrt_cm, "rdma_", ack_cm_event),
	SYM(vrt_cm, "rdma_", migrate_id),
	SYM(vrt_cm, "rdma_", init_qp_attr),
	SYM(vrt_cm, "rdma_", accept),
	SYM(vrt_cm, "rdma_", connect),
	SYM(vrt_cm, "rdma_", establish),
	SYM(vrt_cm, "rdma_", reject),
	SYM(vrt_cm, "rdma_", disconnect),
	SYM(vrt_cm, "rdma_", get_devices),
	SYM(vrt_cm, "rdma_", free_devices),
};

// load opens soname and resolves n symbols into their slots, then each of
// the nopt optional ones it has; on any failure of the first n it resolves
// none (every slot stays NULL) and says why in err. The library stays
// loaded for the life of the process, as libibverbs expects: its providers
// are dlopen'ed by it and never unloaded either.
static int load(const char *soname, const struct sym *syms, size_t n, const struct sym *opt,
		size_t nopt, char *err, int errlen) {
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();
		snprintf(err, (size_t)errlen, "%s", why ? why : soname);
		return -1;
	}
	void *addr[64];
	if (n > sizeof addr / sizeof addr[0]) {
		snprintf(err, (size_t)errlen, "%s: too many symbols", soname);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		dlerror();
		addr[i] = dlsym(h, syms[i].name);
		if (!addr[i]) {
			// Too old a library: keep its handle (dlclose of libibverbs
			// is not safe once a provider was loaded) but use nothing.
			snprintf(err, (size_t)errlen, "%s has no %s (rdma-core too old?)", soname,
				 syms[i].name);
			return -1;
		}
	}
	for (size_t i = 0; i < n; i++)
		*syms[i].slot = addr[i];
	for (size_t i = 0; i < nopt; i++)
		*opt[i].slot = dlsym(h, opt[i].name);
	return 0;
}

int vrt_load_verbs(const char *soname, char *err, int errlen) {
	if (vrt_verbs_loaded)
		return 0;
	if (load(soname, verbs_syms, sizeof verbs_syms / sizeof verbs_syms[0], verbs_opt_syms,
		 sizeof verbs_opt_syms / sizeof verbs_opt_syms[0], err, errlen))
		return -1;
	vrt_verbs_loaded = 1;
	return 0;
}

int vrt_load_rdmacm(const char *soname, char *err, int errlen) {
	if (vrt_rdmacm_loaded)
		return 0;
	if (!vrt_verbs_loaded) {
		snprintf(err, (size_t)errlen, "libibverbs is not loaded");
		return -1;
	}
	if (load(soname, rdmacm_syms, sizeof rdmacm_syms / sizeof rdmacm_syms[0], NULL, 0, err,
		 errlen))
		return -1;
	vrt_rdmacm_loaded = 1;
	return 0;
}

// The wrappers: a NULL slot means the library is not loaded.
#define CALL_PTR(fn, ...) \
	do { \
		if (!vrt_ibv.fn) { \
			errno = ENOSYS; \
			return NULL; \
		} \
		return vrt_ibv.fn(__VA_ARGS__); \
	} while (0)
#define CALL_INT(fn, ...) \
	do { \
		if (!vrt_ibv.fn) \
			return ENOSYS; \
		return vrt_ibv.fn(__VA_ARGS__); \
	} while (0)

struct ibv_pd *vrt_alloc_pd(struct ibv_context *ctx) { CALL_PTR(alloc_pd, ctx); }
int vrt_dealloc_pd(struct ibv_pd *pd) { CALL_INT(dealloc_pd, pd); }
int vrt_dereg_mr(struct ibv_mr *mr) { CALL_INT(dereg_mr, mr); }
struct ibv_ah *vrt_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr) {
	CALL_PTR(create_ah, pd, attr);
}
int vrt_destroy_ah(struct ibv_ah *ah) { CALL_INT(destroy_ah, ah); }
struct ibv_comp_channel *vrt_create_comp_channel(struct ibv_context *ctx) {
	CALL_PTR(create_comp_channel, ctx);
}
int vrt_destroy_comp_channel(struct ibv_comp_channel *ch) { CALL_INT(destroy_comp_channel, ch); }
void vrt_ack_cq_events(struct ibv_cq *cq, unsigned int n) {
	if (vrt_ibv.ack_cq_events)
		vrt_ibv.ack_cq_events(cq, n);
}
int vrt_destroy_cq(struct ibv_cq *cq) { CALL_INT(destroy_cq, cq); }
int vrt_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr) {
	CALL_INT(query_device, ctx, attr);
}
int vrt_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init) {
	CALL_INT(query_qp, qp, attr, mask, init);
}
int vrt_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
	CALL_INT(modify_qp, qp, attr, mask);
}
int vrt_destroy_qp(struct ibv_qp *qp) { CALL_INT(destroy_qp, qp); }
int vrt_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr) {
	CALL_INT(query_srq, srq, attr);
}
int vrt_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask) {
	CALL_INT(modify_srq, srq, attr, mask);
}
int vrt_destroy_srq(struct ibv_srq *srq) { CALL_INT(destroy_srq, srq); }
int vrt_close_device(struct ibv_context *ctx) { CALL_INT(close_device, ctx); }

struct ibv_context **vrt_rdma_get_devices(int *n) {
	if (!vrt_cm.get_devices) {
		errno = ENOSYS;
		return NULL;
	}
	return vrt_cm.get_devices(n);
}

void vrt_rdma_free_devices(struct ibv_context **list) {
	if (vrt_cm.free_devices)
		vrt_cm.free_devices(list);
}

// vctx is libibverbs' verbs_get_ctx_op: the verbs_context around ctx when
// the provider's has the entry at offset off of struct vrt_verbs_context
// (counted, like sz, from the end), else NULL.
static struct vrt_verbs_context *vctx(struct ibv_context *ctx, size_t off) {
	if (!ctx || ctx->abi_compat != VRT_VERBS_ABI_EXTENDED)
		return NULL;
	struct vrt_verbs_context *v =
		(struct vrt_verbs_context *)((char *)ctx - offsetof(struct vrt_verbs_context, context));
	if (v->sz < sizeof *v - off)
		return NULL;
	return v;
}

#define VCTX(ctx, op) vctx(ctx, offsetof(struct vrt_verbs_context, op))

int vrt_close_xrcd(struct ibv_xrcd *xrcd) {
	struct vrt_verbs_context *v = VCTX(xrcd->context, close_xrcd);
	if (!v || !v->close_xrcd)
		return EOPNOTSUPP;
	return v->close_xrcd(xrcd);
}

struct ibv_qp *vrt_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr) {
	if (!vrt_ibv.create_qp) {
		errno = ENOSYS;
		return NULL;
	}
	// As ibv_create_qp_ex: a plain QP on a PD is an ibv_create_qp.
	if (attr->comp_mask == IBV_QP_INIT_ATTR_PD)
		return vrt_ibv.create_qp(attr->pd, (struct ibv_qp_init_attr *)attr);
	struct vrt_verbs_context *v = VCTX(ctx, create_qp_ex);
	if (!v || !v->create_qp_ex) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return v->create_qp_ex(ctx, attr);
}

struct ibv_srq *vrt_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr) {
	if (!vrt_ibv.create_srq) {
		errno = ENOSYS;
		return NULL;
	}
	// As ibv_create_srq_ex: a basic SRQ on a PD is an ibv_create_srq.
	uint32_t mask = attr->comp_mask;
	if (!(mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE)) &&
	    (mask & IBV_SRQ_INIT_ATTR_PD) &&
	    (!(mask & IBV_SRQ_INIT_ATTR_TYPE) || attr->srq_type == IBV_SRQT_BASIC))
		return vrt_ibv.create_srq(attr->pd, (struct ibv_srq_init_attr *)attr);
	struct vrt_verbs_context *v = VCTX(ctx, create_srq_ex);
	if (!v || !v->create_srq_ex) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return v->create_srq_ex(ctx, attr);
}

struct ibv_xrcd *vrt_open_xrcd_ex(struct ibv_context *ctx, struct ibv_xrcd_init_attr *attr) {
	struct vrt_verbs_context *v = VCTX(ctx, open_xrcd);
	if (!v || !v->open_xrcd) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return v->open_xrcd(ctx, attr);
}

int vrt_get_srq_num_ex(struct ibv_srq *srq, uint32_t *num) {
	struct vrt_verbs_context *v = VCTX(srq->context, get_srq_num);
	if (!v || !v->get_srq_num)
		return EOPNOTSUPP;
	return v->get_srq_num(srq, num);
}

ssize_t vrt_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max) {
	if (!vrt_ibv.query_gid_table)
		return -ENOSYS;
	return vrt_ibv.query_gid_table(ctx, entries, max, 0, sizeof *entries);
}

int vrt_has_query_gid_table(void) { return vrt_ibv.query_gid_table != NULL; }
