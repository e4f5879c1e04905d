/*
 * linkcost.c: what this node estimates a step to its peers costs (struct
 * link_cost, engine/algo.h), handed to the coordinator of every job it
 * joins (main thread).  alpha and the two betas are fitted to what this
 * node's own operations took, by the model's formula for the algorithm
 * they ran, each the least of its last 16 fits (an op's time also holds
 * the wait for the last node to arrive, which only adds: after a large op,
 * a small one may wait for milliseconds):
 *   alpha      from allreduces of 4 KiB or less, where latency is nearly
 *              all: their time, less the bandwidth terms, over the model's
 *              count of latencies.  Until the first, half the median over
 *              the peers up of each one's shortest heartbeat round trip of
 *              the last 16 (through both main loops: it overstates the
 *              data path's, which may spin);
 *   beta       from ring allreduces of 1 MiB or more (their lanes send side
 *              by side): their time, less the other terms, over the bytes
 *              each node sends; until the first, beta_pair's if that was
 *              fitted, else 10 Gbit/s;
 *   beta_pair  alike from the other algorithms' (a stream at a time, each
 *              step's reduction after its transfer); the ring's until the
 *              first;
 *   gamma      the float32 sum kernel over 8 MiB, more than a core's caches
 *              hold, timed once at start.
 * Each beta stands in for the other until its own first fit: an algorithm
 * never measured must not lose to a measured one by a default alone, or
 * AUTO would never run it, so never measure it (on a 40 Gbit/s link the
 * ring, at the 10 Gbit/s default, lost every large allreduce to
 * Rabenseifner's, fitted at 2-5 GB/s, and ran them on one lane at a
 * third of the ring's rate).
 * A job runs on the worst of its nodes' numbers (linkcost_worst), which
 * the coordinator hands out with the rank map: its nodes make the same
 * choices, and the slowest link bounds a collective anyway.
 *
 * An op's time also holds any wait for a late rank of another node, and
 * one user must not steer another's jobs by being late on purpose: the
 * fits are kept per user (FIT_USERS, the least recently fitting one goes),
 * and a job's estimate is the least over its own user's fits and those of
 * the other users that fitted within FIT_SHARE_NS.  A late rank can only
 * raise a fit, so another user's fits can lower an estimate but never
 * raise it above one's own; and alpha never exceeds ALPHA_RTT_FACTOR times
 * the heartbeats' half round trip, which no job's ranks can delay.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "engine/reduce.h"

#define ALPHA_MAX_BYTES		((size_t)4096)		/* fit alpha to these, */
#define BETA_MIN_BYTES		((size_t)1 << 20)	/* beta to these */
#define GAMMA_PROBE_FLOATS	((size_t)1 << 21)	/* 8 MiB */
#define GAMMA_PROBE_RUNS	3
#define FIT_WINDOW		16			/* fits kept */
#define COST_MAX		1000000000U		/* 1 s; per byte, 1 ms */
#define FIT_USERS		16			/* users' fits kept */
#define FIT_SHARE_NS		(600ULL * 1000000000)	/* others' count 10 min */
#define ALPHA_RTT_FACTOR	4

/* The last fits of one number, newest at count - 1 (modulo). */
struct fits {
	uint32_t	v[FIT_WINDOW];
	uint64_t	count;
};

/* One user's fits; last_ns 0: the slot is free. */
struct user_fits {
	uid_t		uid;
	uint64_t	last_ns;	/* of its latest fit */
	struct fits	alpha, beta, beta_pair;
};

static struct {
	struct user_fits users[FIT_USERS];
	uint32_t	gamma_ps;
	uint64_t	nfits[3];	/* alpha, beta, beta_pair: all users' */
} lc = { .gamma_ps = LINK_GAMMA_PS_DEFAULT };

enum fit_kind { FIT_ALPHA, FIT_BETA, FIT_BETA_PAIR };

static uint32_t
clamp_cost(double v)
{
	return v < 1 ? 1 : v > COST_MAX ? COST_MAX : (uint32_t)v;
}

