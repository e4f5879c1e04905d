/*
 * lat.c: latency of small MCCL allreduces, for the benchmark harness.
 * mccl-perf reports the mean over its iterations; latency needs the
 * distribution.  Each rank (MCCL_SOCKET, MCCL_JOB, MCCL_RANK, MCCL_NRANKS
 * from the environment) times every one of ITERS blocking out-of-place
 * float32 sum allreduces on buffers from mccl_alloc; then the ranks take
 * the slowest rank's time of each iteration, and rank 0 prints the median,
 * p99, mean and minimum in the line format the harness's report reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mccl.h"

static void __attribute__((noreturn))
lat_fail(const mccl_comm_t *comm, const char *call, mccl_result_t r)
{
	fprintf(stderr, "lat: %s: %s: %s\n", call, mccl_strerror(r),
	    mccl_last_error(comm));
	exit(1);
}

static double
lat_now_us(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int
lat_cmp(const void *a, const void *b)
{
	double	 x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double
lat_percentile(const double *v, int n, double p)
{
	int	 k = (int)(p / 100 * n + 0.999999) - 1;

	return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static void
lat_report(mccl_comm_t *comm, double *t, int iters, size_t bytes)
{
	double	 sum = 0;
	int	 i;

	qsort(t, (size_t)iters, sizeof(*t), lat_cmp);
	for (i = 0; i < iters; i++)
		sum += t[i];
	printf("lat system=mccl ranks=%d bytes=%zu iters=%d median_us=%.2f "
	    "p99_us=%.2f mean_us=%.2f min_us=%.2f\n", mccl_comm_size(comm),
	    bytes, iters, lat_percentile(t, iters, 50),
	    lat_percentile(t, iters, 99), sum / iters, t[0]);
}

int
main(int argc, char **argv)
{
	mccl_comm_t	*comm;
	mccl_result_t	 r;
	float		*src, *dst;
	double		*t, t0;
	size_t		 bytes = 8, count;
	int		 ch, iters = 1000, warmup = 100, i;

	while ((ch = getopt(argc, argv, "b:n:w:")) != -1) {
		switch (ch) {
		case 'b':
			bytes = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			iters = atoi(optarg);
			break;
		case 'w':
			warmup = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: lat [-b bytes] [-n iters] "
			    "[-w warmup]\n");
			return 2;
		}
	}
	if ((count = bytes / sizeof(float)) == 0 || iters <= 0 || warmup < 0) {
		fprintf(stderr, "lat: bad -b, -n or -w\n");
		return 2;
	}
	if ((r = mccl_comm_init_env(&comm)) != MCCL_SUCCESS)
		lat_fail(NULL, "mccl_comm_init_env", r);
	if ((src = mccl_alloc(comm, count * sizeof(float))) == NULL ||
	    (dst = mccl_alloc(comm, count * sizeof(float))) == NULL)
		lat_fail(comm, "mccl_alloc", MCCL_ERR_NO_MEMORY);
	if ((t = calloc((size_t)iters, sizeof(*t))) == NULL)
		lat_fail(comm, "calloc", MCCL_ERR_NO_MEMORY);
	for (i = 0; i < (int)count; i++)
		src[i] = 1;
	for (i = 0; i < warmup; i++)
		if ((r = mccl_allreduce(src, dst, count, MCCL_FLOAT32, MCCL_SUM,
		    comm, NULL)) != MCCL_SUCCESS)
			lat_fail(comm, "mccl_allreduce", r);
	if ((r = mccl_barrier(comm, NULL)) != MCCL_SUCCESS)
		lat_fail(comm, "mccl_barrier", r);
	for (i = 0; i < iters; i++) {
		t0 = lat_now_us();
		if ((r = mccl_allreduce(src, dst, count, MCCL_FLOAT32, MCCL_SUM,
		    comm, NULL)) != MCCL_SUCCESS)
			lat_fail(comm, "mccl_allreduce", r);
		t[i] = lat_now_us() - t0;
	}
	/* Each iteration is as slow as its slowest rank. */
	if ((r = mccl_allreduce(t, t, (size_t)iters, MCCL_FLOAT64, MCCL_MAX,
	    comm, NULL)) != MCCL_SUCCESS)
		lat_fail(comm, "mccl_allreduce(times)", r);
	if (mccl_comm_rank(comm) == 0)
		lat_report(comm, t, iters, count * sizeof(float));
	free(t);
	mccl_free(comm, dst);
	mccl_free(comm, src);
	if ((r = mccl_comm_destroy(comm)) != MCCL_SUCCESS)
		lat_fail(NULL, "mccl_comm_destroy", r);
	return 0;
}
