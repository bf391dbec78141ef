// The part of the libibverbs and librdmacm ABI that verbs/ibv uses, declared
// by the project itself so that the package builds on a machine without
// rdma-core's headers; the libraries are loaded at run time (lib.h).
//
// What is declared here must match the libraries' layout, not merely their
// spelling: these structs cross into libibverbs, its providers and
// librdmacm. rdma-core only ever appends to its public structs and keeps
// every enum value, so a declaration of the leading fields of a struct, as
// rdma-core 22 and later lay them out, stays valid for every later release.
// Where a struct is read only up to some field, only the fields up to it are
// declared, and the struct is never allocated here (the library allocates
// it and hands back a pointer). Structs the project allocates and passes in
// (work requests, attributes) are declared whole.
//
// Tag names are libibverbs' own (struct ibv_qp, enum ibv_wr_opcode...), so
// that the Go side reads as the verbs API does; no rdma-core header may be
// included in the same translation unit.
#ifndef VERBSRT_IBV_ABI_H
#define VERBSRT_IBV_ABI_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>

// ---- libibverbs: constants ------------------------------------------------

enum { IBV_SYSFS_NAME_MAX = 64 };

enum ibv_mtu {
	IBV_MTU_256 = 1,
	IBV_MTU_512 = 2,
	IBV_MTU_1024 = 3,
	IBV_MTU_2048 = 4,
	IBV_MTU_4096 = 5,
};

enum ibv_port_state {
	IBV_PORT_NOP = 0,
	IBV_PORT_DOWN = 1,
	IBV_PORT_INIT = 2,
	IBV_PORT_ARMED = 3,
	IBV_PORT_ACTIVE = 4,
	IBV_PORT_ACTIVE_DEFER = 5,
};

enum ibv_atomic_cap { IBV_ATOMIC_NONE, IBV_ATOMIC_HCA, IBV_ATOMIC_GLOB };

enum ibv_event_type {
	IBV_EVENT_CQ_ERR = 0,
	IBV_EVENT_QP_FATAL = 1,
	IBV_EVENT_QP_REQ_ERR = 2,
	IBV_EVENT_QP_ACCESS_ERR = 3,
	IBV_EVENT_COMM_EST = 4,
	IBV_EVENT_SQ_DRAINED = 5,
	IBV_EVENT_PATH_MIG = 6,
	IBV_EVENT_PATH_MIG_ERR = 7,
	IBV_EVENT_DEVICE_FATAL = 8,
	IBV_EVENT_PORT_ACTIVE = 9,
	IBV_EVENT_PORT_ERR = 10,
	IBV_EVENT_LID_CHANGE = 11,
	IBV_EVENT_PKEY_CHANGE = 12,
	IBV_EVENT_SM_CHANGE = 13,
	IBV_EVENT_SRQ_ERR = 14,
	IBV_EVENT_SRQ_LIMIT_REACHED = 15,
	IBV_EVENT_QP_LAST_WQE_REACHED = 16,
	IBV_EVENT_CLIENT_REREGISTER = 17,
	IBV_EVENT_GID_CHANGE = 18,
	IBV_EVENT_WQ_FATAL = 19,
};

enum ibv_wc_status {
	IBV_WC_SUCCESS = 0,
	IBV_WC_WR_FLUSH_ERR = 5,
	// The other statuses are read as numbers (verbs.WCStatus has them all).
};

enum ibv_wc_opcode {
	IBV_WC_SEND = 0,
	IBV_WC_RECV = 1 << 7,
	// The other opcodes are read as numbers (verbs.WCOpcode has them all).
};

enum ibv_qp_type {
	IBV_QPT_RC = 2,
	IBV_QPT_UC = 3,
	IBV_QPT_UD = 4,
	IBV_QPT_RAW_PACKET = 8,
	IBV_QPT_XRC_SEND = 9,
	IBV_QPT_XRC_RECV = 10,
};

enum ibv_qp_state {
	IBV_QPS_RESET,
	IBV_QPS_INIT,
	IBV_QPS_RTR,
	IBV_QPS_RTS,
	IBV_QPS_SQD,
	IBV_QPS_SQE,
	IBV_QPS_ERR,
	IBV_QPS_UNKNOWN,
};

enum ibv_mig_state { IBV_MIG_MIGRATED, IBV_MIG_REARM, IBV_MIG_ARMED };

enum ibv_qp_attr_mask {
	IBV_QP_STATE = 1 << 0,
	IBV_QP_CAP = 1 << 19,
	// verbs.QPAttrMask has the others, with the same bits.
};

