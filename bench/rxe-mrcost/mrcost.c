// mrcost: what one remote exposure of a memory region costs on a device, and
// what revoking it costs, for the mechanisms a runtime could use (issue 11):
//
//   mr   an MR per exposed region: ibv_reg_mr, then ibv_dereg_mr
//   mw2  a type-2 memory window bound per exposure: a BIND_MW work request,
//        then a LOCAL_INV work request, each on the exposing QP's send queue
//   mw1  a type-1 memory window (ibv_bind_mw), unbound by a zero-length bind
//
// and checks that each exposure does what it says: the peer's RDMA WRITE with
// the key succeeds while it exists and fails with REM_ACCESS_ERR once it is
// revoked, and who besides the QP it was made for can use the key.
//
// Everything runs in one process: device A (default rxe0) exposes memory from
// one large mmap'd, pre-touched arena; device B (default rxe1) is the peer.
// Two RC connections A1-B1 and A2-B2 are set up by hand as ibv_rc_pingpong
// does (GID index 1: RoCEv2 on the IPv4-mapped GID). Built on the host with
//
//   cc -O2 -Wall -o mrcost mrcost.c -libverbs
//
// and run in the rxevm guest by ./run. Every wait for a completion is bounded.
// Exit status: 0 when every check saw what it expected, 1 when one did not,
// 2 when setup failed.
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define ARENA_SIZE (64u << 20)
#define WRITE_LEN 64
#define WAIT_NS (5ull * 1000000000ull)
#define CQ_DEPTH 256

struct side {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	union ibv_gid gid;
};

// One RC connection: a on A, b on B, each with its own CQ (send and receive)
// so that waiting for one operation never sees another QP's completions.
struct pair {
	const char *name;
	struct ibv_cq *acq, *bcq;
	struct ibv_qp *a, *b;
};

static struct side A = {.name = "rxe0"}, B = {.name = "rxe1"};
static struct pair P1 = {.name = "A1-B1"}, P2 = {.name = "A2-B2"};
static int gidx = 1;
static int iters = 2000;
static bool unsafe; // -u: also run the check that trips rxe's use-after-free

static uint8_t *arena;	  // A's exposed memory
static uint8_t *src;	  // B's source for WRITEs and SENDs
static struct ibv_mr *src_mr;
static struct ibv_mr *arena_mr; // LOCAL_WRITE | MW_BIND over the whole arena: what windows bind to

static int checks, surprises;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("mrcost: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

// check records one expectation: ok says whether it held, the rest is what
// was seen (printed either way, so the output is the record).
static void check(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	checks++;
	if (!ok)
		surprises++;
	printf("check %-52s %s: ", name, ok ? "ok  " : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

// --- completions -------------------------------------------------------------

// wait_wc polls cq for one completion, for at most WAIT_NS. It returns 0 with
// *wc filled, or -1 (timeout or poll failure, said on stderr).
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	uint64_t deadline = 0;

	for (unsigned spins = 0;; spins++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0) {
			fprintf(stderr, "mrcost: ibv_poll_cq: %d\n", n);
			return -1;
		}
		if (n == 1)
			return 0;
		if ((spins & 255) == 0) {
			uint64_t t = now_ns();

			if (!deadline)
				deadline = t + WAIT_NS;
			else if (t > deadline) {
				fprintf(stderr, "mrcost: no completion in %llu s\n", WAIT_NS / 1000000000ull);
				return -1;
			}
		}
	}
}

static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];

	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
}

// wc_str names a completion's outcome: "SUCCESS", or the status, its number
// and the vendor error, as a report needs them.
static const char *wc_str(const struct ibv_wc *wc)
{
	static char buf[128];

	if (wc->status == IBV_WC_SUCCESS)
		return "SUCCESS";
	snprintf(buf, sizeof(buf), "%s (status %d, vendor_err 0x%x, opcode %d)",
		 ibv_wc_status_str(wc->status), wc->status, wc->vendor_err, wc->opcode);
	return buf;
}

// --- connections -------------------------------------------------------------

static void open_side(struct side *s)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev = NULL;

	if (!list)
		die("ibv_get_device_list: %s", strerror(errno));
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), s->name))
			dev = list[i];
	if (!dev)
		die("no device %s", s->name);
	s->ctx = ibv_open_device(dev);
	if (!s->ctx)
		die("ibv_open_device %s: %s", s->name, strerror(errno));
	ibv_free_device_list(list);
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		die("ibv_alloc_pd %s: %s", s->name, strerror(errno));
	if (ibv_query_gid(s->ctx, 1, gidx, &s->gid))
		die("ibv_query_gid %s index %d: %s", s->name, gidx, strerror(errno));
}

static struct ibv_qp *create_qp(struct side *s, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 64, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);

	if (!qp)
		die("ibv_create_qp %s: %s", s->name, strerror(errno));
	return qp;
}

// to_rts moves qp through INIT and RTR to RTS, aimed at the QP numbered
// dqpn on the side with GID dgid.
static void to_rts(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *dgid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	int err;

	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		die("modify_qp INIT: %s", strerror(err));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		die("modify_qp RTR: %s", strerror(err));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)))
		die("modify_qp RTS: %s", strerror(err));
}

static void connect_pair(struct pair *p)
{
	if (!p->acq) {
		p->acq = ibv_create_cq(A.ctx, CQ_DEPTH, NULL, NULL, 0);
		p->bcq = ibv_create_cq(B.ctx, CQ_DEPTH, NULL, NULL, 0);
		if (!p->acq || !p->bcq)
			die("ibv_create_cq: %s", strerror(errno));
	}
	p->a = create_qp(&A, p->acq);
	p->b = create_qp(&B, p->bcq);
	to_rts(p->a, p->b->qp_num, &B.gid);
	to_rts(p->b, p->a->qp_num, &A.gid);
}

