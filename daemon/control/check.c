/*
 * check.c: mcclctl check (main thread).  The node asked measures every
 * pair of configured nodes before a job finds out the hard way: for each
 * pair it asks the lower-indexed node (PEER_CHECK_RUN, to itself through
 * the same message) to measure its data path to the other over data links
 * like a job's (engine/check.c: round trip, then each way for CHECK_MS on
 * streams_per_peer links).  Pairs run at once only when they share no
 * node, so no node's links carry two measurements.  The answer is every
 * pair's figures and the pairs that stand out: unreachable, under half the
 * median rate, much slower one way than the other, a slow round trip.
 */
#include <sys/eventfd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "control/job.h"
#include "engine/check.h"

#define CHECK_MS	500	/* each way, each pair */
#define TICK_MS		100	/* deadlines are looked at this often */
#define SLOW_FACTOR	2	/* under median / this: an outlier */
#define ASYM_FACTOR	2	/* one way under the other / this */
#define RTT_FACTOR	4	/* a round trip over median * this, */
#define RTT_SLACK_MS	0.5	/* and over median + this: not jitter */

enum pair_state { PAIR_WAIT, PAIR_RUN, PAIR_DONE };

struct pair {
	uint32_t		 a, b;		/* cluster indexes, a < b */
	enum pair_state		 state;
	uint64_t		 deadline_ns;
	struct peer_check_done	 r;		/* r.code != 0: err says why */
	char			 err[ERR_MAX];
};

/* The check this node runs (one at a time). */
static struct check {
	uint64_t	 id;
	struct client	*client;	/* mcclctl, waiting; NULL once gone */
	uint32_t	 force;
	uint32_t	 npairs, ndone;
	struct pair	*pairs;
	uint8_t		*busy;		/* by node: in a running pair */
	struct event	*ev_tick;
} *check;

static uint64_t check_serial;

/* The measurement this node makes for a checking node (one at a time). */
static struct measuring {
	struct check_measure	 m;
	uint32_t		 from;		/* the checking node */
	uint64_t		 check_id;
	uint32_t		 pair;
	struct event		*ev_done;
} *measuring;

static void	check_finish(void);

static uint64_t
pair_budget_ns(void)
{
	return ((uint64_t)2 * CHECK_MS + 2 * conf->connect_timeout_ms +
	    5000) * 1000000;
}

static void
pair_done(struct pair *p, int code, const char *why)
{
	if (p->state == PAIR_RUN)
		check->busy[p->a] = check->busy[p->b] = 0;
	p->state = PAIR_DONE;
	if (code != 0) {
		p->r.code = (uint32_t)code;
		wire_strlcpy(p->err, why, sizeof(p->err));
	}
	check->ndone++;
}

static int
node_reachable(uint32_t n)
{
	return n == conf->node_index || peer_is_up(n);
}

/* Start every waiting pair whose nodes are free; finish when all are done. */
static void
check_schedule(void)
{
	struct peer_check_run m;
	char why[ERR_MAX];

	for (uint32_t i = 0; i < check->npairs; i++) {
		struct pair *p = &check->pairs[i];

		if (p->state != PAIR_WAIT || check->busy[p->a] ||
		    check->busy[p->b])
			continue;
		if (!node_reachable(p->a) || !node_reachable(p->b)) {
			snprintf(why, sizeof(why), "node %s is down (see mcclctl "
			    "peers)", peer_name(node_reachable(p->a) ? p->b :
			    p->a));
			pair_done(p, MCCL_ERR_CONNECT, why);
			continue;
		}
		m = (struct peer_check_run){ check->id, i, p->b,
		    job_lanes_max(), CHECK_MS, check->force };
		if (peer_send(p->a, PEER_CHECK_RUN, &m, NULL, 0) == -1) {
			snprintf(why, sizeof(why), "cannot reach node %s",
			    peer_name(p->a));
			pair_done(p, MCCL_ERR_CONNECT, why);
			continue;
		}
		p->state = PAIR_RUN;
		p->deadline_ns = now_ns() + pair_budget_ns();
		check->busy[p->a] = check->busy[p->b] = 1;
	}
	if (check->ndone == check->npairs)
		check_finish();
}

