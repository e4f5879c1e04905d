/*
 * test_metrics.c: the daemon's counters and their rendering (control/
 * metrics.c): what operations count, the latency histogram, the gauges
 * taken from the other parts (faked here with known values), and the
 * Prometheus text: each family's HELP and TYPE once before its samples,
 * every line "name{labels} value", label values escaped.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "ctltest.h"
#include "testlib.h"

/* ---- the other parts metrics.c reads, with known values ---- */

static const char *peer_label = "n1";

uint32_t client_count(void) { return 3; }
int job_count(const struct client *c) { (void)c; return 2; }
void job_collect_all(void) { }
uint64_t engine_links_open(void) { return 8; }
uint64_t p2p_links_open(void) { return 1; }
uint64_t p2p_kept_bytes(void) { return 4096; }

void
linkcost_mine(uid_t uid, struct link_cost *c)
{
	(void)uid;
	*c = (struct link_cost){ 25000, 800, 250, 1000 };
}

/* Of the three nodes, this one is 0; node 1 is up over RDMA, 2 is down. */
int
peer_stats(uint32_t i, struct peer_stats *st)
{
	if (i == 0 || i > 2)
		return -1;
	*st = (struct peer_stats){ .name = i == 1 ? peer_label : "n2",
	    .up = i == 1, .rtt_ns = i == 1 ? 80000 : 0, .ctl_tx = 100 * i,
	    .ctl_rx = 200 * i, .data_tx = 1000 * i, .data_rx = 2000 * i };
	if (i == 1) {
		snprintf(st->transport, sizeof(st->transport), "rdma");
		snprintf(st->device, sizeof(st->device), "mlx5_0:1");
	}
	return 0;
}

static struct config settings = { .nnodes = 3, .node_index = 0 };

/* ---- reading the samples ---- */

/* The value of the sample name with label key = value (key NULL: the
 * first sample of that name); fails the test if there is none. */
static double
sample(const json_t *list, const char *name, const char *key,
    const char *value)
{
	size_t i;
	json_t *s;

	json_array_foreach((json_t *)(uintptr_t)list, i, s) {
		const json_t *labels = json_object_get(s, "labels");
		const char *v = key == NULL ? NULL :
		    json_string_value(json_object_get(labels, key));

		if (strcmp(json_string_value(json_object_get(s, "name")),
		    name) == 0 && (key == NULL || (v != NULL &&
		    strcmp(v, value) == 0)))
			return json_real_value(json_object_get(s, "value"));
	}
	ck_abort_msg("no sample %s{%s=\"%s\"}", name, key ? key : "",
	    value ? value : "");
	return -1;
}

static char *
text_of(const json_t *samples)
{
	struct evbuffer *b = evbuffer_new();
	size_t len;
	char *text;

	metrics_text(b, samples);
	len = evbuffer_get_length(b);
	text = calloc(1, len + 1);
	ck_assert_ptr_nonnull(text);
	evbuffer_remove(b, text, len);
	evbuffer_free(b);
	return text;
}

/* ---- the cases ---- */