// reconnect replaces both QPs of p: a remote access error leaves them in the
// error state, where they only flush.
static void reconnect(struct pair *p)
{
	int err;

	if ((err = ibv_destroy_qp(p->a)) || (err = ibv_destroy_qp(p->b)))
		die("ibv_destroy_qp: %s", strerror(err));
	drain(p->acq);
	drain(p->bcq);
	connect_pair(p);
}

// --- operations --------------------------------------------------------------

// post_wait posts one signaled WR on qp and waits for its completion on cq.
// It returns the completion's status, or -1 when the post was refused (the
// errno is in *post_err) or nothing completed.
static int post_wait(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr, struct ibv_wc *wc,
		     int *post_err)
{
	struct ibv_send_wr *bad;
	int err;

	wr->send_flags |= IBV_SEND_SIGNALED;
	if ((err = ibv_post_send(qp, wr, &bad))) {
		if (post_err)
			*post_err = err;
		return -1;
	}
	if (wait_wc(cq, wc))
		return -1;
	return wc->status;
}

// peer_write has B WRITE WRITE_LEN bytes of pattern to A's raddr with rkey
// over pair p, and returns the completion (status -1: none).
static int peer_write(struct pair *p, uint64_t raddr, uint32_t rkey, uint8_t pattern, struct ibv_wc *wc)
{
	struct ibv_sge sge = {.addr = (uintptr_t)src, .length = WRITE_LEN, .lkey = src_mr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = 1,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.wr.rdma = {.remote_addr = raddr, .rkey = rkey},
	};
	int perr = 0, st;

	memset(src, pattern, WRITE_LEN);
	st = post_wait(p->b, p->bcq, &wr, wc, &perr);
	if (st < 0 && perr)
		fprintf(stderr, "mrcost: post WRITE: %s\n", strerror(perr));
	return st;
}

static bool landed(const uint8_t *at, uint8_t pattern)
{
	for (int i = 0; i < WRITE_LEN; i++)
		if (at[i] != pattern)
			return false;
	return true;
}

// expect_write checks one peer WRITE into [region+size-WRITE_LEN, +WRITE_LEN)
// (the region's last bytes, so a key covering less than the region fails):
// want_ok says whether it should succeed (and the bytes land) or fail with
// REM_ACCESS_ERR. A failed WRITE leaves p in error: p is reconnected.
static void expect_write(const char *name, struct pair *p, uint8_t *region, size_t size, uint32_t rkey,
			 bool want_ok)
{
	static uint8_t pattern = 0x10;
	uint8_t *at = region + size - WRITE_LEN;
	struct ibv_wc wc = {0};
	int st;

	pattern++;
	memset(at, 0, WRITE_LEN);
	st = peer_write(p, (uintptr_t)at, rkey, pattern, &wc);
	if (want_ok)
		check(st == IBV_WC_SUCCESS && landed(at, pattern), name, "WRITE over %s with rkey 0x%08x: %s%s",
		      p->name, rkey, st < 0 ? "no completion" : wc_str(&wc),
		      st == IBV_WC_SUCCESS && !landed(at, pattern) ? ", but the bytes did not land" : "");
	else
		check(st == IBV_WC_REM_ACCESS_ERR && !landed(at, pattern), name,
		      "WRITE over %s with rkey 0x%08x: %s", p->name, rkey, st < 0 ? "no completion" : wc_str(&wc));
	if (st != IBV_WC_SUCCESS)
		reconnect(p);
}

static int bind_mw2(struct pair *p, struct ibv_mw *mw, uint32_t rkey, void *addr, size_t len, unsigned wr_flags,
		    struct ibv_wc *wc, int *post_err)
{
	struct ibv_send_wr wr = {
		.wr_id = 2,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = wr_flags,
		.bind_mw = {
			.mw = mw,
			.rkey = rkey,
			.bind_info = {
				.mr = arena_mr,
				.addr = (uintptr_t)addr,
				.length = len,
				.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			},
		},
	};

	return post_wait(p->a, p->acq, &wr, wc, post_err);
}

static int local_inv(struct pair *p, uint32_t rkey, struct ibv_wc *wc, int *post_err)
{
	struct ibv_send_wr wr = {.wr_id = 3, .opcode = IBV_WR_LOCAL_INV, .invalidate_rkey = rkey};

	return post_wait(p->a, p->acq, &wr, wc, post_err);
}

// bind_mw1 binds (len > 0) or unbinds (len == 0) a type-1 window through
// ibv_bind_mw, which posts a BIND_MW WR itself and advances mw->rkey, and
// waits for its completion. An unbind names the arena MR with length 0:
// rdma-core 44's rxe provider dereferences bind_info.mr even then
// (convert_send_wr), so a NULL mr crashes it.
static int bind_mw1(struct pair *p, struct ibv_mw *mw, void *addr, size_t len, struct ibv_wc *wc, int *post_err)
{
	struct ibv_mw_bind b = {
		.wr_id = 4,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_info = {
			.mr = arena_mr,
			.addr = len ? (uintptr_t)addr : 0,
			.length = len,
			.mw_access_flags = len ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0,
		},
	};
	int err = ibv_bind_mw(p->a, mw, &b);

	if (err) {
		*post_err = err;
		return -1;
	}
	if (wait_wc(p->acq, wc))
		return -1;
	return wc->status;
}

