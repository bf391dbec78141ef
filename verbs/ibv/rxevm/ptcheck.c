/*
 * verbs/ibv/rxevm/ptcheck.c: a preload library that lets a perftest program
 * (ib_write_bw, ib_read_bw, ib_send_bw) take part in checking the bytes it
 * exchanges with `verbsrt bench -direct`. perftest fills its buffer with
 * random bytes and checks nothing it receives; under this library its
 * buffer holds what verbsrt's side expects, or what verbsrt's side must
 * put there.
 *
 *   LD_PRELOAD=ptcheck.so VERBSRT_PTCHECK=source ib_send_bw ...
 *   LD_PRELOAD=ptcheck.so VERBSRT_PTCHECK=sink   ib_write_bw ...
 *
 * perftest registers one buffer per QP, twice the cycle buffer: the first
 * half its sources (or where READ responses land), the second what the
 * peer accesses (or where SENDs land), and slots in each at the same
 * offsets as `verbsrt bench -direct` uses. When the first QP moves to RTR,
 * after perftest's random fill and before any byte can arrive:
 *
 *   source  fills both halves with verbsrt's pattern (byte i of a half is
 *           i % 251 + 1, cmd/verbsrt's directPattern), which verbsrt's
 *           side checks (its -peer-pattern flag);
 *   sink    zeroes the buffer; when perftest deregisters it, counts its
 *           bytes that hold the pattern at their offset, those still zero
 *           and the others, and prints them on standard error:
 *
 *             ptcheck: sink of 8192 bytes: 4096 of the pattern, 4096 zero, 0 other
 *
 *   sink-sends  the same for SENDs, slot by slot (see count).
 *
 * The pattern is never zero, so a byte nobody wrote stays apart from one
 * written wrong. Built on the host by test-rxe-2host, with no rdma-core
 * header: it reads only the first field of struct ibv_qp_attr, the state.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ibv_pd;
struct ibv_qp;
struct ibv_qp_attr {
	int qp_state; /* enum ibv_qp_state, the struct's first field */
};
struct ibv_mr; /* addr and length are its third and fourth fields */

enum {
	QP_STATE_MASK = 1, /* IBV_QP_STATE */
	QPS_RTR = 2,       /* IBV_QPS_RTR */
	MAX_BUFS = 16,
};

static struct buf {
	struct ibv_mr *mr;
	unsigned char *addr;
	size_t len;
} bufs[MAX_BUFS];
static int nbufs, prepared;

static unsigned char pattern(size_t off) { return (unsigned char)(off % 251 + 1); }

static const char *mode(void)
{
	const char *m = getenv("VERBSRT_PTCHECK");
	return m ? m : "";
}

static void remember(struct ibv_mr *mr, void *addr, size_t len)
{
	if (mr == NULL || nbufs == MAX_BUFS)
		return;
	for (int i = 0; i < nbufs; i++)
		if (bufs[i].mr == mr)
			return; /* ibv_reg_mr through ibv_reg_mr_iova2 */
	bufs[nbufs++] = (struct buf){mr, addr, len};
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	static struct ibv_mr *(*next)(struct ibv_pd *, void *, size_t, int);
	if (next == NULL)
		next = dlsym(RTLD_NEXT, "ibv_reg_mr");
	struct ibv_mr *mr = next(pd, addr, len, access);
	remember(mr, addr, len);
	return mr;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova, unsigned int access)
{
	static struct ibv_mr *(*next)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int);
	if (next == NULL)
		next = dlsym(RTLD_NEXT, "ibv_reg_mr_iova2");
	struct ibv_mr *mr = next(pd, addr, len, iova, access);
	remember(mr, addr, len);
	return mr;
}

