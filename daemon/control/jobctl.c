/*
 * jobctl.c: what mcclctl sees of jobs (main thread): the list, an abort,
 * and "mcclctl job NAME", every node's view of a job gathered by asking the
 * other nodes, with a diagnosis of what holds it up.  The same question
 * also ends a timed-out operation: the node it waited on is asked why, so
 * every rank's error names the rank that held it up (job_blame).
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "control/job.h"
#include "engine/algo.h"

/* ---- one node's view of a job ---- */

#define QUERY_MS	1000	/* for the other nodes to answer */
#define BEHIND_MIN_MS	250	/* a wait shorter than this is no news */

/*
 * The collective the engine runs: its age, how long until its deadline,
 * and the node it waits on (whose data it lacks, or who takes none).
 */
static json_t *
inflight_json(struct job *j)
{
	struct op_now op;
	uint64_t now;

	if (!engine_current(&j->comm, &op))
		return json_null();
	if ((now = now_ns()) < op.ready_ns)
		now = op.ready_ns;
	return json_pack("{s:I, s:s, s:I, s:I, s:I, s:s?}", "seq",
	    (json_int_t)op.seq, "coll", proto_coll_name(op.coll), "count",
	    (json_int_t)op.count, "age_ms",
	    (json_int_t)((now - op.ready_ns) / 1000000), "timeout_in_ms",
	    (json_int_t)(op.deadline_ns > now ? (op.deadline_ns - now) /
	    1000000 : 0), "waiting_for", op.wait_pos < j->comm.nnodes &&
	    op.wait_pos != j->comm.me ? j->comm.names[op.wait_pos] : NULL);
}

/* The next collective, when some local ranks submitted it and others not. */
static json_t *
waiting_json(struct job *j)
{
	uint64_t seq, since, now = now_ns();
	json_t *missing;

	if ((since = subq_waiting_since(&j->comm, &seq)) == 0 || since > now)
		return json_null();
	missing = json_array();
	for (uint32_t i = 0; i < j->comm.nlocal; i++)
		if (subq_submitted(&j->comm, i) < seq)
			json_array_append_new(missing,
			    json_integer(j->comm.local_ranks[i]));
	return json_pack("{s:I, s:I, s:o}", "seq", (json_int_t)seq, "for_ms",
	    (json_int_t)((now - since) / 1000000), "ranks", missing);
}

/* This node's part: its ranks and what they have done, at one moment. */
static json_t *
job_snapshot(struct job *j)
{
	json_t *ranks = json_array();

	job_collect(j);
	for (uint32_t i = 0; i < j->comm.nlocal; i++) {
		uint32_t r = j->comm.local_ranks[i];
		struct client *c = j->clients[r];

		json_array_append_new(ranks, json_pack("{s:i, s:I, s:I, s:b}",
		    "rank", (int)r, "submitted", (json_int_t)subq_submitted(&j->comm, i),
		    "completed", (json_int_t)j->ops_completed, "connected",
		    c != NULL));
	}
	return json_pack("{s:s, s:s, s:o, s:o, s:o, s:I, s:I, s:s?}", "node",
	    conf->node_name, "state", job_state_names[j->state], "ranks",
	    ranks, "in_flight", inflight_json(j), "waiting", waiting_json(j),
	    "wire_ops", (json_int_t)j->wire_ops, "wire_bytes_saved",
	    (json_int_t)j->wire_saved, "error", j->state == JOB_FAILED ?
	    j->err : NULL);
}

/*
 * Why node `node` has not moved op seq, from its view (NULL: it did not
 * answer): its ranks that have not submitted it or are gone, else whom it
 * waits on itself.
 */