/* Times the reduction kernel: the fastest of a few float32 sums of 8 MiB. */
void
linkcost_init(void)
{
	float *a = calloc(GAMMA_PROBE_FLOATS, sizeof(float));
	float *b = calloc(GAMMA_PROBE_FLOATS, sizeof(float));
	uint64_t best = UINT64_MAX;

	for (int i = 0; a != NULL && b != NULL && i < GAMMA_PROBE_RUNS; i++) {
		uint64_t t0 = now_ns(), t;

		reduce_into(a, b, GAMMA_PROBE_FLOATS, MCCL_FLOAT32, MCCL_SUM);
		if ((t = now_ns() - t0) < best)
			best = t;
	}
	if (best != UINT64_MAX)
		lc.gamma_ps = clamp_cost(best * 1e3 /
		    (GAMMA_PROBE_FLOATS * sizeof(float)));
	free(a);
	free(b);
	log_debug("link cost: the reduction takes %u ps a byte", lc.gamma_ps);
}

/* The least of the fits kept; 0 if none. */
static uint32_t
fits_least(const struct fits *f)
{
	size_t n = f->count < FIT_WINDOW ? (size_t)f->count : FIT_WINDOW;
	uint32_t least = 0;

	for (size_t i = 0; i < n; i++)
		if (least == 0 || f->v[i] < least)
			least = f->v[i];
	return least;
}

static struct fits *
user_fit(struct user_fits *u, enum fit_kind k)
{
	return k == FIT_ALPHA ? &u->alpha : k == FIT_BETA ? &u->beta :
	    &u->beta_pair;
}

/* uid's fits; a new slot (the least recently fitted one) if it has none. */
static struct user_fits *
user_fits_of(uid_t uid)
{
	struct user_fits *oldest = &lc.users[0];

	for (size_t i = 0; i < FIT_USERS; i++) {
		struct user_fits *u = &lc.users[i];

		if (u->last_ns != 0 && u->uid == uid)
			return u;
		if (u->last_ns < oldest->last_ns)
			oldest = u;
	}
	memset(oldest, 0, sizeof(*oldest));
	oldest->uid = uid;
	return oldest;
}

/*
 * The least fit of kind k that a job of uid may use: its user's own, and
 * other users' of the last FIT_SHARE_NS; 0 if none.
 */
static uint32_t
fits_for(uid_t uid, enum fit_kind k)
{
	uint64_t now = now_ns();
	uint32_t least = 0;

	for (size_t i = 0; i < FIT_USERS; i++) {
		struct user_fits *u = &lc.users[i];
		uint32_t v;

		if (u->last_ns == 0 || (u->uid != uid &&
		    now - u->last_ns > FIT_SHARE_NS))
			continue;
		if ((v = fits_least(user_fit(u, k))) > 0 &&
		    (least == 0 || v < least))
			least = v;
	}
	return least;
}

static void
fits_add(uid_t uid, enum fit_kind k, double v)
{
	struct user_fits *u = user_fits_of(uid);
	struct fits *f = user_fit(u, k);

	f->v[f->count++ % FIT_WINDOW] = clamp_cost(v);
	u->last_ns = now_ns();
	lc.nfits[k]++;
}

/* The estimate a job of uid starts from (mcclctl status: uid -1, all). */
void
linkcost_mine(uid_t uid, struct link_cost *c)
{
	uint64_t rtt = peer_rtt_median_ns();
	uint32_t alpha = fits_for(uid, FIT_ALPHA), beta = fits_for(uid, FIT_BETA);
	uint32_t pair = fits_for(uid, FIT_BETA_PAIR);
	uint32_t rtt_alpha = rtt > 0 ? clamp_cost(rtt / 2.0) : 0;

	if (alpha == 0)
		alpha = rtt_alpha > 0 ? rtt_alpha : LINK_ALPHA_NS_DEFAULT;
	else if (rtt_alpha > 0 && alpha / ALPHA_RTT_FACTOR > rtt_alpha)
		alpha = rtt_alpha * ALPHA_RTT_FACTOR;
	c->alpha_ns = alpha;
	c->beta_ps = beta > 0 ? beta : pair > 0 ? pair : LINK_BETA_PS_DEFAULT;
	c->gamma_ps = lc.gamma_ps;
	c->beta_pair_ps = pair > 0 ? pair : c->beta_ps;
}

