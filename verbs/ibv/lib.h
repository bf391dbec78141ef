// libibverbs and librdmacm, loaded at run time with dlopen so that verbs/ibv
// builds and links on a machine without rdma-core and says what is missing
// when it runs there.
//
// vrt_load_verbs and vrt_load_rdmacm load each library once and resolve
// every function this package calls (the optional ones where the library
// has them); Go calls them (once, under a
// sync.Once) before anything else of the library. Until one has succeeded,
// every wrapper below fails with ENOSYS instead of calling through a NULL
// pointer. The data-path verbs (post, poll, arm) do not come through here:
// like libibverbs' own static inlines, they call the provider's ops table in
// the ibv_context directly (shim.c), one indirect call per batch.
#ifndef VERBSRT_IBV_LIB_H
#define VERBSRT_IBV_LIB_H

#include <sys/types.h>
#include "abi.h"

// The sonames loaded: the ABI of abi.h is that of these major versions.
#define VRT_LIBIBVERBS "libibverbs.so.1"
#define VRT_LIBRDMACM "librdmacm.so.1"

// vrt_load_verbs loads libibverbs from soname (VRT_LIBIBVERBS but in
// tests): 0, or -1 with why in err (a NUL-terminated message of at most
// errlen bytes: dlerror's, or the missing symbol).
int vrt_load_verbs(const char *soname, char *err, int errlen);

// vrt_load_rdmacm loads librdmacm from soname (VRT_LIBRDMACM but in tests),
// once libibverbs is loaded: 0, or -1 with why in err.
int vrt_load_rdmacm(const char *soname, char *err, int errlen);

// Wrappers of exported libibverbs functions that Go calls directly. Each
// returns what the function returns; before vrt_load_verbs succeeded, NULL or
// -1 with errno ENOSYS (or ENOSYS itself for those returning an errno).
struct ibv_pd *vrt_alloc_pd(struct ibv_context *ctx);
int vrt_dealloc_pd(struct ibv_pd *pd);
int vrt_dereg_mr(struct ibv_mr *mr);
struct ibv_ah *vrt_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int vrt_destroy_ah(struct ibv_ah *ah);
struct ibv_comp_channel *vrt_create_comp_channel(struct ibv_context *ctx);
int vrt_destroy_comp_channel(struct ibv_comp_channel *ch);
void vrt_ack_cq_events(struct ibv_cq *cq, unsigned int n);
int vrt_destroy_cq(struct ibv_cq *cq);
int vrt_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr);
int vrt_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init);
int vrt_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int vrt_destroy_qp(struct ibv_qp *qp);
int vrt_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int vrt_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
int vrt_destroy_srq(struct ibv_srq *srq);
int vrt_close_device(struct ibv_context *ctx);
int vrt_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_context **vrt_rdma_get_devices(int *n);

// The extended verbs, static inlines in <infiniband/verbs.h> that find the
// provider's entry in its verbs_context (abi.h): the same logic, including
// the fall back on the basic verb that those inlines take.
struct ibv_qp *vrt_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);
struct ibv_srq *vrt_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr);
struct ibv_xrcd *vrt_open_xrcd_ex(struct ibv_context *ctx, struct ibv_xrcd_init_attr *attr);
int vrt_get_srq_num_ex(struct ibv_srq *srq, uint32_t *num);

// vrt_has_query_gid_table is 1 when the loaded libibverbs has
// _ibv_query_gid_table.
int vrt_has_query_gid_table(void);

// vrt_query_gid_table is ibv_query_gid_table: the valid GID entries of every
// port of ctx, up to max, with their types and netdevs' ifindexes; how many,
// or -errno. -ENOSYS when the library has no _ibv_query_gid_table.
ssize_t vrt_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max);
void vrt_rdma_free_devices(struct ibv_context **list);

// vrt_ibv and vrt_cm hold the resolved functions, for the C helpers of this
// package (shim.c, cm_shim.c); Go never reads them.
struct vrt_ibv_fns {
	struct ibv_device **(*get_device_list)(int *n);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	uint64_t (*get_device_guid)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
	int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
				    struct ibv_comp_channel *ch, int vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned int n);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			struct ibv_qp_init_attr *init);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr);
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
	int (*destroy_srq)(struct ibv_srq *srq);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	int (*destroy_ah)(struct ibv_ah *ah);
	int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *ev);
	void (*ack_async_event)(struct ibv_async_event *ev);

	// Optional: NULL where the library predates them, which does not
	// fail the load.
	// _ibv_query_gid_table (libibverbs 32, IBVERBS_1.11), behind the
	// static inline ibv_query_gid_table.
	ssize_t (*query_gid_table)(struct ibv_context *ctx, struct ibv_gid_entry *entries,
				   size_t max_entries, uint32_t flags, size_t entry_size);
};

struct vrt_cm_fns {
	struct rdma_event_channel *(*create_event_channel)(void);
	void (*destroy_event_channel)(struct rdma_event_channel *ch);
	int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *context,
			 enum rdma_port_space ps);
	int (*destroy_id)(struct rdma_cm_id *id);
	int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
	int (*listen)(struct rdma_cm_id *id, int backlog);
	uint16_t (*get_src_port)(struct rdma_cm_id *id); // big-endian
	int (*resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
			    int timeout_ms);
	int (*resolve_route)(struct rdma_cm_id *id, int timeout_ms);
	int (*get_cm_event)(struct rdma_event_channel *ch, struct rdma_cm_event **ev);
	int (*ack_cm_event)(struct rdma_cm_event *ev);
	int (*migrate_id)(struct rdma_cm_id *id, struct rdma_event_channel *ch);
	int (*init_qp_attr)(struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask);
	int (*accept)(struct rdma_cm_id *id, struct rdma_conn_param *param);
	int (*connect)(struct rdma_cm_id *id, struct rdma_conn_param *param);
	int (*establish)(struct rdma_cm_id *id);
	int (*reject)(struct rdma_cm_id *id, const void *private_data, uint8_t len);
	int (*disconnect)(struct rdma_cm_id *id);
	struct ibv_context **(*get_devices)(int *n);
	void (*free_devices)(struct ibv_context **list);
};

extern struct vrt_ibv_fns vrt_ibv;
extern struct vrt_cm_fns vrt_cm;

// vrt_verbs_loaded and vrt_rdmacm_loaded are 1 once the library is loaded.
extern int vrt_verbs_loaded, vrt_rdmacm_loaded;

#endif