static void
check_tick_cb(int fd, short events, void *arg)
{
	uint64_t now = now_ns();
	char why[ERR_MAX];

	(void)fd;
	(void)events;
	(void)arg;
	for (uint32_t i = 0; i < check->npairs; i++) {
		struct pair *p = &check->pairs[i];

		if (p->state != PAIR_RUN || now < p->deadline_ns)
			continue;
		snprintf(why, sizeof(why), "node %s did not report its "
		    "measurement within %llu ms", peer_name(p->a),
		    (unsigned long long)(pair_budget_ns() / 1000000));
		pair_done(p, MCCL_ERR_TIMEOUT, why);
	}
	check_schedule();
}

static void
check_free(void)
{
	event_free(check->ev_tick);
	free(check->pairs);
	free(check->busy);
	free(check);
	check = NULL;
}

/* mcclctl check [--force]: answered once every pair is measured. */
int
check_ctl_start(struct client *c, const char *arg, char *err, size_t errlen)
{
	struct timeval tv = { 0, TICK_MS * 1000 };
	uint32_t n = (uint32_t)conf->nnodes, k = 0;
	struct job *j;
	int njobs = 0;

	if (*arg != '\0' && strcmp(arg, "force") != 0) {
		snprintf(err, errlen, "check takes \"force\" or nothing, not "
		    "\"%s\"", arg);
		return -1;
	}
	if (check != NULL) {
		snprintf(err, errlen, "a check is running on node %s already: "
		    "try again when it has ended", conf->node_name);
		return -1;
	}
	TAILQ_FOREACH(j, &jobs, entry)
		njobs++;
	if (njobs > 0 && *arg == '\0') {
		snprintf(err, errlen, "%d job%s run%s on node %s: the check's "
		    "traffic and theirs would disturb each other (mcclctl "
		    "check --force runs it anyway)", njobs, njobs > 1 ? "s" : "",
		    njobs > 1 ? "" : "s", conf->node_name);
		return -1;
	}
	if ((check = calloc(1, sizeof(*check))) == NULL ||
	    (check->pairs = calloc((size_t)n * (n - 1) / 2 + 1,
	    sizeof(*check->pairs))) == NULL ||
	    (check->busy = calloc(n, 1)) == NULL ||
	    (check->ev_tick = event_new(ctl_base, -1, EV_PERSIST,
	    check_tick_cb, NULL)) == NULL) {
		if (check != NULL) {
			free(check->pairs);
			free(check->busy);
			free(check);
			check = NULL;
		}
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	check->id = ++check_serial;
	check->client = c;
	check->force = *arg != '\0';
	for (uint32_t a = 0; a < n; a++)
		for (uint32_t b = a + 1; b < n; b++)
			check->pairs[k++] = (struct pair){ .a = a, .b = b };
	check->npairs = k;
	log_info("check: %u pairs of nodes, asked by %s", k, c->desc);
	evtimer_add(check->ev_tick, &tv);
	check_schedule();
	return 0;
}

/* mcclctl gone: the check runs on, unanswered. */
void
check_ctl_forget(const struct client *c)
{
	if (check != NULL && check->client == c)
		check->client = NULL;
}

/* ---- the answer ---- */

static double
gbps(uint64_t bytes, uint64_t ns)
{
	return ns == 0 ? 0 : (double)bytes * 8 / (double)ns;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of the n values; 0 for none. */
static double
median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void
outlier(json_t *list, const char *fmt, ...) __attribute__((format(printf, 2,
    3)));

static void
outlier(json_t *list, const char *fmt, ...)
{
	char line[ERR_MAX + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	json_array_append_new(list, json_string(line));
}

/* The pairs that stand out against the medians of all that were measured. */
static json_t *
check_outliers(double mid_rate, double mid_rtt)
{
	json_t *out = json_array();

	for (uint32_t i = 0; i < check->npairs; i++) {
		const struct pair *p = &check->pairs[i];
		const char *a = conf->nodes[p->a].name;
		const char *b = conf->nodes[p->b].name;
		double ab = gbps(p->r.tx_bytes, p->r.tx_ns);
		double ba = gbps(p->r.rx_bytes, p->r.rx_ns);
		double rtt = (double)p->r.rtt_ns / 1e6;

		if (p->r.code == MCCL_ERR_PERMISSION) {
			outlier(out, "%s <-> %s: not measured: %s", a, b,
			    p->err);
			continue;
		}
		if (p->r.code != 0) {
			outlier(out, "%s <-> %s: unreachable: %s", a, b, p->err);
			continue;
		}
		if (ab < mid_rate / SLOW_FACTOR)
			outlier(out, "%s -> %s: %.3f Gbit/s, under half the "
			    "median (%.3f)", a, b, ab, mid_rate);
		if (ba < mid_rate / SLOW_FACTOR)
			outlier(out, "%s -> %s: %.3f Gbit/s, under half the "
			    "median (%.3f)", b, a, ba, mid_rate);
		if (ab < ba / ASYM_FACTOR || ba < ab / ASYM_FACTOR)
			outlier(out, "%s <-> %s: asymmetric: %.3f Gbit/s one way, "
			    "%.3f the other", a, b, ab, ba);
		if (rtt > mid_rtt * RTT_FACTOR && rtt > mid_rtt + RTT_SLACK_MS)
			outlier(out, "%s <-> %s: round trip %.3f ms, over %d "
			    "times the median (%.3f ms)", a, b, rtt, RTT_FACTOR,
			    mid_rtt);
	}
	return out;
}

static json_t *
check_doc(void)
{
	json_t *nodes = json_array(), *pairs = json_array(), *doc;
	double *rates = calloc(2 * check->npairs + 1, sizeof(double));
	double *rtts = calloc(check->npairs + 1, sizeof(double));
	double mid_rate, mid_rtt;
	size_t nr = 0, nt = 0;

	for (size_t i = 0; i < conf->nnodes; i++)
		json_array_append_new(nodes, json_string(conf->nodes[i].name));
	for (uint32_t i = 0; i < check->npairs; i++) {
		const struct pair *p = &check->pairs[i];
		int ok = p->r.code == 0;

		for (int way = 0; way < 2; way++)
			json_array_append_new(pairs, json_pack("{s:s, s:s, s:o, "
			    "s:o, s:s?}", "from", conf->nodes[way ? p->b :
			    p->a].name, "to", conf->nodes[way ? p->a : p->b].name,
			    "gbps", ok ? json_real(way ? gbps(p->r.rx_bytes,
			    p->r.rx_ns) : gbps(p->r.tx_bytes, p->r.tx_ns)) :
			    json_null(), "rtt_us", ok ? json_integer((json_int_t)
			    (p->r.rtt_ns / 1000)) : json_null(), "error",
			    ok ? NULL : p->err));
		if (ok && rates != NULL && rtts != NULL) {
			rates[nr++] = gbps(p->r.tx_bytes, p->r.tx_ns);
			rates[nr++] = gbps(p->r.rx_bytes, p->r.rx_ns);
			rtts[nt++] = (double)p->r.rtt_ns / 1e6;
		}
	}
	mid_rate = rates != NULL ? median(rates, nr) : 0;
	mid_rtt = rtts != NULL ? median(rtts, nt) : 0;
	free(rates);
	free(rtts);
	doc = json_pack("{s:o, s:i, s:i, s:o, s:f, s:f, s:o}", "nodes", nodes,
	    "lanes", (int)job_lanes_max(), "ms", CHECK_MS, "pairs",
	    pairs, "median_gbps", mid_rate, "median_rtt_ms", mid_rtt,
	    "outliers", check_outliers(mid_rate, mid_rtt));
	return doc;
}

static void
check_finish(void)
{
	json_t *doc = check_doc();
	char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;

	log_info("check: done, %zu outliers", json_array_size(json_object_get(
	    doc, "outliers")));
	if (check->client != NULL) {
		if (text == NULL)
			client_error(check->client, MCCL_ERR_NO_MEMORY, IPC_CTL,
			    "out of memory");
		else
			client_reply(check->client, text);
	}
	free(text);
	json_decref(doc);
	check_free();
}

/* ---- this node measuring for a checking node ---- */

static void
measuring_reply(uint32_t to, uint64_t id, uint32_t pair,
    const struct check_measure *m, int code, const char *why)
{
	struct peer_check_done d = { id, pair, (uint32_t)code, 0, 0, 0, 0, 0 };

	if (m != NULL)
		d = (struct peer_check_done){ id, pair, (uint32_t)code,
		    m->rtt_ns, m->tx_bytes, m->tx_ns, m->rx_bytes, m->rx_ns };
	peer_send(to, PEER_CHECK_DONE, &d, why, strlen(why));
}

static void
measuring_free(void)
{
	check_measure_end(&measuring->m);
	event_free(measuring->ev_done);
	close(measuring->m.done_fd);
	free(measuring);
	measuring = NULL;
}

static void
measuring_done_cb(int fd, short events, void *arg)
{
	struct measuring *w = measuring;

	(void)fd;
	(void)events;
	(void)arg;
	measuring_reply(w->from, w->check_id, w->pair, &w->m, w->m.code,
	    w->m.err);
	measuring_free();
}

static void
check_recv_run(uint32_t from, const struct peer_check_run *m)
{
	char why[ERR_MAX];
	struct job *j;
	int njobs = 0;

	TAILQ_FOREACH(j, &jobs, entry)
		njobs++;
	if (m->to <= conf->node_index || m->to >= conf->nnodes ||
	    m->lanes < 1 || m->lanes > PEER_LANES_MAX || m->ms < 1 ||
	    m->ms > PEER_CHECK_MS_MAX)
		snprintf(why, sizeof(why), "node %s: a check of node %u, %u "
		    "links, %u ms: out of range", conf->node_name, m->to,
		    m->lanes, m->ms);
	else if (measuring != NULL)
		snprintf(why, sizeof(why), "node %s is measuring for another "
		    "check", conf->node_name);
	else if (njobs > 0 && !m->force) {
		snprintf(why, sizeof(why), "node %s runs %d job%s: not "
		    "measured (mcclctl check --force measures anyway)",
		    conf->node_name, njobs, njobs > 1 ? "s" : "");
		measuring_reply(from, m->check_id, m->pair, NULL,
		    MCCL_ERR_PERMISSION, why);
		return;
	}
	else if ((measuring = calloc(1, sizeof(*measuring))) == NULL)
		snprintf(why, sizeof(why), "node %s: out of memory",
		    conf->node_name);
	else {
		measuring->from = from;
		measuring->check_id = m->check_id;
		measuring->pair = m->pair;
		measuring->m = (struct check_measure){
		    .link_id = PEER_CHECK_JOB | (m->force ? PEER_CHECK_FORCE :
		    0) | m->check_id, .lanes = m->lanes,
		    .ms = m->ms };
		check_peer_of(m->to, &measuring->m.peer);
		if ((measuring->m.done_fd = eventfd(0, EFD_CLOEXEC |
		    EFD_NONBLOCK)) != -1 && (measuring->ev_done = event_new(
		    ctl_base, measuring->m.done_fd, EV_READ, measuring_done_cb,
		    NULL)) != NULL && event_add(measuring->ev_done, NULL) == 0 &&
		    check_measure_start(&measuring->m, why, sizeof(why)) == 0)
			return;
		if (measuring->ev_done != NULL)
			event_free(measuring->ev_done);
		if (measuring->m.done_fd != -1)
			close(measuring->m.done_fd);
		free(measuring);
		measuring = NULL;
		if (why[0] == '\0')
			snprintf(why, sizeof(why), "node %s: out of file "
			    "descriptors", conf->node_name);
	}
	measuring_reply(from, m->check_id, m->pair, NULL, MCCL_ERR_INVALID_ARGUMENT,
	    why);
}

static void
check_recv_done(uint32_t from, const struct peer_check_done *d,
    const char *text)
{
	struct pair *p;

	if (check == NULL || d->check_id != check->id || d->pair >=
	    check->npairs)
		return;		/* late: the pair timed out */
	p = &check->pairs[d->pair];
	if (p->a != from || p->state != PAIR_RUN)
		return;
	p->r = *d;
	pair_done(p, (int)d->code, text);
	check_schedule();
}

static int
check_peer_msg(uint32_t from, uint16_t type, const void *msg,
    const uint8_t *trailer, size_t tlen)
{
	char text[PEER_TEXT_MAX + 1];

	snprintf(text, sizeof(text), "%.*s", (int)tlen, (const char *)trailer);
	if (type == PEER_CHECK_RUN)
		check_recv_run(from, msg);
	else
		check_recv_done(from, msg, text);
	return 0;
}

/* At start, before the peers: the check's frames. */
void
check_init(void)
{
	peer_handle(PEER_CHECK_RUN, check_peer_msg);
	peer_handle(PEER_CHECK_DONE, check_peer_msg);
}

/* The daemon is exiting. */
void
check_close(void)
{
	if (measuring != NULL)
		measuring_free();
	if (check != NULL)
		check_free();
	check_shutdown();
}