START_TEST(operations_count_by_collective_algorithm_and_error)
{
	json_t *s;

	metrics_op_done(COLL_ALLREDUCE, ALGO_RING, 0, 2000000);
	metrics_op_done(COLL_ALLREDUCE, ALGO_DOUBLING, 0, 50000);
	metrics_op_done(COLL_BROADCAST, ALGO_TREE, 0, 50000);
	metrics_op_done(COLL_BARRIER, ALGO_AUTO, 0, 50000);
	metrics_op_done(COLL_ALLREDUCE, ALGO_RING, MCCL_ERR_TIMEOUT, 9000000);
	metrics_op_done(COLL_ALLREDUCE, ALGO_RING, MCCL_ERR_PEER_FAILED, 1);
	metrics_op_done(COLL_ALLREDUCE, ALGO_RING, 999, 1);	/* no such code */
	metrics_wire(MCCL_BFLOAT16, 1000);
	metrics_wire(MCCL_FLOAT16, 24);
	metrics_xmem(1 << 20);
	metrics_overlapped();
	metrics_lanes(3000000000ULL, 1000000000ULL);
	s = metrics_samples();
	ck_assert_double_eq(sample(s, "mccl_ops_total", "collective",
	    "allreduce"), 2);
	ck_assert_double_eq(sample(s, "mccl_ops_total", "collective",
	    "broadcast"), 1);
	ck_assert_double_eq(sample(s, "mccl_ops_total", "collective",
	    "barrier"), 1);
	ck_assert_double_eq(sample(s, "mccl_ops_total", "collective",
	    "gather"), 0);
	ck_assert_double_eq(sample(s, "mccl_allreduce_algo_total", "algo",
	    "ring"), 1);
	ck_assert_double_eq(sample(s, "mccl_allreduce_algo_total", "algo",
	    "doubling"), 1);
	ck_assert_double_eq(sample(s, "mccl_broadcast_algo_total", "algo",
	    "tree"), 1);
	/* failed ops count by error only, not as ops or in the histogram */
	ck_assert_double_eq(sample(s, "mccl_op_errors_total", "error",
	    "timeout"), 1);
	ck_assert_double_eq(sample(s, "mccl_op_errors_total", "error",
	    "peer_failed"), 1);
	ck_assert_double_eq(sample(s, "mccl_op_errors_total", "error",
	    "aborted"), 0);
	ck_assert_double_eq(sample(s, "mccl_allreduce_wire_total", "wire",
	    "bfloat16"), 1);
	ck_assert_double_eq(sample(s, "mccl_allreduce_wire_total", "wire",
	    "float16"), 1);
	ck_assert_double_eq(sample(s, "mccl_wire_bytes_saved_total", NULL,
	    NULL), 1024);
	ck_assert_double_eq(sample(s, "mccl_xmem_bytes_total", NULL, NULL),
	    1 << 20);
	ck_assert_double_eq(sample(s, "mccl_allreduce_overlapped_total", NULL,
	    NULL), 1);
	ck_assert_double_eq(sample(s, "mccl_lane_seconds_total", NULL, NULL),
	    3);
	ck_assert_double_eq(sample(s, "mccl_lane_wait_seconds_total", NULL,
	    NULL), 1);
	json_decref(s);
}
END_TEST

/* Buckets are cumulative: an op counts in every bucket at or above it. */
START_TEST(latencies_fill_a_cumulative_histogram)
{
	json_t *s;

	metrics_op_done(COLL_ALLREDUCE, ALGO_RING, 0, 50000);	/* 50 us */
	metrics_op_done(COLL_ALLREDUCE, ALGO_RING, 0, 2000000);	/* 2 ms */
	metrics_op_done(COLL_ALLREDUCE, ALGO_RING, 0, 1000000);	/* 1 ms */
	metrics_op_done(COLL_ALLREDUCE, ALGO_RING, 0, 20000000000ULL);
	s = metrics_samples();
	ck_assert_double_eq(sample(s, "mccl_op_duration_seconds_bucket", "le",
	    "0.0001"), 1);
	ck_assert_double_eq(sample(s, "mccl_op_duration_seconds_bucket", "le",
	    "0.001"), 2);		/* the bound itself counts */
	ck_assert_double_eq(sample(s, "mccl_op_duration_seconds_bucket", "le",
	    "0.003"), 3);
	ck_assert_double_eq(sample(s, "mccl_op_duration_seconds_bucket", "le",
	    "10"), 3);
	ck_assert_double_eq(sample(s, "mccl_op_duration_seconds_bucket", "le",
	    "+Inf"), 4);
	ck_assert_double_eq(sample(s, "mccl_op_duration_seconds_count", NULL,
	    NULL), 4);
	ck_assert_double_eq_tol(sample(s, "mccl_op_duration_seconds_sum",
	    NULL, NULL), 20.00305, 1e-9);
	json_decref(s);
}
END_TEST

