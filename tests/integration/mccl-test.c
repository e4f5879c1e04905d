/*
 * mccl-test: the client side of the integration tests.  Each process is one
 * rank (MCCL_JOB, MCCL_RANK, MCCL_NRANKS, MCCL_SOCKET from run.sh).  Modes:
 *
 *   collectives        every collective x dtype x op x placement x count,
 *                      each result checked against a reference computed
 *                      here, and bit-identity across ranks checked by
 *                      comparing the min and max of the result hashes
 *   expect-init CODE TEXT
 *                      mccl_comm_init_env must fail with CODE (a name such
 *                      as MCCL_ERR_TIMEOUT) and a message containing TEXT
 *   p2p                sends and receives between every pair of ranks,
 *                      out of order, by tag and with MCCL_ANY_TAG
 *   api                argument errors (code and message, and nothing
 *                      changes), 100 operations in flight, comm_split, two
 *                      threads on two communicators, use after destroy
 *   mismatch           rank 0 issues another count: every rank fails
 *   mismatch-coll KIND rank 0 issues another collective or root: every
 *                      rank fails with INVALID_ARGUMENT naming both
 *   mismatch-v KIND    KIND 0: in an alltoallv rank 0 sends rank 1 one
 *                      element fewer than it expects: the ranks on their
 *                      nodes fail with INVALID_ARGUMENT saying so, others
 *                      (ranks 2 and up) may end well, then fail; 1: in an
 *                      allgatherv rank 0 gives other recvcounts: every
 *                      rank fails
 *   abort              rank 0 aborts: every other rank's op fails
 *   loop CODE TEXT [COUNT]
 *                      allreduce (COUNT floats, default 1 Mi) until an op
 *                      fails with CODE and TEXT
 *   steady MS          allreduce for MS ms, every one must succeed
 *   big                one in-place allreduce of 2 GiB + 16 KiB
 *   idle MS            join, take part in nothing for MS ms, leave
 *   hold MS [allreduce]
 *                      join, do one barrier (or one 4-byte allreduce,
 *                      its sum checked), stay MS ms, leave
 *   send-hold BYTES MS 2 ranks: rank 0 sends BYTES, rank 1 receives them
 *                      MS ms later (the daemon keeps them meanwhile)
 *   send-refused BYTES CODE TEXT
 *                      2 ranks: rank 0's send of BYTES fails with CODE and
 *                      TEXT
 *   poll               2 ranks: mccl_test alone completes a receive, and
 *                      an allreduce whose peer died (with its error)
 *   ring-full          rank 0 submits 3 submission rings' worth of
 *                      allreduces at once, the others 300 ms later: every
 *                      one ends well, with the right sums
 *   queued die         submit 8 allreduces and die with them queued
 *   queued wait CODE TEXT
 *                      submit 8 allreduces; the first must fail with CODE
 *                      and TEXT (printing failed_at=, as loop does)
 *   straggle N MS      N allreduces of 8 floats; the last rank comes to
 *                      each MS ms late (one user's jobs steering
 *                      another's link cost)
 *   uffd MS            2 ranks, MCCL_XMEM=2: rank 0's 4 MiB allreduce buffer
 *                      is registered with userfaultfd and never served;
 *                      both ranks' allreduce must fail with a timeout
 *                      naming rank 0, which then holds its buffer MS ms
 *                      (exit 3: userfaultfd not allowed here)
 *   soak MS SEED       random verified collectives (allreduce, broadcast,
 *                      allgather, reduce-scatter, alltoall; int32 and
 *                      float32; heap and mccl_alloc buffers) for about MS
 *                      ms, the ranks' sequence drawn from SEED; prints
 *                      "soak: rank R: N ops verified, E elements, W
 *                      wrong"; exit 0, 1 on a wrong result, 2 when an
 *                      operation fails (its named error printed)
 *   late MS CODE TEXT  after MS ms, an allreduce must fail with CODE, TEXT
 *   recv-wait CODE TEXT
 *                      rank 0 sends nothing and stays 60 s; rank 1's
 *                      receive from it must fail with CODE and TEXT
 *   abort-many N       N one-rank jobs, each aborted once formed
 *   xmem-unmap send|recv
 *                      rank 0 unmaps a buffer of its allreduce before it
 *                      ran: the op fails, naming it
 *   xmem-unmap-last    the same for the last segment of the first of two
 *                      queued allreduces, handed out beside the second
 *   queued-heap        queued large allreduces in the ranks' own memory
 *   scratch BYTES CODE TEXT MS
 *                      a reduce_scatter of BYTES of input (floats), which
 *                      must fail with CODE and TEXT (CODE MCCL_SUCCESS: end
 *                      well, each block the sum), then stay MS ms
 *
 * Exit status 0 when every check passed; every failure prints a line.
 */
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <linux/userfaultfd.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mccl.h"

static _Atomic int failures;
static _Atomic int checks;

#define FAIL(...) do {							\
	fprintf(stderr, "mccl-test: rank %d: ", my_rank);		\
	fprintf(stderr, __VA_ARGS__);					\
	fputc('\n', stderr);						\
	failures++;							\
} while (0)

static int my_rank = -1;

static const char *result_names[] = {
	"MCCL_SUCCESS", "MCCL_ERR_INVALID_ARGUMENT", "MCCL_ERR_UNSUPPORTED",
	"MCCL_ERR_CONNECT", "MCCL_ERR_TIMEOUT", "MCCL_ERR_PEER_FAILED",
	"MCCL_ERR_ABORTED", "MCCL_ERR_PERMISSION", "MCCL_ERR_NO_MEMORY",
	"MCCL_ERR_PROTOCOL", "MCCL_ERR_INTERNAL"
};

/* ---- element values: small integers, exact in every dtype ---- */

static uint16_t
to_half(double v)
{
	int e = 0;
	unsigned iv = (unsigned)v;

	if (iv == 0)
		return 0;
	while ((iv >> (e + 1)) != 0)
		e++;
	return (uint16_t)(((e + 15) << 10) | (((iv << (10 - e))) & 0x3ff));
}

static double
from_half(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v;

	if (e == 0)
		v = m / 16777216.0;
	else if (e == 31)
		v = m ? 0.0 / 0.0 : 1e300;
	else
		v = (1.0 + m / 1024.0) * (double)(1LL << (e > 15 ? e - 15 : 0)) /
		    (double)(1LL << (e < 15 ? 15 - e : 0));
	return (h & 0x8000) ? -v : v;
}

