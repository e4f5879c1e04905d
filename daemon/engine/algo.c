/*
 * algo.c: the algorithm a collective runs between nodes.  A requested one
 * (MCCL_ALGO, the daemon's "algo") runs as asked where the collective has
 * it; otherwise the cost model below picks the candidate it predicts
 * fastest.  Every node of a job computes the same choice from the same
 * numbers (the node count, the bytes, the job's agreed link cost); the
 * operation header carries it, so a node that chose otherwise fails the op
 * naming both.
 *
 * The model, per algorithm on p nodes of n bytes each: alpha a message's
 * latency, beta the time per byte sent (the ring allreduce's own, on its
 * lanes side by side, or b, every other algorithm's, one stream at a
 * time; each fitted to what ran), gamma per byte reduced; q the
 * largest power of two <= p, r = log2 q, f = 1 where p > q (the power-of-
 * two algorithms fold the other nodes in first and hand them the result
 * last: two more whole-buffer steps).
 *
 *   ring          2(p-1) alpha + 2(p-1)/p n beta  (reduction overlaps the
 *                 link: it runs while the next chunk is on the wire; on
 *                 a 16-bit wire, "narrowed", half the bytes cross, the
 *                 conversions overlapping the link too: only the ring
 *                 narrows, so a wire asked for moves AUTO toward it)
 *   doubling      (r+2f) (alpha + n b) + (r+f) n gamma
 *   rabenseifner  2(r+f) alpha + (2(q-1)/q + 2f) n b
 *                 + ((q-1)/q + f) n gamma
 *   direct        k alpha + (p-1) 7/12 alpha + (p-1) n (b + gamma),
 *                 k the rounds of PEER_LANES_MAX peers: one thread sends
 *                 its messages one after another, each about 7/12 alpha
 *                 (measured over TCP on the 16-core machine)
 *   chain (broadcast's ring)
 *                 (p-1) alpha + (p-2) c b + n b + 2(p-2) 7/12 alpha,
 *                 c = min(n, the pipeline chunk): the first chunk's way
 *                 down the chain, then the rest behind it; the last term
 *                 is the headers a chain sends and checks beyond its data
 *   tree          d (alpha + n b) + 2d alpha, d = ceil(log2 p): the
 *                 root sends d times; then one confirmation up the tree
 *                 and one down, so that no node returns before all agree
 *
 * Doubles: on one build every node computes the same bits (ISO C, no
 * contraction), and the header check catches any node that did not.
 */
#include "engine/engine.h"
#include "engine/algo.h"

#define PIPE_CHUNK_BYTES	((double)(1 << 20))	/* chunk_bytes' default */
#define SEND_COST		(7.0 / 12.0)	/* of alpha, per extra message */
#define LAST_SHOWN_BYTES	((size_t)1 << 30) /* the open range's example */

static const int allreduce_algos[] = { ALGO_RING, ALGO_DOUBLING,
    ALGO_RABENSEIFNER, ALGO_DIRECT, 0 };
static const int broadcast_algos[] = { ALGO_RING, ALGO_TREE, 0 };

/* The candidates of a collective, in the order that breaks ties; or NULL. */
static const int *
candidates(int coll)
{
	switch (coll) {
	case COLL_ALLREDUCE:
	case COLL_REDUCE:
		return allreduce_algos;
	case COLL_BROADCAST:
		return broadcast_algos;
	default:
		return NULL;
	}
}

/* Whether coll can run algo between nodes. */
int
algo_runs_for(int coll, int algo)
{
	const int *c = candidates(coll);

	for (; c != NULL && *c != 0; c++)
		if (*c == algo)
			return 1;
	return 0;
}

struct shape {
	double	p, q, r, f;	/* nodes, power of two, its log2, folded */
	double	d;		/* ceil(log2 p) */
};

static struct shape
shape_of(uint32_t n)
{
	uint32_t q = 1, r = 0;

	while (q * 2 <= n) {
		q *= 2;
		r++;
	}
	return (struct shape){ n, q, r, n > q, r + (n > q) };
}