static void
why_node(const json_t *view, const char *node, uint64_t seq, char *buf,
    size_t len)
{
	const json_t *r, *in = json_object_get(view, "in_flight");
	char ranks[96] = "";
	size_t i, n = 0, off = 0;
	int gone = 0;

	if (!json_is_array(json_object_get(view, "ranks"))) {
		snprintf(buf, len, "node %s did not answer within %d ms: is it "
		    "down? (see mcclctl peers)", node, QUERY_MS);
		return;
	}
	json_array_foreach(json_object_get(view, "ranks"), i, r) {
		int left = !json_is_true(json_object_get(r, "connected"));

		if (!left && (uint64_t)json_integer_value(json_object_get(r,
		    "submitted")) >= seq)
			continue;
		gone |= left;
		if (off < sizeof(ranks))
			off += (size_t)snprintf(ranks + off, sizeof(ranks) - off,
			    "%s%lld", n ? ", " : "", (long long)
			    json_integer_value(json_object_get(r, "rank")));
		n++;
	}
	if (n > 0)
		snprintf(buf, len, "rank%s %s on node %s %s", n > 1 ? "s" : "",
		    ranks, node, gone ? "left or died before submitting it" :
		    n > 1 ? "have not submitted it" : "has not submitted it");
	else if (json_is_string(json_object_get(view, "error")))
		snprintf(buf, len, "on node %s the job failed: %s", node,
		    json_string_value(json_object_get(view, "error")));
	else if (json_is_object(in) && json_is_string(json_object_get(in,
	    "waiting_for")))
		snprintf(buf, len, "node %s runs op %lld too, waiting for node "
		    "%s", node, (long long)json_integer_value(json_object_get(in,
		    "seq")), json_string_value(json_object_get(in,
		    "waiting_for")));
	else
		snprintf(buf, len, "node %s has it from every rank there and "
		    "waits on no node", node);
}

/* ---- questions to the nodes of a job ---- */

/*
 * A question to nodes of a job: for mcclctl (every node, then a reply with
 * a diagnosis) or for a timed-out op (the node it waited on, then the
 * job's failure).
 */
struct query {
	TAILQ_ENTRY(query) entry;
	uint32_t	 qid;
	struct client	*client;	/* mcclctl, waiting; or NULL */
	struct op	*blame;		/* or the op that timed out */
	uint64_t	 job_id;
	uint32_t	 waiting;	/* answers still to come */
	json_t		*nodes;		/* each node's answer, by position */
	json_t		*job;		/* name, id, state, ... */
	struct event	*ev_timeout;
};

static TAILQ_HEAD(, query) queries = TAILQ_HEAD_INITIALIZER(queries);
static uint32_t next_qid;

static void	query_done(struct query *);

static void
query_free(struct query *q)
{
	TAILQ_REMOVE(&queries, q, entry);
	event_free(q->ev_timeout);
	json_decref(q->nodes);
	json_decref(q->job);
	free(q);
}

static void
query_timeout_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	query_done(arg);
}

/* Ask the nodes at positions [from, to) of j; this one answers itself. */
static struct query *
query_start(struct job *j, uint32_t from, uint32_t to)
{
	struct timeval tv = { QUERY_MS / 1000, (QUERY_MS % 1000) * 1000 };
	struct peer_job_query m;
	struct query *q;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return NULL;
	q->qid = ++next_qid;
	q->job_id = j->comm.id;
	q->nodes = json_array();
	m = (struct peer_job_query){ j->comm.id, q->qid };
	for (uint32_t p = 0; p < j->comm.nnodes; p++) {
		if (p < from || p >= to)
			json_array_append_new(q->nodes, json_null());
		else if (p == j->comm.me)
			json_array_append_new(q->nodes, job_snapshot(j));
		else {
			json_array_append_new(q->nodes, json_pack("{s:s}",
			    "node", j->comm.names[p]));
			if (peer_send(j->comm.node_index[p], PEER_JOB_QUERY, &m, NULL,
			    0) == 0)
				q->waiting++;
		}
	}
	q->ev_timeout = evtimer_new(ctl_base, query_timeout_cb, q);
	TAILQ_INSERT_TAIL(&queries, q, entry);
	evtimer_add(q->ev_timeout, &tv);
	return q;
}

void
job_recv_query(uint32_t from, const struct peer_job_query *m)
{
	struct job *j = job_find_id(m->job_id);
	json_t *snap;
	char *text;

	if (j == NULL || !job_spans(j, from))
		return;
	snap = job_snapshot(j);
	if ((text = json_dumps(snap, JSON_COMPACT)) != NULL &&
	    strlen(text) < PEER_MSG_MAX - 256)
		peer_send(from, PEER_JOB_INFO, m, text, strlen(text));
	free(text);
	json_decref(snap);
}