static void
put(void *buf, size_t i, mccl_dtype_t t, double v)
{
	float f = (float)v;
	uint32_t u;

	switch (t) {
	case MCCL_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
	case MCCL_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case MCCL_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case MCCL_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case MCCL_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
	case MCCL_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case MCCL_FLOAT16: ((uint16_t *)buf)[i] = to_half(v); break;
	case MCCL_BFLOAT16:
		memcpy(&u, &f, 4);
		((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
		break;
	case MCCL_FLOAT32: ((float *)buf)[i] = f; break;
	case MCCL_FLOAT64: ((double *)buf)[i] = v; break;
	}
}

static double
get(const void *buf, size_t i, mccl_dtype_t t)
{
	uint32_t u;
	float f;

	switch (t) {
	case MCCL_INT8: return ((const int8_t *)buf)[i];
	case MCCL_UINT8: return ((const uint8_t *)buf)[i];
	case MCCL_INT32: return ((const int32_t *)buf)[i];
	case MCCL_UINT32: return ((const uint32_t *)buf)[i];
	case MCCL_INT64: return (double)((const int64_t *)buf)[i];
	case MCCL_UINT64: return (double)((const uint64_t *)buf)[i];
	case MCCL_FLOAT16: return from_half(((const uint16_t *)buf)[i]);
	case MCCL_BFLOAT16:
		u = (uint32_t)((const uint16_t *)buf)[i] << 16;
		memcpy(&f, &u, 4);
		return f;
	case MCCL_FLOAT32: return ((const float *)buf)[i];
	case MCCL_FLOAT64: return ((const double *)buf)[i];
	}
	return 0;
}

/* Rank r's input: PROD uses 1s and 2s so products stay exact. */
static double
input(int r, size_t i, mccl_op_t op)
{
	if (op == MCCL_PROD)
		return (double)((r + i) % 2 + 1);
	return (double)(r + 1) + (double)(i % 13);
}

static double
expected(int n, size_t i, mccl_op_t op)
{
	double acc = input(0, i, op);

	for (int r = 1; r < n; r++) {
		double v = input(r, i, op);

		switch (op) {
		case MCCL_SUM: case MCCL_AVG: acc += v; break;
		case MCCL_PROD: acc *= v; break;
		case MCCL_MIN: acc = v < acc ? v : acc; break;
		case MCCL_MAX: acc = v > acc ? v : acc; break;
		case MCCL_BAND: acc = (double)((uint64_t)acc & (uint64_t)v); break;
		case MCCL_BOR: acc = (double)((uint64_t)acc | (uint64_t)v); break;
		case MCCL_BXOR: acc = (double)((uint64_t)acc ^ (uint64_t)v); break;
		}
	}
	return op == MCCL_AVG ? acc / n : acc;
}

static uint64_t
fnv(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	return h;
}

/* All ranks hold the same hash iff its min equals its max. */
static void
check_identical(mccl_comm_t *comm, uint64_t h, const char *what)
{
	uint64_t *buf = mccl_alloc(comm, 2 * sizeof(uint64_t));

	if (buf == NULL) {
		FAIL("mccl_alloc: %s", mccl_last_error(comm));
		return;
	}
	buf[0] = h;
	buf[1] = h;
	if (mccl_allreduce(buf, buf, 1, MCCL_UINT64, MCCL_MAX, comm, NULL) ||
	    mccl_allreduce(buf + 1, buf + 1, 1, MCCL_UINT64, MCCL_MIN, comm,
	    NULL))
		FAIL("%s: hash allreduce: %s", what, mccl_last_error(comm));
	else if (buf[0] != buf[1])
		FAIL("%s: results differ between ranks", what);
	checks++;
	mccl_free(comm, buf);
}

/* Join the job the environment names; NULL (said why) if that fails. */
static mccl_comm_t *
join(void)
{
	mccl_comm_t *comm;
	mccl_result_t rc;

	if ((rc = mccl_comm_init_env(&comm)) != MCCL_SUCCESS) {
		FAIL("init: %s: %s", mccl_strerror(rc), mccl_last_error(NULL));
		return NULL;
	}
	return comm;
}

/* ---- the matrix ---- */

struct bufs {
	void	*send;
	void	*recv;
};

static size_t counts[] = { 0, 1, 2, 7, 1000, 100003 };
#define NCOUNTS	(sizeof(counts) / sizeof(counts[0]))
#define MAXCOUNT 100003

static int
elem_ok(double got, double want, mccl_dtype_t t, mccl_op_t op)
{
	double tol;

	if (op != MCCL_AVG)
		return got == want;
	tol = t == MCCL_FLOAT16 || t == MCCL_BFLOAT16 ? 1e-2 * want : 1e-6 * want;
	return got - want <= tol && want - got <= tol;
}

static void
run_allreduce(mccl_comm_t *comm, struct bufs *b, int in_place, size_t count,
    mccl_dtype_t t, mccl_op_t op)
{
	int n = mccl_comm_size(comm);
	void *send = in_place ? b->recv : b->send;
	size_t bad = 0, es = mccl_dtype_size(t);
	mccl_result_t rc;

	for (size_t i = 0; i < count; i++)
		put(send, i, t, input(my_rank, i, op));
	rc = mccl_allreduce(send, b->recv, count, t, op, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS) {
		FAIL("allreduce dtype %d op %d count %zu: %s: %s", t, op, count,
		    mccl_strerror(rc), mccl_last_error(comm));
		return;
	}
	for (size_t i = 0; i < count; i++)
		bad += !elem_ok(get(b->recv, i, t), expected(n, i, op), t, op);
	if (bad > 0)
		FAIL("allreduce dtype %d op %d count %zu %s: %zu wrong, e.g. "
		    "[0] = %g, expected %g", t, op, count, in_place ?
		    "in place" : "out of place", bad, get(b->recv, 0, t),
		    expected(n, 0, op));
	if (op == MCCL_AVG && count > 0)
		check_identical(comm, fnv(b->recv, count * es), "allreduce avg");
}

static void
run_broadcast(mccl_comm_t *comm, struct bufs *b, size_t count, int root)
{
	size_t bad = 0;
	mccl_result_t rc;

	for (size_t i = 0; i < count; i++)
		put(b->recv, i, MCCL_INT32, my_rank == root ? (double)(i * 3 +
		    (size_t)root) : -1.0);
	rc = mccl_broadcast(b->recv, count, MCCL_INT32, root, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS) {
		FAIL("broadcast root %d count %zu: %s: %s", root, count,
		    mccl_strerror(rc), mccl_last_error(comm));
		return;
	}
	for (size_t i = 0; i < count; i++)
		bad += get(b->recv, i, MCCL_INT32) != (double)(i * 3 +
		    (size_t)root);
	if (bad > 0)
		FAIL("broadcast root %d count %zu: %zu wrong", root, count, bad);
}

static size_t
count_wrong(const void *buf, size_t count, mccl_dtype_t t, mccl_op_t op,
    int n, size_t first)
{
	size_t bad = 0;

	for (size_t i = 0; i < count; i++)
		bad += !elem_ok(get(buf, i, t), expected(n, first + i, op), t, op);
	return bad;
}

static void
run_reduce(mccl_comm_t *comm, struct bufs *b, int in_place, size_t count,
    mccl_dtype_t t, mccl_op_t op, int root)
{
	int n = mccl_comm_size(comm);
	void *send = in_place && my_rank == root ? b->recv : b->send;
	size_t bad;
	mccl_result_t rc;

	for (size_t i = 0; i < count; i++)
		put(send, i, t, input(my_rank, i, op));
	rc = mccl_reduce(send, my_rank == root ? b->recv : NULL, count, t, op,
	    root, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS) {
		FAIL("reduce dtype %d op %d count %zu root %d: %s: %s", t, op,
		    count, root, mccl_strerror(rc), mccl_last_error(comm));
		return;
	}
	if (my_rank == root &&
	    (bad = count_wrong(b->recv, count, t, op, n, 0)) > 0)
		FAIL("reduce dtype %d op %d count %zu root %d: %zu wrong", t, op,
		    count, root, bad);
}

static void
run_reduce_scatter(mccl_comm_t *comm, struct bufs *b, int in_place,
    size_t count, mccl_dtype_t t, mccl_op_t op)
{
	int n = mccl_comm_size(comm);
	size_t es = mccl_dtype_size(t), bad;
	void *recv = in_place ? (uint8_t *)b->send + (size_t)my_rank * count *
	    es : b->recv;
	mccl_result_t rc;

	for (size_t i = 0; i < count * (size_t)n; i++)
		put(b->send, i, t, input(my_rank, i, op));
	rc = mccl_reduce_scatter(b->send, recv, count, t, op, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS) {
		FAIL("reduce_scatter dtype %d op %d count %zu: %s: %s", t, op,
		    count, mccl_strerror(rc), mccl_last_error(comm));
		return;
	}
	if ((bad = count_wrong(recv, count, t, op, n, (size_t)my_rank *
	    count)) > 0)
		FAIL("reduce_scatter dtype %d op %d count %zu %s: %zu wrong", t,
		    op, count, in_place ? "in place" : "out of place", bad);
}

static void
run_allgather(mccl_comm_t *comm, struct bufs *b, int in_place, size_t count,
    mccl_dtype_t t)
{
	int n = mccl_comm_size(comm);
	size_t es = mccl_dtype_size(t), bad = 0;
	void *send = in_place ? (uint8_t *)b->recv + (size_t)my_rank * count *
	    es : b->send;
	mccl_result_t rc;

	for (size_t i = 0; i < count; i++)
		put(send, i, t, input(my_rank, i, MCCL_SUM));
	rc = mccl_allgather(send, b->recv, count, t, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS) {
		FAIL("allgather dtype %d count %zu: %s: %s", t, count,
		    mccl_strerror(rc), mccl_last_error(comm));
		return;
	}
	for (int r = 0; r < n; r++)
		for (size_t i = 0; i < count; i++)
			bad += get(b->recv, (size_t)r * count + i, t) !=
			    input(r, i, MCCL_SUM);
	if (bad > 0)
		FAIL("allgather dtype %d count %zu %s: %zu wrong", t, count,
		    in_place ? "in place" : "out of place", bad);
}

/* Rank r's block for rank d holds values only that pair produces. */
static double
a2a_value(int r, int d, size_t i)
{
	return (double)((r * 7 + d * 3 + (int)(i % 5)) % 100);
}

static void
run_alltoall(mccl_comm_t *comm, struct bufs *b, int in_place, size_t count,
    mccl_dtype_t t)
{
	int n = mccl_comm_size(comm);
	void *send = in_place ? b->recv : b->send;
	size_t bad = 0;
	mccl_result_t rc;

	for (int d = 0; d < n; d++)
		for (size_t i = 0; i < count; i++)
			put(send, (size_t)d * count + i, t, a2a_value(my_rank,
			    d, i));
	rc = mccl_alltoall(send, b->recv, count, t, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS) {
		FAIL("alltoall dtype %d count %zu: %s: %s", t, count,
		    mccl_strerror(rc), mccl_last_error(comm));
		return;
	}
	for (int r = 0; r < n; r++)
		for (size_t i = 0; i < count; i++)
			bad += get(b->recv, (size_t)r * count + i, t) !=
			    a2a_value(r, my_rank, i);
	if (bad > 0)
		FAIL("alltoall dtype %d count %zu %s: %zu wrong", t, count,
		    in_place ? "in place" : "out of place", bad);
}

static void
run_gather(mccl_comm_t *comm, struct bufs *b, int in_place, size_t count,
    mccl_dtype_t t, int root)
{
	int n = mccl_comm_size(comm);
	size_t es = mccl_dtype_size(t), bad = 0;
	void *send = in_place && my_rank == root ? (uint8_t *)b->recv +
	    (size_t)root * count * es : b->send;
	mccl_result_t rc;

	for (size_t i = 0; i < count; i++)
		put(send, i, t, input(my_rank, i, MCCL_SUM));
	rc = mccl_gather(send, my_rank == root ? b->recv : NULL, count, t,
	    root, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS) {
		FAIL("gather dtype %d count %zu root %d: %s: %s", t, count,
		    root, mccl_strerror(rc), mccl_last_error(comm));
		return;
	}
	for (int r = 0; r < n && my_rank == root; r++)
		for (size_t i = 0; i < count; i++)
			bad += get(b->recv, (size_t)r * count + i, t) !=
			    input(r, i, MCCL_SUM);
	if (bad > 0)
		FAIL("gather dtype %d count %zu root %d %s: %zu wrong", t, count,
		    root, in_place ? "in place" : "out of place", bad);
}

static void
run_scatter(mccl_comm_t *comm, struct bufs *b, int in_place, size_t count,
    mccl_dtype_t t, int root)
{
	int n = mccl_comm_size(comm);
	size_t es = mccl_dtype_size(t), bad = 0;
	void *recv = in_place && my_rank == root ? (uint8_t *)b->send +
	    (size_t)root * count * es : b->recv;
	mccl_result_t rc;

	for (int r = 0; r < n && my_rank == root; r++)
		for (size_t i = 0; i < count; i++)
			put(b->send, (size_t)r * count + i, t, a2a_value(root, r,
			    i));
	rc = mccl_scatter(my_rank == root ? b->send : NULL, recv, count, t,
	    root, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS) {
		FAIL("scatter dtype %d count %zu root %d: %s: %s", t, count,
		    root, mccl_strerror(rc), mccl_last_error(comm));
		return;
	}
	for (size_t i = 0; i < count; i++)
		bad += get(recv, i, t) != a2a_value(root, my_rank, i);
	if (bad > 0)
		FAIL("scatter dtype %d count %zu root %d %s: %zu wrong", t, count,
		    root, in_place ? "in place" : "out of place", bad);
}

/* Uneven counts, from 0 to count: rank r's share for rank d. */
static size_t
v_count(size_t count, int r, int d)
{
	return count * (size_t)((r + 2 * d + 1) % 5) / 4;
}

#define GAP_BYTE	0xa5	/* what the receive buffer held between blocks */

/* Fill the receive extent (blocks and gaps) with GAP_BYTE. */
static void
gaps_fill(void *recv, const size_t *blocks, const size_t *displs, int n,
    mccl_dtype_t t)
{
	size_t end = 0;

	for (int r = 0; r < n; r++)
		if (blocks[r] > 0 && displs[r] + blocks[r] > end)
			end = displs[r] + blocks[r];
	memset(recv, GAP_BYTE, end * mccl_dtype_size(t));
}

/* The elements of the extent that no block covers still hold GAP_BYTE. */
static size_t
gaps_changed(const void *recv, const size_t *blocks, const size_t *displs,
    int n, mccl_dtype_t t)
{
	size_t es = mccl_dtype_size(t), end = 0, bad = 0;
	const uint8_t *p = recv;
	uint8_t *covered;

	for (int r = 0; r < n; r++)
		if (blocks[r] > 0 && displs[r] + blocks[r] > end)
			end = displs[r] + blocks[r];
	if ((covered = calloc(end + 1, 1)) == NULL)
		return 0;
	for (int r = 0; r < n; r++)
		memset(covered + displs[r], 1, blocks[r]);
	for (size_t i = 0; i < end; i++)
		for (size_t k = 0; !covered[i] && k < es; k++)
			bad += p[i * es + k] != GAP_BYTE;
	free(covered);
	return bad;
}

static void
run_allgatherv(mccl_comm_t *comm, struct bufs *b, size_t count,
    mccl_dtype_t t)
{
	int n = mccl_comm_size(comm);
	size_t *vc = calloc((size_t)n, sizeof(size_t));
	size_t *displs = calloc((size_t)n, sizeof(size_t));
	size_t bad = 0, at = 0;
	mccl_result_t rc;

	if (vc == NULL || displs == NULL) {
		FAIL("out of memory");
		goto out;
	}
	/* Blocks in reverse rank order with a gap after each. */
	for (int r = n - 1; r >= 0; r--) {
		vc[r] = v_count(count, r, 0);
		displs[r] = at;
		at += vc[r] + 1;
	}
	for (size_t i = 0; i < vc[my_rank]; i++)
		put(b->send, i, t, input(my_rank, i, MCCL_SUM));
	gaps_fill(b->recv, vc, displs, n, t);
	rc = mccl_allgatherv(b->send, vc[my_rank], b->recv, vc, displs,
	    t, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS) {
		FAIL("allgatherv dtype %d count %zu: %s: %s", t, count,
		    mccl_strerror(rc), mccl_last_error(comm));
		goto out;
	}
	for (int r = 0; r < n; r++)
		for (size_t i = 0; i < vc[r]; i++)
			bad += get(b->recv, displs[r] + i, t) !=
			    input(r, i, MCCL_SUM);
	if (bad > 0)
		FAIL("allgatherv dtype %d count %zu: %zu wrong", t, count, bad);
	if ((bad = gaps_changed(b->recv, vc, displs, n, t)) > 0)
		FAIL("allgatherv dtype %d count %zu: %zu bytes between the "
		    "receive blocks written", t, count, bad);
out:
	free(vc);
	free(displs);
}

/*
 * Rank s sends v_count(count, s, d) elements to rank d: in rank order in
 * its send buffer, received in reverse rank order with a gap after each.
 */
static void
run_alltoallv(mccl_comm_t *comm, struct bufs *b, size_t count,
    mccl_dtype_t t)
{
	int n = mccl_comm_size(comm);
	size_t *v = calloc(4 * (size_t)n, sizeof(size_t)), bad = 0, at = 0;
	size_t *sc = v, *sd = v + n, *rc_ = v + 2 * n, *rd = v + 3 * n;
	mccl_result_t rc;

	if (v == NULL) {
		FAIL("out of memory");
		return;
	}
	for (int d = 0; d < n; d++) {
		sc[d] = v_count(count, my_rank, d);
		sd[d] = at;
		at += sc[d];
	}
	at = 0;
	for (int s = n - 1; s >= 0; s--) {
		rc_[s] = v_count(count, s, my_rank);
		rd[s] = at;
		at += rc_[s] + 1;
	}
	for (int d = 0; d < n; d++)
		for (size_t i = 0; i < sc[d]; i++)
			put(b->send, sd[d] + i, t, a2a_value(my_rank, d, i));
	gaps_fill(b->recv, rc_, rd, n, t);
	rc = mccl_alltoallv(b->send, sc, sd, b->recv, rc_, rd, t, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS) {
		FAIL("alltoallv dtype %d count %zu: %s: %s", t, count,
		    mccl_strerror(rc), mccl_last_error(comm));
		free(v);
		return;
	}
	for (int s = 0; s < n; s++)
		for (size_t i = 0; i < rc_[s]; i++)
			bad += get(b->recv, rd[s] + i, t) != a2a_value(s, my_rank,
			    i);
	if (bad > 0)
		FAIL("alltoallv dtype %d count %zu: %zu wrong", t, count, bad);
	if ((bad = gaps_changed(b->recv, rc_, rd, n, t)) > 0)
		FAIL("alltoallv dtype %d count %zu: %zu bytes between the "
		    "receive blocks written", t, count, bad);
	free(v);
}

/*
 * Every dtype and op with buffers shared with the daemon; with staged ones
 * (any pointer) the staging path is the same for every dtype and op, so
 * two dtypes and two ops cover it.
 */
static int
in_matrix(int full, int t, int op)
{
	if ((op == MCCL_AVG && t < MCCL_FLOAT16) ||
	    (op >= MCCL_BAND && t >= MCCL_FLOAT16))
		return 0;
	return full || ((t == MCCL_INT8 || t == MCCL_FLOAT32) &&
	    (op == MCCL_SUM || op == MCCL_MAX));
}

static void
run_matrix(mccl_comm_t *comm, struct bufs *b, int full)
{
	for (int t = 0; t < MCCL_NUM_DTYPES; t++)
		for (int op = 0; op < MCCL_NUM_OPS; op++) {
			if (!in_matrix(full, t, op))
				continue;
			for (size_t c = 0; c < NCOUNTS; c++)
				for (int ip = 0; ip < 2; ip++) {
					run_allreduce(comm, b, ip, counts[c],
					    (mccl_dtype_t)t, (mccl_op_t)op);
					run_reduce(comm, b, ip, counts[c],
					    (mccl_dtype_t)t, (mccl_op_t)op,
					    (int)(c % (size_t)mccl_comm_size(comm)));
					run_reduce_scatter(comm, b, ip, counts[c],
					    (mccl_dtype_t)t, (mccl_op_t)op);
				}
		}
	for (int t = 0; t < 10; t++)
		for (size_t c = 0; c < NCOUNTS && in_matrix(full, t, MCCL_SUM);
		    c++)
			for (int ip = 0; ip < 2; ip++) {
				run_allgather(comm, b, ip, counts[c],
				    (mccl_dtype_t)t);
				run_alltoall(comm, b, ip, counts[c],
				    (mccl_dtype_t)t);
			}
	for (int t = 0; t < MCCL_NUM_DTYPES; t++)
		for (size_t c = 0; c < NCOUNTS && in_matrix(full, t, MCCL_SUM);
		    c++) {
			run_allgatherv(comm, b, counts[c], (mccl_dtype_t)t);
			run_alltoallv(comm, b, counts[c], (mccl_dtype_t)t);
		}
	for (int root = 0; root < mccl_comm_size(comm); root++)
		for (size_t c = 0; c < NCOUNTS; c++) {
			run_broadcast(comm, b, counts[c], root);
			for (int ip = 0; ip < 2; ip++) {
				run_gather(comm, b, ip, counts[c], MCCL_INT32,
				    root);
				run_scatter(comm, b, ip, counts[c],
				    c % 2 ? MCCL_FLOAT64 : MCCL_UINT8, root);
			}
		}
}

/*
 * The matrix's buffers of bytes each: shared with the daemon (shm) and the
 * process's own, which the library stages (heap).  -1: FAILed.
 */
static int
bufs_get(mccl_comm_t *comm, size_t bytes, struct bufs *shm,
    struct bufs *heap)
{
	shm->send = mccl_alloc(comm, bytes);
	shm->recv = mccl_alloc(comm, bytes);
	heap->send = malloc(bytes);
	heap->recv = malloc(bytes);
	if (shm->send == NULL || shm->recv == NULL || heap->send == NULL ||
	    heap->recv == NULL) {
		FAIL("buffers: %s", mccl_last_error(comm));
		return -1;
	}
	return 0;
}

/* Give the buffers back, end the communicator, say how the checks went. */
static int
bufs_done(mccl_comm_t *comm, struct bufs *shm, struct bufs *heap)
{
	free(heap->send);
	free(heap->recv);
	mccl_free(comm, shm->send);
	mccl_free(comm, shm->recv);
	mccl_comm_destroy(comm);
	printf("rank %d: %d checks, %d failed\n", my_rank, checks, failures);
	return failures != 0;
}

static int
mode_collectives(void)
{
	mccl_comm_t *comm;
	struct bufs shm, heap;
	size_t bytes;
	mccl_result_t rc;

	if ((comm = join()) == NULL)
		return 1;
	/* the v-collectives leave a gap of one element after each block */
	bytes = (MAXCOUNT + 1) * 8 * (size_t)mccl_comm_size(comm);
	if (bufs_get(comm, bytes, &shm, &heap) == -1)
		return 1;
	run_matrix(comm, &shm, 1);
	run_matrix(comm, &heap, 0);
	checks++;
	if ((rc = mccl_barrier(comm, NULL)) != MCCL_SUCCESS)
		FAIL("barrier: %s: %s", mccl_strerror(rc), mccl_last_error(comm));
	return bufs_done(comm, &shm, &heap);
}

/* ---- point to point ---- */

static int
fill_check(int32_t *buf, size_t count, int src, int dst, int tag, int fill)
{
	size_t bad = 0;

	for (size_t i = 0; i < count; i++) {
		int32_t v = (int32_t)(src * 1000003 + dst * 1009 + tag * 7 +
		    (int)i);

		if (fill)
			buf[i] = v;
		else
			bad += buf[i] != v;
	}
	return bad == 0;
}

static void
wait_all(mccl_comm_t *comm, mccl_request_t **reqs, int n, const char *what)
{
	for (int i = 0; i < n; i++) {
		mccl_result_t rc = mccl_wait(reqs[i], -1);

		checks++;
		if (rc != MCCL_SUCCESS)
			FAIL("%s: wait %d: %s: %s", what, i, mccl_strerror(rc),
			    mccl_last_error(comm));
	}
}

/* Every rank sends to every rank (itself too); receives in reverse order. */
static void
p2p_all_pairs(mccl_comm_t *comm, int32_t **sbuf, int32_t **rbuf, size_t count)
{
	int n = mccl_comm_size(comm);
	mccl_request_t **reqs = calloc(2 * (size_t)n, sizeof(*reqs));
	int k = 0;

	for (int d = 0; d < n; d++) {
		fill_check(sbuf[d], count, my_rank, d, my_rank + d, 1);
		if (mccl_send(sbuf[d], count, MCCL_INT32, d, my_rank + d, comm,
		    &reqs[k++]) != MCCL_SUCCESS)
			FAIL("send to %d: %s", d, mccl_last_error(comm));
	}
	for (int s = n - 1; s >= 0; s--)
		if (mccl_recv(rbuf[s], count, MCCL_INT32, s, s + my_rank, comm,
		    &reqs[k++]) != MCCL_SUCCESS)
			FAIL("recv from %d: %s", s, mccl_last_error(comm));
	wait_all(comm, reqs, k, "all pairs");
	for (int s = 0; s < n; s++)
		if (!fill_check(rbuf[s], count, s, my_rank, s + my_rank, 0))
			FAIL("all pairs count %zu: wrong data from rank %d",
			    count, s);
	free(reqs);
}

/* Rank 0 sends tags 3, 1, 2 to rank 1, which receives with MCCL_ANY_TAG:
 * the messages must come in the order they were sent. */
static void
p2p_any_tag(mccl_comm_t *comm, int32_t *buf)
{
	static const int tags[] = { 3, 1, 2 };

	if (my_rank == 0)
		for (int i = 0; i < 3; i++) {
			fill_check(buf, 10, 0, 1, tags[i], 1);
			if (mccl_send(buf, 10, MCCL_INT32, 1, tags[i], comm,
			    NULL) != MCCL_SUCCESS)
				FAIL("send tag %d: %s", tags[i],
				    mccl_last_error(comm));
		}
	else if (my_rank == 1)
		for (int i = 0; i < 3; i++) {
			checks++;
			if (mccl_recv(buf, 10, MCCL_INT32, 0, MCCL_ANY_TAG,
			    comm, NULL) != MCCL_SUCCESS)
				FAIL("recv any tag: %s", mccl_last_error(comm));
			else if (!fill_check(buf, 10, 0, 1, tags[i], 0))
				FAIL("any-tag message %d out of order", i);
		}
}

/*
 * Two rounds, a barrier between: every other rank r sends rank 0 a message
 * of tag 10 * round + r.  Rank 0 receives from any source, in round 1 with
 * any tag, in round 2 by tag in rank order: each status names the sender
 * and tag, the data is that sender's, every sender once.
 */
static void
p2p_any_source(mccl_comm_t *comm, int32_t *buf)
{
	int n = mccl_comm_size(comm), seen[2][64] = { { 0 } };
	mccl_status_t st;

	if (n > 64)
		return;
	for (int k = 1; k <= 2; k++) {
		if (my_rank != 0) {
			fill_check(buf, 5, my_rank, 0, k * 10 + my_rank, 1);
			if (mccl_send(buf, 5, MCCL_INT32, 0, k * 10 + my_rank,
			    comm, NULL) != MCCL_SUCCESS)
				FAIL("send to rank 0: %s", mccl_last_error(comm));
		}
		for (int i = 1; i < n && my_rank == 0; i++) {
			int tag = k == 1 ? MCCL_ANY_TAG : 20 + i;

			checks++;
			st.source = st.tag = -2;
			if (mccl_recv_status(buf, 5, MCCL_INT32, MCCL_ANY_SOURCE,
			    tag, &st, comm, NULL) != MCCL_SUCCESS)
				FAIL("recv from any source: %s",
				    mccl_last_error(comm));
			else if (st.source < 1 || st.source >= n ||
			    st.tag != k * 10 + st.source ||
			    seen[k - 1][st.source]++ ||
			    (k == 2 && st.source != i) ||
			    !fill_check(buf, 5, st.source, 0, st.tag, 0))
				FAIL("recv from any source: status source %d tag "
				    "%d (round %d, message %d)", st.source,
				    st.tag, k, i);
		}
		if (mccl_barrier(comm, NULL) != MCCL_SUCCESS)
			FAIL("barrier: %s", mccl_last_error(comm));
	}
}

static int
mode_p2p(void)
{
	static const size_t sizes[] = { 0, 1, 1000, 300007 };
	mccl_comm_t *comm;
	int32_t **sbuf, **rbuf;
	mccl_result_t rc;
	int n;

	if ((comm = join()) == NULL)
		return 1;
	n = mccl_comm_size(comm);
	sbuf = calloc((size_t)n, sizeof(*sbuf));
	rbuf = calloc((size_t)n, sizeof(*rbuf));
	for (int i = 0; i < n; i++) {
		/* Half the buffers shared with the daemon, half staged. */
		sbuf[i] = i % 2 ? mccl_alloc(comm, 300007 * 4) :
		    malloc(300007 * 4);
		rbuf[i] = i % 2 ? malloc(300007 * 4) :
		    mccl_alloc(comm, 300007 * 4);
	}
	for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]); c++)
		p2p_all_pairs(comm, sbuf, rbuf, sizes[c]);
	p2p_any_tag(comm, sbuf[0]);
	p2p_any_source(comm, sbuf[0]);
	checks++;
	if ((rc = mccl_barrier(comm, NULL)) != MCCL_SUCCESS)
		FAIL("barrier: %s", mccl_last_error(comm));
	for (int i = 0; i < n; i++) {
		if (i % 2) {
			mccl_free(comm, sbuf[i]);
			free(rbuf[i]);
		} else {
			free(sbuf[i]);
			mccl_free(comm, rbuf[i]);
		}
	}
	free(sbuf);
	free(rbuf);
	mccl_comm_destroy(comm);
	printf("rank %d: %d checks, %d failed\n", my_rank, checks, failures);
	return failures != 0;
}

