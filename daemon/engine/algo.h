/*
 * algo.h: which inter-node allreduce algorithm an operation runs.  The one
 * rule AUTO stands for lives in algo.c; ring.c runs what it picks, and
 * mcclctl job shows it as size ranges for the job's node count.
 */
#ifndef MCCL_ALGO_H
#define MCCL_ALGO_H

#include <stddef.h>
#include <stdint.h>

#define ALGO_SMALL_BYTES	65536	/* AUTO: latency-bound algorithms up to */

struct algo_range {
	int	algo;		/* enum algo_type */
	size_t	up_to;		/* bytes per rank, inclusive; SIZE_MAX: above */
};

int	algo_choose(int requested, uint32_t nnodes, size_t bytes,
	    size_t small_bytes);
size_t	algo_auto_ranges(uint32_t nnodes, size_t small_bytes,
	    struct algo_range *ranges, size_t max);

#endif