enum ibv_wr_opcode {
	IBV_WR_RDMA_WRITE = 0,
	// verbs.Opcode has the others, with the same values.
};

enum ibv_send_flags {
	IBV_SEND_INLINE = 1 << 3,
	// verbs.SendFlags has the others, with the same bits.
};

enum ibv_qp_init_attr_mask {
	IBV_QP_INIT_ATTR_PD = 1 << 0,
	IBV_QP_INIT_ATTR_XRCD = 1 << 1,
};

enum ibv_srq_type { IBV_SRQT_BASIC, IBV_SRQT_XRC, IBV_SRQT_TM };

enum ibv_srq_init_attr_mask {
	IBV_SRQ_INIT_ATTR_TYPE = 1 << 0,
	IBV_SRQ_INIT_ATTR_PD = 1 << 1,
	IBV_SRQ_INIT_ATTR_XRCD = 1 << 2,
	IBV_SRQ_INIT_ATTR_CQ = 1 << 3,
};

enum ibv_xrcd_init_attr_mask {
	IBV_XRCD_INIT_ATTR_FD = 1 << 0,
	IBV_XRCD_INIT_ATTR_OFLAGS = 1 << 1,
};

enum ibv_gid_type {
	IBV_GID_TYPE_IB,
	IBV_GID_TYPE_ROCE_V1,
	IBV_GID_TYPE_ROCE_V2,
};

// ---- libibverbs: structs passed in whole ----------------------------------

union ibv_gid {
	uint8_t raw[16];
	struct {
		uint64_t subnet_prefix; // big-endian
		uint64_t interface_id;  // big-endian
	} global;
};

// ibv_gid_entry is what _ibv_query_gid_table fills, one per valid entry of
// every port. Its size is passed in (entry_size): libibverbs and the kernel
// fill no more than that.
struct ibv_gid_entry {
	union ibv_gid gid;
	uint32_t gid_index;
	uint32_t port_num;
	uint32_t gid_type; // enum ibv_gid_type
	uint32_t ndev_ifindex; // 0 for none; an ifindex of the netdev's own namespace
};

struct ibv_device_attr {
	char fw_ver[64];
	uint64_t node_guid;      // big-endian
	uint64_t sys_image_guid; // big-endian
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	int max_qp;
	int max_qp_wr;
	unsigned int device_cap_flags;
	int max_sge;
	int max_sge_rd;
	int max_cq;
	int max_cqe;
	int max_mr;
	int max_pd;
	int max_qp_rd_atom;
	int max_ee_rd_atom;
	int max_res_rd_atom;
	int max_qp_init_rd_atom;
	int max_ee_init_rd_atom;
	enum ibv_atomic_cap atomic_cap;
	int max_ee;
	int max_rdd;
	int max_mw;
	int max_raw_ipv6_qp;
	int max_raw_ethy_qp;
	int max_mcast_grp;
	int max_mcast_qp_attach;
	int max_total_mcast_qp_attach;
	int max_ah;
	int max_fmr;
	int max_map_per_fmr;
	int max_srq;
	int max_srq_wr;
	int max_srq_sge;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
};

// ibv_port_attr as the exported ibv_query_port fills it (libibverbs 1.1's
// layout, which every release keeps as the prefix of the current one).
struct ibv_port_attr {
	enum ibv_port_state state;
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
	uint16_t port_cap_flags2; // never written by ibv_query_port: left 0
};

struct ibv_async_event {
	union {
		struct ibv_cq *cq;
		struct ibv_qp *qp;
		struct ibv_srq *srq;
		struct ibv_wq *wq;
		int port_num;
	} element;
	enum ibv_event_type event_type;
};

struct ibv_wc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	union {
		uint32_t imm_data; // big-endian
		uint32_t invalidated_rkey;
	};
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned int wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
};

struct ibv_xrcd_init_attr {
	uint32_t comp_mask;
	int fd;
	int oflags;
};

struct ibv_global_route {
	union ibv_gid dgid;
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
};

struct ibv_ah_attr {
	struct ibv_global_route grh;
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	uint8_t is_global;
	uint8_t port_num;
};

struct ibv_srq_attr {
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
};

struct ibv_srq_init_attr {
	void *srq_context;
	struct ibv_srq_attr attr;
};

struct ibv_tm_cap {
	uint32_t max_num_tags;
	uint32_t max_ops;
};