/*
 * Rank 1 sends to rank 0 and leaves; rank 2 sends to rank 0 after it.  The
 * link from rank 1's node was made by its first message and never answered:
 * its hang-up is the only news of that node, and must not cost rank 0 its
 * next message.
 */
#define LEAVE_COUNT	1000

static void
p2p_leave_recv(mccl_comm_t *comm, int32_t *buf, int from)
{
	mccl_result_t rc;

	checks++;
	memset(buf, 0, LEAVE_COUNT * sizeof(*buf));
	if ((rc = mccl_recv(buf, LEAVE_COUNT, MCCL_INT32, from, from, comm,
	    NULL)) != MCCL_SUCCESS) {
		FAIL("recv from rank %d: %s", from, mccl_last_error(comm));
		return;
	}
	for (int i = 0; i < LEAVE_COUNT; i++)
		if (buf[i] != from * 100000 + i) {
			FAIL("from rank %d: [%d] = %d", from, i, (int)buf[i]);
			return;
		}
}

static int
mode_p2p_leave(void)
{
	int32_t buf[LEAVE_COUNT];
	mccl_comm_t *comm;
	mccl_result_t rc;

	if ((comm = join()) == NULL)
		return 1;
	if (my_rank == 0) {
		p2p_leave_recv(comm, buf, 1);
		p2p_leave_recv(comm, buf, 2);
	} else {
		for (int i = 0; i < LEAVE_COUNT; i++)
			buf[i] = my_rank * 100000 + i;
		if (my_rank == 2)
			usleep(500 * 1000);	/* after rank 1 left */
		checks++;
		if ((rc = mccl_send(buf, LEAVE_COUNT, MCCL_INT32, 0, my_rank,
		    comm, NULL)) != MCCL_SUCCESS)
			FAIL("send: %s", mccl_last_error(comm));
	}
	mccl_comm_destroy(comm);
	printf("rank %d: %d checks, %d failed\n", my_rank, checks, failures);
	return failures != 0;
}