/* What the other parts say, as they said it. */
START_TEST(gauges_come_from_their_owners)
{
	json_t *s;

	ctl_started_ns = now_ns() - 5000000000ULL;	/* loop.c's */
	s = metrics_samples();
	ck_assert_double_ge(sample(s, "mccl_uptime_seconds", NULL, NULL), 5);
	ck_assert_double_lt(sample(s, "mccl_uptime_seconds", NULL, NULL),
	    3600);
	ck_assert_double_eq(sample(s, "mccl_clients", NULL, NULL), 3);
	ck_assert_double_eq(sample(s, "mccl_jobs", NULL, NULL), 2);
	ck_assert_double_eq(sample(s, "mccl_data_links", "kind", "lane"), 8);
	ck_assert_double_eq(sample(s, "mccl_data_links", "kind", "p2p"), 1);
	ck_assert_double_eq(sample(s, "mccl_unreceived_bytes", NULL, NULL),
	    4096);
	ck_assert_double_eq(sample(s, "mccl_scratch_bytes", NULL, NULL), 0);
	ck_assert_double_eq(sample(s, "mccl_peer_up", "peer", "n1"), 1);
	ck_assert_double_eq(sample(s, "mccl_peer_up", "peer", "n2"), 0);
	ck_assert_double_eq(sample(s, "mccl_peer_rtt_seconds", "peer", "n1"),
	    80e-6);
	ck_assert_double_eq(sample(s, "mccl_peer_link_info", "transport",
	    "rdma"), 1);
	ck_assert_double_eq(sample(s, "mccl_peer_link_info", "device",
	    "mlx5_0:1"), 1);
	ck_assert_double_eq(sample(s, "mccl_peer_bytes_total", "kind",
	    "data"), 1000);		/* n1's first: tx */
	/* link cost as rates: 25 us; 1e12 / 800 ps per byte */
	ck_assert_double_eq_tol(sample(s, "mccl_link_latency_seconds", NULL,
	    NULL), 25e-6, 1e-15);
	ck_assert_double_eq_tol(sample(s, "mccl_link_bytes_per_second", NULL,
	    NULL), 1.25e9, 1e-3);
	ck_assert_double_eq_tol(sample(s, "mccl_link_pair_bytes_per_second",
	    NULL, NULL), 1e9, 1e-3);
	ck_assert_double_eq_tol(sample(s, "mccl_reduce_bytes_per_second", NULL,
	    NULL), 4e9, 1e-3);
	json_decref(s);
}
END_TEST

/*
 * Every line is a comment or "name{labels} value"; a family's HELP and
 * TYPE come once, right before its first sample, the histogram's three
 * series under one family.
 */
START_TEST(the_text_is_prometheus_exposition_format)
{
	json_t *s;
	char *text, *line, *save = NULL;
	char seen[64][128], family[128] = "";
	int nseen = 0, types = 0, samples = 0;

	metrics_op_done(COLL_ALLREDUCE, ALGO_RING, 0, 2000000);
	s = metrics_samples();
	text = text_of(s);
	ck_assert_ptr_nonnull(strstr(text, "# HELP mccl_clients Connections "
	    "on the Unix socket.\n# TYPE mccl_clients gauge\nmccl_clients 3\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE mccl_op_duration_seconds "
	    "histogram\nmccl_op_duration_seconds_bucket{le=\"0.0001\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(text,
	    "mccl_ops_total{collective=\"allreduce\"} 1\n"));
	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char name[128];
		double v;

		if (strncmp(line, "# HELP ", 7) == 0) {
			ck_assert_int_eq(sscanf(line + 7, "%127s", family), 1);
			for (int i = 0; i < nseen; i++)	/* once a family */
				ck_assert_str_ne(seen[i], family);
			ck_assert_int_lt(nseen, 64);
			strcpy(seen[nseen++], family);
			continue;
		}
		if (strncmp(line, "# TYPE ", 7) == 0) {
			ck_assert_int_eq(strncmp(line + 7, family,
			    strlen(family)), 0);	/* right after HELP */
			types++;
			continue;
		}
		ck_assert_msg(sscanf(line, "%127[a-z_]", name) == 1 &&
		    strchr(line, ' ') != NULL && sscanf(strrchr(line, ' ') + 1,
		    "%lf", &v) == 1, "not a sample: %s", line);
		/* under its family's HELP: its name, or a histogram's series */
		ck_assert_msg(family[0] != '\0' && strncmp(name, family,
		    strlen(family)) == 0, "%s under %s", name, family);
		samples++;
	}
	ck_assert_int_eq(nseen, types);
	ck_assert_int_eq(samples, (int)json_array_size(s));
	free(text);
	json_decref(s);
}
END_TEST

/* A label value's backslash, quote and newline are escaped. */
START_TEST(label_values_are_escaped)
{
	json_t *s;
	char *text;

	peer_label = "a\"b\\c\nd";
	s = metrics_samples();
	text = text_of(s);
	ck_assert_msg(strstr(text, "mccl_peer_up{peer=\"a\\\"b\\\\c\\nd\"} 1\n")
	    != NULL, "%s", text);
	free(text);
	json_decref(s);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("metrics");

	log_init(LOG_ERR, "test_metrics");
	ctltest_init(&settings, NULL);
	/* Each case in a process of its own (test_run): the counters start
	   at 0. */
	tcase_add_test(tc, operations_count_by_collective_algorithm_and_error);
	tcase_add_test(tc, latencies_fill_a_cumulative_histogram);
	tcase_add_test(tc, gauges_come_from_their_owners);
	tcase_add_test(tc, the_text_is_prometheus_exposition_format);
	tcase_add_test(tc, label_values_are_escaped);
	suite_add_tcase(s, tc);
	return test_run(s);
}
