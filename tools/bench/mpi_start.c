/*
 * mpi_start.c: how long an Open MPI job takes to start, the MPI side of
 * the scale case's job start: each rank notes the wall clock before
 * MPI_Init and after its first 8-byte MPI_Allreduce, and prints
 * "# start RANK T0 T1" (seconds since the epoch), as start_time.py does.
 * mpirun's own launch (its agent reaching every host) comes before T0.
 * Then rank 0 prints where each rank ran (placement.h).
 * Usage: mpi_start
 */
#include <sys/time.h>

#include <mpi.h>
#include <stdio.h>

#include "placement.h"

static double
wall(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

int
main(int argc, char **argv)
{
	double t0 = wall(), t1;
	float one[2] = { 1, 1 }, sum[2];
	int rank, n;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	MPI_Allreduce(one, sum, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	t1 = wall();
	if (sum[0] != (float)n) {
		fprintf(stderr, "rank %d: allreduce gave %g, not %d\n", rank,
		    (double)sum[0], n);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	printf("# start %d %.6f %.6f\n", rank, t0, t1);
	fflush(stdout);
	placement_print(rank, n);
	MPI_Finalize();
	return 0;
}