/* ---- errors, split, concurrency, abort ---- */

static mccl_result_t
code_of(const char *name)
{
	for (int i = 0; i < MCCL_NUM_RESULTS; i++)
		if (strcmp(result_names[i], name) == 0)
			return (mccl_result_t)i;
	return MCCL_ERR_INTERNAL;
}

static void
expect(mccl_comm_t *comm, mccl_result_t rc, mccl_result_t want,
    const char *text, const char *what)
{
	checks++;
	if (rc != want)
		FAIL("%s: got %s, expected %s (%s)", what, result_names[rc],
		    result_names[want], mccl_last_error(comm));
	else if (text != NULL && strstr(mccl_last_error(comm), text) == NULL)
		FAIL("%s: message \"%s\" lacks \"%s\"", what,
		    mccl_last_error(comm), text);
}

static void
bad_arguments(mccl_comm_t *comm, float *buf)
{
	int n = mccl_comm_size(comm);
	mccl_result_t I = MCCL_ERR_INVALID_ARGUMENT;
	char root_text[64], peer_text[64];

	snprintf(root_text, sizeof(root_text), "root %d is out of range for "
	    "%d ranks", n, n);
	snprintf(peer_text, sizeof(peer_text), "peer %d is out of range for "
	    "%d ranks", n, n);
	expect(comm, mccl_allreduce(NULL, buf, 5, MCCL_FLOAT32, MCCL_SUM, comm,
	    NULL), I, "sendbuf is NULL", "NULL sendbuf");
	expect(comm, mccl_allreduce(buf, buf, 5, (mccl_dtype_t)99, MCCL_SUM,
	    comm, NULL), I, "dtype 99", "bad dtype");
	expect(comm, mccl_allreduce(buf, buf, 5, MCCL_FLOAT32, (mccl_op_t)42,
	    comm, NULL), I, "op 42", "bad op");
	expect(comm, mccl_allreduce(buf, buf, 5, MCCL_INT32, MCCL_AVG, comm,
	    NULL), MCCL_ERR_UNSUPPORTED, "floating-point", "integer avg");
	expect(comm, mccl_broadcast(buf, 5, MCCL_FLOAT32, n, comm, NULL), I,
	    root_text, "root out of range");
	expect(comm, mccl_reduce(buf, buf, 5, MCCL_FLOAT32, MCCL_SUM, -1, comm,
	    NULL), I, "root -1", "negative root");
	expect(comm, mccl_send(buf, 5, MCCL_FLOAT32, n, 0, comm, NULL), I,
	    peer_text, "peer out of range");
	expect(comm, mccl_send(buf, 5, MCCL_FLOAT32, 0, MCCL_ANY_TAG, comm,
	    NULL), I, "tag", "send with any tag");
	expect(comm, mccl_allreduce(buf, buf + 1, 5, MCCL_FLOAT32, MCCL_SUM,
	    comm, NULL), I, "overlap", "overlapping buffers");
	expect(comm, mccl_allgather(buf + 1, buf, 5, MCCL_FLOAT32, comm, NULL),
	    I, "overlap", "allgather in place off its slot");
}

/* The communicator must still work: bad calls changed nothing. */
static void
still_works(mccl_comm_t *comm, float *buf, const char *what)
{
	int n = mccl_comm_size(comm);
	mccl_result_t rc;

	for (int i = 0; i < 4; i++)
		buf[i] = (float)(mccl_comm_rank(comm) + i);
	rc = mccl_allreduce(buf, buf, 4, MCCL_FLOAT32, MCCL_SUM, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS)
		FAIL("%s: allreduce: %s", what, mccl_last_error(comm));
	else if (buf[1] != (float)(n * (n - 1) / 2 + n))
		FAIL("%s: allreduce gave %g", what, buf[1]);
}

static void
many_in_flight(mccl_comm_t *comm, int32_t *buf)
{
	enum { K = 100, C = 64 };
	mccl_request_t *reqs[K];
	int n = mccl_comm_size(comm), done = 0;

	for (int k = 0; k < K; k++) {
		for (int i = 0; i < C; i++)
			buf[k * C + i] = k + i + my_rank;
		if (mccl_allreduce(buf + k * C, buf + k * C, C, MCCL_INT32,
		    MCCL_SUM, comm, &reqs[k]) != MCCL_SUCCESS)
			FAIL("in flight %d: %s", k, mccl_last_error(comm));
	}
	(void)mccl_test(reqs[K - 1], &done);	/* may or may not be done */
	if (done)
		reqs[K - 1] = NULL;
	for (int k = 0; k < K; k++)
		if (reqs[k] != NULL && mccl_wait(reqs[k], -1) != MCCL_SUCCESS)
			FAIL("in flight %d: wait: %s", k, mccl_last_error(comm));
	for (int k = 0; k < K; k++)
		for (int i = 0; i < C; i++)
			if (buf[k * C + i] != n * (k + i) + n * (n - 1) / 2) {
				FAIL("in flight %d: wrong result", k);
				return;
			}
	checks++;
}

static void *
thread_main(void *arg)
{
	mccl_comm_t *comm = arg;
	float *buf = mccl_alloc(comm, 64 * sizeof(float));

	for (int k = 0; k < 50 && buf != NULL; k++)
		still_works(comm, buf, "thread");
	mccl_free(comm, buf);
	return NULL;
}

static void
two_threads(mccl_comm_t *a, mccl_comm_t *b)
{
	pthread_t t[2];

	pthread_create(&t[0], NULL, thread_main, a);
	pthread_create(&t[1], NULL, thread_main, b);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
}

static void
split_checks(mccl_comm_t *comm, float *buf)
{
	mccl_comm_t *half, *none;
	int n = mccl_comm_size(comm);

	expect(comm, mccl_comm_split(comm, my_rank % 2, -my_rank, &half),
	    MCCL_SUCCESS, NULL, "split by parity");
	if (half == NULL)
		return;
	checks++;
	if (mccl_comm_size(half) != (n + 1 - my_rank % 2) / 2 ||
	    mccl_comm_rank(half) != (mccl_comm_size(half) - 1 - my_rank / 2))
		FAIL("split: rank %d of %d in the half", mccl_comm_rank(half),
		    mccl_comm_size(half));
	still_works(half, buf, "split");
	two_threads(comm, half);
	expect(comm, mccl_comm_split(comm, my_rank == 0 ? MCCL_UNDEFINED : 0,
	    0, &none), MCCL_SUCCESS, NULL, "split with MCCL_UNDEFINED");
	checks++;
	if ((my_rank == 0) != (none == NULL))
		FAIL("split: MCCL_UNDEFINED gives %p", (void *)none);
	if (none != NULL) {
		still_works(none, buf, "split without rank 0");
		mccl_comm_destroy(none);
	}
	mccl_comm_destroy(half);
}

static int
mode_api(void)
{
	mccl_comm_t *comm;
	float *buf;

	if ((comm = join()) == NULL)
		return 1;
	buf = mccl_alloc(comm, 64 * 100 * sizeof(int32_t));
	bad_arguments(comm, buf);
	still_works(comm, buf, "after bad arguments");
	many_in_flight(comm, (int32_t *)buf);
	split_checks(comm, buf);
	mccl_free(comm, buf);
	mccl_comm_destroy(comm);
	expect(NULL, mccl_barrier(comm, NULL), MCCL_ERR_INVALID_ARGUMENT,
	    "destroyed", "use after destroy");
	printf("rank %d: %d checks, %d failed\n", my_rank, checks, failures);
	return failures != 0;
}

/* Rank 0 issues a different count: every rank must get an error, at once. */
static int
mode_mismatch(void)
{
	mccl_comm_t *comm;
	float buf[16] = { 0 };
	mccl_result_t rc;

	if ((comm = join()) == NULL)
		return 1;
	rc = mccl_allreduce(buf, buf, my_rank == 0 ? 10 : 12, MCCL_FLOAT32,
	    MCCL_SUM, comm, NULL);
	expect(comm, rc, MCCL_ERR_INVALID_ARGUMENT, "count", "mismatch");
	expect(comm, mccl_barrier(comm, NULL), MCCL_ERR_INVALID_ARGUMENT,
	    "count", "the communicator stays failed");
	mccl_comm_destroy(comm);
	return failures != 0;
}

