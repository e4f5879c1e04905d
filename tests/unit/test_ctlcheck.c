/*
 * test_ctlcheck.c: mcclctl check's control side (control/check.c) on node
 * 0 of three, the peers and the measurements faked: every pair measured
 * once and pairs that share a node never at once, the answer's figures and
 * outliers (a slow and asymmetric pair, an unreachable node), the refusals
 * (an argument, a second check, jobs running without --force), and a
 * measurement asked of this node checked before it starts.
 */
#include <sys/queue.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "ctltest.h"
#include "testlib.h"
#include "control/job.h"
#include "engine/check.h"

#define NNODES		3
#define GBIT_NS(bytes, gbps)	((uint64_t)((double)(bytes) * 8 / (gbps)))

/* ---- the peers, faked: what node 0 sent, and frames to deliver ---- */

struct frame {
	uint32_t	 to;
	uint16_t	 type;
	union {
		struct peer_check_run	 run;
		struct peer_check_done	 done;
	} m;
	char		 text[ERR_MAX];
};

static struct frame sent[64];
static int nsent, delivered;	/* self-addressed ones delivered so far */
static int up[NNODES];
static peer_frame_fn handlers[2];	/* CHECK_RUN, CHECK_DONE */
static struct check_measure *measure;	/* the one node 0 started */

int
peer_send(uint32_t to, uint16_t type, const void *msg, const void *trailer,
    size_t tlen)
{
	struct frame *f = &sent[nsent++];

	ck_assert_int_le(nsent, 64);
	memset(f, 0, sizeof(*f));
	f->to = to;
	f->type = type;
	memcpy(&f->m, msg, type == PEER_CHECK_RUN ? sizeof(f->m.run) :
	    sizeof(f->m.done));
	snprintf(f->text, sizeof(f->text), "%.*s", (int)tlen,
	    (const char *)trailer);
	return 0;
}

void
peer_handle(uint16_t type, peer_frame_fn fn)
{
	ck_assert(type == PEER_CHECK_RUN || type == PEER_CHECK_DONE);
	handlers[type - PEER_CHECK_RUN] = fn;
}

int peer_is_up(uint32_t n) { return up[n]; }

static struct conf_node nodes[NNODES] = { { .name = "n0" }, { .name = "n1" },
    { .name = "n2" } };

const char *
peer_name(uint32_t n)
{
	return n < NNODES ? nodes[n].name : "?";
}

uint32_t job_lanes_max(void) { return 2; }
struct job_list jobs = TAILQ_HEAD_INITIALIZER(jobs);	/* job.c's */

void
check_peer_of(uint32_t node, struct check_peer *p)
{
	memset(p, 0, sizeof(*p));
	p->node = node;
	snprintf(p->name, sizeof(p->name), "%s", nodes[node].name);
}

int
check_measure_start(struct check_measure *m, char *err, size_t errlen)
{
	(void)err; (void)errlen;
	ck_assert_ptr_null(measure);		/* one at a time */
	measure = m;
	return 0;
}

void check_measure_end(struct check_measure *m) { (void)m; measure = NULL; }
void check_shutdown(void) { }

/* ---- the client ---- */

static char reply[8192], error_text[ERR_MAX];
static uint32_t error_code;

static int
port_reply(struct client *c, const char *text)
{
	(void)c;
	snprintf(reply, sizeof(reply), "%s", text);
	return 0;
}

static void
port_error(struct client *c, uint32_t code, uint16_t type, const char *text)
{
	(void)c; (void)type;
	error_code = code;
	snprintf(error_text, sizeof(error_text), "%s", text);
}

static struct client client = { .desc = "mcclctl" };
static struct config settings;

/* ---- driving it ---- */

/* Deliver to node 0 a frame from node `from`. */
static void
deliver(uint32_t from, uint16_t type, const void *msg, const char *text)
{
	ck_assert_int_eq(handlers[type - PEER_CHECK_RUN](from, type, msg,
	    (const uint8_t *)text, strlen(text)), 0);
}

/* The rates each pair measures: tx a -> b, rx b -> a, in Gbit/s. */
static double rate_ab[NNODES][NNODES];

static struct peer_check_done
result(uint64_t id, uint32_t pair, uint32_t a, uint32_t b)
{
	const uint64_t bytes = 1000000000;

	return (struct peer_check_done){ id, pair, 0, 200000, bytes,
	    GBIT_NS(bytes, rate_ab[a][b]), bytes, GBIT_NS(bytes, rate_ab[b][a]) };
}

