/*
 * placement.h: where each rank of an MPI baseline ran.  Every rank sends
 * rank 0 its host name (the harness gives each host namespace a host name
 * of its own), and rank 0 prints "# placement NAME..." in rank order.
 */
#ifndef PLACEMENT_H
#define PLACEMENT_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define PLACEMENT_NAME	64

static void
placement_print(int rank, int nranks)
{
	char mine[PLACEMENT_NAME] = "", *all = NULL;

	if (gethostname(mine, sizeof(mine) - 1) == -1)
		snprintf(mine, sizeof(mine), "unknown");
	if (rank == 0 && (all = calloc((size_t)nranks, PLACEMENT_NAME)) ==
	    NULL)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Gather(mine, PLACEMENT_NAME, MPI_CHAR, all, PLACEMENT_NAME,
	    MPI_CHAR, 0, MPI_COMM_WORLD);
	if (rank != 0)
		return;
	printf("# ranks %d\n# placement", nranks);
	for (int r = 0; r < nranks; r++)
		printf(" %s", all + (size_t)r * PLACEMENT_NAME);
	printf("\n");
	fflush(stdout);
	free(all);
}

#endif