double
algo_predict_ns(int coll, int algo, uint32_t nnodes, size_t bytes,
    int narrowed, const struct link_cost *c)
{
	struct shape s = shape_of(nnodes);
	double a = c->alpha_ns, ring_b = c->beta_ps / 1e3, g = c->gamma_ps / 1e3;
	double b = c->beta_pair_ps > 0 ? c->beta_pair_ps / 1e3 : ring_b;
	double n = (double)bytes, p = s.p, rounds, chunk;

	if (nnodes < 2 || !algo_runs_for(coll, algo))
		return 0;
	switch (algo) {
	case ALGO_RING:
		if (coll == COLL_BROADCAST) {
			chunk = n < PIPE_CHUNK_BYTES ? n : PIPE_CHUNK_BYTES;
			return (p - 1) * a + (p - 2) * chunk * b + n * b +
			    2 * (p - 2) * SEND_COST * a;
		}
		return 2 * (p - 1) * a + 2 * (p - 1) / p * n * ring_b *
		    (narrowed ? 0.5 : 1);
	case ALGO_DOUBLING:
		return (s.r + 2 * s.f) * (a + n * b) + (s.r + s.f) * n * g;
	case ALGO_RABENSEIFNER:
		return 2 * (s.r + s.f) * a +
		    (2 * (s.q - 1) / s.q + 2 * s.f) * n * b +
		    ((s.q - 1) / s.q + s.f) * n * g;
	case ALGO_DIRECT:
		rounds = (nnodes - 1 + PEER_LANES_MAX - 1) / PEER_LANES_MAX;
		return rounds * a + (p - 1) * SEND_COST * a +
		    (p - 1) * n * (b + g);
	case ALGO_TREE:
		return s.d * (a + n * b) + 2 * s.d * a;
	default:
		return 0;
	}
}

int
algo_choose(int coll, int requested, uint32_t nnodes, size_t bytes,
    int narrowed, const struct link_cost *c)
{
	const int *cand = candidates(coll);
	int best = ALGO_AUTO;
	double best_ns = 0;

	if (algo_runs_for(coll, requested) || cand == NULL)
		return requested;
	for (; *cand != 0; cand++) {
		double t = algo_predict_ns(coll, *cand, nnodes, bytes, narrowed,
		    c);

		if (best == ALGO_AUTO || t < best_ns) {
			best = *cand;
			best_ns = t;
		}
	}
	return best;
}

/*
 * The last size from lo that AUTO runs as it runs lo: each algorithm's
 * time is affine in the bytes, so the one fastest holds over one range,
 * which doubling then bisection finds.
 */
static size_t
range_end(int coll, uint32_t nnodes, const struct link_cost *c, size_t lo)
{
	int a = algo_choose(coll, ALGO_AUTO, nnodes, lo, 0, c);
	size_t good = lo, step = 1, hi;

	for (;;) {
		if (good > SIZE_MAX / 2 - step)
			return SIZE_MAX;
		hi = good + step;
		if (algo_choose(coll, ALGO_AUTO, nnodes, hi, 0, c) != a)
			break;
		good = hi;
		step *= 2;
	}
	while (hi - good > 1) {		/* good runs a, hi does not */
		size_t mid = good + (hi - good) / 2;

		if (algo_choose(coll, ALGO_AUTO, nnodes, mid, 0, c) == a)
			good = mid;
		else
			hi = mid;
	}
	return good;
}

/*
 * AUTO on nnodes nodes as ranges of bytes, smallest first, each up to its
 * up_to with the time predicted there (on a float32 wire); the number of
 * ranges (none on one node, or for a collective without choices).
 */
size_t
algo_auto_ranges(int coll, uint32_t nnodes, const struct link_cost *c,
    struct algo_range *ranges, size_t max)
{
	size_t n = 0, lo = 0, end;

	if (nnodes < 2 || candidates(coll) == NULL)
		return 0;
	while (n < max) {
		int a = algo_choose(coll, ALGO_AUTO, nnodes, lo, 0, c);
		size_t at;

		end = range_end(coll, nnodes, c, lo);
		at = end != SIZE_MAX ? end : lo > LAST_SHOWN_BYTES ? lo :
		    LAST_SHOWN_BYTES;
		ranges[n++] = (struct algo_range){ a, end, at,
		    algo_predict_ns(coll, a, nnodes, at, 0, c) };
		if (end == SIZE_MAX)
			break;
		lo = end + 1;
	}
	if (n == max)
		ranges[n - 1].up_to = SIZE_MAX;
	return n;
}

/*
 * The lanes a job's ring needs for its link, from 1 to most: as many as
 * fill it, one per LANE_FILL_PS of its time per byte.  Where one fills it,
 * more only contend for the link and the cores.
 */
uint32_t
algo_lanes(const struct link_cost *c, uint32_t most)
{
	uint32_t beta = c->beta_ps != 0 ? c->beta_ps : LINK_BETA_PS_DEFAULT;
	uint32_t need = (LANE_FILL_PS + beta - 1) / beta;	/* >= 1 */

	return need > most ? most : need;
}