struct ibv_srq_init_attr_ex {
	void *srq_context;
	struct ibv_srq_attr attr;
	uint32_t comp_mask;
	enum ibv_srq_type srq_type;
	struct ibv_pd *pd;
	struct ibv_xrcd *xrcd;
	struct ibv_cq *cq;
	struct ibv_tm_cap tm_cap;
};

struct ibv_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

struct ibv_qp_init_attr {
	void *qp_context;
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq;
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;
	int sq_sig_all;
};

struct ibv_rx_hash_conf {
	uint8_t rx_hash_function;
	uint8_t rx_hash_key_len;
	uint8_t *rx_hash_key;
	uint64_t rx_hash_fields_mask;
};

// ibv_qp_init_attr_ex begins with ibv_qp_init_attr: ibv_create_qp_ex hands
// it to ibv_create_qp as one when only the PD is set.
struct ibv_qp_init_attr_ex {
	void *qp_context;
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq;
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;
	int sq_sig_all;

	uint32_t comp_mask;
	struct ibv_pd *pd;
	struct ibv_xrcd *xrcd;
	uint32_t create_flags;
	uint16_t max_tso_header;
	struct ibv_rwq_ind_table *rwq_ind_tbl;
	struct ibv_rx_hash_conf rx_hash_conf;
	uint32_t source_qpn;
	uint64_t send_ops_flags;
};

struct ibv_qp_attr {
	enum ibv_qp_state qp_state;
	enum ibv_qp_state cur_qp_state;
	enum ibv_mtu path_mtu;
	enum ibv_mig_state path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	unsigned int qp_access_flags;
	struct ibv_qp_cap cap;
	struct ibv_ah_attr ah_attr;
	struct ibv_ah_attr alt_ah_attr;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint32_t rate_limit;
};

struct ibv_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct ibv_mw_bind_info {
	struct ibv_mr *mr;
	uint64_t addr;
	uint64_t length;
	unsigned int mw_access_flags;
};

struct ibv_send_wr {
	uint64_t wr_id;
	struct ibv_send_wr *next;
	struct ibv_sge *sg_list;
	int num_sge;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;
	union {
		uint32_t imm_data; // big-endian
		uint32_t invalidate_rkey;
	};
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
		} atomic;
		struct {
			struct ibv_ah *ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
	} wr;
	union {
		struct {
			uint32_t remote_srqn;
		} xrc;
	} qp_type;
	union {
		struct {
			struct ibv_mw *mw;
			uint32_t rkey;
			struct ibv_mw_bind_info bind_info;
		} bind_mw;
		struct {
			void *hdr;
			uint16_t hdr_sz;
			uint16_t mss;
		} tso;
	};
};

struct ibv_recv_wr {
	uint64_t wr_id;
	struct ibv_recv_wr *next;
	struct ibv_sge *sg_list;
	int num_sge;
};

// ---- libibverbs: objects the library allocates ----------------------------

struct ibv_device; // opaque: only passed back to the library

// The leading fields of each object, up to the last one read here.

struct ibv_pd {
	struct ibv_context *context;
	uint32_t handle;
};

struct ibv_xrcd {
	struct ibv_context *context;
};

struct ibv_mr {
	struct ibv_context *context;
	struct ibv_pd *pd;
	void *addr;
	size_t length;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
};

struct ibv_ah {
	struct ibv_context *context;
	struct ibv_pd *pd;
	uint32_t handle;
};

struct ibv_comp_channel {
	struct ibv_context *context;
	int fd;
	int refcnt;
};

struct ibv_cq {
	struct ibv_context *context;
	struct ibv_comp_channel *channel;
	void *cq_context;
	uint32_t handle;
	int cqe;
};

struct ibv_srq {
	struct ibv_context *context;
	void *srq_context;
	struct ibv_pd *pd;
	uint32_t handle;
};

struct ibv_qp {
	struct ibv_context *context;
	void *qp_context;
	struct ibv_pd *pd;
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq;
	uint32_t handle;
	uint32_t qp_num;
	enum ibv_qp_state state;
	enum ibv_qp_type qp_type;
};

// ibv_context_ops is the provider's table that the data-path verbs, static
// inlines in <infiniband/verbs.h>, call through: ibv_post_send,
// ibv_post_recv, ibv_post_srq_recv, ibv_poll_cq and ibv_req_notify_cq are
// one indirect call each, no library function in between. The slots this
// package does not use keep their places as opaque pointers.
struct ibv_context_ops {
	void *unused_0_to_10[11]; // query_device ... create_cq (compat slots, alloc_mw, bind_mw, dealloc_mw)
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	void *unused_13_to_19[7]; // cq_event ... destroy_srq
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
	void *unused_21_to_24[4]; // create_qp ... destroy_qp
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
	void *unused_27_to_31[5]; // create_ah ... async_event
};

