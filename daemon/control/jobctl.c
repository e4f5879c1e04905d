/*
 * jobctl.c: what mcclctl sees of jobs (main thread): the list, an abort,
 * and "mcclctl job NAME", every node's view of a job gathered by asking the
 * other nodes, with a diagnosis of what holds it up.
 */
#include <sys/random.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "control/job.h"

/* ---- mcclctl job NAME: every node's view, and a diagnosis ---- */

#define QUERY_MS	1000	/* for the other nodes to answer */

struct query {
	TAILQ_ENTRY(query) entry;
	uint32_t	 qid;
	struct client	*client;	/* mcclctl, waiting */
	uint64_t	 job_id;
	uint32_t	 waiting;	/* answers still to come */
	json_t		*nodes;		/* each node's answer, by position */
	json_t		*job;		/* name, id, state, ... */
	struct event	*ev_timeout;
};

static TAILQ_HEAD(, query) queries = TAILQ_HEAD_INITIALIZER(queries);
static uint32_t next_qid;

/* This node's part: its ranks and what they have done. */
static json_t *
job_snapshot(struct job *j)
{
	json_t *ranks = json_array(), *inflight = json_null();

	job_collect(j);
	for (uint32_t i = 0; i < j->nlocal; i++) {
		uint32_t r = j->local_ranks[i];
		struct client *c = j->clients[r];

		json_array_append_new(ranks, json_pack("{s:i, s:I, s:I, s:b}",
		    "rank", (int)r, "submitted", (json_int_t)(j->sq != NULL ?
		    subq_submitted(j, i) : 0),
		    "completed", (json_int_t)j->ops_completed, "connected",
		    c != NULL));
	}
	if (j->eng_running) {
		pthread_mutex_lock(&j->eng_mtx);
		if (j->eng_current != NULL)
			inflight = json_pack("{s:I, s:s}", "seq",
			    (json_int_t)j->eng_current->desc.seq, "coll",
			    proto_coll_name(j->eng_current->desc.coll));
		pthread_mutex_unlock(&j->eng_mtx);
	}
	return json_pack("{s:s, s:s, s:o, s:o, s:s?}", "node",
	    md.conf.node_name, "state", job_state_names[j->state], "ranks",
	    ranks, "in_flight", inflight, "error",
	    j->state == JOB_FAILED ? j->err : NULL);
}

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

/* Ranks behind the others, or gone; nodes that did not answer or fail. */
static json_t *
query_diagnose(const struct query *q)
{
	json_t *d = json_array(), *n, *r;
	json_int_t most = 0;
	size_t i, k;

	json_array_foreach(q->nodes, i, n)
		json_array_foreach(json_object_get(n, "ranks"), k, r)
			if (json_integer_value(json_object_get(r, "submitted")) >
			    most)
				most = json_integer_value(json_object_get(r,
				    "submitted"));
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
			int rank = (int)json_integer_value(json_object_get(r,
			    "rank"));

			if (!json_is_true(json_object_get(r, "connected")))
				diag_add(d, "rank %d on node %s has left or died",
				    rank, node);
			else if (sub < most)
				diag_add(d, "rank %d on node %s is behind: it "
				    "submitted %lld collectives, others %lld",
				    rank, node, (long long)sub, (long long)most);
		}
	}
	if (json_array_size(d) == 0)
		diag_add(d, "no problem seen: every rank submitted %lld "
		    "collectives", (long long)most);
	return d;
}

static void
query_answer(struct query *q)
{
	struct ipc_ctl_reply r = { 0 };
	char *text;

	json_object_set_new(q->job, "nodes", json_incref(q->nodes));
	json_object_set_new(q->job, "diagnosis", query_diagnose(q));
	text = json_dumps(q->job, JSON_COMPACT);
	if (text == NULL || strlen(text) > IPC_MSG_MAX - WIRE_HDR_LEN - 4)
		client_error(q->client, MCCL_ERR_NO_MEMORY, IPC_CTL,
		    "reply too large");
	else
		client_send(q->client, IPC_CTL_REPLY, &r, text, strlen(text));
	free(text);
	query_free(q);
}

static void
query_timeout_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	query_answer(arg);
}

