/*
 * measure.c: running one collective: started and waited for with -t (or
 * as parts with -P), timed over the iterations, checked against the
 * pattern, agreed on by every rank; the sizes; progress on a terminal.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

/*
 * Every operation is started with a request and waited for with -t.  The
 * caller passes the request by address: it is set by the start call, which
 * must have run before it is read.
 */
static void
complete(const struct bench *b, const char *call, mccl_result_t r,
    mccl_request_t *const *reqp)
{
	mccl_request_t	*req = *reqp;
	char	 what[64];

	if (r != MCCL_SUCCESS)
		die_mccl(b->comm, call, r);
	r = mccl_wait(req, b->o->timeout_ms);
	if (r != MCCL_SUCCESS) {
		snprintf(what, sizeof(what), "mccl_wait(%s)", call);
		die_mccl(b->comm, what, r);
	}
}

/*
 * -P: the buffer goes as consecutive allreduces of PARTBYTES each, the last
 * taking the remainder, all started before the first is waited for: the
 * way the torch backend sends a large tensor, each part in memory of its
 * own, so the daemon may overlap one part's end with the next one's start.
 */
static void
run_parts(const struct bench *b, size_t count, int inplace)
{
	mccl_request_t	*reqs[PARTS_MAX];
	const uint8_t	*src = inplace ? b->recvbuf : b->sendbuf;
	uint8_t		*dst = b->recvbuf;
	size_t		 step = b->o->partbytes / b->esize;
	size_t		 nparts = count / step, i, off, n;
	mccl_result_t	 r;

	for (i = 0; i < nparts; i++) {
		off = i * step;
		n = i + 1 < nparts ? step : count - off;
		r = mccl_allreduce(src + off * b->esize, dst + off * b->esize,
		    n, b->o->dtype->dtype, b->o->op->op, b->comm, &reqs[i]);
		if (r != MCCL_SUCCESS)
			die_mccl(b->comm, "mccl_allreduce", r);
	}
	for (i = 0; i < nparts; i++)
		complete(b, "mccl_allreduce", MCCL_SUCCESS, &reqs[i]);
}

static void
run_once(const struct bench *b, size_t count, int inplace)
{
	mccl_request_t	*req = NULL;
	mccl_result_t	 r;

	if (b->o->partbytes != 0 && count >= 2 * (b->o->partbytes / b->esize)) {
		run_parts(b, count, inplace);
		return;
	}
	r = b->o->coll->start(b, count, inplace, &req);
	complete(b, b->o->coll->call, r, &req);
}

static void
barrier(const struct bench *b)
{
	mccl_request_t	*req = NULL;
	mccl_result_t	 r;

	r = mccl_barrier(b->comm, &req);
	complete(b, "mccl_barrier", r, &req);
}

void
allreduce(const struct bench *b, void *buf, size_t count, mccl_dtype_t t,
    mccl_op_t op)
{
	mccl_request_t	*req = NULL;
	mccl_result_t	 r;

	r = mccl_allreduce(buf, buf, count, t, op, b->comm, &req);
	complete(b, "mccl_allreduce", r, &req);
}

/* ---- measuring ---- */