static int
mode_mismatch_v(int kind)
{
	size_t v[4 * 64] = { 0 };
	float send[64] = { 0 }, recv[64];
	int n;
	mccl_comm_t *comm;
	mccl_result_t rc;

	if ((comm = join()) == NULL)
		return 1;
	if ((n = mccl_comm_size(comm)) > 64)
		return 1;
	expect(comm, mccl_barrier(comm, NULL), MCCL_SUCCESS, NULL, "barrier");
	for (int r = 0; r < n; r++) {
		v[r] = v[2 * n + r] = 1;	/* counts */
		v[n + r] = v[3 * n + r] = (size_t)r;	/* displacements */
	}
	if (kind == 0) {
		if (my_rank == 0)
			v[1] = 0;	/* sends rank 1 nothing: it expects 1 */
		rc = mccl_alltoallv(send, v, v + n, recv, v + 2 * n, v + 3 * n,
		    MCCL_FLOAT32, comm, NULL);
		/* the pair's ranks, or where the totals differ already, the
		   nodes: "alltoallv: rank 0 sends 0 elements to rank 1,
		   which expects 1", "alltoallv: node n0 sends 16 bytes to
		   this node's ranks, which expect 20 from it" */
		if (my_rank < 2 || rc != MCCL_SUCCESS)
			expect(comm, rc, MCCL_ERR_INVALID_ARGUMENT,
			    "which expect", "alltoallv");
		else	/* its own exchanges agreed: the failure comes next */
			expect(comm, mccl_barrier(comm, NULL),
			    MCCL_ERR_INVALID_ARGUMENT, "which expect",
			    "the barrier after");
	} else {
		if (my_rank == 0) {
			v[0] = 2;	/* its own count, as it says: 2 */
			v[n] = 0;
			for (int r = 1; r < n; r++)
				v[n + r] = (size_t)r + 1;
		}
		rc = mccl_allgatherv(send, v[my_rank], recv, v, v + n,
		    MCCL_FLOAT32, comm, NULL);
		expect(comm, rc, MCCL_ERR_INVALID_ARGUMENT, "recvcounts",
		    "allgatherv");
	}
	mccl_comm_destroy(comm);
	return failures != 0;
}

/*
 * Rank 0 calls another collective than the rest on the same op: KIND 0,
 * rank 0 broadcasts (root 0) while the others allreduce; 1, the reverse
 * with root 1; 2, all broadcast but rank 0 names root 0 and the others
 * root 1.  Every rank, every time, must fail with INVALID_ARGUMENT and a
 * message naming both collectives (or both roots): never success, never
 * PEER_FAILED.  A barrier first makes the links hot, as in a real job.
 */
static int
mode_mismatch_coll(int kind)
{
	static const char *names[3][2] = { { "broadcast", "allreduce" },
	    { "allreduce", "broadcast" }, { "root 0", "root 1" } };
	mccl_comm_t *comm;
	float buf[12] = { 0 };
	mccl_result_t rc;
	int odd = my_rank == 0;

	if ((comm = join()) == NULL)
		return 1;
	expect(comm, mccl_barrier(comm, NULL), MCCL_SUCCESS, NULL, "barrier");
	if (kind == 2)
		rc = mccl_broadcast(buf, 12, MCCL_FLOAT32, odd ? 0 : 1, comm,
		    NULL);
	else if ((kind == 0) == odd)
		rc = mccl_broadcast(buf, 12, MCCL_FLOAT32, kind, comm, NULL);
	else
		rc = mccl_allreduce(buf, buf, 12, MCCL_FLOAT32, MCCL_SUM, comm,
		    NULL);
	expect(comm, rc, MCCL_ERR_INVALID_ARGUMENT, names[kind][0],
	    "mismatched collective");
	if (rc == MCCL_ERR_INVALID_ARGUMENT)
		expect(comm, rc, MCCL_ERR_INVALID_ARGUMENT, names[kind][1],
		    "mismatched collective, the other name");
	mccl_comm_destroy(comm);
	return failures != 0;
}

/* Rank 0 aborts while the others wait in an allreduce. */
static int
mode_abort(void)
{
	mccl_comm_t *comm;
	float buf[4] = { 0 };

	if ((comm = join()) == NULL)
		return 1;
	if (my_rank == 0) {
		usleep(300000);
		expect(comm, mccl_comm_abort(comm), MCCL_SUCCESS, NULL, "abort");
		expect(comm, mccl_barrier(comm, NULL), MCCL_ERR_ABORTED, NULL,
		    "after abort");
	} else
		expect(comm, mccl_allreduce(buf, buf, 4, MCCL_FLOAT32, MCCL_SUM,
		    comm, NULL), MCCL_ERR_ABORTED, "aborted by rank 0",
		    "allreduce during abort");
	mccl_comm_destroy(comm);
	return failures != 0;
}

/*
 * n jobs of one rank, each aborted as soon as it formed, with names of
 * 120 bytes: the daemon keeps them failed (failed_jobs_kept), so that
 * mcclctl jobs --failed answers with a document of several records.
 */
static int
mode_abort_many(int n)
{
	mccl_comm_t *comm;
	char name[121];
	int len;

	for (int i = 0; i < n && failures == 0; i++) {
		len = snprintf(name, sizeof(name), "many-%d-%d-", (int)getpid(),
		    i);
		memset(name + len, 'x', sizeof(name) - 1 - (size_t)len);
		name[sizeof(name) - 1] = '\0';
		if (mccl_comm_init(&comm, name, 1, 0) != MCCL_SUCCESS) {
			FAIL("init of job %d: %s", i, mccl_last_error(NULL));
			break;
		}
		expect(comm, mccl_comm_abort(comm), MCCL_SUCCESS, NULL,
		    "abort");
		mccl_comm_destroy(comm);
	}
	printf("rank %d: %d jobs aborted, %d failed\n", my_rank, n, failures);
	return failures != 0;
}

/*
 * Allreduce C floats (4 MiB unless asked) again and again until an
 * operation fails; the failure must have code CODE and a message
 * containing TEXT.  Prints the wall time of the failure, for the test to
 * measure how long detection took.  Gives up (failing) after 60 s without
 * an error.
 */
static int
mode_loop(const char *code, const char *text, size_t C)
{
	mccl_comm_t *comm;
	struct timespec t0, t;
	float *buf;
	mccl_result_t rc;

	if ((comm = join()) == NULL)
		return 1;
	buf = mccl_alloc(comm, C * sizeof(float));
	printf("rank %d: looping\n", my_rank);
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		rc = mccl_allreduce(buf, buf, C, MCCL_FLOAT32, MCCL_MAX, comm,
		    NULL);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (rc == MCCL_SUCCESS && t.tv_sec - t0.tv_sec < 60);
	clock_gettime(CLOCK_REALTIME, &t);
	printf("rank %d: failed_at=%lld.%03ld %s: %s\n", my_rank,
	    (long long)t.tv_sec, t.tv_nsec / 1000000, result_names[rc],
	    mccl_last_error(comm));
	expect(comm, rc, code_of(code), text, "loop");
	mccl_comm_destroy(comm);
	return failures != 0;
}

/* Allreduce for ms milliseconds; every one must succeed. */
static int
mode_steady(int ms)
{
	struct timespec t0, t;
	mccl_comm_t *comm;
	float *buf;
	long n = 0;

	if ((comm = join()) == NULL)
		return 1;
	buf = mccl_alloc(comm, 1024 * sizeof(float));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int32_t go = 1; go && failures == 0; n++) {
		still_works(comm, buf, "steady");
		clock_gettime(CLOCK_MONOTONIC, &t);
		/* Stop together: go on while every rank wants to. */
		go = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) /
		    1000000 < ms;
		if (mccl_allreduce(&go, &go, 1, MCCL_INT32, MCCL_MIN, comm,
		    NULL) != MCCL_SUCCESS)
			FAIL("steady: %s", mccl_last_error(comm));
	}
	mccl_comm_destroy(comm);
	printf("rank %d: %ld rounds, %d failed\n", my_rank, n, failures);
	return failures != 0;
}

static int
mode_expect_init(const char *code, const char *text)
{
	mccl_comm_t *comm;
	mccl_result_t rc = mccl_comm_init_env(&comm);

	if (rc == MCCL_SUCCESS) {
		FAIL("init succeeded, expected %s", code);
		mccl_comm_destroy(comm);
		return 1;
	}
	if (strcmp(result_names[rc], code) != 0)
		FAIL("init failed with %s, expected %s (%s)", result_names[rc],
		    code, mccl_last_error(NULL));
	else if (strstr(mccl_last_error(NULL), text) == NULL)
		FAIL("message \"%s\" lacks \"%s\"", mccl_last_error(NULL), text);
	else
		printf("rank %d: %s: %s\n", my_rank, code, mccl_last_error(NULL));
	return failures != 0;
}

/*
 * One allreduce of more than 2 GiB, in place: no length, count or single
 * system call may be 32 bits (or over 1 GiB) on the way.
 */
static int
mode_big(void)
{
	const size_t count = ((size_t)1 << 29) + 4099;	/* 2 GiB + 16 KiB */
	mccl_comm_t *comm;
	float *buf;
	mccl_result_t rc;
	int n;

	if ((comm = join()) == NULL)
		return 1;
	n = mccl_comm_size(comm);
	if ((buf = mccl_alloc(comm, count * sizeof(float))) == NULL) {
		FAIL("mccl_alloc of %zu bytes: %s", count * sizeof(float),
		    mccl_last_error(comm));
		return 1;
	}
	for (size_t i = 0; i < count; i++)
		buf[i] = (float)(my_rank + 1 + (int)(i >> 27));
	rc = mccl_allreduce(buf, buf, count, MCCL_FLOAT32, MCCL_SUM, comm, NULL);
	checks++;
	if (rc != MCCL_SUCCESS)
		FAIL("allreduce of %zu floats: %s", count, mccl_last_error(comm));
	else
		for (size_t i = 0; i < count; i += 4093)
			if (buf[i] != (float)(n * (n + 1) / 2 + n * (int)(i >> 27))) {
				FAIL("big allreduce: [%zu] = %g", i, buf[i]);
				break;
			}
	if (rc == MCCL_SUCCESS && buf[count - 1] != (float)(n * (n + 1) / 2 +
	    n * (int)((count - 1) >> 27)))
		FAIL("big allreduce: the last element is %g", buf[count - 1]);
	mccl_free(comm, buf);
	mccl_comm_destroy(comm);
	printf("rank %d: %d checks, %d failed\n", my_rank, checks, failures);
	return failures != 0;
}

/*
 * Collectives of 4 MiB and more, where the daemon cuts its passes over a
 * node's buffers (combining its ranks' inputs, handing each the result)
 * into parts on several threads, and an allreduce of 16 MiB and more in a
 * job with several ranks on a node runs in segments of 8 MiB, the passes
 * beside the network; the count leaves the last part and segment uneven.
 */
#define LARGECOUNT	(((size_t)5 << 20) + 13)	/* 20 MiB of float32 */

/*
 * Large allreduces queued back to back, in place in a segment of two
 * LARGECOUNT slices: the daemon combines each one's first segment beside
 * the last of the one before, and hands that one's last out beside its
 * own first, where they share no byte (a, b, c: slices 0, 1, 0), and not
 * where one reads what the one before writes (d: slice 0 after c).
 */
