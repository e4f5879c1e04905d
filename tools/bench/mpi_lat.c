/*
 * mpi_lat.c: latency of small MPI_Allreduce calls, the Open MPI side of the
 * harness's latency case, timed exactly as lat.c times MCCL: every one of
 * ITERS out-of-place float32 sum allreduces is timed, each iteration counts
 * as its slowest rank, and rank 0 prints median, p99, mean and minimum.
 * Rank 0 also prints where each rank ran (placement.h).
 * Usage: mpi_lat [BYTES [ITERS [WARMUP]]] (default 8 1000 100).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "placement.h"

static int
mpilat_cmp(const void *a, const void *b)
{
	double	 x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double
mpilat_percentile(const double *v, int n, double p)
{
	int	 k = (int)(p / 100 * n + 0.999999) - 1;

	return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

int
main(int argc, char **argv)
{
	float	 src[1024], dst[1024];
	double	*t, *tmax, t0, sum = 0;
	int	 rank, n, bytes, iters, warmup, count, i;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	bytes = argc > 1 ? atoi(argv[1]) : 8;
	iters = argc > 2 ? atoi(argv[2]) : 1000;
	warmup = argc > 3 ? atoi(argv[3]) : 100;
	count = bytes / (int)sizeof(float);
	if (count <= 0 || count > 1024 || iters <= 0 || warmup < 0) {
		if (rank == 0)
			fprintf(stderr, "usage: mpi_lat [BYTES [ITERS "
			    "[WARMUP]]] (BYTES 4 to 4096)\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	t = calloc((size_t)iters, sizeof(*t));
	tmax = calloc((size_t)iters, sizeof(*tmax));
	if (t == NULL || tmax == NULL)
		MPI_Abort(MPI_COMM_WORLD, 1);
	placement_print(rank, n);
	for (i = 0; i < count; i++)
		src[i] = 1;
	for (i = 0; i < warmup; i++)
		MPI_Allreduce(src, dst, count, MPI_FLOAT, MPI_SUM,
		    MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	for (i = 0; i < iters; i++) {
		t0 = MPI_Wtime();
		MPI_Allreduce(src, dst, count, MPI_FLOAT, MPI_SUM,
		    MPI_COMM_WORLD);
		t[i] = (MPI_Wtime() - t0) * 1e6;
	}
	MPI_Allreduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0) {
		qsort(tmax, (size_t)iters, sizeof(*tmax), mpilat_cmp);
		for (i = 0; i < iters; i++)
			sum += tmax[i];
		printf("lat system=ompi ranks=%d bytes=%d iters=%d "
		    "median_us=%.2f p99_us=%.2f mean_us=%.2f min_us=%.2f\n",
		    n, count * (int)sizeof(float), iters,
		    mpilat_percentile(tmax, iters, 50),
		    mpilat_percentile(tmax, iters, 99), sum / iters, tmax[0]);
	}
	free(t);
	free(tmax);
	MPI_Finalize();
	return 0;
}