int
job_recv_info(uint32_t from, const struct peer_job_query *m,
    const uint8_t *trailer, size_t tlen)
{
	struct job *j;
	struct query *q;
	json_t *snap;

	TAILQ_FOREACH(q, &queries, entry)
		if (q->qid == m->qid && q->job_id == m->job_id)
			break;
	if (q == NULL || (j = job_find_id(m->job_id)) == NULL)
		return 0;	/* late: the query timed out */
	if ((snap = json_loadb((const char *)trailer, tlen, 0, NULL)) == NULL ||
	    !json_is_object(snap))
		return -1;
	for (uint32_t p = 0; p < j->comm.nnodes; p++)
		if (j->comm.node_index[p] == from)
			json_array_set_new(q->nodes, p, json_incref(snap));
	json_decref(snap);
	if (q->waiting > 0 && --q->waiting == 0)
		query_done(q);
	return 0;
}

/* ---- a timed-out op: the node it waited on says why ---- */

/*
 * op timed out waiting on node op->blame_pos: ask that node, and fail the
 * job with its answer (or with its silence) within QUERY_MS.  A failure
 * that comes meanwhile (the node that knows says so itself) wins.
 */
int
job_blame(struct job *j, struct op *op)
{
	struct query *q;

	if ((q = query_start(j, op->blame_pos, op->blame_pos + 1)) == NULL)
		return -1;
	q->blame = op;
	if (q->waiting == 0)
		query_done(q);
	return 0;
}

static void
blame_done(struct query *q)
{
	struct op *op = q->blame;
	struct job *j = job_of(op->comm);
	const char *node = j->comm.names[op->blame_pos];
	char why[ERR_MAX], msg[ERR_MAX];

	why_node(json_array_get(q->nodes, op->blame_pos), node, op->desc.seq,
	    why, sizeof(why));
	snprintf(msg, sizeof(msg), "timeout waiting for node %s: %s", node,
	    why);
	job_fail_op(j, op, MCCL_ERR_TIMEOUT, msg);
	op_finish(op, j->code, j->err);
	query_free(q);
}

/* The job is going: its ops still waiting for an answer go with it. */
void
job_blame_cancel(struct job *j)
{
	struct query *q, *next;

	for (q = TAILQ_FIRST(&queries); q != NULL; q = next) {
		next = TAILQ_NEXT(q, entry);
		if (q->blame != NULL && q->blame->comm == &j->comm) {
			op_free(q->blame);
			query_free(q);
		}
	}
}

/* ---- mcclctl job NAME: every node's view, and a diagnosis ---- */