static void
queued_large(mccl_comm_t *comm, int32_t *buf)
{
	static const int slice[4] = { 0, 1, 0, 0 };
	mccl_request_t *reqs[4];
	int n = mccl_comm_size(comm);

	for (size_t i = 0; i < 2 * LARGECOUNT; i++)
		buf[i] = my_rank + (int32_t)(i % 7);
	for (int k = 0; k < 4; k++)
		if (mccl_allreduce(buf + slice[k] * LARGECOUNT, buf + slice[k] *
		    LARGECOUNT, LARGECOUNT, MCCL_INT32, MCCL_SUM, comm,
		    &reqs[k]) != MCCL_SUCCESS)
			FAIL("queued %d: %s", k, mccl_last_error(comm));
	wait_all(comm, reqs, 4, "queued large allreduces");
	for (size_t i = 0; i < 2 * LARGECOUNT; i++) {
		int64_t once = n * (n - 1) / 2 + n * (int64_t)(i % 7);
		int32_t want = (int32_t)(i < LARGECOUNT ? n * n * once : once);

		if (buf[i] != want) {
			FAIL("queued large allreduces: [%zu] = %d, not %d", i,
			    buf[i], want);
			break;
		}
	}
}

/*
 * queued_large in the ranks' own heap, which the daemon reads and writes
 * in place (from 4 MiB where a node has several ranks): the same sums,
 * with the ops that share no byte overlapping as in its segments.
 */
static int
mode_queued_heap(void)
{
	mccl_comm_t *comm;
	int32_t *buf;

	if ((comm = join()) == NULL)
		return 1;
	if ((buf = malloc(2 * LARGECOUNT * sizeof(*buf))) == NULL) {
		FAIL("out of memory");
		return 1;
	}
	queued_large(comm, buf);
	free(buf);
	mccl_comm_destroy(comm);
	printf("rank %d: %d checks, %d failed\n", my_rank, checks, failures);
	return failures != 0;
}

static int
mode_large(void)
{
	mccl_comm_t *comm;
	struct bufs shm, heap;
	size_t bytes = LARGECOUNT * 8;
	int n;

	if ((comm = join()) == NULL)
		return 1;
	n = mccl_comm_size(comm);
	if (bufs_get(comm, bytes, &shm, &heap) == -1)
		return 1;
	for (int ip = 0; ip < 2; ip++) {
		run_allreduce(comm, &shm, ip, LARGECOUNT, MCCL_FLOAT32, MCCL_SUM);
		run_allreduce(comm, &shm, ip, LARGECOUNT, MCCL_FLOAT32, MCCL_AVG);
		run_allreduce(comm, &shm, ip, LARGECOUNT / 2, MCCL_FLOAT64,
		    MCCL_AVG);
		run_allreduce(comm, &shm, ip, LARGECOUNT, MCCL_INT32, MCCL_MAX);
		run_reduce(comm, &shm, ip, LARGECOUNT, MCCL_FLOAT32, MCCL_SUM,
		    n - 1);
		run_reduce_scatter(comm, &shm, ip, LARGECOUNT / (size_t)n,
		    MCCL_FLOAT32, MCCL_SUM);
		run_allreduce(comm, &heap, ip, LARGECOUNT, MCCL_FLOAT32,
		    MCCL_SUM);
		run_allreduce(comm, &heap, ip, LARGECOUNT, MCCL_FLOAT32,
		    MCCL_AVG);
		run_allreduce(comm, &heap, ip, LARGECOUNT / 2, MCCL_FLOAT64,
		    MCCL_AVG);
		run_allreduce(comm, &heap, ip, LARGECOUNT, MCCL_INT32,
		    MCCL_MAX);
	}
	run_broadcast(comm, &shm, LARGECOUNT, 0);
	run_broadcast(comm, &shm, LARGECOUNT, n - 1);
	queued_large(comm, shm.recv);
	/* a bfloat16 wire, narrowed segment by segment: small sums, exact */
	if (mccl_comm_set_wire_dtype(comm, MCCL_BFLOAT16) != MCCL_SUCCESS)
		FAIL("set_wire_dtype: %s", mccl_last_error(comm));
	run_allreduce(comm, &shm, 0, LARGECOUNT, MCCL_FLOAT32, MCCL_SUM);
	run_allreduce(comm, &shm, 1, LARGECOUNT, MCCL_FLOAT32, MCCL_AVG);
	run_allreduce(comm, &heap, 0, LARGECOUNT, MCCL_FLOAT32, MCCL_AVG);
	return bufs_done(comm, &shm, &heap);
}

/*
 * Rank 0 unmaps its buffer (which=send) or its receive buffer (recv)
 * while its allreduce waits for rank 1, on its node, to submit: the
 * daemon, reading or writing it in place, fails the op with
 * INVALID_ARGUMENT naming the buffer, and the job with it; every other
 * rank either fails the same way or, where its node's part of the op had
 * ended (a receive buffer gone), got the right sums.  No rank hangs and
 * no daemon falls.
 */
#define UNMAP_COUNT	((size_t)8 << 20)		/* 32 MiB of float32 */

static int
mode_xmem_unmap(const char *which)
{
	size_t bytes = UNMAP_COUNT * sizeof(float);
	int recv = strcmp(which, "recv") == 0, n;
	const char *text = recv ? "rank 0's receive buffer" :
	    "rank 0's send buffer";
	mccl_request_t *req;
	mccl_comm_t *comm;
	mccl_result_t rc;
	float *send, *buf;

	if ((comm = join()) == NULL)
		return 1;
	n = mccl_comm_size(comm);
	send = malloc(bytes);
	buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (send == NULL || buf == MAP_FAILED) {
		FAIL("out of memory");
		return 1;
	}
	for (size_t i = 0; i < UNMAP_COUNT; i++)
		send[i] = buf[i] = (float)(my_rank + 1);
	if (my_rank == 0) {
		rc = mccl_allreduce(recv ? send : buf, buf, UNMAP_COUNT,
		    MCCL_FLOAT32, MCCL_SUM, comm, &req);
		if (rc == MCCL_SUCCESS) {
			munmap(buf, bytes);
			rc = mccl_wait(req, -1);
		}
		expect(comm, rc, MCCL_ERR_INVALID_ARGUMENT, text,
		    "allreduce of a buffer unmapped");
		if (strstr(mccl_last_error(comm), "freed or unmapped") == NULL)
			FAIL("the message does not say what happened: %s",
			    mccl_last_error(comm));
	} else {
		usleep(300 * 1000);		/* after rank 0's unmap */
		rc = mccl_allreduce(buf, buf, UNMAP_COUNT, MCCL_FLOAT32,
		    MCCL_SUM, comm, NULL);
		checks++;
		if (rc == MCCL_SUCCESS && (!recv ||
		    buf[UNMAP_COUNT - 1] != (float)(n * (n + 1) / 2)))
			FAIL("the allreduce ended well, with %g", buf[0]);
		else if (rc != MCCL_SUCCESS)
			expect(comm, rc, MCCL_ERR_INVALID_ARGUMENT, text,
			    "the others' allreduce");
		munmap(buf, bytes);
	}
	free(send);
	mccl_comm_destroy(comm);
	printf("rank %d: %d checks, %d failed\n", my_rank, checks, failures);
	return failures != 0;
}

/*
 * Rank 0 queues two 32 MiB allreduces in its own memory, the first out
 * of place into a buffer whose last 8 MiB (the op's last segment) it
 * unmaps before the other ranks come: the daemon hands that segment out
 * beside the second op's start, where the write fails.  The first op
 * fails with INVALID_ARGUMENT naming rank 0's receive buffer, on rank 0
 * and its node; every rank's second op fails with the job (no rank hangs,
 * none gets wrong sums: another node's first op, whose part had ended,
 * may end well, with the right ones).
 */
static int
mode_xmem_unmap_last(void)
{
	size_t bytes = UNMAP_COUNT * sizeof(float), tail = (size_t)8 << 20;
	float *send, *buf, *other;
	mccl_request_t *reqs[2];
	mccl_comm_t *comm;
	mccl_result_t rc;
	int n;

	if ((comm = join()) == NULL)
		return 1;
	n = mccl_comm_size(comm);
	send = malloc(bytes);
	other = malloc(bytes);
	buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (send == NULL || other == NULL || buf == MAP_FAILED) {
		FAIL("out of memory");
		return 1;
	}
	for (size_t i = 0; i < UNMAP_COUNT; i++)
		send[i] = other[i] = buf[i] = (float)(my_rank + 1);
	if (my_rank != 0)
		usleep(300 * 1000);		/* after rank 0's unmap */
	if (mccl_allreduce(send, buf, UNMAP_COUNT, MCCL_FLOAT32, MCCL_SUM,
	    comm, &reqs[0]) != MCCL_SUCCESS || mccl_allreduce(other, other,
	    UNMAP_COUNT, MCCL_FLOAT32, MCCL_SUM, comm, &reqs[1]) !=
	    MCCL_SUCCESS) {
		FAIL("submit: %s", mccl_last_error(comm));
		return 1;
	}
	if (my_rank == 0)
		munmap((char *)buf + bytes - tail, tail);
	rc = mccl_wait(reqs[0], -1);
	checks++;
	if (my_rank == 0 || rc != MCCL_SUCCESS)
		expect(comm, rc, MCCL_ERR_INVALID_ARGUMENT,
		    "rank 0's receive buffer", "the first allreduce");
	else if (buf[UNMAP_COUNT - 1] != (float)(n * (n + 1) / 2))
		FAIL("the first allreduce ended well, with %g",
		    buf[UNMAP_COUNT - 1]);
	if (my_rank == 0 && strstr(mccl_last_error(comm), "freed or unmapped")
	    == NULL)
		FAIL("the message does not say what happened: %s",
		    mccl_last_error(comm));
	rc = mccl_wait(reqs[1], -1);
	checks++;
	if (rc == MCCL_SUCCESS)
		FAIL("the second allreduce ended well after the job failed");
	munmap(buf, my_rank == 0 ? bytes - tail : bytes);
	free(send);
	free(other);
	mccl_comm_destroy(comm);
	printf("rank %d: %d checks, %d failed\n", my_rank, checks, failures);
	return failures != 0;
}

/* Join and do nothing for ms: a rank that never takes part. */
static int
mode_idle(int ms)
{
	mccl_comm_t *comm;

	if ((comm = join()) == NULL)
		return 1;
	usleep((useconds_t)ms * 1000);
	mccl_comm_destroy(comm);
	return 0;
}

static int
mode_hold(int ms, int allreduce)
{
	mccl_comm_t *comm;
	mccl_result_t rc;
	float x = (float)my_rank + 1;
	int n;

	if ((comm = join()) == NULL)
		return 1;
	n = mccl_comm_size(comm);
	rc = allreduce ? mccl_allreduce(&x, &x, 1, MCCL_FLOAT32, MCCL_SUM, comm,
	    NULL) : mccl_barrier(comm, NULL);
	if (rc != MCCL_SUCCESS)
		FAIL("%s: %s: %s", allreduce ? "allreduce" : "barrier",
		    mccl_strerror(rc), mccl_last_error(comm));
	else if (allreduce && x != (float)(n * (n + 1) / 2))
		FAIL("allreduce: %g, not %d", x, n * (n + 1) / 2);
	usleep((useconds_t)ms * 1000);
	mccl_comm_destroy(comm);
	return failures != 0;
}

/*
 * Rank 0 sends one message of bytes to rank 1, which receives it only
 * after ms: the daemon keeps it meanwhile.  With code, the send must fail
 * with code and text instead (rank 1 then only leaves).
 */
