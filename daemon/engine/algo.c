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

#define COLLS_REDUCING	(1u << COLL_ALLREDUCE | 1u << COLL_REDUCE)

struct shape {
	double	p, q, r, f;	/* nodes, power of two, its log2, folded */
	double	d;		/* ceil(log2 p) */
};

/* The job's link cost in nanoseconds: a per message; per byte b, ring_b
 * the ring allreduce's, g reduced. */
struct rates {
	double	a, b, ring_b, g;
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

/* Each algorithm's predicted time for n bytes (the model above). */
static double
ring_ns(int coll, const struct shape *s, double n, int narrowed,
    const struct rates *t)
{
	double chunk = n < PIPE_CHUNK_BYTES ? n : PIPE_CHUNK_BYTES;

	if (coll == COLL_BROADCAST)
		return (s->p - 1) * t->a + (s->p - 2) * chunk * t->b +
		    n * t->b + 2 * (s->p - 2) * SEND_COST * t->a;
	return 2 * (s->p - 1) * t->a + 2 * (s->p - 1) / s->p * n * t->ring_b *
	    (narrowed ? 0.5 : 1);
}

static double
doubling_ns(int coll, const struct shape *s, double n, int narrowed,
    const struct rates *t)
{
	(void)coll, (void)narrowed;
	return (s->r + 2 * s->f) * (t->a + n * t->b) + (s->r + s->f) * n * t->g;
}

static double
rabenseifner_ns(int coll, const struct shape *s, double n, int narrowed,
    const struct rates *t)
{
	(void)coll, (void)narrowed;
	return 2 * (s->r + s->f) * t->a +
	    (2 * (s->q - 1) / s->q + 2 * s->f) * n * t->b +
	    ((s->q - 1) / s->q + s->f) * n * t->g;
}

static double
direct_ns(int coll, const struct shape *s, double n, int narrowed,
    const struct rates *t)
{
	double rounds = (double)(((uint32_t)s->p - 1 + PEER_LANES_MAX - 1) /
	    PEER_LANES_MAX);

	(void)coll, (void)narrowed;
	return rounds * t->a + (s->p - 1) * SEND_COST * t->a +
	    (s->p - 1) * n * (t->b + t->g);
}

static double
tree_ns(int coll, const struct shape *s, double n, int narrowed,
    const struct rates *t)
{
	(void)coll, (void)narrowed;
	return s->d * (t->a + n * t->b) + 2 * s->d * t->a;
}

/*
 * One row per algorithm between nodes: the collectives it serves and its
 * predicted time.  The order breaks ties between equal predictions.
 */
static const struct algo_row {
	int		 algo;		/* enum algo_type (ipc.h) */
	unsigned	 colls;		/* 1 << COLL_* it runs */
	double		(*predict_ns)(int, const struct shape *, double, int,
			    const struct rates *);
} algos[] = {
	{ ALGO_RING,		COLLS_REDUCING | 1u << COLL_BROADCAST, ring_ns },
	{ ALGO_DOUBLING,	COLLS_REDUCING,	doubling_ns },
	{ ALGO_RABENSEIFNER,	COLLS_REDUCING,	rabenseifner_ns },
	{ ALGO_DIRECT,		COLLS_REDUCING,	direct_ns },
	{ ALGO_TREE,		1u << COLL_BROADCAST, tree_ns },
};
#define NALGOS	(sizeof(algos) / sizeof(algos[0]))
_Static_assert(NALGOS == ALGO_MAX, "a row for every algorithm but AUTO");

/* Whether row's algorithm runs coll. */
static int
serves(const struct algo_row *row, int coll)
{
	return coll >= 0 && coll < 32 && (row->colls & 1u << coll) != 0;
}

static const struct algo_row *
algo_row(int coll, int algo)
{
	for (size_t i = 0; i < NALGOS; i++)
		if (algos[i].algo == algo && serves(&algos[i], coll))
			return &algos[i];
	return NULL;
}

/* Whether coll can run algo between nodes. */
int
algo_runs_for(int coll, int algo)
{
	return algo_row(coll, algo) != NULL;
}

/* Whether coll has algorithms to choose from. */
static int
has_choices(int coll)
{
	for (size_t i = 0; i < NALGOS; i++)
		if (serves(&algos[i], coll))
			return 1;
	return 0;
}

/* row's time for coll of bytes on nnodes nodes; 0 on one node. */
static double
row_predict_ns(const struct algo_row *row, int coll, uint32_t nnodes,
    size_t bytes, int narrowed, const struct link_cost *c)
{
	struct shape s = shape_of(nnodes);
	struct rates t = { c->alpha_ns, c->beta_ps / 1e3, c->beta_ps / 1e3,
	    c->gamma_ps / 1e3 };

	if (nnodes < 2)
		return 0;
	if (c->beta_pair_ps > 0)
		t.b = c->beta_pair_ps / 1e3;
	return row->predict_ns(coll, &s, (double)bytes, narrowed, &t);
}

double
algo_predict_ns(int coll, int algo, uint32_t nnodes, size_t bytes,
    int narrowed, const struct link_cost *c)
{
	const struct algo_row *row = algo_row(coll, algo);

	return row != NULL ? row_predict_ns(row, coll, nnodes, bytes,
	    narrowed, c) : 0;
}

int
algo_choose(int coll, int requested, uint32_t nnodes, size_t bytes,
    int narrowed, const struct link_cost *c)
{
	const struct algo_row *best = NULL;
	double best_ns = 0;

	if (algo_runs_for(coll, requested) || !has_choices(coll))
		return requested;
	for (size_t i = 0; i < NALGOS; i++) {
		double t;

		if (!serves(&algos[i], coll))
			continue;
		t = row_predict_ns(&algos[i], coll, nnodes, bytes, narrowed, c);
		if (best == NULL || t < best_ns) {
			best = &algos[i];
			best_ns = t;
		}
	}
	return best->algo;
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

	if (nnodes < 2 || !has_choices(coll))
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