struct ibv_context {
	struct ibv_device *device;
	struct ibv_context_ops ops;
	int cmd_fd;
	int async_fd;
	int num_comp_vectors;
	pthread_mutex_t mutex;
	void *abi_compat; // VRT_VERBS_ABI_EXTENDED when a verbs_context surrounds it
};

#define VRT_VERBS_ABI_EXTENDED ((void *)UINTPTR_MAX)

// vrt_verbs_context is the tail of libibverbs' struct verbs_context, which
// surrounds every ibv_context a current provider returns and ends with it.
// The extended verbs (ibv_create_qp_ex, ibv_create_srq_ex, ibv_open_xrcd,
// ibv_close_xrcd, ibv_get_srq_num) are static inlines that find their entry
// here. New entries are added at the front of the struct, so the distance of
// each entry from the end never changes, and `sz` (the provider's whole
// verbs_context size) tells whether an entry exists: it does when sz reaches
// back to it. Only the tail from create_qp_ex on is declared.
struct vrt_verbs_context {
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);
	int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);
	struct ibv_srq *(*create_srq_ex)(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr);
	struct ibv_xrcd *(*open_xrcd)(struct ibv_context *ctx, struct ibv_xrcd_init_attr *attr);
	int (*close_xrcd)(struct ibv_xrcd *xrcd);
	uint64_t reserved;
	size_t sz;
	struct ibv_context context;
};

// ---- librdmacm -------------------------------------------------------------

enum rdma_cm_event_type {
	RDMA_CM_EVENT_ADDR_RESOLVED,
	RDMA_CM_EVENT_ADDR_ERROR,
	RDMA_CM_EVENT_ROUTE_RESOLVED,
	RDMA_CM_EVENT_ROUTE_ERROR,
	RDMA_CM_EVENT_CONNECT_REQUEST,
	RDMA_CM_EVENT_CONNECT_RESPONSE,
	RDMA_CM_EVENT_CONNECT_ERROR,
	RDMA_CM_EVENT_UNREACHABLE,
	RDMA_CM_EVENT_REJECTED,
	RDMA_CM_EVENT_ESTABLISHED,
	RDMA_CM_EVENT_DISCONNECTED,
	RDMA_CM_EVENT_DEVICE_REMOVAL,
	RDMA_CM_EVENT_MULTICAST_JOIN,
	RDMA_CM_EVENT_MULTICAST_ERROR,
	RDMA_CM_EVENT_ADDR_CHANGE,
	RDMA_CM_EVENT_TIMEWAIT_EXIT,
};

enum rdma_port_space {
	RDMA_PS_IPOIB = 0x0002,
	RDMA_PS_TCP = 0x0106,
	RDMA_PS_UDP = 0x0111,
	RDMA_PS_IB = 0x013F,
};

struct rdma_event_channel {
	int fd;
};

// rdma_addr holds the id's bound and peer addresses (rdma_get_local_addr
// and rdma_get_peer_addr, static inlines, read them here).
struct rdma_addr {
	union {
		struct sockaddr src_addr;
		struct sockaddr_storage src_storage;
	};
	union {
		struct sockaddr dst_addr;
		struct sockaddr_storage dst_storage;
	};
	// The IB addresses follow; not read here.
};

// rdma_cm_id, up to port_num: route begins with its rdma_addr, whose
// IB-address part and the path records that follow it are skipped by
// their size.
struct rdma_cm_id {
	struct ibv_context *verbs;
	struct rdma_event_channel *channel;
	void *context;
	struct ibv_qp *qp;
	struct {
		struct rdma_addr addr;
		uint8_t ib_addr[2 * 16 + 2]; // sgid, dgid, pkey
		void *path_rec;
		int num_paths;
	} route;
	enum rdma_port_space ps;
	uint8_t port_num;
};

struct rdma_conn_param {
	const void *private_data;
	uint8_t private_data_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint32_t qp_num;
};

struct rdma_ud_param {
	const void *private_data;
	uint8_t private_data_len;
	struct ibv_ah_attr ah_attr;
	uint32_t qp_num;
	uint32_t qkey;
};

struct rdma_cm_event {
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	enum rdma_cm_event_type event;
	int status;
	union {
		struct rdma_conn_param conn;
		struct rdma_ud_param ud;
	} param;
};

#endif
