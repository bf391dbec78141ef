// C helpers of verbs/ibv for librdmacm (the connection manager). Each does
// what would otherwise take several cgo crossings; the comment of each says
// how many it saves. Event channels are non-blocking: Go waits for their fd
// through the netpoller, never in rdma_get_cm_event.
//
// QPs stay the provider's own (created with ibv_create_qp on a context the
// provider opened, on the device the rdma_cm_id is bound to) and are handed
// to the connection manager by number, as `rping -q` does: the helpers move
// them through INIT, RTR and RTS with the attributes rdma_init_qp_attr
// returns, and rdma_accept, rdma_connect and rdma_establish carry qp_num.
#ifndef VERBSRT_IBV_CM_SHIM_H
#define VERBSRT_IBV_CM_SHIM_H

#include <stdint.h>
#include "lib.h"

enum { VRT_CM_PRIVATE_MAX = 255 };

// vrt_cm_addr is an IPv4 or IPv6 address and port; family 0 means none.
struct vrt_cm_addr {
	uint8_t ip[16]; // IPv4 in the first 4 bytes
	uint16_t port;  // host byte order
	uint8_t family; // 4, 6 or 0
};

// vrt_cm_param is struct rdma_conn_param with its private data inline.
struct vrt_cm_param {
	uint8_t private_data[VRT_CM_PRIVATE_MAX];
	uint8_t private_data_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint32_t qp_num;
};

// vrt_cm_event is an event copied out of librdmacm's (which is acknowledged
// by then), with what Go needs to know about its rdma_cm_id.
struct vrt_cm_event {
	int event;
	int status;
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	struct vrt_cm_param param; // connection events
	char dev_name[IBV_SYSFS_NAME_MAX]; // of id->verbs; "" while unbound
	uint8_t port_num;
	struct vrt_cm_addr src, dst;
};

// vrt_cm_listen creates a non-blocking event channel and an RC (RDMA_PS_TCP)
// rdma_cm_id on it, binds it to addr and listens; *port is the port bound
// (for addr port 0). 0 or the errno, with nothing left behind on error. One
// crossing instead of five.
int vrt_cm_listen(const struct vrt_cm_addr *addr, int backlog, struct rdma_event_channel **ch,
		  struct rdma_cm_id **id, uint16_t *port);

// vrt_cm_resolve creates a non-blocking event channel and an RC rdma_cm_id
// on it and starts resolving dst (from src, when its family is not 0):
// RDMA_CM_EVENT_ADDR_RESOLVED follows. 0 or the errno. One crossing
// instead of four.
int vrt_cm_resolve(const struct vrt_cm_addr *src, const struct vrt_cm_addr *dst, int timeout_ms,
		   struct rdma_event_channel **ch, struct rdma_cm_id **id);

// vrt_cm_get_event reads one event from the non-blocking channel, copies it
// into *out and acknowledges it (rdma_ack_cm_event): 0, EAGAIN when none is
// pending, or the errno. One crossing instead of three, plus one per field
// of the id read from Go.
int vrt_cm_get_event(struct rdma_event_channel *ch, struct vrt_cm_event *out);

// vrt_cm_resolve_route wraps rdma_resolve_route: 0 or the errno.
int vrt_cm_resolve_route(struct rdma_cm_id *id, int timeout_ms);

// vrt_cm_migrate moves id (a connection request's, whose events arrive on
// its listener's channel) to a new non-blocking channel *ch of its own. 0 or
// the errno. One crossing instead of three.
int vrt_cm_migrate(struct rdma_cm_id *id, struct rdma_event_channel **ch);

// vrt_cm_modify_qp moves qp through INIT (from RESET, or INIT again to
// refresh its attributes), then up to last (IBV_QPS_INIT, _RTR or _RTS), each
// step with the attributes rdma_init_qp_attr gives for id. 0 or the errno;
// *failed is the state that failed. One crossing instead of two per state.
int vrt_cm_modify_qp(struct rdma_cm_id *id, struct ibv_qp *qp, int last, int *failed);

// vrt_cm_accept brings qp to RTS (vrt_cm_modify_qp) and accepts the
// connection request of id with *p, whose qp_num the caller set. 0 or the
// errno (*failed -1 when the modifies succeeded). One crossing instead of
// seven.
int vrt_cm_accept(struct rdma_cm_id *id, struct ibv_qp *qp, const struct vrt_cm_param *p,
		  int *failed);

// vrt_cm_connect brings qp to INIT and sends the connect request with *p.
// One crossing instead of three.
int vrt_cm_connect(struct rdma_cm_id *id, struct ibv_qp *qp, const struct vrt_cm_param *p,
		   int *failed);

// vrt_cm_establish completes an active connection after
// RDMA_CM_EVENT_CONNECT_RESPONSE: qp to RTS (INIT refreshed with the
// response's attributes, RTR, RTS), then rdma_establish (the RTU). One
// crossing instead of seven.
int vrt_cm_establish(struct rdma_cm_id *id, struct ibv_qp *qp, int *failed);

// vrt_cm_reject wraps rdma_reject.
int vrt_cm_reject(struct rdma_cm_id *id, const uint8_t *private_data, uint8_t len);

// vrt_cm_disconnect moves qp (when not NULL) to ERR, so that its
// outstanding work flushes, and sends the disconnect request. One crossing
// instead of two.
int vrt_cm_disconnect(struct rdma_cm_id *id, struct ibv_qp *qp);

// vrt_cm_destroy destroys id and then ch (either may be NULL). One crossing
// instead of two.
void vrt_cm_destroy(struct rdma_cm_id *id, struct rdma_event_channel *ch);

#endif