static void
diag_add(json_t *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
diag_add(json_t *d, const char *fmt, ...)
{
	char line[ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	json_array_append_new(d, json_string(line));
}

/* Shorter waits are what any collective takes: a multiple of the slowest. */
static json_int_t
behind_ms(const struct job *j)
{
	uint64_t slow = j->op_slow_ns[0] > j->op_slow_ns[1] ?
	    j->op_slow_ns[0] : j->op_slow_ns[1];
	uint64_t ms = 4 * slow / 1000000;

	return (json_int_t)(ms > BEHIND_MIN_MS ? ms : BEHIND_MIN_MS);
}

static const json_t *
view_of(const json_t *nodes, const char *name)
{
	const json_t *n;
	size_t i;

	json_array_foreach(nodes, i, n)
		if (json_is_string(json_object_get(n, "node")) &&
		    strcmp(json_string_value(json_object_get(n, "node")),
		    name) == 0)
			return n;
	return NULL;
}

/* An op in flight on node for longer than `behind`: what holds it. */
static void
diag_inflight(json_t *d, const json_t *nodes, const char *node,
    const json_t *in, json_int_t behind)
{
	json_int_t age = json_integer_value(json_object_get(in, "age_ms"));
	const char *on = json_string_value(json_object_get(in, "waiting_for"));
	uint64_t seq = (uint64_t)json_integer_value(json_object_get(in, "seq"));
	char why[ERR_MAX];

	if (age < behind)
		return;
	if (on != NULL)
		why_node(view_of(nodes, on), on, seq, why, sizeof(why));
	diag_add(d, "%s seq %llu on node %s: in flight %.1f s, times out in "
	    "%.1f s%s%s%s%s", json_string_value(json_object_get(in, "coll")),
	    (unsigned long long)seq, node, (double)age / 1000,
	    (double)json_integer_value(json_object_get(in, "timeout_in_ms")) /
	    1000, on != NULL ? ", waiting for node " : "", on != NULL ? on : "",
	    on != NULL ? ": " : "", on != NULL ? why : "");
}

/* Local ranks that have not submitted what the others there did. */
static void
diag_waiting(json_t *d, const char *node, const json_t *w, json_int_t behind)
{
	json_int_t ms = json_integer_value(json_object_get(w, "for_ms"));
	const json_t *r;
	size_t i;

	if (ms < behind)
		return;
	json_array_foreach(json_object_get(w, "ranks"), i, r)
		diag_add(d, "rank %lld on node %s has not submitted op %lld: "
		    "the other ranks there did %.1f s ago",
		    (long long)json_integer_value(r), node,
		    (long long)json_integer_value(json_object_get(w, "seq")),
		    (double)ms / 1000);
}

/*
 * What holds the job up, from the nodes' views.  A rank is behind only
 * when something has waited for it longer than `behind`: counts taken at
 * different moments on different nodes differ in any busy job.
 */
static json_t *
query_diagnose(const struct query *q, json_int_t behind)
{
	json_t *d = json_array(), *n, *r;
	json_int_t most = 0;
	size_t i, k;

	json_array_foreach(q->nodes, i, n) {
		const char *node = json_string_value(json_object_get(n, "node"));

		if (json_object_get(n, "ranks") == NULL) {
			diag_add(d, "node %s did not answer: is it down? (see "
			    "mcclctl peers)", node);
			continue;
		}
		if (json_is_string(json_object_get(n, "error")))
			diag_add(d, "on node %s the job failed: %s", node,
			    json_string_value(json_object_get(n, "error")));
		json_array_foreach(json_object_get(n, "ranks"), k, r) {
			json_int_t sub = json_integer_value(json_object_get(r,
			    "submitted"));

			if (sub > most)
				most = sub;
			if (!json_is_true(json_object_get(r, "connected")))
				diag_add(d, "rank %lld on node %s has left or "
				    "died", (long long)json_integer_value(
				    json_object_get(r, "rank")), node);
		}
		if (json_is_object(json_object_get(n, "waiting")))
			diag_waiting(d, node, json_object_get(n, "waiting"),
			    behind);
		if (json_is_object(json_object_get(n, "in_flight")))
			diag_inflight(d, q->nodes, node, json_object_get(n,
			    "in_flight"), behind);
	}
	if (json_array_size(d) == 0)
		diag_add(d, "no problem seen: nothing has waited %lld ms or more "
		    "(up to %lld collectives submitted)", (long long)behind,
		    (long long)most);
	return d;
}

static void
query_answer(struct query *q)
{
	struct job *j = job_find_id(q->job_id);
	json_int_t behind = j != NULL ? behind_ms(j) : BEHIND_MIN_MS;
	char *text;

	json_object_set_new(q->job, "nodes", json_incref(q->nodes));
	json_object_set_new(q->job, "behind_ms", json_integer(behind));
	json_object_set_new(q->job, "diagnosis", query_diagnose(q, behind));
	text = json_dumps(q->job, JSON_COMPACT);
	if (text == NULL)
		client_error(q->client, MCCL_ERR_NO_MEMORY, IPC_CTL,
		    "out of memory");
	else
		client_reply(q->client, text);
	free(text);
	query_free(q);
}

/* Every answer is in, or the time is up. */
static void
query_done(struct query *q)
{
	if (q->blame != NULL)
		blame_done(q);
	else
		query_answer(q);
}

/*
 * What AUTO runs between this job's nodes, by bytes per rank, with the
 * time the cost model predicts at the top of each range (engine/algo.c):
 * [{"algo": "direct", "up_to_bytes": 16384, "at_bytes": 16384,
 * "predicted_us": 61.2}, ..., up_to_bytes null last].
 */
static json_t *
auto_ranges(int coll, const struct job *j)
{
	struct algo_range r[ALGO_RANGES_MAX];
	size_t n = algo_auto_ranges(coll, j->comm.nnodes, &j->comm.cost, r,
	    ALGO_RANGES_MAX);
	json_t *list = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, json_pack("{s:s, s:o, s:I, s:f}",
		    "algo", proto_algo_name(r[i].algo), "up_to_bytes",
		    r[i].up_to == SIZE_MAX ? json_null() : json_integer(
		    (json_int_t)r[i].up_to), "at_bytes", (json_int_t)
		    r[i].at_bytes, "predicted_us", r[i].at_ns / 1e3));
	return list;
}

/* mcclctl job NAME: answered once every node of the job has, or at 1 s. */
int
job_ctl_query(struct client *c, const char *name, char *err, size_t errlen)
{
	struct query *q;
	struct job *j;

	TAILQ_FOREACH(j, &jobs, entry)
		if (strcmp(j->comm.name, name) == 0 && j->comm.id != 0 &&
		    client_sees(c, j->comm.uid))
			break;
	if (j == NULL) {
		snprintf(err, errlen, "no formed job named \"%s\" on node %s",
		    name, conf->node_name);
		return -1;
	}
	if ((q = query_start(j, 0, j->comm.nnodes)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	q->client = c;
	q->job = json_pack("{s:s, s:i, s:i, s:i, s:s, s:s, s:o, s:o, s:{s:i, "
	    "s:i, s:i, s:i}}", "name", j->comm.name, "nranks", (int)j->comm.nranks,
	    "nnodes", (int)j->comm.nnodes, "lanes", (int)j->comm.nlanes, "state",
	    job_state_names[j->state], "algo",
	    proto_algo_name(conf->algo),
	    "allreduce_auto", auto_ranges(COLL_ALLREDUCE, j),
	    "broadcast_auto", auto_ranges(COLL_BROADCAST, j), "link_cost",
	    "alpha_ns", (int)j->comm.cost.alpha_ns, "beta_ps", (int)j->comm.cost.beta_ps,
	    "beta_pair_ps", (int)j->comm.cost.beta_pair_ps, "gamma_ps",
	    (int)j->comm.cost.gamma_ps);
	json_object_set_new(q->job, "id", json_sprintf("%016llx",
	    (unsigned long long)j->comm.id));
	if (q->waiting == 0)
		query_answer(q);
	return 0;
}

/* A client gone: forget what it was waiting for. */
void
job_ctl_forget(const struct client *c)
{
	struct query *q, *next;

	for (q = TAILQ_FIRST(&queries); q != NULL; q = next) {
		next = TAILQ_NEXT(q, entry);
		if (q->client == c)
			query_free(q);
	}
}

/* ---- mcclctl ---- */


static json_t *
job_ctl_one(struct job *j)
{
	json_t *ranks = json_array();
	char id[20];

	job_collect(j);
	snprintf(id, sizeof(id), "%016llx", (unsigned long long)j->comm.id);
	for (uint32_t r = 0; r < j->comm.nranks; r++)
		if (j->clients[r] != NULL)
			json_array_append_new(ranks, json_integer(r));
	return json_pack("{s:s, s:s, s:i, s:s, s:i, s:o, s:i, s:i, s:I, s:o, "
	    "s:s?}",
	    "name", j->comm.name, "id", id, "uid", (int)j->comm.uid,
	    "state", job_state_names[j->state], "nranks", (int)j->comm.nranks,
	    "local_ranks", ranks, "nlocal", (int)(j->comm.nlocal - j->nleft),
	    "nnodes", (int)j->comm.nnodes, "ops_completed",
	    (json_int_t)j->ops_completed, "op_in_flight", inflight_json(j),
	    "error", j->state == JOB_FAILED ? j->err : NULL);
}

/* mcclctl abort NAME: fail every job of that name here and everywhere. */
json_t *
job_ctl_abort(const struct client *c, const char *name, char *err,
    size_t errlen)
{
	struct job *j, *next;
	int n = 0;

	for (j = TAILQ_FIRST(&jobs); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (strcmp(j->comm.name, name) != 0 || j->state == JOB_FAILED)
			continue;
		job_fail(j, MCCL_ERR_ABORTED, "job %s: aborted by mcclctl "
		    "(uid %u) on node %s", j->comm.name, (unsigned)c->uid,
		    conf->node_name);
		n++;
	}
	if (n == 0) {
		snprintf(err, errlen, "no running job named \"%s\" on node %s",
		    name, conf->node_name);
		return NULL;
	}
	return json_pack("{s:s, s:i}", "job", name, "aborted", n);
}

json_t *
job_ctl_list(const struct client *c)
{
	json_t *list = json_array();
	struct job *j;

	TAILQ_FOREACH(j, &jobs, entry)
		if (client_sees(c, j->comm.uid))
			json_array_append_new(list, job_ctl_one(j));
	return json_pack("{s:o}", "jobs", list);
}

/* ---- failed jobs, kept for mcclctl ---- */

/* A failed or aborted job that has ended here, as mcclctl shows it. */
struct failed_job {
	TAILQ_ENTRY(failed_job) entry;
	uid_t		 uid;
	char		 name[JOB_NAME_MAX];
	json_t		*doc;
};

static TAILQ_HEAD(failed_job_list, failed_job) failed_jobs =
    TAILQ_HEAD_INITIALIZER(failed_jobs);	/* oldest first */

void
utc_time(time_t t, char *buf, size_t len)
{
	struct tm tm;

	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
}

static void
failed_free(struct failed_job *f)
{
	TAILQ_REMOVE(&failed_jobs, f, entry);
	json_decref(f->doc);
	free(f);
}

/* Keep at most failed_jobs_kept of uid's: the oldest go. */
static void
failed_trim(uid_t uid)
{
	struct failed_job *f, *next;
	uint32_t n = 0;

	TAILQ_FOREACH(f, &failed_jobs, entry)
		n += f->uid == uid;
	for (f = TAILQ_FIRST(&failed_jobs); f != NULL &&
	    n > conf->failed_jobs_kept; f = next) {
		next = TAILQ_NEXT(f, entry);
		if (f->uid == uid) {
			failed_free(f);
			n--;
		}
	}
}

/*
 * The failed jobs survive a restart of the daemon in a file beside its
 * socket, named after it (mccld.sock: mccld.failed-jobs.json; daemons
 * whose sockets share a folder keep theirs apart; /run/mccl keeps it
 * across restarts of mccld.service), rewritten whole, through a temporary file and a rename,
 * as each one is added: [{"uid": U, "job": {what mcclctl shows}}, ...].
 * It is read back only if it is the daemon user's, a regular file no one
 * else may write, and at most FAILED_FILE_MAX bytes; entries that do not
 * hold are skipped, and failed_jobs_kept bounds each uid's as always.
 */
#define FAILED_FILE	".failed-jobs.json"
#define FAILED_FILE_MAX	(16 * 1024 * 1024)

static void
failed_path(char *buf, size_t len, const char *suffix)
{
	const char *sock = conf->socket_path;
	size_t n = strlen(sock);

	if (n > 5 && strcmp(sock + n - 5, ".sock") == 0)
		n -= 5;
	snprintf(buf, len, "%.*s%s%s", (int)n, sock, FAILED_FILE, suffix);
}

static void
failed_save(void)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	static int warned;
	struct failed_job *f;
	json_t *all = json_array();
	int fd, rc = -1;

	TAILQ_FOREACH(f, &failed_jobs, entry)
		json_array_append_new(all, json_pack("{s:I, s:O}", "uid",
		    (json_int_t)f->uid, "job", f->doc));
	failed_path(path, sizeof(path), "");
	failed_path(tmp, sizeof(tmp), ".XXXXXX");
	if ((fd = mkostemp(tmp, O_CLOEXEC)) != -1) {
		rc = json_dumpfd(all, fd, JSON_COMPACT) == 0 && fsync(fd) == 0 &&
		    rename(tmp, path) == 0 ? 0 : -1;
		close(fd);
		if (rc == -1)
			unlink(tmp);
	}
	json_decref(all);
	if (rc == -1 && !warned++)
		log_warn("jobs: cannot keep the failed jobs in %s for a "
		    "restart", path);
	else if (rc == 0)
		warned = 0;
}

/* One entry of the file, if it holds: {"uid": U, "job": {"name": ...}}. */
static int
failed_restore_one(json_t *e)
{
	json_t *uid = json_object_get(e, "uid"), *doc = json_object_get(e,
	    "job");
	const char *name = json_string_value(json_object_get(doc, "name"));
	struct failed_job *f;

	if (!json_is_integer(uid) || json_integer_value(uid) < 0 ||
	    json_integer_value(uid) > UINT32_MAX || !json_is_object(doc) ||
	    name == NULL || *name == '\0' || strlen(name) >= JOB_NAME_MAX ||
	    (f = calloc(1, sizeof(*f))) == NULL)
		return 0;
	f->uid = (uid_t)json_integer_value(uid);
	wire_strlcpy(f->name, name, sizeof(f->name));
	f->doc = json_incref(doc);
	TAILQ_INSERT_TAIL(&failed_jobs, f, entry);
	failed_trim(f->uid);
	return 1;
}

/* At start: the failed jobs of the daemon before this one. */
void
job_ctl_restore(void)
{
	char path[PATH_MAX];
	json_error_t jerr;
	struct stat st;
	json_t *all, *e;
	size_t i, n = 0;
	int fd;

	failed_path(path, sizeof(path), "");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		if (errno != ENOENT)
			log_warn("jobs: %s", path);
		return;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 022) ||
	    st.st_size > FAILED_FILE_MAX) {
		log_warnx("jobs: %s is not this daemon user's private file of "
		    "at most %d bytes: not read", path, FAILED_FILE_MAX);
		close(fd);
		return;
	}
	all = json_loadfd(fd, 0, &jerr);
	close(fd);
	if (!json_is_array(all))
		log_warnx("jobs: %s: not a list of failed jobs (%s): not read",
		    path, jerr.text);
	json_array_foreach(all, i, e)
		n += failed_restore_one(e);
	json_decref(all);
	log_info("jobs: %zu failed jobs kept from before the restart", n);
}

