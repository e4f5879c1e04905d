/*
 * metrics.c: the daemon's samples (name, labels, value): the gauges of
 * every part, asked of each, and the operation counters (counters.c), in
 * one rendering shown by `mcclctl metrics` (text in the Prometheus
 * exposition format, or JSON) and, with metrics_listen set, served over
 * HTTP at /metrics (scrape.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"

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

/* The peers, family by family: the text wants each one's samples
 * together. */
static void
metrics_peers(json_t *list)
{
	static const char *const dir[] = { "tx", "rx" };
	struct peer_stats st;
	uint32_t i;

	for (i = 0; i < conf->nnodes; i++)
		if (peer_stats(i, &st) == 0)
			metrics_add(list, "mccl_peer_up", json_pack("{s:s}",
			    "peer", st.name), st.up);
	for (i = 0; i < conf->nnodes; i++)
		if (peer_stats(i, &st) == 0)
			metrics_add(list, "mccl_peer_rtt_seconds", json_pack(
			    "{s:s}", "peer", st.name), st.rtt_ns / 1e9);
	for (i = 0; i < conf->nnodes; i++)
		if (peer_stats(i, &st) == 0 && st.transport[0] != '\0')
			metrics_add(list, "mccl_peer_link_info", json_pack(
			    "{s:s, s:s, s:s}", "peer", st.name, "transport",
			    st.transport, "device", st.device), 1);
	for (i = 0; i < conf->nnodes; i++) {
		if (peer_stats(i, &st) == -1)
			continue;
		const uint64_t ctl[] = { st.ctl_tx, st.ctl_rx };
		const uint64_t data[] = { st.data_tx, st.data_rx };

		for (int d = 0; d < 2; d++) {
			metrics_add(list, "mccl_peer_bytes_total", json_pack(
			    "{s:s, s:s, s:s}", "peer", st.name, "direction",
			    dir[d], "kind", "control"), (double)ctl[d]);
			metrics_add(list, "mccl_peer_bytes_total", json_pack(
			    "{s:s, s:s, s:s}", "peer", st.name, "direction",
			    dir[d], "kind", "data"), (double)data[d]);
		}
	}
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
	metrics_peers(list);
	metrics_link_cost(list);
	counters_samples(list);
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
