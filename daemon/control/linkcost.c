/*
 * linkcost.c: what this node estimates a step to its peers costs (struct
 * link_cost, engine/algo.h), handed to the coordinator of every job it
 * joins (main thread):
 *   alpha  half the median, over the peers up, of each one's shortest
 *          heartbeat round trip of the last 16;
 *   beta   fitted to the ring allreduces this node ran (of 1 MiB or more:
 *          the model's time, less its latency term, over the bytes each
 *          node sends), the least of the last 16 fits: an op's time also
 *          holds the wait for the last node to arrive, which only adds;
 *          a default until the first;
 *   gamma  the float32 sum kernel over 8 MiB, more than a core's caches
 *          hold, timed once at start.
 * A job runs on the worst of its nodes' numbers (linkcost_worst), which
 * the coordinator hands out with the rank map: its nodes make the same
 * choices, and the slowest link bounds a collective anyway.
 */
#include <stdlib.h>

#include <jansson.h>

#include "mccld.h"
#include "control/control.h"

#define OBSERVE_MIN_BYTES	((size_t)1 << 20)	/* fit beta from these */
#define GAMMA_PROBE_FLOATS	((size_t)1 << 21)	/* 8 MiB */
#define GAMMA_PROBE_RUNS	3
#define BETA_WINDOW		16			/* fits kept */
#define COST_MAX		1000000000U		/* 1 s; per byte, 1 ms */

static struct {
	uint32_t	beta_win[BETA_WINDOW];	/* the last fits */
	uint64_t	beta_fits;	/* ring allreduces it was fitted to */
	uint32_t	gamma_ps;
} lc = { { 0 }, 0, LINK_GAMMA_PS_DEFAULT };

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

static uint32_t
beta_estimate(void)
{
	uint64_t n = lc.beta_fits < BETA_WINDOW ? lc.beta_fits : BETA_WINDOW;
	uint32_t best = 0;

	for (uint64_t i = 0; i < n; i++)
		if (best == 0 || lc.beta_win[i] < best)
			best = lc.beta_win[i];
	return best > 0 ? best : LINK_BETA_PS_DEFAULT;
}

void
linkcost_mine(struct link_cost *c)
{
	uint64_t rtt = peer_rtt_median_ns();

	c->alpha_ns = rtt > 0 ? clamp_cost(rtt / 2.0) : LINK_ALPHA_NS_DEFAULT;
	c->beta_ps = beta_estimate();
	c->gamma_ps = lc.gamma_ps;
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
}

/*
 * A ring allreduce of bytes per node took ns between nnodes nodes, with
 * the job's cost: refit beta to it.  The model's ring is
 * 2(p-1) alpha + 2(p-1)/p bytes beta.
 */
void
linkcost_observe(uint32_t nnodes, size_t bytes, uint64_t ns,
    const struct link_cost *job)
{
	double p = nnodes, sent, beta_ps;

	if (nnodes < 2 || bytes < OBSERVE_MIN_BYTES)
		return;
	sent = 2 * (p - 1) / p * (double)bytes;
	beta_ps = ((double)ns - 2 * (p - 1) * job->alpha_ns) * 1e3 / sent;
	if (beta_ps <= 0)
		return;
	lc.beta_win[lc.beta_fits++ % BETA_WINDOW] = clamp_cost(beta_ps);
}

/* For mcclctl status: this node's estimate. */
json_t *
linkcost_ctl(void)
{
	struct link_cost c;

	linkcost_mine(&c);
	return json_pack("{s:i, s:i, s:i, s:I}", "alpha_ns", (int)c.alpha_ns,
	    "beta_ps", (int)c.beta_ps, "gamma_ps", (int)c.gamma_ps,
	    "beta_fits", (json_int_t)lc.beta_fits);
}
