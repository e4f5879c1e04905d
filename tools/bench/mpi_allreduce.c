/*
 * mpi_allreduce.c: MPI_Allreduce bandwidth, the Open MPI side of the
 * harness's bandwidth cases, in the table mccl-perf and nccl-tests print:
 * for each size from MINB to MAXB (doubling), ITERS out-of-place float32
 * sum allreduces (at most 5 from 8 MiB), timed as one span whose slowest
 * rank counts, and every element of the last result checked.  Rank 0 also
 * prints where each rank ran ("# placement HOST..."), so that the harness
 * can refuse a run whose ranks were not spread as asked.
 * Usage: mpi_allreduce MINB MAXB ITERS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

/* Rank r's element i: small integers, so every sum is exact. */
static float
value(int r, size_t i)
{
	return (float)((r + 1) * (int)(i % 7 + 1));
}

static long
count_wrong(const float *got, size_t count, int nranks)
{
	long wrong = 0;

	for (size_t i = 0; i < count; i++)
		if (got[i] != (float)(nranks * (nranks + 1) / 2) *
		    (float)(i % 7 + 1))
			wrong++;
	return wrong;
}

static double
time_allreduce(const float *src, float *dst, size_t count, int iters)
{
	double t0, mine, slowest;

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int k = 0; k < iters; k++)
		MPI_Allreduce(src, dst, (int)count, MPI_FLOAT, MPI_SUM,
		    MPI_COMM_WORLD);
	mine = (MPI_Wtime() - t0) / iters;
	MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return slowest;
}

int
main(int argc, char **argv)
{
	size_t minb = 0, maxb = 0;
	float *src, *dst;
	int rank, n, iters = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (argc == 4) {
		minb = strtoull(argv[1], NULL, 0);
		maxb = strtoull(argv[2], NULL, 0);
		iters = atoi(argv[3]);
	}
	if (minb < 4 || maxb < minb || maxb / 4 > (size_t)0x7fffffff ||
	    iters <= 0) {
		if (rank == 0)
			fprintf(stderr, "usage: mpi_allreduce MINB MAXB ITERS "
			    "(MINB >= 4)\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
		return 2;
	}
	if ((src = malloc(maxb)) == NULL || (dst = malloc(maxb)) == NULL)
		MPI_Abort(MPI_COMM_WORLD, 1);
	placement_print(rank, n);
	if (rank == 0)
		printf("#%11s %10s %10s %8s %8s %6s\n", "size", "count",
		    "time(us)", "algbw", "busbw", "wrong");
	for (size_t b = minb; b <= maxb; b *= 2) {
		size_t count = b / 4;
		int it = b >= (8u << 20) && iters > 5 ? 5 : iters;
		double t, alg;
		long wrong;

		for (size_t i = 0; i < count; i++)
			src[i] = value(rank, i);
		MPI_Allreduce(src, dst, (int)count, MPI_FLOAT, MPI_SUM,
		    MPI_COMM_WORLD);		/* warm-up */
		t = time_allreduce(src, dst, count, it);
		wrong = count_wrong(dst, count, n);
		alg = (double)b / t / 1e9;
		if (rank == 0)
			printf("%12zu %10zu %10.1f %8.3f %8.3f %6ld\n", b, count,
			    t * 1e6, alg, alg * 2 * (n - 1) / n, wrong);
	}
	free(src);
	free(dst);
	MPI_Finalize();
	return 0;
}