static int
mode_send_kept(size_t bytes, int ms, const char *code, const char *text)
{
	mccl_comm_t *comm;
	mccl_result_t rc;
	uint8_t *buf;

	if ((comm = join()) == NULL)
		return 1;
	if ((buf = calloc(1, bytes)) == NULL) {
		FAIL("out of memory");
		return 1;
	}
	if (my_rank == 0) {
		rc = mccl_send(buf, bytes, MCCL_UINT8, 1, 7, comm, NULL);
		if (code != NULL)
			expect(comm, rc, code_of(code), text, "send");
		else if (rc != MCCL_SUCCESS)
			FAIL("send of %zu bytes: %s", bytes,
			    mccl_last_error(comm));
		else
			printf("rank 0: %zu bytes sent\n", bytes);
	} else {
		usleep((useconds_t)ms * 1000);
		if (code == NULL && mccl_recv(buf, bytes, MCCL_UINT8, 0, 7, comm,
		    NULL) != MCCL_SUCCESS)
			FAIL("recv: %s", mccl_last_error(comm));
	}
	/* The sender stays until the message is taken. */
	if (code == NULL && failures == 0 && mccl_barrier(comm, NULL) !=
	    MCCL_SUCCESS)
		FAIL("barrier: %s", mccl_last_error(comm));
	free(buf);
	mccl_comm_destroy(comm);
	return failures != 0;
}

/* Poll req with mccl_test alone until it completes (10 s at most). */
static mccl_result_t
poll_until_done(mccl_request_t *req, const char *what, long *polls)
{
	struct timespec t0, t;
	mccl_result_t rc;
	int done = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (*polls = 0; ; (*polls)++) {
		if ((rc = mccl_test(req, &done)) != MCCL_SUCCESS || done)
			return rc;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 10) {
			FAIL("%s: not done after %ld polls in 10 s", what, *polls);
			return MCCL_ERR_TIMEOUT;
		}
		usleep(1000);
	}
}

/*
 * mccl_test alone makes progress: rank 1 sends to rank 0, which polls its
 * receive to completion; then rank 0 polls an allreduce while rank 1 dies
 * without a word, and must see the failure.
 */
static int
mode_poll(void)
{
	enum { N = 1024 };
	mccl_request_t *req;
	mccl_comm_t *comm;
	mccl_result_t rc;
	float buf[N];
	int32_t posted = 0;
	long polls = 0;

	if ((comm = join()) == NULL)
		return 1;
	for (int i = 0; i < N; i++)
		buf[i] = my_rank == 1 ? (float)i : -1.0f;
	if (my_rank == 1) {
		if (mccl_send(buf, N, MCCL_FLOAT32, 0, 1, comm, NULL) != 0 ||
		    mccl_recv(&posted, 1, MCCL_INT32, 0, 2, comm, NULL) != 0)
			FAIL("rank 1: %s", mccl_last_error(comm));
		_exit(failures != 0);	/* dies in the middle of the job */
	}
	if ((rc = mccl_recv(buf, N, MCCL_FLOAT32, 1, 1, comm, &req)) != 0)
		FAIL("recv: %s", mccl_last_error(comm));
	else if ((rc = poll_until_done(req, "polled recv", &polls)) != 0)
		FAIL("polled recv: %s: %s", result_names[rc],
		    mccl_last_error(comm));
	else if (buf[N - 1] != (float)(N - 1))
		FAIL("polled recv: [%d] = %g", N - 1, buf[N - 1]);
	else
		printf("rank 0: polled recv done after %ld polls\n", polls);
	rc = mccl_allreduce(buf, buf, N, MCCL_FLOAT32, MCCL_SUM, comm, &req);
	posted = 1;
	if (rc == MCCL_SUCCESS && mccl_send(&posted, 1, MCCL_INT32, 1, 2, comm,
	    NULL) != MCCL_SUCCESS)
		FAIL("send: %s", mccl_last_error(comm));
	if (rc == MCCL_SUCCESS)
		rc = poll_until_done(req, "polled allreduce", &polls);
	if (rc != MCCL_ERR_PEER_FAILED)
		FAIL("polled allreduce with rank 1 dead: %s, expected "
		    "MCCL_ERR_PEER_FAILED (%s)", result_names[rc],
		    mccl_last_error(comm));
	else
		printf("rank 0: polled allreduce failed after %ld polls: %s\n",
		    polls, mccl_last_error(comm));
	mccl_comm_destroy(comm);
	return failures != 0;
}

/*
 * More allreduces at once than the submission ring holds: the library waits
 * for slots, and the engine assembles them once the late ranks come.
 */
static int
mode_ring_full(void)
{
	enum { N = 3 * 64, C = 16 };
	mccl_request_t *req[N];
	mccl_comm_t *comm;
	mccl_result_t rc;
	float *buf;
	int n;

	if ((comm = join()) == NULL)
		return 1;
	n = mccl_comm_size(comm);
	buf = mccl_alloc(comm, (size_t)N * C * sizeof(float));
	for (int i = 0; i < N * C; i++)
		buf[i] = (float)(my_rank + i / C);
	if (my_rank != 0)
		usleep(300000);
	for (int i = 0; i < N; i++)
		if ((rc = mccl_allreduce(buf + i * C, buf + i * C, C,
		    MCCL_FLOAT32, MCCL_SUM, comm, &req[i])) != MCCL_SUCCESS) {
			FAIL("allreduce %d: %s", i, mccl_last_error(comm));
			return 1;
		}
	for (int i = 0; i < N; i++) {
		checks++;
		if ((rc = mccl_wait(req[i], 30000)) != MCCL_SUCCESS)
			FAIL("wait %d: %s", i, mccl_last_error(comm));
		else if (buf[i * C + C - 1] != (float)(n * (n - 1) / 2 + n * i))
			FAIL("allreduce %d: %g, expected %d", i,
			    buf[i * C + C - 1], n * (n - 1) / 2 + n * i);
	}
	mccl_comm_destroy(comm);
	printf("rank %d: %d checks, %d failed\n", my_rank, checks, failures);
	return failures != 0;
}

static void
print_failed_at(mccl_comm_t *comm, mccl_result_t rc)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	printf("rank %d: failed_at=%lld.%03ld %s: %s\n", my_rank,
	    (long long)t.tv_sec, t.tv_nsec / 1000000, result_names[rc],
	    mccl_last_error(comm));
	fflush(stdout);
}

/* Allreduces in the ring that no other rank matches: see the modes. */
static int
mode_queued(const char *what, const char *code, const char *text)
{
	enum { N = 8, C = 1024 };
	mccl_request_t *req[N];
	mccl_comm_t *comm;
	mccl_result_t rc;
	float *buf;

	if ((comm = join()) == NULL)
		return 1;
	buf = mccl_alloc(comm, (size_t)N * C * sizeof(float));
	for (int i = 0; i < N; i++)
		if (mccl_allreduce(buf + i * C, buf + i * C, C, MCCL_FLOAT32,
		    MCCL_SUM, comm, &req[i]) != MCCL_SUCCESS) {
			FAIL("allreduce %d: %s", i, mccl_last_error(comm));
			return 1;
		}
	printf("rank %d: looping\n", my_rank);
	fflush(stdout);
	if (strcmp(what, "die") == 0)
		_exit(0);
	rc = mccl_wait(req[0], 60000);
	print_failed_at(comm, rc);
	expect(comm, rc, code_of(code), text, "queued");
	for (int i = 1; i < N; i++)	/* failed with it: each freed by its wait */
		expect(comm, mccl_wait(req[i], 1000), code_of(code), NULL,
		    "queued, the others");
	mccl_comm_destroy(comm);
	return failures != 0;
}

static int
mode_straggle(int n, int ms)
{
	mccl_comm_t *comm;
	float x[8] = { 1 };

	if ((comm = join()) == NULL)
		return 1;
	for (int i = 0; i < n && failures == 0; i++) {
		if (my_rank == mccl_comm_size(comm) - 1)
			usleep((useconds_t)ms * 1000);
		if (mccl_allreduce(x, x, 8, MCCL_FLOAT32, MCCL_MAX, comm,
		    NULL) != MCCL_SUCCESS)
			FAIL("straggle: %s", mccl_last_error(comm));
	}
	mccl_comm_destroy(comm);
	return failures != 0;
}

/* bytes of fresh memory whose pages userfaultfd must serve (it never
   does); NULL where the kernel refuses userfaultfd. */
static void *
uffd_buffer(size_t bytes)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg;
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	void *p;

	if (fd == -1 || ioctl(fd, UFFDIO_API, &api) == -1)
		return NULL;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	reg = (struct uffdio_register){ .range = { (uintptr_t)p, bytes },
	    .mode = UFFDIO_REGISTER_MODE_MISSING };
	return ioctl(fd, UFFDIO_REGISTER, &reg) == -1 ? NULL : p;
}

static int
mode_uffd(int ms)
{
	size_t count = (size_t)1 << 20;		/* 4 MiB: XMEM_MIN_BYTES */
	mccl_comm_t *comm;
	mccl_result_t rc;
	float *buf;

	buf = my_rank == 0 ? uffd_buffer(count * sizeof(float)) :
	    calloc(count, sizeof(float));
	if (buf == NULL) {
		printf("rank %d: no userfaultfd here: %s\n", my_rank,
		    strerror(errno));
		return 3;
	}
	if ((comm = join()) == NULL)
		return 1;
	rc = mccl_allreduce(buf, buf, count, MCCL_FLOAT32, MCCL_SUM, comm,
	    NULL);
	expect(comm, rc, MCCL_ERR_TIMEOUT, "rank 0", "uffd");
	printf("rank %d: %s\n", my_rank, mccl_last_error(comm));
	fflush(stdout);
	if (my_rank == 0)
		usleep((useconds_t)ms * 1000);
	mccl_comm_destroy(comm);
	if (my_rank == 0)
		munmap(buf, count * sizeof(float));
	else
		free(buf);
	return failures != 0;
}

/* ---- soak: random verified collectives ---- */

#define SOAK_MAXC	16384		/* elements a rank's block */

struct soak {
	mccl_comm_t	*comm;
	int		 n, me;
	uint64_t	 k;		/* op index: the same on every rank */
	uint64_t	 ops, elems, wrong;
	void		*send[2], *recv[2];	/* heap, mccl_alloc */
};

static uint64_t
soak_rand(uint64_t seed, uint64_t k, int which)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + k * 0xbf58476d1ce4e5b9ULL +
	    (uint64_t)which * 0x94d049bb133111ebULL;

	x ^= x >> 31;
	x *= 0xd6e9f8cc3f9bb4b5ULL;
	return x ^ (x >> 29);
}

/* What rank r puts at element i of op k: small integers, exact in both. */
static int32_t
soak_val(int r, size_t i, uint64_t k)
{
	return (int32_t)((r + 1) * (int)(i % 97 + 1) + (int)(k % 13));
}

static void
soak_put(void *b, size_t i, int fl, int32_t v)
{
	if (fl)
		((float *)b)[i] = (float)v;
	else
		((int32_t *)b)[i] = v;
}

static int32_t
soak_get(const void *b, size_t i, int fl)
{
	return fl ? (int32_t)((const float *)b)[i] : ((const int32_t *)b)[i];
}

