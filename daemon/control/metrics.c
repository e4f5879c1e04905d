/*
 * metrics.c: the daemon's counters and histograms, and their one rendering
 * as samples (name, labels, value), shown by `mcclctl metrics` (text in the
 * Prometheus exposition format, or JSON) and, with metrics_listen set,
 * served over HTTP at /metrics (scrape.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
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

static const char *const family[][3] = {	/* name, type, help */
	{ "mccl_uptime_seconds", "gauge", "Seconds since the daemon started." },
	{ "mccl_clients", "gauge", "Connections on the Unix socket." },
	{ "mccl_jobs", "gauge", "Jobs on this node, forming or running." },
	{ "mccl_scratch_bytes", "gauge",
	    "Working memory the engines hold (max_scratch_bytes)." },
	{ "mccl_unreceived_bytes", "gauge",
	    "Messages kept for receives not yet posted (max_unreceived_bytes)." },
	{ "mccl_data_links", "gauge", "Data links open, all jobs: a job's "
	    "lanes, or send/recv's (made on a pair's first message)." },
	{ "mccl_peer_up", "gauge", "1 when the peer's control connection is up." },
	{ "mccl_peer_rtt_seconds", "gauge", "Last heartbeat round trip." },
	{ "mccl_link_latency_seconds", "gauge",
	    "This node's estimate of a message's latency (half the median "
	    "heartbeat round trip)." },
	{ "mccl_link_bytes_per_second", "gauge",
	    "This node's estimate of its link rate by the ring allreduce "
	    "(fitted to its large ones)." },
	{ "mccl_link_pair_bytes_per_second", "gauge",
	    "This node's estimate of its link rate by the other algorithms, "
	    "a stream at a time (fitted to their large ones)." },
	{ "mccl_reduce_bytes_per_second", "gauge",
	    "The float32 sum kernel's rate, timed at start." },
	{ "mccl_peer_link_info", "gauge",
	    "1, labelled with the transport and device of the peer's latest "
	    "data links." },
	{ "mccl_peer_bytes_total", "counter",
	    "Bytes exchanged with a peer, by direction and kind." },
	{ "mccl_ops_total", "counter", "Operations completed, by collective." },
	{ "mccl_allreduce_algo_total", "counter",
	    "Allreduces and reduces completed between nodes, by algorithm." },
	{ "mccl_broadcast_algo_total", "counter",
	    "Broadcasts completed between nodes, by algorithm." },
	{ "mccl_allreduce_wire_total", "counter",
	    "Allreduces whose float32 data crossed as 16 bits, by format." },
	{ "mccl_wire_bytes_saved_total", "counter",
	    "Bytes those allreduces did not send, against float32." },
	{ "mccl_xmem_bytes_total", "counter",
	    "Bytes of allreduces read and written in clients' own memory "
	    "(cross-memory attach) instead of staged." },
	{ "mccl_allreduce_overlapped_total", "counter",
	    "Allreduces whose last segment was handed out beside the "
	    "network carrying the next one, queued behind it." },
	{ "mccl_lane_seconds_total", "counter",
	    "Lanes of large operations on threads of their own: their time, "
	    "from the start to the last lane's end, summed over the lanes." },
	{ "mccl_lane_wait_seconds_total", "counter",
	    "Of that, lanes that had ended waiting for the last one: lanes "
	    "that move unevenly (connections sharing a link unfairly)." },
	{ "mccl_op_errors_total", "counter", "Operations failed, by error." },
	{ "mccl_op_duration_seconds", "histogram",
	    "Time from an operation's last local submission to its end." },
};

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

/* This node's link cost estimate, as rates (control/linkcost.c). */
static void
metrics_link_cost(json_t *list)
{
	struct link_cost c;

	linkcost_mine((uid_t)-1, &c);
	metrics_add(list, "mccl_link_latency_seconds", NULL, c.alpha_ns / 1e9);
	metrics_add(list, "mccl_link_bytes_per_second", NULL, 1e12 / c.beta_ps);
	metrics_add(list, "mccl_link_pair_bytes_per_second", NULL,
	    1e12 / c.beta_pair_ps);
	metrics_add(list, "mccl_reduce_bytes_per_second", NULL,
	    1e12 / c.gamma_ps);
}

