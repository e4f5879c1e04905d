/*
 * algo.c: the algorithm an allreduce between nodes runs.  A requested one
 * (MCCL_ALGO, the daemon's "algo") is run as asked; AUTO picks by the
 * bytes and the node count: the latency-bound algorithms up to small_bytes
 * (the one-round direct exchange where it pays, while what each node sends
 * in it stays small; else recursive doubling), the ring above.  Every node
 * of a job computes the same from the same numbers; the operation header
 * carries the choice, so a node that chose otherwise fails the op naming
 * both.
 */
#include "engine/engine.h"
#include "engine/algo.h"

#define DIRECT_BYTES	((size_t)32 << 10)	/* AUTO: most a node sends in
						   the one-round exchange */

/*
 * Whether the one-round exchange beats recursive doubling on n nodes, by
 * a cost model measured over TCP on the 16-core machine (README): a round
 * of doubling costs one latency L, the one round of the exchange L plus
 * about 7/12 L for every message a node sends in it, as one thread sends
 * them one after another.  Doubling takes log2(p) rounds on the largest
 * power of two p <= n, two more when it folds the rest in.  So the
 * exchange wins on 3, 5 and 6 nodes, doubling on 2 (a tie), 4, 7 and up.
 */
static int
direct_pays(uint32_t n)
{
	uint32_t pow2 = 1, rounds = 0;

	while (pow2 * 2 <= n) {
		pow2 *= 2;
		rounds++;
	}
	if (pow2 != n)
		rounds += 2;
	return n - 1 <= PEER_LANES_MAX && 7 * (n - 1) < 12 * (rounds - 1);
}

/* The most bytes per rank the direct exchange takes on n nodes (0: none). */
static size_t
direct_up_to(uint32_t n, size_t small_bytes)
{
	size_t most;

	if (n < 2 || !direct_pays(n))
		return 0;
	most = DIRECT_BYTES / (n - 1);
	return most < small_bytes ? most : small_bytes;
}

int
algo_choose(int requested, uint32_t nnodes, size_t bytes, size_t small_bytes)
{
	if (requested != ALGO_AUTO)
		return requested;
	if (bytes > small_bytes)
		return ALGO_RING;
	if (direct_up_to(nnodes, small_bytes) > 0 &&
	    bytes <= direct_up_to(nnodes, small_bytes))
		return ALGO_DIRECT;
	return ALGO_DOUBLING;
}

/*
 * AUTO on nnodes nodes as ranges of bytes, smallest first, each up to its
 * up_to; the number of ranges (none on one node: nothing crosses).
 */
size_t
algo_auto_ranges(uint32_t nnodes, size_t small_bytes,
    struct algo_range *ranges, size_t max)
{
	size_t direct = direct_up_to(nnodes, small_bytes), n = 0;

	if (nnodes < 2 || max < 3)
		return 0;
	if (direct > 0)
		ranges[n++] = (struct algo_range){ ALGO_DIRECT, direct };
	if (direct < small_bytes)
		ranges[n++] = (struct algo_range){ ALGO_DOUBLING, small_bytes };
	ranges[n++] = (struct algo_range){ ALGO_RING, SIZE_MAX };
	return n;
}