/* prepare fills or zeroes every buffer registered so far, once. */
static void prepare(void)
{
	const char *m = mode();
	for (int i = 0; i < nbufs; i++) {
		struct buf *b = &bufs[i];
		if (strncmp(m, "sink", 4) == 0) {
			memset(b->addr, 0, b->len);
		} else if (strcmp(m, "source") == 0) {
			size_t half = b->len / 2;
			for (size_t j = 0; j < b->len; j++)
				b->addr[j] = pattern(j < half ? j : j - half);
			fflush(stdout);
			fprintf(stderr, "ptcheck: source of %zu bytes: the pattern in both halves\n", b->len);
		}
	}
	prepared = 1;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	static int (*next)(struct ibv_qp *, struct ibv_qp_attr *, int);
	if (next == NULL)
		next = dlsym(RTLD_NEXT, "ibv_modify_qp");
	if (!prepared && (mask & QP_STATE_MASK) && attr->qp_state == QPS_RTR)
		prepare();
	return next(qp, attr, mask);
}

/*
 * slot_matches says whether the size bytes at p are the message a
 * verbsrt client sends from slot k of its cycle: the pattern at k*stride.
 */
static int slot_matches(const unsigned char *p, size_t size, size_t stride, size_t k)
{
	for (size_t i = 0; i < size; i++)
		if (p[i] != pattern(k * stride + i))
			return 0;
	return 1;
}

/*
 * count classes the bytes of a sink's buffer. In "sink" each byte must hold
 * the pattern at its own offset in its half (WRITE, READ: the two ends use
 * the same slots). In "sink-sends" each slot of VERBSRT_PTCHECK_STRIDE
 * bytes must hold, in its first VERBSRT_PTCHECK_SIZE bytes, one of the
 * messages the sender's cycle holds, whichever: perftest re-posts its
 * receives at slots of its own bookkeeping, which need not follow the
 * sender's.
 */
static void count(const struct buf *b, size_t *pat, size_t *zero, size_t *other)
{
	size_t half = b->len / 2;
	size_t size = 0, stride = 0;
	if (strcmp(mode(), "sink-sends") == 0) {
		const char *sz = getenv("VERBSRT_PTCHECK_SIZE"), *st = getenv("VERBSRT_PTCHECK_STRIDE");
		size = sz ? strtoul(sz, NULL, 10) : 0;
		stride = st ? strtoul(st, NULL, 10) : 0;
		if (size == 0 || stride < size || stride > half) {
			fprintf(stderr, "ptcheck: sink-sends needs VERBSRT_PTCHECK_SIZE and VERBSRT_PTCHECK_STRIDE (at least the size, at most %zu)\n", half);
			exit(2);
		}
	}
	for (size_t j = 0; j < b->len; j++) {
		size_t off = j < half ? j : j - half;
		unsigned char c = b->addr[j];
		if (stride != 0 && off % stride == 0 && off + size <= half) {
			int zeros = 1;
			for (size_t i = 0; i < size; i++)
				zeros &= b->addr[j + i] == 0;
			size_t k = 0;
			while (!zeros && k < half / stride && !slot_matches(b->addr + j, size, stride, k))
				k++;
			if (zeros)
				*zero += size;
			else if (k < half / stride)
				*pat += size;
			else
				*other += size;
			j += size - 1;
			continue;
		}
		if (c == 0)
			(*zero)++;
		else if (stride == 0 && c == pattern(off))
			(*pat)++;
		else
			(*other)++;
	}
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	static int (*next)(struct ibv_mr *);
	if (next == NULL)
		next = dlsym(RTLD_NEXT, "ibv_dereg_mr");
	for (int i = 0; i < nbufs; i++) {
		struct buf *b = &bufs[i];
		if (b->mr != mr || strncmp(mode(), "sink", 4) != 0 || !prepared)
			continue;
		size_t pat = 0, zero = 0, other = 0;
		count(b, &pat, &zero, &other);
		fflush(stdout); /* perftest's lines first, whole */
		fprintf(stderr, "ptcheck: %s of %zu bytes: %zu of the pattern, %zu zero, %zu other\n",
			mode(), b->len, pat, zero, other);
		b->mr = NULL;
	}
	return next(mr);
}