static void
metrics_ops(json_t *list)
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

json_t *
metrics_samples(void)
{
	json_t *list = json_array();

	job_collect_all();	/* ops the engine answered quietly count too */
	metrics_add(list, "mccl_uptime_seconds", NULL,
	    (now_ns() - ctl_started_ns) / 1e9);
	metrics_add(list, "mccl_clients", NULL, client_count());
	metrics_add(list, "mccl_jobs", NULL, job_count(NULL));
	metrics_add(list, "mccl_scratch_bytes", NULL,
	    (double)budget_held(&scratch_budget, (uid_t)-1));
	metrics_add(list, "mccl_unreceived_bytes", NULL,
	    (double)p2p_kept_bytes());
	metrics_add(list, "mccl_data_links", json_pack("{s:s}", "kind",
	    "lane"), (double)engine_links_open());
	metrics_add(list, "mccl_data_links", json_pack("{s:s}", "kind",
	    "p2p"), (double)p2p_links_open());
	peer_metrics(list);
	metrics_link_cost(list);
	metrics_ops(list);
	return list;
}

/* The family a sample belongs to: its name less a histogram suffix. */
static int
family_of(const char *name)
{
	for (size_t f = 0; f < sizeof(family) / sizeof(family[0]); f++) {
		size_t n = strlen(family[f][0]);

		if (strncmp(name, family[f][0], n) == 0 && (name[n] == '\0' ||
		    strcmp(family[f][1], "histogram") == 0))
			return (int)f;
	}
	return -1;
}

/* A label's value, its backslashes, quotes and newlines escaped. */
static void
text_label_value(struct evbuffer *b, const char *v)
{
	for (; *v != '\0'; v++)
		if (*v == '\\' || *v == '"')
			evbuffer_add_printf(b, "\\%c", *v);
		else if (*v == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, v, 1);
}

static void
text_labels(struct evbuffer *b, const json_t *labels)
{
	const char *k;
	json_t *v;
	int first = 1;

	if (json_object_size(labels) == 0)
		return;
	evbuffer_add_printf(b, "{");
	json_object_foreach((json_t *)(uintptr_t)labels, k, v) {
		evbuffer_add_printf(b, "%s%s=\"", first ? "" : ",", k);
		text_label_value(b, json_string_value(v));
		evbuffer_add(b, "\"", 1);
		first = 0;
	}
	evbuffer_add_printf(b, "}");
}

/* The Prometheus text exposition format (version 0.0.4). */
void
metrics_text(struct evbuffer *b, const json_t *samples)
{
	size_t i;
	json_t *s;
	int last = -1;

	json_array_foreach((json_t *)(uintptr_t)samples, i, s) {
		const char *name = json_string_value(json_object_get(s, "name"));
		int f = family_of(name);

		if (f != last && f >= 0)
			evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n",
			    family[f][0], family[f][2], family[f][0],
			    family[f][1]);
		last = f;
		evbuffer_add_printf(b, "%s", name);
		text_labels(b, json_object_get(s, "labels"));
		evbuffer_add_printf(b, " %.17g\n",
		    json_real_value(json_object_get(s, "value")));
	}
}

/* mcclctl metrics: the samples, and the same as text. */
json_t *
metrics_ctl(void)
{
	struct evbuffer *b = evbuffer_new();
	json_t *samples = metrics_samples(), *doc;
	size_t len;

	metrics_text(b, samples);
	len = evbuffer_get_length(b);
	doc = json_pack("{s:o, s:s%}", "samples", samples, "text",
	    (const char *)evbuffer_pullup(b, -1), len);
	evbuffer_free(b);
	return doc;
}