/* Fold one node's numbers into a job's: the worst of each. */
void
linkcost_worst(struct link_cost *job, const struct link_cost *node)
{
	if (node->alpha_ns > job->alpha_ns)
		job->alpha_ns = node->alpha_ns;
	if (node->beta_ps > job->beta_ps)
		job->beta_ps = node->beta_ps;
	if (node->gamma_ps > job->gamma_ps)
		job->gamma_ps = node->gamma_ps;
	if (node->beta_pair_ps > job->beta_pair_ps)
		job->beta_pair_ps = node->beta_pair_ps;
}

/*
 * The model's time for what ran is a sum of terms, each a coefficient times
 * one number of the cost: one's coefficient is the time the model gives
 * with that number 1 (ns, or ns a byte) and the others 0.  Solve for that
 * number, the others at the job's values; 0 if the op took less time than
 * the other terms alone.
 */
static double
fit_term(int algo, uint32_t nnodes, size_t bytes, uint64_t ns,
    const struct link_cost *unit, const struct link_cost *others)
{
	double coef = algo_predict_ns(COLL_ALLREDUCE, algo, nnodes, bytes, 0,
	    unit);
	double rest = algo_predict_ns(COLL_ALLREDUCE, algo, nnodes, bytes, 0,
	    others);

	return coef > 0 && (double)ns > rest ? ((double)ns - rest) / coef : 0;
}

/*
 * An allreduce of uid's job, of bytes per node, ran by algo between nnodes
 * nodes in ns, on the job's cost (j): fit alpha to it if it was small, the beta of its
 * kind if it was large.
 */
void
linkcost_observe(uid_t uid, int algo, uint32_t nnodes, size_t bytes,
    uint64_t ns, const struct link_cost *j)
{
	const struct link_cost alpha_1 = { 1, 0, 0, 0 };
	const struct link_cost no_alpha = { 0, j->beta_ps, j->gamma_ps,
	    j->beta_pair_ps };
	const struct link_cost ring_1 = { 0, 1000, 0, 0 };	/* 1 ns a byte */
	const struct link_cost pair_1 = { 0, 0, 0, 1000 };
	const struct link_cost no_beta = { j->alpha_ns, 0, j->gamma_ps, 0 };
	double v;

	if (nnodes < 2 || !algo_runs_for(COLL_ALLREDUCE, algo))
		return;
	if (bytes <= ALPHA_MAX_BYTES &&
	    (v = fit_term(algo, nnodes, bytes, ns, &alpha_1, &no_alpha)) > 0)
		fits_add(uid, FIT_ALPHA, v);
	if (bytes >= BETA_MIN_BYTES && (v = fit_term(algo, nnodes, bytes, ns,
	    algo == ALGO_RING ? &ring_1 : &pair_1, &no_beta)) > 0)
		fits_add(uid, algo == ALGO_RING ? FIT_BETA : FIT_BETA_PAIR,
		    v * 1e3);
}

/* For mcclctl status: this node's estimate. */
json_t *
linkcost_ctl(void)
{
	struct link_cost c;

	linkcost_mine((uid_t)-1, &c);
	return json_pack("{s:i, s:i, s:i, s:i, s:I, s:I, s:I}", "alpha_ns",
	    (int)c.alpha_ns, "beta_ps", (int)c.beta_ps, "beta_pair_ps",
	    (int)c.beta_pair_ps, "gamma_ps", (int)c.gamma_ps, "alpha_fits",
	    (json_int_t)lc.nfits[FIT_ALPHA], "beta_fits",
	    (json_int_t)lc.nfits[FIT_BETA], "beta_pair_fits",
	    (json_int_t)lc.nfits[FIT_BETA_PAIR]);
}