double
now_us(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int
variant_runs(const struct bench *b, int inplace)
{
	return inplace ? b->o->coll->has_ip : b->o->coll->has_oop;
}

/* -C 1: the CPU time of the process, all its threads, in microseconds. */
static double
cpu_us(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* -z 0: n operations started, then waited for in order. */
static void
run_queued(const struct bench *b, size_t count, int inplace, int n)
{
	mccl_request_t	**reqs = calloc((size_t)n, sizeof(*reqs));
	mccl_result_t	 r;
	int		 i;

	if (reqs == NULL)
		die_mccl(b->comm, "calloc", MCCL_ERR_NO_MEMORY);
	for (i = 0; i < n; i++)
		if ((r = b->o->coll->start(b, count, inplace, &reqs[i])) !=
		    MCCL_SUCCESS)
			die_mccl(b->comm, b->o->coll->call, r);
	for (i = 0; i < n; i++)
		complete(b, b->o->coll->call, MCCL_SUCCESS, &reqs[i]);
	free(reqs);
}

/* This rank's average time of one operation, in microseconds. */
static double
time_variant(const struct bench *b, size_t count, int inplace)
{
	double	(*clock)(void) = b->o->cputime ? cpu_us : now_us;
	double	 t0;
	int	 i;

	for (i = 0; i < b->o->warmup; i++)
		run_once(b, count, inplace);
	barrier(b);
	t0 = clock();
	if (b->o->blocking)
		for (i = 0; i < b->o->iters; i++)
			run_once(b, count, inplace);
	else
		run_queued(b, count, inplace, b->o->iters);
	return (clock() - t0) / b->o->iters;
}

/* Every rank's t[2] becomes the one -a asks for. */
static void
times_agree(const struct bench *b, double *t)
{
	mccl_request_t	*req = NULL;
	mccl_result_t	 r;

	switch (b->o->average) {
	case AVERAGE_RANK0:
		r = mccl_broadcast(t, 2, MCCL_FLOAT64, 0, b->comm, &req);
		complete(b, "mccl_broadcast", r, &req);
		break;
	case AVERAGE_MEAN:
		allreduce(b, t, 2, MCCL_FLOAT64, MCCL_AVG);
		break;
	case AVERAGE_MIN:
		allreduce(b, t, 2, MCCL_FLOAT64, MCCL_MIN);
		break;
	default:
		allreduce(b, t, 2, MCCL_FLOAT64, MCCL_MAX);
	}
}

static uint64_t
check_variant(const struct bench *b, size_t count, int inplace)
{
	struct layout l;

	b->o->coll->layout(b, count, inplace, &l);
	if (!inplace)
		memset(b->recvbuf, SENTINEL, count * b->esize);
	pattern_fill(b, l.send, l.scount);
	run_once(b, count, inplace);
	return pattern_wrong(b, l.recv, l.rcount, count);
}

static void
result_set(const struct bench *b, struct result *r, size_t bytes,
    double time_us, uint64_t wrong)
{
	r->time_us = time_us;
	r->algbw = time_us > 0 ? bytes / time_us / 1e3 : 0;
	r->busbw = r->algbw * b->o->coll->busfactor(b->nranks);
	r->wrong = wrong;
}

void
measure(const struct bench *b, size_t count, struct row *row)
{
	double		 t[2] = { 0, 0 };
	uint64_t	 wrong[2] = { 0, 0 };
	int		 v;

	for (v = 0; v < 2; v++) {
		if (!variant_runs(b, v))
			continue;
		t[v] = time_variant(b, count, v);
		if (b->checked)
			wrong[v] = check_variant(b, count, v);
	}
	/* All ranks report the time -a names and the total wrong. */
	times_agree(b, t);
	if (b->checked)
		allreduce(b, wrong, 2, MCCL_UINT64, MCCL_SUM);
	row->count = count;
	row->bytes = count * b->esize;
	for (v = 0; v < 2; v++) {
		row->res[v].ran = variant_runs(b, v);
		result_set(b, &row->res[v], row->bytes, t[v], wrong[v]);
	}
}

/* Counts of the rows: sizes rounded down to whole elements, no repeats. */
int
sizes_next(struct sizes *it, size_t *count)
{
	const struct opts	*o = it->b->o;
	size_t			 c;

	if (!o->coll->sized) {
		*count = 0;
		return it->done++ == 0;
	}
	while (it->next <= o->maxbytes) {
		c = it->next / it->b->esize;
		if (o->coll->per_rank)	/* whole blocks for every rank */
			c -= c % (size_t)it->b->nranks;
		if (o->stepbytes != 0)
			it->next += o->stepbytes;
		else
			it->next *= o->factor;
		if (c > 0 && c != it->last) {
			it->last = c;
			*count = c;
			return 1;
		}
	}
	return 0;
}

void
sizes_init(struct sizes *it, const struct bench *b)
{
	memset(it, 0, sizeof(*it));
	it->b = b;
	it->next = b->o->minbytes;
}

/* ---- progress ---- */

static void
human_size(char *buf, size_t len, size_t bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double			 v = (double)bytes;
	size_t			 u = 0;

	while (v >= 1024 && u + 1 < nitems(units)) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.4g %s", v, units[u]);
}

void
progress_show(struct bench *b, size_t k, size_t n, size_t bytes)
{
	char	 h[32];

	if (!b->progress || now_us() - b->start_us < PROGRESS_AFTER_US)
		return;
	human_size(h, sizeof(h), bytes);
	fprintf(stderr, "\r\033[K[size %zu/%zu] %s ...", k, n, h);
	b->progress_shown = 1;
}

void
progress_clear(struct bench *b)
{
	if (b->progress_shown)
		fputs("\r\033[K", stderr);
	b->progress_shown = 0;
}
