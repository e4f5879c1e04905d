/*
 * counters.c: what this node's operations did, counted as they end (main
 * thread): by collective, algorithm and error, their 16-bit wire, their
 * reach into clients' memory, their lanes, and a latency histogram; and
 * the samples they make (metrics.c shows them with the gauges).
 */
#include <stdio.h>

#include <jansson.h>

#include "mccld.h"
#include "control/control.h"

/* Operation latency buckets, in seconds (upper bounds; +Inf implied). */
static const double lat_bounds[] = { 0.0001, 0.0003, 0.001, 0.003, 0.01,
    0.03, 0.1, 0.3, 1, 3, 10 };
#define NBUCKETS	(sizeof(lat_bounds) / sizeof(lat_bounds[0]))

static struct {
	uint64_t	ops[COLL_MAX + 1];		/* completed, by collective */
	uint64_t	algos[2][ALGO_MAX + 1];		/* of those, allreduce or
							   broadcast, by algorithm */
	uint64_t	wire_ops[2];			/* float16, bfloat16 */
	uint64_t	wire_saved;
	uint64_t	xmem_bytes;
	uint64_t	overlapped;
	uint64_t	lane_ns, lane_wait_ns;
	uint64_t	errors[MCCL_NUM_RESULTS];	/* failed, by code */
	uint64_t	lat[NBUCKETS + 1];		/* cumulative counts */
	double		lat_sum;
	uint64_t	lat_count;
} m;

static const char *const error_names[MCCL_NUM_RESULTS] = { "success",
    "invalid_argument", "unsupported", "connect", "timeout", "peer_failed",
    "aborted", "permission", "no_memory", "protocol", "internal" };

/*
 * An operation of this node ended (main thread); algo: the one its
 * inter-node part ran, ALGO_AUTO if none.
 */
void
metrics_op_done(int coll, int algo, int code, uint64_t ns)
{
	double s = ns / 1e9;

	if (code != 0) {
		if (code > 0 && code < MCCL_NUM_RESULTS)
			m.errors[code]++;
		return;
	}
	if (coll >= 1 && coll <= COLL_MAX)
		m.ops[coll]++;
	if (algo > ALGO_AUTO && algo <= ALGO_MAX)
		m.algos[coll == COLL_BROADCAST][algo]++;
	for (size_t i = 0; i < NBUCKETS; i++)
		if (s <= lat_bounds[i])
			m.lat[i]++;
	m.lat[NBUCKETS]++;
	m.lat_sum += s;
	m.lat_count++;
}

/* An allreduce of this node crossed on a 16-bit wire, saving bytes. */
void
metrics_wire(int wire, uint64_t saved)
{
	m.wire_ops[wire == MCCL_BFLOAT16]++;
	m.wire_saved += saved;
}

/* An allreduce of this node reached its clients' own memory. */
void
metrics_xmem(uint64_t bytes)
{
	m.xmem_bytes += bytes;
}

/* An allreduce of this node started beside the one before it. */
void
metrics_overlapped(void)
{
	m.overlapped++;
}

/* An operation of this node ran lanes on threads of their own (duplex.c). */
void
metrics_lanes(uint64_t lane_ns, uint64_t wait_ns)
{
	m.lane_ns += lane_ns;
	m.lane_wait_ns += wait_ns;
}

/* Append one sample; labels is a JSON object of strings (consumed). */
void
metrics_add(json_t *list, const char *name, json_t *labels, double value)
{
	json_array_append_new(list, json_pack("{s:s, s:o, s:f}", "name", name,
	    "labels", labels != NULL ? labels : json_object(), "value", value));
}

/* The counters as samples, family by family. */
void
counters_samples(json_t *list)
{
	char le[32];

	for (int c = 1; c <= COLL_MAX; c++)
		metrics_add(list, "mccl_ops_total", json_pack("{s:s}",
		    "collective", proto_coll_name(c)), (double)m.ops[c]);
	for (int b = 0; b < 2; b++)		/* one family, then the other */
		for (int a = ALGO_AUTO + 1; a <= ALGO_MAX; a++)
			if (algo_runs_for(b ? COLL_BROADCAST : COLL_ALLREDUCE, a))
				metrics_add(list, b ? "mccl_broadcast_algo_total" :
				    "mccl_allreduce_algo_total", json_pack(
				    "{s:s}", "algo", proto_algo_name(a)),
				    (double)m.algos[b][a]);
	for (int w = 0; w < 2; w++)
		metrics_add(list, "mccl_allreduce_wire_total", json_pack(
		    "{s:s}", "wire", w ? "bfloat16" : "float16"),
		    (double)m.wire_ops[w]);
	metrics_add(list, "mccl_wire_bytes_saved_total", NULL,
	    (double)m.wire_saved);
	metrics_add(list, "mccl_xmem_bytes_total", NULL, (double)m.xmem_bytes);
	metrics_add(list, "mccl_allreduce_overlapped_total", NULL,
	    (double)m.overlapped);
	metrics_add(list, "mccl_lane_seconds_total", NULL, m.lane_ns / 1e9);
	metrics_add(list, "mccl_lane_wait_seconds_total", NULL,
	    m.lane_wait_ns / 1e9);
	for (int e = 1; e < MCCL_NUM_RESULTS; e++)
		metrics_add(list, "mccl_op_errors_total", json_pack("{s:s}",
		    "error", error_names[e]), (double)m.errors[e]);
	for (size_t i = 0; i <= NBUCKETS; i++) {
		if (i < NBUCKETS)
			snprintf(le, sizeof(le), "%g", lat_bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		metrics_add(list, "mccl_op_duration_seconds_bucket",
		    json_pack("{s:s}", "le", le), (double)m.lat[i]);
	}
	metrics_add(list, "mccl_op_duration_seconds_sum", NULL, m.lat_sum);
	metrics_add(list, "mccl_op_duration_seconds_count", NULL,
	    (double)m.lat_count);
}