/* A failed job is going: remember its reason, its op, its ranks. */
void
job_ctl_remember(const struct job *j)
{
	struct failed_job *f;
	char when[32];

	if (conf->failed_jobs_kept == 0 || (f = calloc(1, sizeof(*f))) ==
	    NULL)
		return;
	f->uid = j->comm.uid;
	wire_strlcpy(f->name, j->comm.name, sizeof(f->name));
	utc_time(j->failed_at, when, sizeof(when));
	f->doc = json_pack("{s:s, s:n, s:i, s:i, s:i, s:i, s:I, s:s, s:s, "
	    "s:s, s:o}", "name", j->comm.name, "id", "uid", (int)j->comm.uid,
	    "nranks", (int)j->comm.nranks, "nnodes", (int)j->comm.nnodes, "nlocal",
	    (int)j->comm.nlocal, "ops_completed", (json_int_t)j->ops_completed,
	    "failed_at", when, "code", proto_result_name(j->code), "error",
	    j->err, "op", j->fail_coll != 0 ? json_pack("{s:I, s:s}", "seq",
	    (json_int_t)j->fail_seq, "coll", proto_coll_name(j->fail_coll)) :
	    json_null());
	if (f->doc == NULL) {
		free(f);
		return;
	}
	json_object_set_new(f->doc, "id", j->comm.id != 0 ? json_sprintf("%016llx",
	    (unsigned long long)j->comm.id) : json_null());
	TAILQ_INSERT_TAIL(&failed_jobs, f, entry);
	failed_trim(j->comm.uid);
	failed_save();
}