/* One collective of the sequence, checked; -1 when it failed. */
static int
soak_one(struct soak *s, uint64_t seed)
{
	uint64_t r = soak_rand(seed, s->k, 0);
	int kind = (int)(r % 5), fl = (int)(r >> 8 & 1), pl = (int)(r >> 9 & 1);
	size_t c = 1 + (size_t)(soak_rand(seed, s->k, 1) %
	    (r >> 10 & 1 ? SOAK_MAXC : 64));
	mccl_dtype_t t = fl ? MCCL_FLOAT32 : MCCL_INT32;
	void *in = s->send[pl], *out = s->recv[pl];
	int n = s->n, me = s->me, root = (int)(s->k % (uint64_t)n);
	size_t checked = 0, bad = 0;
	mccl_result_t rc = MCCL_SUCCESS;

	switch (kind) {
	case 0:		/* allreduce: sum */
		for (size_t i = 0; i < c; i++)
			soak_put(in, i, fl, soak_val(me, i, s->k));
		rc = mccl_allreduce(in, out, c, t, MCCL_SUM, s->comm, NULL);
		for (size_t i = 0; rc == 0 && i < c; i++, checked++)
			bad += soak_get(out, i, fl) != (int32_t)(i % 97 + 1) *
			    n * (n + 1) / 2 + n * (int32_t)(s->k % 13);
		break;
	case 1:		/* broadcast from root */
		for (size_t i = 0; i < c; i++)
			soak_put(out, i, fl, me == root ?
			    soak_val(root, i, s->k) : -1);
		rc = mccl_broadcast(out, c, t, root, s->comm, NULL);
		for (size_t i = 0; rc == 0 && i < c; i++, checked++)
			bad += soak_get(out, i, fl) != soak_val(root, i, s->k);
		break;
	case 2:		/* allgather */
		for (size_t i = 0; i < c; i++)
			soak_put(in, i, fl, soak_val(me, i, s->k));
		rc = mccl_allgather(in, out, c, t, s->comm, NULL);
		for (int q = 0; rc == 0 && q < n; q++)
			for (size_t i = 0; i < c; i++, checked++)
				bad += soak_get(out, (size_t)q * c + i, fl) !=
				    soak_val(q, i, s->k);
		break;
	case 3:		/* reduce-scatter: sum of every rank's n blocks */
		for (size_t i = 0; i < (size_t)n * c; i++)
			soak_put(in, i, fl, soak_val(me, i, s->k));
		rc = mccl_reduce_scatter(in, out, c, t, MCCL_SUM, s->comm, NULL);
		for (size_t i = 0; rc == 0 && i < c; i++, checked++) {
			int32_t want = 0;

			for (int q = 0; q < n; q++)
				want += soak_val(q, (size_t)me * c + i, s->k);
			bad += soak_get(out, i, fl) != want;
		}
		break;
	default:	/* alltoall: block d of rank me goes to rank d */
		for (int d = 0; d < n; d++)
			for (size_t i = 0; i < c; i++)
				soak_put(in, (size_t)d * c + i, fl,
				    soak_val(me * n + d, i, s->k));
		rc = mccl_alltoall(in, out, c, t, s->comm, NULL);
		for (int q = 0; rc == 0 && q < n; q++)
			for (size_t i = 0; i < c; i++, checked++)
				bad += soak_get(out, (size_t)q * c + i, fl) !=
				    soak_val(q * n + me, i, s->k);
		break;
	}
	s->k++;
	if (rc != MCCL_SUCCESS) {
		printf("soak: rank %d: op %llu failed: %s: %s\n", me,
		    (unsigned long long)s->k, result_names[rc],
		    mccl_last_error(s->comm));
		return -1;
	}
	if (bad > 0)
		printf("soak: rank %d: op %llu (kind %d, %zu elements): %zu "
		    "WRONG\n", me, (unsigned long long)s->k, kind, c, bad);
	s->ops++;
	s->elems += checked;
	s->wrong += bad;
	return 0;
}

static int
mode_soak(int ms, uint64_t seed)
{
	size_t bytes;
	struct soak s = { 0 };
	struct timespec t0, t;
	mccl_result_t r;
	int32_t go = 1;
	int rc = 0;

	if ((s.comm = join()) == NULL)
		return 2;
	s.n = mccl_comm_size(s.comm);
	s.me = mccl_comm_rank(s.comm);
	bytes = (size_t)s.n * SOAK_MAXC * 4;
	s.send[0] = malloc(bytes);
	s.recv[0] = malloc(bytes);
	s.send[1] = mccl_alloc(s.comm, bytes);
	s.recv[1] = mccl_alloc(s.comm, bytes);
	if (!s.send[0] || !s.recv[0] || !s.send[1] || !s.recv[1]) {
		printf("soak: rank %d: buffers: %s\n", s.me,
		    mccl_last_error(s.comm));
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (go && rc == 0) {
		for (int i = 0; i < 8 && rc == 0; i++)
			rc = soak_one(&s, seed);
		clock_gettime(CLOCK_MONOTONIC, &t);
		go = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) /
		    1000000 < ms;		/* stop together */
		if (rc == 0 && (r = mccl_allreduce(&go, &go, 1, MCCL_INT32,
		    MCCL_MIN, s.comm, NULL)) != MCCL_SUCCESS) {
			printf("soak: rank %d: op %llu failed: %s: %s\n", s.me,
			    (unsigned long long)s.k, result_names[r],
			    mccl_last_error(s.comm));
			rc = -1;
		}
	}
	printf("soak: rank %d: %llu ops verified, %llu elements, %llu wrong\n",
	    s.me, (unsigned long long)s.ops, (unsigned long long)s.elems,
	    (unsigned long long)s.wrong);
	fflush(stdout);
	if (rc == 0)
		mccl_comm_destroy(s.comm);
	return s.wrong > 0 ? 1 : rc != 0 ? 2 : 0;
}

static int
mode_late(int ms, const char *code, const char *text)
{
	mccl_comm_t *comm;
	mccl_result_t rc;
	float x = 1;

	if ((comm = join()) == NULL)
		return 1;
	printf("rank %d: looping\n", my_rank);
	fflush(stdout);
	usleep((useconds_t)ms * 1000);
	rc = mccl_allreduce(&x, &x, 1, MCCL_FLOAT32, MCCL_SUM, comm, NULL);
	print_failed_at(comm, rc);
	expect(comm, rc, code_of(code), text, "late");
	mccl_comm_destroy(comm);
	return failures != 0;
}

static int
mode_recv_wait(const char *code, const char *text)
{
	mccl_comm_t *comm;
	mccl_result_t rc;
	float x = 0;

	if ((comm = join()) == NULL)
		return 1;
	printf("rank %d: looping\n", my_rank);
	fflush(stdout);
	if (my_rank == 0)
		sleep(60);
	else {
		rc = mccl_recv(&x, 1, MCCL_FLOAT32, 0, 5, comm, NULL);
		print_failed_at(comm, rc);
		expect(comm, rc, code_of(code), text, "recv");
	}
	mccl_comm_destroy(comm);
	return failures != 0;
}

static int
mode_scratch(size_t bytes, const char *code, const char *text, int ms)
{
	mccl_comm_t *comm;
	mccl_result_t rc;
	size_t block, n;
	float *in, *out;

	if ((comm = join()) == NULL)
		return 1;
	n = (size_t)mccl_comm_size(comm);
	block = bytes / sizeof(float) / n;
	in = mccl_alloc(comm, block * n * sizeof(float));
	out = mccl_alloc(comm, block * sizeof(float) + 1);
	if (in == NULL || out == NULL) {
		FAIL("mccl_alloc: %s", mccl_last_error(comm));
		return 1;
	}
	for (size_t i = 0; i < block * n; i++)
		in[i] = (float)(i / block);
	rc = mccl_reduce_scatter(in, out, block, MCCL_FLOAT32, MCCL_SUM, comm,
	    NULL);
	expect(comm, rc, code_of(code), text, "reduce_scatter");
	for (size_t i = 0; rc == MCCL_SUCCESS && i < block; i++)
		if (out[i] != (float)(my_rank * (int)n)) {
			FAIL("reduce_scatter: element %zu is %g, expected %d", i,
			    out[i], my_rank * (int)n);
			break;
		}
	usleep((useconds_t)ms * 1000);
	mccl_comm_destroy(comm);
	return failures != 0;
}

int
main(int argc, char **argv)
{
	const char *r = getenv("MCCL_RANK");

	my_rank = r ? atoi(r) : -1;
	/* a rank the daemon may not read (tests/integration/security.sh) */
	if (getenv("MCCL_TEST_NODUMP") != NULL &&
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1)
		FAIL("PR_SET_DUMPABLE: %s", strerror(errno));
	if (argc >= 2 && strcmp(argv[1], "collectives") == 0)
		return mode_collectives();
	if (argc == 4 && strcmp(argv[1], "expect-init") == 0)
		return mode_expect_init(argv[2], argv[3]);
	if (argc == 2 && strcmp(argv[1], "p2p") == 0)
		return mode_p2p();
	if (argc == 2 && strcmp(argv[1], "p2p-leave") == 0)
		return mode_p2p_leave();
	if (argc == 2 && strcmp(argv[1], "api") == 0)
		return mode_api();
	if (argc == 2 && strcmp(argv[1], "mismatch") == 0)
		return mode_mismatch();
	if (argc == 3 && strcmp(argv[1], "mismatch-coll") == 0)
		return mode_mismatch_coll(atoi(argv[2]) % 3);
	if (argc == 3 && strcmp(argv[1], "mismatch-v") == 0)
		return mode_mismatch_v(atoi(argv[2]));
	if (argc == 2 && strcmp(argv[1], "abort") == 0)
		return mode_abort();
	if (argc == 3 && strcmp(argv[1], "steady") == 0)
		return mode_steady(atoi(argv[2]));
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "loop") == 0)
		return mode_loop(argv[2], argv[3], argc == 5 ?
		    (size_t)strtoull(argv[4], NULL, 10) : (size_t)1 << 20);
	if (argc == 2 && strcmp(argv[1], "big") == 0)
		return mode_big();
	if (argc == 2 && strcmp(argv[1], "large") == 0)
		return mode_large();
	if (argc == 3 && strcmp(argv[1], "abort-many") == 0)
		return mode_abort_many(atoi(argv[2]));
	if (argc == 3 && strcmp(argv[1], "xmem-unmap") == 0)
		return mode_xmem_unmap(argv[2]);
	if (argc == 2 && strcmp(argv[1], "xmem-unmap-last") == 0)
		return mode_xmem_unmap_last();
	if (argc == 2 && strcmp(argv[1], "queued-heap") == 0)
		return mode_queued_heap();
	if (argc == 3 && strcmp(argv[1], "idle") == 0)
		return mode_idle(atoi(argv[2]));
	if (argc == 3 && strcmp(argv[1], "hold") == 0)
		return mode_hold(atoi(argv[2]), 0);
	if (argc == 4 && strcmp(argv[1], "hold") == 0 &&
	    strcmp(argv[3], "allreduce") == 0)
		return mode_hold(atoi(argv[2]), 1);
	if (argc == 2 && strcmp(argv[1], "poll") == 0)
		return mode_poll();
	if (argc == 2 && strcmp(argv[1], "ring-full") == 0)
		return mode_ring_full();
	if (argc == 3 && strcmp(argv[1], "queued") == 0)
		return mode_queued(argv[2], NULL, NULL);
	if (argc == 5 && strcmp(argv[1], "queued") == 0)
		return mode_queued(argv[2], argv[3], argv[4]);
	if (argc == 4 && strcmp(argv[1], "recv-wait") == 0)
		return mode_recv_wait(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "soak") == 0)
		return mode_soak(atoi(argv[2]), strtoull(argv[3], NULL, 10));
	if (argc == 3 && strcmp(argv[1], "uffd") == 0)
		return mode_uffd(atoi(argv[2]));
	if (argc == 4 && strcmp(argv[1], "straggle") == 0)
		return mode_straggle(atoi(argv[2]), atoi(argv[3]));
	if (argc == 5 && strcmp(argv[1], "late") == 0)
		return mode_late(atoi(argv[2]), argv[3], argv[4]);
	if (argc == 6 && strcmp(argv[1], "scratch") == 0)
		return mode_scratch(strtoul(argv[2], NULL, 10), argv[3],
		    argv[4], atoi(argv[5]));
	if (argc == 4 && strcmp(argv[1], "send-hold") == 0)
		return mode_send_kept(strtoul(argv[2], NULL, 10), atoi(argv[3]),
		    NULL, NULL);
	if (argc == 5 && strcmp(argv[1], "send-refused") == 0)
		return mode_send_kept(strtoul(argv[2], NULL, 10), 100, argv[3],
		    argv[4]);
	fprintf(stderr, "usage: mccl-test collectives | expect-init CODE TEXT | "
	    "hold MS\n");
	return 2;
}