/*
 * Play the cluster until the client has an answer: node 0's own runs
 * are delivered to it and measured by the fake; another node's runs are
 * answered as that node.  Checks that no node is in two pairs at once.
 */
static void
play(void)
{
	int busy[NNODES] = { 0 }, rounds = 0;

	while (reply[0] == '\0' && error_code == 0 && rounds++ < 20000) {
		event_base_loop(ctl_base, EVLOOP_NONBLOCK);
		if (delivered == nsent) {
			usleep(100);
			continue;
		}
		struct frame f = sent[delivered++];

		if (f.type == PEER_CHECK_RUN) {
			uint32_t a = f.to, b = f.m.run.to;

			ck_assert_int_eq(busy[a] + busy[b], 0);
			busy[a] = busy[b] = 1;
			ck_assert_uint_eq(f.m.run.lanes, 2);
			if (a == 0) {		/* to itself, through the peers */
				deliver(0, PEER_CHECK_RUN, &f.m.run, "");
				ck_assert_ptr_nonnull(measure);
				ck_assert_uint_eq(measure->peer.node, b);
				ck_assert_uint_eq(measure->lanes, 2);
				measure->code = 0;
				measure->rtt_ns = 200000;
				measure->tx_bytes = measure->rx_bytes =
				    1000000000;
				measure->tx_ns = GBIT_NS(1000000000,
				    rate_ab[a][b]);
				measure->rx_ns = GBIT_NS(1000000000,
				    rate_ab[b][a]);
				uint64_t one = 1;
				ck_assert_int_eq(write(measure->done_fd, &one,
				    sizeof(one)), sizeof(one));
			} else {
				struct peer_check_done d = result(
				    f.m.run.check_id, f.m.run.pair, a, b);

				busy[a] = busy[b] = 0;
				deliver(a, PEER_CHECK_DONE, &d, "");
			}
		} else {			/* node 0's answer to itself */
			ck_assert_uint_eq(f.to, 0);
			deliver(0, PEER_CHECK_DONE, &f.m.done, f.text);
			memset(busy, 0, sizeof(busy));
		}
	}
}

/* Every pair measures gbps each way. */
static void
rates_all(double gbps)
{
	for (int a = 0; a < NNODES; a++)
		for (int b = 0; b < NNODES; b++)
			rate_ab[a][b] = gbps;
}

/* The answer's outliers are exactly first and second, in that order. */
static void
outliers_are(const json_t *doc, const char *first, const char *second)
{
	const json_t *outliers = json_object_get(doc, "outliers");

	ck_assert_uint_eq(json_array_size(outliers), 2);
	ck_assert_str_eq(json_string_value(json_array_get(outliers, 0)),
	    first);
	ck_assert_str_eq(json_string_value(json_array_get(outliers, 1)),
	    second);
}

/* ---- the cases ---- */

START_TEST(every_pair_is_measured_and_outliers_named)
{
	char err[ERR_MAX] = "";
	json_t *doc, *pairs;

	rates_all(10);
	rate_ab[1][2] = 2;		/* n1 -> n2 slow, and asymmetric */
	ck_assert_msg(check_ctl_start(&client, "", err, sizeof(err)) == 0,
	    "%s", err);
	play();
	ck_assert_msg(reply[0] != '\0', "no answer (error %u: %s)", error_code,
	    error_text);
	doc = json_loads(reply, 0, NULL);
	ck_assert_ptr_nonnull(doc);
	pairs = json_object_get(doc, "pairs");
	ck_assert_uint_eq(json_array_size(pairs), 6);	/* 3 pairs, 2 ways */
	ck_assert_int_eq(json_integer_value(json_object_get(doc, "lanes")), 2);
	ck_assert_double_eq_tol(json_real_value(json_object_get(doc,
	    "median_gbps")), 10, 1e-6);
	outliers_are(doc, "n1 -> n2: 2.000 Gbit/s, under half the median "
	    "(10.000)", "n1 <-> n2: asymmetric: 2.000 Gbit/s one way, 10.000 "
	    "the other");
	json_decref(doc);
	/* a second check may start now */
	ck_assert_int_eq(check_ctl_start(&client, "", err, sizeof(err)), 0);
	check_close();
}
END_TEST