/*
 * mcclctl jobs --failed: every one c may see (failed_jobs_kept of each
 * uid), oldest first; a long list goes in pieces (client_reply).
 */
json_t *
job_ctl_failed(const struct client *c)
{
	json_t *list = json_array();
	struct failed_job *f;

	TAILQ_FOREACH(f, &failed_jobs, entry)
		if (client_sees(c, f->uid))
			json_array_append(list, f->doc);
	return json_pack("{s:o}", "failed_jobs", list);
}

/*
 * mcclctl job NAME of no job here: the latest failure of that name c may
 * see, in the shape of a live job's answer, with what was kept of it.
 */
json_t *
job_ctl_ended(const struct client *c, const char *name, char *err,
    size_t errlen)
{
	struct failed_job *f;
	json_t *d;

	TAILQ_FOREACH_REVERSE(f, &failed_jobs, failed_job_list, entry)
		if (strcmp(f->name, name) == 0 && client_sees(c, f->uid))
			break;
	if (f == NULL) {
		snprintf(err, errlen, "no job named \"%s\" on node %s, running "
		    "or among the failed jobs kept", name, conf->node_name);
		return NULL;
	}
	d = f->doc;
	return json_pack("{s:s, s:s, s:s, s:O, s:O, s:[], s:i, s:[s+++], "
	    "s:O}", "name", f->name, "id", json_is_string(json_object_get(d,
	    "id")) ? json_string_value(json_object_get(d, "id")) : "-",
	    "state", "failed", "nranks", json_object_get(d, "nranks"),
	    "nnodes", json_object_get(d, "nnodes"), "nodes", "behind_ms", 0,
	    "diagnosis", "the job has ended: it failed at ",
	    json_string_value(json_object_get(d, "failed_at")), ": ",
	    json_string_value(json_object_get(d, "error")), "failed", d);
}

/* The daemon is exiting: let go of what was kept. */
void
job_ctl_close(void)
{
	struct query *q;

	while (!TAILQ_EMPTY(&failed_jobs))
		failed_free(TAILQ_FIRST(&failed_jobs));
	while ((q = TAILQ_FIRST(&queries)) != NULL) {
		if (q->blame != NULL)
			op_free(q->blame);
		query_free(q);
	}
}