// --- statistics --------------------------------------------------------------

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static void header(void)
{
	printf("%-26s %8s %6s %10s %10s %10s %10s\n", "op", "size", "n", "min_us", "median_us", "p99_us",
	       "max_us");
}

// size_str writes "4KiB", "1MiB", or "-" for no size.
static const char *size_str(char *buf, size_t n, size_t size)
{
	if (size == 0)
		snprintf(buf, n, "-");
	else if (size % (1u << 20) == 0)
		snprintf(buf, n, "%zuMiB", size >> 20);
	else if (size % 1024 == 0)
		snprintf(buf, n, "%zuKiB", size >> 10);
	else
		snprintf(buf, n, "%zuB", size);
	return buf;
}

// report prints min, median, p99 (nearest rank) and max of n durations.
static void report(const char *op, size_t size, uint64_t *ns, int n)
{
	char sz[32];

	if (n == 0)
		return;
	qsort(ns, n, sizeof(*ns), cmp_u64);
	int p99 = (int)((99ll * n + 99) / 100) - 1;
	double med = n % 2 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2.0;

	printf("%-26s %8s %6d %10.1f %10.1f %10.1f %10.1f\n", op, size_str(sz, sizeof(sz), size), n, ns[0] / 1e3,
	       med / 1e3, ns[p99] / 1e3, ns[n - 1] / 1e3);
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

// distinct counts the different values among n keys (and sorts them).
static int distinct(uint32_t *v, int n)
{
	int d = n > 0;

	qsort(v, n, sizeof(*v), cmp_u32);
	for (int i = 1; i < n; i++)
		d += v[i] != v[i - 1];
	return d;
}

// --- the device --------------------------------------------------------------

static void device_facts(void)
{
	struct ibv_device_attr_ex ax = {0};
	struct ibv_device_attr *a = &ax.orig_attr;
	int err;

	if ((err = ibv_query_device_ex(A.ctx, NULL, &ax)))
		die("ibv_query_device_ex: %s", strerror(err));
	printf("device %s: max_mr %d, max_mw %d, max_pd %d, max_qp %d, max_mr_size %" PRIu64 "\n", A.name,
	       a->max_mr, a->max_mw, a->max_pd, a->max_qp, a->max_mr_size);
	printf("device %s: device_cap_flags 0x%x: MEM_WINDOW %s, MEM_MGT_EXTENSIONS %s, MEM_WINDOW_TYPE_2A %s, "
	       "MEM_WINDOW_TYPE_2B %s\n",
	       A.name, a->device_cap_flags, a->device_cap_flags & IBV_DEVICE_MEM_WINDOW ? "yes" : "no",
	       a->device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS ? "yes" : "no",
	       a->device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A ? "yes" : "no",
	       a->device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B ? "yes" : "no");
	printf("device %s: fw_ver %s, vendor_id 0x%x, vendor_part_id %u\n", A.name, a->fw_ver, a->vendor_id,
	       a->vendor_part_id);
}

static const int MR_ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

static char *label(char *buf, size_t n, const char *what, size_t size)
{
	char sz[32];

	snprintf(buf, n, "%s %s", what, size_str(sz, sizeof(sz), size));
	return buf;
}

// --- checks: does each exposure do what it says? -----------------------------

static void check_mr(size_t size)
{
	uint8_t *r = arena + size; // away from offset 0, so a key for the wrong place shows
	struct ibv_mr *mr = ibv_reg_mr(A.pd, r, size, MR_ACCESS);
	char n[64];
	int err;

	if (!mr) {
		check(false, label(n, sizeof(n), "mr reg", size), "ibv_reg_mr: %s (errno %d)", strerror(errno), errno);
		return;
	}
	expect_write(label(n, sizeof(n), "mr exposed, own QP", size), &P1, r, size, mr->rkey, true);
	expect_write(label(n, sizeof(n), "mr exposed, other QP", size), &P2, r, size, mr->rkey, true);
	uint32_t rkey = mr->rkey;
	err = ibv_dereg_mr(mr);
	check(err == 0, label(n, sizeof(n), "mr dereg", size), "ibv_dereg_mr: %s", err ? strerror(err) : "0");
	expect_write(label(n, sizeof(n), "mr revoked (dereg)", size), &P1, r, size, rkey, false);
}

// check_mw2 exposes r through a type-2 window bound on A1: only B1's WRITEs
// (which A1 answers) may use the key, and a LOCAL_INV on A1 revokes it.
static bool check_mw2(struct ibv_mw *mw, size_t size)
{
	uint8_t *r = arena + size;
	uint32_t key = ibv_inc_rkey(mw->rkey);
	struct ibv_wc wc = {0};
	int perr = 0, st;
	char n[64];

	st = bind_mw2(&P1, mw, key, r, size, 0, &wc, &perr);
	check(st == IBV_WC_SUCCESS, label(n, sizeof(n), "mw2 BIND_MW on A1", size), "%s",
	      perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	if (st != IBV_WC_SUCCESS) {
		if (!perr)
			reconnect(&P1);
		return false;
	}
	mw->rkey = key; // post_send leaves ibv_mw.rkey alone; the next BIND_MW names the window by it
	expect_write(label(n, sizeof(n), "mw2 exposed, other QP", size), &P2, r, size, key, false);
	expect_write(label(n, sizeof(n), "mw2 exposed, bound QP", size), &P1, r, size, key, true);
	perr = 0;
	st = local_inv(&P1, key, &wc, &perr);
	check(st == IBV_WC_SUCCESS, label(n, sizeof(n), "mw2 LOCAL_INV on A1", size), "%s",
	      perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	if (st != IBV_WC_SUCCESS && !perr)
		reconnect(&P1);
	expect_write(label(n, sizeof(n), "mw2 revoked (LOCAL_INV)", size), &P1, r, size, key, false);
	return true;
}

static void check_mw1(struct ibv_mw *mw, size_t size)
{
	uint8_t *r = arena + size;
	struct ibv_wc wc = {0};
	int perr = 0, st;
	char n[64];

	st = bind_mw1(&P1, mw, r, size, &wc, &perr);
	check(st == IBV_WC_SUCCESS, label(n, sizeof(n), "mw1 ibv_bind_mw on A1", size), "%s",
	      perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	if (st != IBV_WC_SUCCESS) {
		if (!perr)
			reconnect(&P1);
		return;
	}
	uint32_t key = mw->rkey;
	expect_write(label(n, sizeof(n), "mw1 exposed, other QP", size), &P2, r, size, key, true);
	expect_write(label(n, sizeof(n), "mw1 exposed, bound QP", size), &P1, r, size, key, true);
	perr = 0;
	st = bind_mw1(&P1, mw, NULL, 0, &wc, &perr);
	check(st == IBV_WC_SUCCESS, label(n, sizeof(n), "mw1 unbind (zero length)", size), "%s",
	      perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	if (st != IBV_WC_SUCCESS && !perr)
		reconnect(&P1);
	expect_write(label(n, sizeof(n), "mw1 revoked, old key", size), &P1, r, size, key, false);
}

// check_send_inv: the peer revokes a type-2 window itself, with the SEND
// that tells A it is done (SEND_WITH_INV naming the window's rkey).
static void check_send_inv(struct ibv_mw *mw)
{
	size_t size = 4096;
	uint8_t *r = arena + size, *rbuf = arena + ARENA_SIZE - 4096;
	uint32_t key = ibv_inc_rkey(mw->rkey);
	struct ibv_wc wc = {0}, rwc = {0};
	int perr = 0, st;

	st = bind_mw2(&P1, mw, key, r, size, 0, &wc, &perr);
	if (st != IBV_WC_SUCCESS) {
		check(false, "mw2 bind for SEND_WITH_INV", "%s", perr ? strerror(perr) : wc_str(&wc));
		if (!perr)
			reconnect(&P1);
		return;
	}
	mw->rkey = key;
	struct ibv_sge rsge = {.addr = (uintptr_t)rbuf, .length = 64, .lkey = arena_mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 9, .sg_list = &rsge, .num_sge = 1}, *rbad;
	if ((perr = ibv_post_recv(P1.a, &rwr, &rbad)))
		die("ibv_post_recv: %s", strerror(perr));
	struct ibv_sge sge = {.addr = (uintptr_t)src, .length = 16, .lkey = src_mr->lkey};
	struct ibv_send_wr swr = {
		.wr_id = 10, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV, .invalidate_rkey = key};
	st = post_wait(P1.b, P1.bcq, &swr, &wc, &perr);
	int rst = st == IBV_WC_SUCCESS && wait_wc(P1.acq, &rwc) == 0 ? (int)rwc.status : -1;
	check(st == IBV_WC_SUCCESS && rst == IBV_WC_SUCCESS && rwc.invalidated_rkey == key, "mw2 peer SEND_WITH_INV",
	      "sender: %s; receiver: %s, invalidated_rkey 0x%08x (key 0x%08x)",
	      perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc),
	      rst < 0 ? "no completion" : wc_str(&rwc), rwc.invalidated_rkey, key);
	if (st != IBV_WC_SUCCESS || rst != IBV_WC_SUCCESS) {
		reconnect(&P1);
		return;
	}
	// The flag that says invalidated_rkey is meaningful: rxe (6.1) writes
	// the kernel's IB_WC_WITH_INVALIDATE (1 << 2) into a user CQ, and
	// libibverbs reads bit 2 as IBV_WC_IP_CSUM_OK; IBV_WC_WITH_INV is 1 << 3.
	printf("info  receiver's wc_flags 0x%x: IBV_WC_WITH_INV (0x%x) %s, bit 2 (IBV_WC_IP_CSUM_OK to libibverbs, "
	       "the kernel's IB_WC_WITH_INVALIDATE) %s\n",
	       rwc.wc_flags, IBV_WC_WITH_INV, rwc.wc_flags & IBV_WC_WITH_INV ? "set" : "not set",
	       rwc.wc_flags & (1u << 2) ? "set" : "not set");
	expect_write("mw2 revoked by the peer's SEND_WITH_INV", &P1, r, size, key, false);
}

// check_mr_local_inv: can a WR revoke an ordinary (user) MR, as it does a
// window? The IB spec allows LOCAL_INV only on fast-registration MRs.
static void check_mr_local_inv(void)
{
	size_t size = 4096;
	uint8_t *r = arena + size;
	struct ibv_mr *mr = ibv_reg_mr(A.pd, r, size, MR_ACCESS);
	struct ibv_wc wc = {0};
	int perr = 0, st;

	if (!mr)
		die("ibv_reg_mr: %s", strerror(errno));
	st = local_inv(&P1, mr->rkey, &wc, &perr);
	check(st != IBV_WC_SUCCESS, "mr LOCAL_INV of a user MR refused", "%s",
	      perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	if (st >= 0 && st != IBV_WC_SUCCESS) {
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;

		if (!ibv_query_qp(P1.a, &qa, IBV_QP_STATE, &qi))
			printf("info  A1's state after the refused LOCAL_INV: %d (%s)\n", qa.qp_state,
			       qa.qp_state == IBV_QPS_ERR ? "ERR" : qa.qp_state == IBV_QPS_RTS ? "RTS" : "other");
		reconnect(&P1);
	}
	expect_write("mr still exposed after LOCAL_INV attempt", &P1, r, size, mr->rkey, true);
	ibv_dereg_mr(mr);
}

// check_stale_mw_rkey: a BIND_MW posted through ibv_post_send does not
// update ibv_mw.rkey; naming the window by a stale key fails the bind, and a
// failed bind is a completion error that takes the QP down.
static void check_stale_mw_rkey(struct ibv_mw *mw)
{
	uint8_t *r = arena + 4096;
	uint32_t old = mw->rkey, key = ibv_inc_rkey(old), key2 = ibv_inc_rkey(key);
	struct ibv_wc wc = {0};
	int perr = 0, st;

	st = bind_mw2(&P1, mw, key, r, 4096, 0, &wc, &perr);
	if (st == IBV_WC_SUCCESS)
		st = local_inv(&P1, key, &wc, &perr);
	if (st != IBV_WC_SUCCESS) {
		check(false, "mw2 bind+inv before the stale-key bind", "%s", perr ? strerror(perr) : wc_str(&wc));
		if (!perr)
			reconnect(&P1);
		mw->rkey = key;
		return;
	}
	// mw->rkey still holds old: the kernel's window now has key.
	st = bind_mw2(&P1, mw, key2, r, 4096, 0, &wc, &perr);
	check(st != IBV_WC_SUCCESS, "mw2 BIND_MW naming a stale ibv_mw.rkey fails", "%s",
	      perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	if (st >= 0 && st != IBV_WC_SUCCESS) {
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;

		if (!ibv_query_qp(P1.a, &qa, IBV_QP_STATE, &qi))
			printf("info  A1's state after the failed bind: %d (%s)\n", qa.qp_state,
			       qa.qp_state == IBV_QPS_ERR ? "ERR" : qa.qp_state == IBV_QPS_RTS ? "RTS" : "other");
		reconnect(&P1);
	} else if (st == IBV_WC_SUCCESS) {
		mw->rkey = key2;
		local_inv(&P1, key2, &wc, &perr);
		return;
	}
	mw->rkey = key;
	st = bind_mw2(&P1, mw, key2, r, 4096, 0, &wc, &perr);
	check(st == IBV_WC_SUCCESS, "mw2 bind with the right key afterwards", "%s",
	      perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	if (st == IBV_WC_SUCCESS) {
		mw->rkey = key2;
		local_inv(&P1, key2, &wc, &perr);
	} else if (!perr)
		reconnect(&P1);
}

static void to_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	int err = ibv_modify_qp(qp, &a, IBV_QP_STATE);

	if (err)
		die("modify_qp ERR: %s", strerror(err));
}

// destroy_a1 destroys P1's QPs, says how long A1's destruction took, and
// connects P1 anew.
static void destroy_a1(const char *what)
{
	uint64_t t0 = now_ns();
	int err = ibv_destroy_qp(P1.a);
	uint64_t t1 = now_ns();

	check(err == 0 && t1 - t0 < 1000000000ull, what, "ibv_destroy_qp(A1): %s in %.1f us",
	      err ? strerror(err) : "ok", (t1 - t0) / 1e3);
	if (err)
		die("cannot go on without destroying A1");
	if ((err = ibv_destroy_qp(P1.b)))
		die("ibv_destroy_qp: %s", strerror(err));
	drain(P1.acq);
	drain(P1.bcq);
	connect_pair(&P1);
}

// check_qp_failed: a bound type-2 window holds a reference on its QP. When a
// connection fails with exposures outstanding, its QP is in the error state
// and can run no LOCAL_INV; the windows must be invalidated from another QP
// of the PD, or deallocated, before the QP is destroyed (see -u).
static void check_qp_failed(struct ibv_mw **mwp)
{
	struct ibv_mw *mw = *mwp;
	uint8_t *r = arena + 4096;
	uint32_t k1 = ibv_inc_rkey(mw->rkey), k2 = ibv_inc_rkey(k1);
	struct ibv_wc wc = {0};
	int perr = 0, st;

	// 1. Invalidated from another QP.
	st = bind_mw2(&P1, mw, k1, r, 4096, 0, &wc, &perr);
	if (st != IBV_WC_SUCCESS) {
		check(false, "mw2 bind before failing its QP", "%s", perr ? strerror(perr) : wc_str(&wc));
		if (!perr)
			reconnect(&P1);
		return;
	}
	mw->rkey = k1;
	to_err(P1.a);
	st = local_inv(&P1, k1, &wc, &perr);
	check(st != IBV_WC_SUCCESS, "mw2 LOCAL_INV on its QP in ERR flushes", "%s",
	      perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	perr = 0;
	st = local_inv(&P2, k1, &wc, &perr);
	check(st == IBV_WC_SUCCESS, "mw2 LOCAL_INV from another QP (A2)", "%s",
	      perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	if (st != IBV_WC_SUCCESS && !perr)
		reconnect(&P2);
	destroy_a1("destroy of A1 after its window was invalidated");

	// 2. Deallocated.
	perr = 0;
	st = bind_mw2(&P1, mw, k2, r, 4096, 0, &wc, &perr);
	if (st != IBV_WC_SUCCESS) {
		check(false, "mw2 bind before failing its QP", "%s", perr ? strerror(perr) : wc_str(&wc));
		if (!perr)
			reconnect(&P1);
		return;
	}
	mw->rkey = k2;
	to_err(P1.a);
	uint64_t t0 = now_ns();
	int err = ibv_dealloc_mw(mw);
	uint64_t t1 = now_ns();
	check(err == 0, "mw2 dealloc of a window bound to a QP in ERR", "ibv_dealloc_mw: %s in %.1f us",
	      err ? strerror(err) : "ok", (t1 - t0) / 1e3);
	destroy_a1("destroy of A1 after its window was deallocated");
	expect_write("mw2 key dead after dealloc", &P1, r, 4096, k2, false);
	*mwp = ibv_alloc_mw(A.pd, IBV_MW_TYPE_2);
	if (!*mwp)
		die("ibv_alloc_mw: %s", strerror(errno));
}

// check_qp_destroyed_bound (-u only): destroy a QP while a type-2 window is
// still bound to it. On Debian's 6.1.192 this waits ~50 s in rxe's cleanup,
// WARNs at rxe_pool.c, frees the QP anyway, and the window's dangling QP
// pointer can match the next QP allocated at that address: a use-after-free
// in the guest kernel. Not run by default.
static void check_qp_destroyed_bound(struct ibv_mw *mw)
{
	uint8_t *r = arena + 4096;
	uint32_t key = ibv_inc_rkey(mw->rkey), key2 = ibv_inc_rkey(key);
	struct ibv_wc wc = {0};
	int perr = 0, st, err;

	st = bind_mw2(&P1, mw, key, r, 4096, 0, &wc, &perr);
	if (st != IBV_WC_SUCCESS) {
		check(false, "mw2 bind before destroying its QP", "%s", perr ? strerror(perr) : wc_str(&wc));
		if (!perr)
			reconnect(&P1);
		return;
	}
	mw->rkey = key;
	uint64_t t0 = now_ns();
	err = ibv_destroy_qp(P1.a);
	uint64_t t1 = now_ns();
	printf("info  -u: ibv_destroy_qp of A1 with a window bound to it: %s in %.1f us\n",
	       err ? strerror(err) : "ok", (t1 - t0) / 1e3);
	if (err)
		die("cannot go on without destroying A1");
	if ((err = ibv_destroy_qp(P1.b)))
		die("ibv_destroy_qp: %s", strerror(err));
	drain(P1.acq);
	drain(P1.bcq);
	connect_pair(&P1);
	printf("info  -u: new A1 qpn %u\n", P1.a->qp_num);
	expect_write("-u: mw2 key dead once its QP is destroyed", &P1, r, 4096, key, false);
	perr = 0;
	st = local_inv(&P2, key, &wc, &perr);
	printf("info  -u: LOCAL_INV of that window on another QP (A2): %s\n",
	       perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	if (st != IBV_WC_SUCCESS && !perr)
		reconnect(&P2);
	perr = 0;
	st = bind_mw2(&P1, mw, key2, r, 4096, 0, &wc, &perr);
	printf("info  -u: rebinding that window on the new A1 afterwards: %s\n",
	       perr ? strerror(perr) : st < 0 ? "no completion" : wc_str(&wc));
	if (st == IBV_WC_SUCCESS) {
		mw->rkey = key2;
		st = local_inv(&P1, key2, &wc, &perr);
	}
	if (st != IBV_WC_SUCCESS && !perr)
		reconnect(&P1);
}

static void check_rereg(void)
{
	uint8_t *r = arena + 4096;
	struct ibv_mr *mr = ibv_reg_mr(A.pd, r, 4096, MR_ACCESS);
	int ret;

	if (!mr)
		die("ibv_reg_mr: %s", strerror(errno));
	errno = 0;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE);
	printf("info  ibv_rereg_mr(CHANGE_ACCESS to LOCAL_WRITE only): %d, errno %d (%s)\n", ret, errno,
	       ret ? strerror(errno) : "ok");
	errno = 0;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, r + 4096, 4096, 0);
	printf("info  ibv_rereg_mr(CHANGE_TRANSLATION to the next page): %d, errno %d (%s)\n", ret, errno,
	       ret ? strerror(errno) : "ok");
	ibv_dereg_mr(mr);
}

// check_dereg_bound_mr: the MR windows are bound to cannot go while one is
// bound; a runtime must revoke every window before releasing the arena.
static void check_dereg_bound_mr(struct ibv_mw *mw)
{
	uint8_t *r = arena + 4096;
	uint32_t key = ibv_inc_rkey(mw->rkey);
	struct ibv_wc wc = {0};
	int perr = 0, st, err;

	st = bind_mw2(&P1, mw, key, r, 4096, 0, &wc, &perr);
	if (st != IBV_WC_SUCCESS) {
		check(false, "mw2 bind before dereg of its MR", "%s", perr ? strerror(perr) : wc_str(&wc));
		return;
	}
	mw->rkey = key;
	err = ibv_dereg_mr(arena_mr);
	check(err != 0, "dereg of an MR with a bound window refused", "ibv_dereg_mr: %d (%s)", err,
	      err ? strerror(err) : "succeeded");
	if (!err) {
		arena_mr = NULL;
		return;
	}
	st = local_inv(&P1, key, &wc, &perr);
	err = ibv_dereg_mr(arena_mr);
	check(st == IBV_WC_SUCCESS && err == 0, "dereg of that MR after LOCAL_INV", "LOCAL_INV %s, ibv_dereg_mr %d (%s)",
	      st < 0 ? "no completion" : wc_str(&wc), err, err ? strerror(err) : "ok");
	if (!err)
		arena_mr = NULL;
}

// --- timings ---------------------------------------------------------------------

static uint64_t *t1s, *t2s, *t3s;
static uint32_t *keys;

static void bench_mr(size_t size)
{
	size_t slots = ARENA_SIZE / size;

	for (int i = 0; i < iters; i++) {
		uint8_t *r = arena + (i % slots) * size;
		uint64_t t0 = now_ns();
		struct ibv_mr *mr = ibv_reg_mr(A.pd, r, size, MR_ACCESS);
		uint64_t t1 = now_ns();

		if (!mr)
			die("ibv_reg_mr %zu bytes, iteration %d: %s", size, i, strerror(errno));
		keys[i] = mr->rkey;
		int err = ibv_dereg_mr(mr);
		uint64_t t2 = now_ns();

		if (err)
			die("ibv_dereg_mr: %s", strerror(err));
		t1s[i] = t1 - t0, t2s[i] = t2 - t1, t3s[i] = t2 - t0;
	}
	report("mr reg", size, t1s, iters);
	report("mr dereg", size, t2s, iters);
	report("mr reg+dereg", size, t3s, iters);
	char sz[32];

	printf("info  mr %s: %d distinct rkeys among %d registrations\n", size_str(sz, sizeof(sz), size),
	       distinct(keys, iters), iters);
}

static void bench_mw2(struct ibv_mw *mw, size_t size)
{
	size_t slots = ARENA_SIZE / size;
	struct ibv_wc wc;
	int perr = 0, st;

	for (int i = 0; i < iters; i++) {
		uint8_t *r = arena + (i % slots) * size;
		uint32_t key = ibv_inc_rkey(mw->rkey);
		uint64_t t0 = now_ns();

		st = bind_mw2(&P1, mw, key, r, size, 0, &wc, &perr);
		uint64_t t1 = now_ns();
		if (st != IBV_WC_SUCCESS)
			die("mw2 bind, iteration %d: %s", i, perr ? strerror(perr) : wc_str(&wc));
		mw->rkey = key;
		keys[i] = key;
		st = local_inv(&P1, key, &wc, &perr);
		uint64_t t2 = now_ns();
		if (st != IBV_WC_SUCCESS)
			die("mw2 local inv, iteration %d: %s", i, perr ? strerror(perr) : wc_str(&wc));
		t1s[i] = t1 - t0, t2s[i] = t2 - t1, t3s[i] = t2 - t0;
	}
	report("mw2 bind", size, t1s, iters);
	report("mw2 inv", size, t2s, iters);
	report("mw2 bind+inv", size, t3s, iters);
	char sz[32];

	printf("info  mw2 %s: %d distinct rkeys among %d binds (ibv_inc_rkey steps the low 8 bits)\n",
	       size_str(sz, sizeof(sz), size), distinct(keys, iters), iters);

	// The same pair as one doorbell: an unsignaled BIND_MW chained to a
	// signaled LOCAL_INV, one completion (work requests on a send queue
	// run in order, so the invalidation follows the bind).
	for (int i = 0; i < iters; i++) {
		uint8_t *r = arena + (i % slots) * size;
		uint32_t key = ibv_inc_rkey(mw->rkey);
		struct ibv_send_wr inv = {.wr_id = 3, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
					  .invalidate_rkey = key};
		struct ibv_send_wr bind = {
			.wr_id = 2,
			.next = &inv,
			.opcode = IBV_WR_BIND_MW,
			.bind_mw = {.mw = mw, .rkey = key,
				    .bind_info = {.mr = arena_mr, .addr = (uintptr_t)r, .length = size,
						  .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ}},
		};
		struct ibv_send_wr *bad;
		uint64_t t0 = now_ns();

		if ((perr = ibv_post_send(P1.a, &bind, &bad)))
			die("mw2 chained post: %s", strerror(perr));
		if (wait_wc(P1.acq, &wc) || wc.status != IBV_WC_SUCCESS)
			die("mw2 chained bind+inv, iteration %d: %s", i, wc_str(&wc));
		t1s[i] = now_ns() - t0;
		mw->rkey = key;
	}
	report("mw2 bind+inv chained", size, t1s, iters);
}

static void bench_mw1(struct ibv_mw *mw, size_t size)
{
	size_t slots = ARENA_SIZE / size;
	struct ibv_wc wc;
	int perr = 0, st;

	for (int i = 0; i < iters; i++) {
		uint8_t *r = arena + (i % slots) * size;
		uint64_t t0 = now_ns();

		st = bind_mw1(&P1, mw, r, size, &wc, &perr);
		uint64_t t1 = now_ns();
		if (st != IBV_WC_SUCCESS)
			die("mw1 bind, iteration %d: %s", i, perr ? strerror(perr) : wc_str(&wc));
		st = bind_mw1(&P1, mw, NULL, 0, &wc, &perr);
		uint64_t t2 = now_ns();
		if (st != IBV_WC_SUCCESS)
			die("mw1 unbind, iteration %d: %s", i, perr ? strerror(perr) : wc_str(&wc));
		t1s[i] = t1 - t0, t2s[i] = t2 - t1, t3s[i] = t2 - t0;
	}
	report("mw1 bind", size, t1s, iters);
	report("mw1 unbind", size, t2s, iters);
	report("mw1 bind+unbind", size, t3s, iters);
}

static void bench_alloc_mw(enum ibv_mw_type type, const char *name)
{
	int n = iters;

	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		struct ibv_mw *mw = ibv_alloc_mw(A.pd, type);
		uint64_t t1 = now_ns();

		if (!mw)
			die("ibv_alloc_mw: %s", strerror(errno));
		int err = ibv_dealloc_mw(mw);
		uint64_t t2 = now_ns();

		if (err)
			die("ibv_dealloc_mw: %s", strerror(err));
		t1s[i] = t1 - t0, t2s[i] = t2 - t1;
	}
	char a[32], d[32];
	snprintf(a, sizeof(a), "%s alloc", name);
	snprintf(d, sizeof(d), "%s dealloc", name);
	report(a, 0, t1s, n);
	report(d, 0, t2s, n);
}

// bench_write: the yardstick, one 64-byte WRITE from B into an exposure,
// posted and waited for, as the checks do it.
static void bench_write(void)
{
	uint8_t *r = arena + 4096;
	struct ibv_mr *mr = ibv_reg_mr(A.pd, r, 4096, MR_ACCESS);
	struct ibv_wc wc;

	if (!mr)
		die("ibv_reg_mr: %s", strerror(errno));
	for (int i = 0; i < iters; i++) {
		uint64_t t0 = now_ns();

		if (peer_write(&P1, (uintptr_t)r, mr->rkey, (uint8_t)i, &wc) != IBV_WC_SUCCESS)
			die("WRITE, iteration %d: %s", i, wc_str(&wc));
		t1s[i] = now_ns() - t0;
	}
	report("write 64B B1->A1", 0, t1s, iters);
	ibv_dereg_mr(mr);
}

static void usage(void)
{
	fprintf(stderr, "usage: mrcost [-n iterations] [-a device] [-b peer-device] [-g gid-index] [-u]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = {4096, 65536, 1u << 20};
	struct ibv_mw *mw2 = NULL, *mw1 = NULL;
	int opt;

	while ((opt = getopt(argc, argv, "n:a:b:g:u")) != -1) {
		switch (opt) {
		case 'n': iters = atoi(optarg); break;
		case 'a': A.name = optarg; break;
		case 'b': B.name = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'u': unsafe = true; break;
		default: usage();
		}
	}
	if (iters < 1 || optind != argc)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);

	open_side(&A);
	open_side(&B);
	arena = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	src = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (arena == MAP_FAILED || src == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	memset(arena, 0xa5, ARENA_SIZE); // touched: registration pins, it does not fault pages in
	src_mr = ibv_reg_mr(B.pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!src_mr)
		die("ibv_reg_mr source: %s", strerror(errno));
	t1s = calloc(iters, sizeof(*t1s));
	t2s = calloc(iters, sizeof(*t2s));
	t3s = calloc(iters, sizeof(*t3s));
	keys = calloc(iters, sizeof(*keys));
	if (!t1s || !t2s || !t3s || !keys)
		die("calloc");
	connect_pair(&P1);
	connect_pair(&P2);
	printf("setup: A %s, B %s, GID index %d, RC, A1-B1 qpn %u-%u, A2-B2 qpn %u-%u, %d iterations, arena %u MiB\n",
	       A.name, B.name, gidx, P1.a->qp_num, P1.b->qp_num, P2.a->qp_num, P2.b->qp_num, iters,
	       ARENA_SIZE >> 20);
	device_facts();

	uint64_t t0 = now_ns();
	arena_mr = ibv_reg_mr(A.pd, arena, ARENA_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	uint64_t t1 = now_ns();
	if (arena_mr)
		printf("info  arena MR (%u MiB, LOCAL_WRITE|MW_BIND): ibv_reg_mr %.1f us\n", ARENA_SIZE >> 20,
		       (t1 - t0) / 1e3);
	else
		printf("info  arena MR (LOCAL_WRITE|MW_BIND): ibv_reg_mr failed: %s (errno %d)\n", strerror(errno),
		       errno);

	t0 = now_ns();
	mw2 = ibv_alloc_mw(A.pd, IBV_MW_TYPE_2);
	t1 = now_ns();
	if (mw2)
		printf("info  ibv_alloc_mw(TYPE_2): ok in %.1f us, rkey 0x%08x\n", (t1 - t0) / 1e3, mw2->rkey);
	else
		printf("info  ibv_alloc_mw(TYPE_2): failed: %s (errno %d)\n", strerror(errno), errno);
	t0 = now_ns();
	mw1 = ibv_alloc_mw(A.pd, IBV_MW_TYPE_1);
	t1 = now_ns();
	if (mw1)
		printf("info  ibv_alloc_mw(TYPE_1): ok in %.1f us, rkey 0x%08x\n", (t1 - t0) / 1e3, mw1->rkey);
	else
		printf("info  ibv_alloc_mw(TYPE_1): failed: %s (errno %d)\n", strerror(errno), errno);
	if (!arena_mr)
		mw1 = mw2 = NULL;

	// Checks first: timing a mechanism that does not work would mean nothing.
	bool mw2_ok = mw2 != NULL;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		check_mr(sizes[i]);
		if (mw2_ok)
			mw2_ok = check_mw2(mw2, sizes[i]);
		if (mw1)
			check_mw1(mw1, sizes[i]);
	}
	check_mr_local_inv();
	check_rereg();
	if (mw2_ok) {
		check_send_inv(mw2);
		check_stale_mw_rkey(mw2);
		check_qp_failed(&mw2);
		if (unsafe)
			check_qp_destroyed_bound(mw2);
	}

	header();
	bench_write();
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		bench_mr(sizes[i]);
		if (mw2_ok)
			bench_mw2(mw2, sizes[i]);
		if (mw1)
			bench_mw1(mw1, sizes[i]);
	}
	if (mw2_ok)
		bench_alloc_mw(IBV_MW_TYPE_2, "mw2");
	if (mw1)
		bench_alloc_mw(IBV_MW_TYPE_1, "mw1");

	if (mw2_ok)
		check_dereg_bound_mr(mw2);
	if (mw1)
		ibv_dealloc_mw(mw1);
	if (mw2)
		ibv_dealloc_mw(mw2);
	if (arena_mr)
		ibv_dereg_mr(arena_mr);
	printf("checks: %d, as expected %d, not %d\n", checks, checks - surprises, surprises);
	return surprises ? 1 : 0;
}