START_TEST(a_down_node_is_unreachable)
{
	char err[ERR_MAX] = "";
	json_t *doc;

	rates_all(10);
	up[2] = 0;
	ck_assert_int_eq(check_ctl_start(&client, "", err, sizeof(err)), 0);
	play();
	doc = json_loads(reply, 0, NULL);
	ck_assert_ptr_nonnull(doc);
	outliers_are(doc, "n0 <-> n2: unreachable: node n2 is down (see "
	    "mcclctl peers)", "n1 <-> n2: unreachable: node n2 is down (see "
	    "mcclctl peers)");
	json_decref(doc);
}
END_TEST

START_TEST(refusals_name_why)
{
	char err[ERR_MAX] = "";
	struct job j;

	ck_assert_int_eq(check_ctl_start(&client, "now", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "check takes \"force\" or nothing, not \"now\"");
	memset(&j, 0, sizeof(j));
	TAILQ_INSERT_TAIL(&jobs, &j, entry);
	ck_assert_int_eq(check_ctl_start(&client, "", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "1 job runs on node n0: the check's traffic and "
	    "theirs would disturb each other (mcclctl check --force runs it "
	    "anyway)");
	ck_assert_int_eq(check_ctl_start(&client, "force", err, sizeof(err)),
	    0);
	ck_assert_int_eq(nsent, 1);
	ck_assert_uint_eq(sent[0].m.run.force, 1);
	ck_assert_int_eq(check_ctl_start(&client, "", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "a check is running on node n0 already: try "
	    "again when it has ended");
	TAILQ_REMOVE(&jobs, &j, entry);
	check_close();
}
END_TEST

/* A measurement another node asks of node 0, checked before it starts. */
START_TEST(a_measurement_asked_of_this_node_is_checked)
{
	struct peer_check_run bad = { 7, 0, 0, 2, 500, 0 };	/* to itself */
	struct peer_check_run ok = { 7, 1, 2, 2, 500, 0 };
	struct job j;

	deliver(1, PEER_CHECK_RUN, &bad, "");
	ck_assert_int_eq(nsent, 1);
	ck_assert_uint_eq(sent[0].to, 1);
	ck_assert_uint_eq(sent[0].m.done.code, MCCL_ERR_INVALID_ARGUMENT);
	ck_assert_str_eq(sent[0].text, "node n0: a check of node 0, 2 links, "
	    "500 ms: out of range");
	memset(&j, 0, sizeof(j));
	TAILQ_INSERT_TAIL(&jobs, &j, entry);
	deliver(1, PEER_CHECK_RUN, &ok, "");
	ck_assert_uint_eq(sent[1].m.done.code, MCCL_ERR_PERMISSION);
	ck_assert_str_eq(sent[1].text, "node n0 runs 1 job: not measured "
	    "(mcclctl check --force measures anyway)");
	ck_assert_ptr_null(measure);
	ok.force = 1;
	deliver(1, PEER_CHECK_RUN, &ok, "");
	ck_assert_ptr_nonnull(measure);
	ck_assert_uint_eq(measure->peer.node, 2);
	ck_assert_uint_eq(measure->link_id, PEER_CHECK_JOB | PEER_CHECK_FORCE |
	    7);
	deliver(1, PEER_CHECK_RUN, &ok, "");	/* one at a time */
	ck_assert_str_eq(sent[2].text, "node n0 is measuring for another "
	    "check");
	TAILQ_REMOVE(&jobs, &j, entry);
	check_close();
	ck_assert_ptr_null(measure);
}
END_TEST

static void
setup(void)
{
	memset(&settings, 0, sizeof(settings));
	snprintf(settings.node_name, sizeof(settings.node_name), "n0");
	settings.nodes = nodes;
	settings.nnodes = NNODES;
	settings.connect_timeout_ms = 1000;
	ctltest_init(&settings, &(struct client_port){ NULL, port_reply,
	    port_error, NULL, NULL, NULL });
	check_init();
	nsent = delivered = 0;
	reply[0] = error_text[0] = '\0';
	error_code = 0;
	measure = NULL;
	for (int i = 0; i < NNODES; i++)
		up[i] = 1;
}

static void
teardown(void)
{
	ctltest_end();
}

int
main(void)
{
	Suite *s = suite_create("ctlcheck");
	TCase *tc = tcase_create("ctlcheck");

	log_init(LOG_ERR, "test_ctlcheck");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, every_pair_is_measured_and_outliers_named);
	tcase_add_test(tc, a_down_node_is_unreachable);
	tcase_add_test(tc, refusals_name_why);
	tcase_add_test(tc, a_measurement_asked_of_this_node_is_checked);
	suite_add_tcase(s, tc);
	return test_run(s);
}