/* mcclctl job NAME: answered once every node of the job has, or at 1 s. */
int
job_ctl_query(struct client *c, const char *name, char *err, size_t errlen)
{
	struct peer_job_query m;
	struct timeval tv = { QUERY_MS / 1000, (QUERY_MS % 1000) * 1000 };
	struct query *q;
	struct job *j;

	TAILQ_FOREACH(j, &md.jobs, entry)
		if (strcmp(j->name, name) == 0 && j->id != 0 &&
		    client_sees(c, j->uid))
			break;
	if (j == NULL) {
		snprintf(err, errlen, "no formed job named \"%s\" on node %s",
		    name, md.conf.node_name);
		return -1;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	q->qid = ++next_qid;
	q->client = c;
	q->job_id = j->id;
	q->nodes = json_array();
	q->job = json_pack("{s:s, s:i, s:i, s:s}", "name", j->name, "nranks",
	    (int)j->nranks, "nnodes", (int)j->nnodes, "state",
	    job_state_names[j->state]);
	json_object_set_new(q->job, "id", json_sprintf("%016llx",
	    (unsigned long long)j->id));
	m = (struct peer_job_query){ j->id, q->qid };
	for (uint32_t p = 0; p < j->nnodes; p++) {
		if (p == j->me)
			json_array_append_new(q->nodes, job_snapshot(j));
		else {
			json_array_append_new(q->nodes, json_pack("{s:s}",
			    "node", j->names[p]));
			if (peer_send(j->node_index[p], PEER_JOB_QUERY, &m, NULL,
			    0) == 0)
				q->waiting++;
		}
	}
	q->ev_timeout = evtimer_new(md.base, query_timeout_cb, q);
	TAILQ_INSERT_TAIL(&queries, q, entry);
	if (q->waiting == 0)
		query_answer(q);
	else
		evtimer_add(q->ev_timeout, &tv);
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
	for (uint32_t p = 0; p < j->nnodes; p++)
		if (j->node_index[p] == from)
			json_array_set_new(q->nodes, p, snap);
	if (--q->waiting == 0) {
		evtimer_del(q->ev_timeout);
		query_answer(q);
	}
	return 0;
}

/* ---- mcclctl ---- */


static json_t *
job_ctl_one(struct job *j)
{
	json_t *ranks = json_array(), *inflight = json_null();
	char id[20];

	job_collect(j);
	snprintf(id, sizeof(id), "%016llx", (unsigned long long)j->id);
	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->clients[r] != NULL)
			json_array_append_new(ranks, json_integer(r));
	if (j->eng_running) {
		pthread_mutex_lock(&j->eng_mtx);
		if (j->eng_current != NULL)
			inflight = json_pack("{s:I, s:s, s:I}", "seq",
			    (json_int_t)j->eng_current->desc.seq, "coll",
			    proto_coll_name(j->eng_current->desc.coll), "count",
			    (json_int_t)j->eng_current->desc.count);
		pthread_mutex_unlock(&j->eng_mtx);
	}
	return json_pack("{s:s, s:s, s:i, s:s, s:i, s:o, s:i, s:i, s:I, s:o, "
	    "s:s?}",
	    "name", j->name, "id", id, "uid", (int)j->uid,
	    "state", job_state_names[j->state], "nranks", (int)j->nranks,
	    "local_ranks", ranks, "nlocal", (int)(j->nlocal - j->nleft),
	    "nnodes", (int)j->nnodes, "ops_completed",
	    (json_int_t)j->ops_completed, "op_in_flight", inflight,
	    "error", j->state == JOB_FAILED ? j->err : NULL);
}

/* mcclctl abort NAME: fail every job of that name here and everywhere. */
json_t *
job_ctl_abort(const struct client *c, const char *name, char *err,
    size_t errlen)
{
	struct job *j, *next;
	int n = 0;

	for (j = TAILQ_FIRST(&md.jobs); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (strcmp(j->name, name) != 0 || j->state == JOB_FAILED)
			continue;
		job_fail(j, MCCL_ERR_ABORTED, "job %s: aborted by mcclctl "
		    "(uid %u) on node %s", j->name, (unsigned)c->uid,
		    md.conf.node_name);
		n++;
	}
	if (n == 0) {
		snprintf(err, errlen, "no running job named \"%s\" on node %s",
		    name, md.conf.node_name);
		return NULL;
	}
	return json_pack("{s:s, s:i}", "job", name, "aborted", n);
}

json_t *
job_ctl_list(const struct client *c)
{
	json_t *list = json_array();
	struct job *j;

	TAILQ_FOREACH(j, &md.jobs, entry)
		if (client_sees(c, j->uid))
			json_array_append_new(list, job_ctl_one(j));
	return json_pack("{s:o}", "jobs", list);
}
