/*
 * algo.h: which algorithm a collective runs between nodes.  AUTO is one
 * rule, in algo.c: the candidate the cost model predicts fastest, from the
 * node count, the bytes, and the link cost the job's nodes agreed on at
 * formation.  ring.c and allreduce.c run what it picks; mcclctl job shows it as size
 * ranges with their predicted times.
 */
#ifndef MCCL_ALGO_H
#define MCCL_ALGO_H

#include <stddef.h>
#include <stdint.h>

/*
 * What a step between nodes costs: a message's latency, and the time per
 * byte on the wire and per byte reduced.  Each node estimates its own
 * (control/linkcost.c); a job runs on the coordinator's worst of them, so
 * every node of the job computes the same choices.
 */
struct link_cost {
	uint32_t	alpha_ns;	/* one message's latency */
	uint32_t	beta_ps;	/* per byte sent by the ring allreduce, in
					   picoseconds (its lanes, side by side) */
	uint32_t	gamma_ps;	/* per byte reduced, picoseconds */
	uint32_t	beta_pair_ps;	/* per byte sent by the others, one
					   stream at a time; 0: beta_ps */
};

/* Until a node has measured its own: 25 us, 10 Gbit/s, 4 GB/s reduced. */
#define LINK_ALPHA_NS_DEFAULT	25000
#define LINK_BETA_PS_DEFAULT	800
#define LINK_GAMMA_PS_DEFAULT	250

/*
 * A lane (one connection each way, one thread) fills a link of this many
 * picoseconds per byte or slower (2.5 Gbit/s) on any host measured: on the
 * 2-core machine at 1 Gbit/s one lane sent 0.990-0.995 of the link where
 * two, contending for the same link and cores, sent 0.980-0.983.
 */
#define LANE_FILL_PS		3200

struct algo_range {
	int	algo;		/* enum algo_type */
	size_t	up_to;		/* bytes per rank, inclusive; SIZE_MAX: above */
	size_t	at_bytes;	/* up_to, or 1 GiB past the last */
	double	at_ns;		/* the time predicted there */
};

#define ALGO_RANGES_MAX	8

int	algo_runs_for(int coll, int algo);
double	algo_predict_ns(int coll, int algo, uint32_t nnodes, size_t bytes,
	    int narrowed, const struct link_cost *);
int	algo_choose(int coll, int requested, uint32_t nnodes, size_t bytes,
	    int narrowed, const struct link_cost *);
size_t	algo_auto_ranges(int coll, uint32_t nnodes, const struct link_cost *,
	    struct algo_range *, size_t max);
uint32_t algo_lanes(const struct link_cost *, uint32_t most);

#endif
