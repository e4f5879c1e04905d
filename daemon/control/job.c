/*
 * job.c: a job's life on this node (main thread): the peer messages that
 * concern jobs, its operations' records, what its engine reports, and its
 * failure and end.  Formation is in form.c; what mcclctl sees of jobs, in
 * jobctl.c.
 *
 * Operations: collectives go from the local ranks' submission rings to the
 * job's engine directly (subq.c); sends and receives come here as records
 * and go to the job's p2p thread (p2p.c).  What the threads hand back is
 * counted and freed here.  Any failure fails the whole job on every node
 * (PEER_ABORT) and reaches every local rank (IPC_JOB_FAILED), so no rank
 * is left waiting.
 */
#include <sys/random.h>

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "engine/reduce.h"
#include "control/job.h"

struct job_list	 jobs = TAILQ_HEAD_INITIALIZER(jobs);	/* this node's */
/* Freed, waiting for their threads to end. */
static struct job_list dying = TAILQ_HEAD_INITIALIZER(dying);

static void	job_fail_clients(struct job *, enum job_state);
static void	job_reap(struct job *);

const char *job_state_names[] = { "forming", "linking", "ready",
    "failed" };


void
ms_to_tv(uint32_t ms, struct timeval *tv)
{
	tv->tv_sec = ms / 1000;
	tv->tv_usec = (ms % 1000) * 1000;
}

uint32_t
coordinator_of(uid_t uid, const char *name)
{
	uint64_t h = 1469598103934665603ULL ^ uid;

	for (const char *p = name; *p != '\0'; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
	return (uint32_t)(h % conf->nnodes);
}

/* Jobs on this node; those c may see when c is not NULL. */
int
job_count(const struct client *c)
{
	struct job *j;
	int n = 0;

	TAILQ_FOREACH(j, &jobs, entry)
		n += c == NULL || client_sees(c, j->comm.uid);
	return n;
}

struct job *
job_find_forming(uid_t uid, const char *name)
{
	struct job *j;

	TAILQ_FOREACH(j, &jobs, entry)
		if (j->state == JOB_FORMING && j->comm.uid == uid &&
		    strcmp(j->comm.name, name) == 0)
			return j;
	return NULL;
}

struct job *
job_find_id(uint64_t id)
{
	struct job *j;

	TAILQ_FOREACH(j, &jobs, entry)
		if (j->comm.id == id && id != 0)
			return j;
	return NULL;
}

int
job_spans(const struct job *j, uint32_t node)
{
	for (uint32_t p = 0; p < j->comm.nnodes; p++)
		if (j->comm.node_index[p] == node)
			return 1;
	return 0;
}

/*
 * Mark in mark[nnodes] the nodes whose failure a job here must see at
 * once: those a live job spans, and a forming job's coordinator.
 */
static void
job_nodes_mark(uint8_t *mark, uint32_t nnodes)
{
	struct job *j;

	TAILQ_FOREACH(j, &jobs, entry) {
		if (j->state == JOB_FAILED)
			continue;
		for (uint32_t p = 0; p < j->comm.nnodes; p++)
			if (j->comm.node_index[p] < nnodes)
				mark[j->comm.node_index[p]] = 1;
		if (j->state == JOB_FORMING && j->coordinator < nnodes)
			mark[j->coordinator] = 1;
	}
}

/* The settings a job's engine runs by, as they are now (engine.h). */
void
job_tunables(struct engine_tunables *t)
{
	*t = (struct engine_tunables){ conf->spin_us, conf->algo,
	    conf->op_timeout_ms, conf->connect_timeout_ms,
	    conf->transport };
}

/* A reload: every running engine takes the settings as they are now. */
void
job_retune_all(void)
{
	struct engine_tunables t;
	struct job *j;

	job_tunables(&t);
	TAILQ_FOREACH(j, &jobs, entry)
		engine_retune(&j->comm, &t);
}

static int
job_peer_msg(uint32_t from, uint16_t type, const void *msg,
    const uint8_t *trailer, size_t tlen)
{
	char text[PEER_TEXT_MAX + 1];
	struct job *j;

	snprintf(text, sizeof(text), "%.*s", (int)tlen, (const char *)trailer);
	switch (type) {
	case PEER_JOIN:
		return coord_join(from, msg, trailer, tlen);
	case PEER_FORMED:
		/* Only the job's coordinator speaks for its formation. */
		if (from != coordinator_of(((const struct peer_formed *)msg)->uid,
		    ((const struct peer_formed *)msg)->job))
			return -1;
		return job_recv_formed(msg, trailer, tlen);
	case PEER_JOIN_FAIL:
		if (from != coordinator_of(
		    ((const struct peer_join_fail *)msg)->uid,
		    ((const struct peer_join_fail *)msg)->job))
			return -1;
		job_recv_join_fail(msg, text);
		return 0;
	case PEER_JOB_QUERY:
		job_recv_query(from, msg);
		return 0;
	case PEER_JOB_INFO:
		return job_recv_info(from, msg, trailer, tlen);
	case PEER_ABORT:
		if ((j = job_find_id(((const struct peer_abort *)msg)->job_id)) &&
		    job_spans(j, from))
			job_fail(j, (int)((const struct peer_abort *)msg)->code,
			    "%s", text);
		return 0;
	}
	return -1;
}
/* ---- peers coming and going ---- */

static void
job_peer_up(uint32_t node)
{
	struct job *j;

	TAILQ_FOREACH(j, &jobs, entry)
		if (j->state == JOB_FORMING && j->coordinator == node)
			job_send_join(j);
}

static void
job_peer_down(uint32_t node, const char *why)
{
	struct job *j, *next;

	for (j = TAILQ_FIRST(&jobs); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (j->state != JOB_FORMING && j->state != JOB_FAILED &&
		    job_spans(j, node))
			job_fail(j, MCCL_ERR_PEER_FAILED, "job %s: node %s is "
			    "down: %s", j->comm.name, peer_name(node), why);
		/* Its claims died with it: waiting out the init timeout
		   would only delay the same failure. */
		else if (j->state == JOB_FORMING && j->coordinator == node)
			job_fail(j, MCCL_ERR_PEER_FAILED, "job %s: node %s, "
			    "which coordinates its formation, is down: %s",
			    j->comm.name, peer_name(node), why);
	}
	coord_node_down(node);
}

/* At start, before the peers: the jobs' frames and the peers' news. */
void
job_init(void)
{
	static const uint16_t frames[] = { PEER_JOIN, PEER_FORMED,
	    PEER_JOIN_FAIL, PEER_ABORT, PEER_JOB_QUERY, PEER_JOB_INFO };

	for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++)
		peer_handle(frames[i], job_peer_msg);
	peer_watch(&(struct peer_watcher){ job_peer_up, job_peer_down,
	    job_data_link, job_nodes_mark });
}

/* ---- operations ---- */

/*
 * When op ended: the engine's time for a collective, which the main thread
 * collects in batches (engine_lazy), else now.
 */
static uint64_t
op_end_ns(const struct op *op)
{
	return op->done_ns > op->ready_ns ? op->done_ns : now_ns();
}

static double
ms_of(uint64_t ns)
{
	return (double)ns / 1e6;
}

/*
 * A collective's times at debug level, on the monotonic clock that every
 * daemon of a machine shares: when the engine took it from the local
 * ranks' submission rings (once all were there, and the op before it
 * ended or was near its end), when it started and ended, its part
 * between nodes, and whether the next op ended it: what lines up the
 * daemons' and the ranks' view of a slow operation.
 */
static void
op_trace(const struct op *op, int code)
{
	if (log_getlevel() < LOG_DEBUG || op->start_ns == 0)
		return;
	log_debug("job %s: op %llu %s of %zu bytes (%s): taken at %.3f ms, "
	    "started %.3f ms later, ran %.3f ms (between nodes %.3f ms, lanes "
	    "waiting %.3f ms of %.3f)%s%s", op->comm->name,
	    (unsigned long long)op->desc.seq, proto_coll_name(op->desc.coll),
	    (size_t)op->desc.count * dtype_size(op->desc.dtype),
	    proto_algo_name(op->algo_run), ms_of(op->ready_ns),
	    ms_of(op->start_ns - op->ready_ns), ms_of(op_end_ns(op) -
	    op->start_ns), ms_of(op->node_ns), ms_of(op->lane_wait_ns),
	    ms_of(op->lane_ns), op->handed_on ? ", its last segment handed "
	    "out beside the next op" : "", code == 0 ? "" : ", failed");
}

/*
 * An op has ended: count it, and answer a send or receive.  A collective
 * that ended well was answered through the doorbells; one that failed
 * failed the job, which told every rank (IPC_JOB_FAILED).
 */
void
op_finish(struct op *op, int code, const char *err)
{
	struct job *j = job_of(op->comm);

	if (proto_coll_p2p(op->desc.coll)) {
		struct client *c = j->clients[op->p2p_rank];

		for (uint32_t i = 0; i < j->comm.nlocal; i++)
			if (op->parts[i].submitted && c != NULL)
				client_op_done(c, op, op->parts[i].req, code, err);
	}
	if (code == 0)
		j->ops_completed++;
	if (code == 0 && op->wire_run != 0) {
		j->wire_ops++;
		j->wire_saved += op->wire_saved;
		metrics_wire(op->wire_run, op->wire_saved);
	}
	if (code == 0 && op->xmem_bytes > 0)
		metrics_xmem(op->xmem_bytes);
	if (code == 0 && op->handed_on)
		metrics_overlapped();
	if (code == 0 && op->lane_ns > 0)
		metrics_lanes(op->lane_ns, op->lane_wait_ns);
	if (code == 0 && op->wire_run == 0 && op->node_ns > 0 &&
	    (op->desc.coll == COLL_ALLREDUCE || op->desc.coll == COLL_REDUCE))
		linkcost_observe(j->comm.uid, op->algo_run, j->comm.nnodes, (size_t)
		    op->desc.count * dtype_size(op->desc.dtype), op->node_ns,
		    &j->comm.cost);
	op_trace(op, code);
	if (op->ready_ns != 0)
		metrics_op_done(op->desc.coll, op->algo_run, code,
		    op_end_ns(op) - op->ready_ns);
	op_free(op);
}

/* Fail the job because of this op, and answer it. */
static void
op_reject(struct client *c, const struct ipc_op *m, int code, const char *why)
{
	struct job *j = c->job;

	job_fail(j, code, "job %s: rank %u: op %llu (%s): %s", j->comm.name, c->rank,
	    (unsigned long long)m->seq, proto_coll_name(m->coll), why);
	client_op_done(c, NULL, m->seq, j->code, j->err);
}

/* A send or recv: it involves this rank alone, so it starts at once. */
static void
job_p2p(struct client *c, const struct ipc_op *m)
{
	struct job *j = c->job;
	uint32_t ms = m->timeout_ms ? m->timeout_ms : conf->op_timeout_ms;
	char err[ERR_MAX];
	struct op *op;

	if (m->coll == COLL_SEND && m->tag == IPC_ANY_TAG) {
		op_reject(c, m, MCCL_ERR_INVALID_ARGUMENT, "a send needs a tag, "
		    "not MCCL_ANY_TAG");
		return;
	}
	if ((op = op_new(&j->comm)) == NULL) {
		op_reject(c, m, MCCL_ERR_NO_MEMORY, "out of memory");
		return;
	}
	op->desc = *m;
	op->p2p_rank = c->rank;
	if (op_attach(op, c->local_index, c->segs, c->rank, m, err,
	    sizeof(err)) == -1) {
		op_free(op);
		op_reject(c, m, MCCL_ERR_INVALID_ARGUMENT, err);
		return;
	}
	op->ready_ns = now_ns();
	op->deadline_ns = op->ready_ns + (uint64_t)ms * 1000000;
	p2p_submit(&j->comm, op);
}

/* Every IPC_OP gets exactly one IPC_OP_DONE, whatever happens. */
void
job_client_op(struct client *c, const struct ipc_op *m)
{
	struct job *j = c->job;
	char err[ERR_MAX];

	c->inflight++;
	if (j != NULL)
		job_collect(j);
	if (j == NULL || j->state == JOB_FORMING || j->state == JOB_LINKING) {
		client_op_done(c, NULL, m->seq, MCCL_ERR_INVALID_ARGUMENT,
		    "operation before the job was formed");
		return;
	}
	if (j->state == JOB_FAILED) {
		client_op_done(c, NULL, m->seq, j->code, j->err);
		return;
	}
	/* Collectives take seqs too, on the ring: they rise, with gaps. */
	if (m->seq <= c->last_seq) {
		snprintf(err, sizeof(err), "op %llu follows op %llu: seqs must "
		    "rise", (unsigned long long)m->seq,
		    (unsigned long long)c->last_seq);
		op_reject(c, m, MCCL_ERR_PROTOCOL, err);
		return;
	}
	c->last_seq = m->seq;
	if (c->inflight > conf->max_pending_ops) {
		snprintf(err, sizeof(err), "over the limit of %u operations in "
		    "flight (max_pending_ops)", conf->max_pending_ops);
		op_reject(c, m, MCCL_ERR_NO_MEMORY, err);
	} else if (j->nleft > 0)
		op_reject(c, m, MCCL_ERR_PEER_FAILED, "a rank on this node has "
		    "left the job");
	else if (op_check(j->comm.nranks, m, err, sizeof(err)) != NULL)
		op_reject(c, m, MCCL_ERR_INVALID_ARGUMENT, err);
	else if (!proto_coll_p2p(m->coll))
		op_reject(c, m, MCCL_ERR_PROTOCOL, "a collective in an IPC_OP "
		    "record: collectives go through the submission ring");
	else
		job_p2p(c, m);
}

/* ---- the engine reports ---- */

static void
job_links_reported(struct job *j, int ok, int code, const char *err)
{
	struct ipc_joined m;

	if (!ok) {
		job_fail(j, code, "job %s: %s", j->comm.name, err);
		return;
	}
	if (j->state != JOB_LINKING)
		return;
	j->state = JOB_READY;
	for (uint32_t i = 0; i < j->comm.nlocal; i++) {
		struct client *c = j->clients[j->comm.local_ranks[i]];

		if (c == NULL)
			continue;
		m = (struct ipc_joined){ j->comm.id, j->comm.nranks, c->rank, j->comm.nnodes,
		    j->comm.nlocal };
		client_send(c, IPC_JOINED, &m, NULL, 0);
	}
	log_info("job %s: ready", j->comm.name);
	monitor_event("job_formed", &j->comm.uid, json_pack("{s:s, s:i, s:i, s:i}",
	    "job", j->comm.name, "uid", (int)j->comm.uid, "nranks", (int)j->comm.nranks,
	    "nnodes", (int)j->comm.nnodes));
	control_status_changed();
}

/* How long collectives take: mcclctl calls a rank behind past a multiple. */
static void
job_op_timed(struct job *j, const struct op *op)
{
	if (proto_coll_p2p(op->desc.coll) || op->code != 0 ||
	    op->done_ns <= op->ready_ns)
		return;
	if (op->done_ns - op->ready_ns > j->op_slow_ns[0])
		j->op_slow_ns[0] = op->done_ns - op->ready_ns;
	if (++j->op_slow_n == OP_SLOW_WINDOW) {
		j->op_slow_ns[1] = j->op_slow_ns[0];
		j->op_slow_ns[0] = 0;
		j->op_slow_n = 0;
	}
}

void
job_engine_cb(int fd, short events, void *arg)
{
	struct job *j = arg;
	struct op_list done = TAILQ_HEAD_INITIALIZER(done);
	struct op *op;
	int links, code = 0;
	char err[ERR_MAX] = "";

	(void)fd;
	(void)events;
	if (j->dying) {
		job_reap(j);
		return;
	}
	if ((links = engine_collect(&j->comm, &done, &code, err, sizeof(err))) != 0)
		job_links_reported(j, links == 1, code, err);
	/*
	 * An op that ended well did, even if the job failed since: a send
	 * whose bytes the transport took before its peer died is answered
	 * as sent.  A failed one fails the job, and says the job's reason.
	 */
	while ((op = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, op, entry);
		job_op_timed(j, op);
		/* The node it waited on may know who held it up: ask. */
		if (op->code == MCCL_ERR_TIMEOUT && op->blame_pos < j->comm.nnodes &&
		    op->blame_pos != j->comm.me && j->state != JOB_FAILED &&
		    job_blame(j, op) == 0)
			continue;
		if (op->code != 0)
			job_fail_op(j, op, op->code, op->err);
		op_finish(op, op->code != 0 ? j->code : 0, j->err);
	}
	if (j->state == JOB_FAILED && !j->fail_told)	/* the engine stopped */
		job_fail_clients(j, JOB_READY);
}

/*
 * Take what the engine handed back without waking us (engine_idle): before
 * anything that counts a client's operations in flight or shows them.
 */
void
job_collect(struct job *j)
{
	if (j->comm.ev_engine != NULL)
		job_engine_cb(-1, 0, j);
}

void
job_collect_all(void)
{
	struct job *j;

	TAILQ_FOREACH(j, &jobs, entry)
		job_collect(j);
}

/* ---- failure and departure ---- */

static void
job_tell_peers(struct job *j)
{
	struct peer_abort a = { j->comm.id, (uint32_t)j->code, conf->node_index };

	for (uint32_t p = 0; p < j->comm.nnodes; p++)
		if (p != j->comm.me)
			peer_send(j->comm.node_index[p], PEER_ABORT, &a, j->err,
			    strlen(j->err));
}

/*
 * Ranks still joining get the error as JOIN's answer.  Ranks of a formed
 * job get IPC_JOB_FAILED, which fails whatever they have pending, in their
 * rings or not yet submitted; but only once the engine has ended the op it
 * was running (engine_stopped): one that ended well is answered through the
 * doorbells before the failure, so a rank whose op completed on every
 * node is never told it failed.
 */
static void
job_fail_clients(struct job *j, enum job_state was)
{
	struct ipc_job_failed f = { (uint32_t)j->code };

	if ((was != JOB_FORMING && was != JOB_LINKING && !engine_stopped(&j->comm) &&
	    !j->stuck) || j->fail_told)
		return;
	j->fail_told = 1;
	for (uint32_t r = 0; r < j->comm.nranks; r++) {
		if (j->clients[r] == NULL)
			continue;
		if (was == JOB_FORMING || was == JOB_LINKING)
			client_error(j->clients[r], (uint32_t)j->code, IPC_JOIN,
			    j->err);
		else
			client_send(j->clients[r], IPC_JOB_FAILED, &f, j->err,
			    strnlen(j->err, IPC_TEXT_MAX));
	}
}

/* Fail the job here and on every node of it; the first reason wins. */
void
job_fail(struct job *j, int code, const char *fmt, ...)
{
	enum job_state was = j->state;
	va_list ap;

	if (was == JOB_FAILED)
		return;
	j->state = JOB_FAILED;
	j->code = code;
	j->failed_at = time(NULL);
	va_start(ap, fmt);
	vsnprintf(j->err, sizeof(j->err), fmt, ap);
	va_end(ap);
	log_warnx("%s", j->err);
	monitor_event("job_failed", &j->comm.uid, json_pack("{s:s, s:i, s:s}",
	    "job", j->comm.name, "uid", (int)j->comm.uid, "reason", j->err));
	evtimer_del(j->ev_timeout);
	if (was == JOB_FORMING)
		job_send_join(j);	/* withdraws our ranks */
	if (j->comm.id != 0)
		job_tell_peers(j);
	engine_abort(&j->comm);
	job_fail_clients(j, was);
	control_status_changed();
}

/* Fail the job because of op: "job J: op 5 (allreduce): why". */
void
job_fail_op(struct job *j, const struct op *op, int code, const char *why)
{
	if (j->state == JOB_FAILED)
		return;
	j->fail_seq = op->desc.seq;
	j->fail_coll = op->desc.coll;
	job_fail(j, code, "job %s: op %llu (%s): %s", j->comm.name,
	    (unsigned long long)op->desc.seq, proto_coll_name(op->desc.coll),
	    why);
}

void
job_client_abort(struct client *c)
{
	if (c->job != NULL)
		job_fail(c->job, MCCL_ERR_ABORTED, "job %s: aborted by rank %u "
		    "(%s) on node %s", c->job->comm.name, c->rank, c->desc,
		    conf->node_name);
}

/* Its threads are gone: free what is left of the job. */
static void
job_destroy(struct job *j)
{
	p2p_finish(&j->comm);
	engine_finish(&j->comm);
	if (j->comm.ev_engine != NULL)	/* none if the job never formed */
		event_free(j->comm.ev_engine);
	event_free(j->ev_timeout);
	free(j->clients);
	free(j->comm.local_ranks);
	free(j->comm.node_index);
	free(j->comm.names);
	free(j->comm.conf.nodes);
	free(j->comm.rank_pos);
	free(j->comm.rank_slot);
	free(j->comm.pos_first);
	free(j->comm.pos_count);
	free(j);
}

#define TRIM_IDLE_MS	2000	/* after the last job: its scratch is gone */
#define WATCH_MS	500	/* job_watch_cb */

static int	trim_pending;
static struct event *watch_ev;

static void
job_trim_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	trim_pending = 0;
	if (TAILQ_EMPTY(&jobs) && TAILQ_EMPTY(&dying)) {
		struct mallinfo2 mi = mallinfo2();

		malloc_trim(0);
		log_debug("memory: no job left; malloc holds %zu KiB in use, "
		    "%zu KiB free, given back", mi.uordblks / 1024,
		    mi.fordblks / 1024);
	}
}

/*
 * The node has no job left: give malloc's free memory back to the system
 * a moment later.  Jobs' threads free into arenas of their own, which
 * malloc keeps; without this a daemon grew round after round of the same
 * jobs (45 MB to 320 MB in 8) with 95 KB in use.
 */
static void
job_trim_later(void)
{
	struct timeval tv;

	if (trim_pending)
		return;
	ms_to_tv(TRIM_IDLE_MS, &tv);
	if (event_base_once(ctl_base, -1, EV_TIMEOUT, job_trim_cb, NULL,
	    &tv) == 0)
		trim_pending = 1;
}

/*
 * A dying job is destroyed once both of its threads have returned; each
 * wakes us (job_engine_cb) as it goes.  The main loop never waits for a
 * thread: one stuck connecting to a frozen node must not stall it.
 */
static void
job_reap(struct job *j)
{
	if (!p2p_exited(&j->comm) || !engine_exited(&j->comm))
		return;
	TAILQ_REMOVE(&dying, j, entry);
	job_destroy(j);
	if (TAILQ_EMPTY(&jobs) && TAILQ_EMPTY(&dying))
		job_trim_later();
}

/*
 * The daemon is exiting: wait for the threads (told to quit, and aborted),
 * but those stuck in a client's memory: the exit ends them.  Returns how
 * many jobs were left so.
 */
int
job_reap_all(void)
{
	struct job *j;
	int left = 0;

	if (watch_ev != NULL)
		event_free(watch_ev);
	watch_ev = NULL;
	while ((j = TAILQ_FIRST(&dying)) != NULL) {
		TAILQ_REMOVE(&dying, j, entry);
		if (j->stuck && !engine_exited(&j->comm)) {
			log_warnx("job %s: not waiting for its threads: one is "
			    "stuck in a client's memory", j->comm.name);
			left++;
		} else
			job_destroy(j);
	}
	return left;
}

/*
 * The local rank of j whose memory a call of the daemon's has been stuck
 * in for longer than an operation may take (xmem.c), or NULL.
 */
static struct client *
job_stuck_rank(struct job *j, uint64_t *ns)
{
	uint64_t limit = (uint64_t)conf->op_timeout_ms * 1000000;

	for (uint32_t r = 0; r < j->comm.nranks; r++) {
		struct client *c = j->clients[r];

		if (c != NULL && c->segs != NULL &&
		    (*ns = xmem_stuck_ns(&c->segs->xm)) > limit)
			return c;
	}
	return NULL;
}

/*
 * Every WATCH_MS: a job whose engine waits on a rank's memory that the
 * kernel never hands over (pages registered with userfaultfd and not
 * served) fails, naming the rank, where its engine cannot.
 */
static void
job_watch_cb(int fd, short events, void *arg)
{
	struct job *j, *next;
	struct client *c;
	uint64_t ns = 0;

	(void)fd;
	(void)events;
	(void)arg;
	if (TAILQ_EMPTY(&jobs))	/* idle: no wake-ups until the next */
		event_del(watch_ev);
	for (j = TAILQ_FIRST(&jobs); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (j->state != JOB_READY || (c = job_stuck_rank(j, &ns)) == NULL)
			continue;
		for (uint32_t r = 0; r < j->comm.nranks; r++)
			if (j->clients[r] != NULL && j->clients[r]->segs != NULL)
				xmem_refuse(&j->clients[r]->segs->xm);
		j->stuck = 1;
		job_fail(j, MCCL_ERR_TIMEOUT, "job %s: rank %u (%s): the "
		    "daemon's copy of its memory has not returned for %llu ms "
		    "(pages nobody serves, as userfaultfd's can be): the job "
		    "fails", j->comm.name, c->rank, c->desc,
		    (unsigned long long)(ns / 1000000));
	}
}

/* The watch runs while the daemon has jobs (job_new starts it). */
void
job_watch_start(void)
{
	struct timeval tv;

	if (watch_ev == NULL && (watch_ev = event_new(ctl_base, -1,
	    EV_PERSIST, job_watch_cb, NULL)) == NULL)
		return;
	if (!event_pending(watch_ev, EV_TIMEOUT, NULL)) {
		ms_to_tv(WATCH_MS, &tv);
		event_add(watch_ev, &tv);
	}
}

void
job_free(struct job *j)
{
	if (j->state == JOB_READY)
		monitor_event("job_finished", &j->comm.uid, json_pack("{s:s, s:i, "
		    "s:I}", "job", j->comm.name, "uid", (int)j->comm.uid, "ops_completed",
		    (json_int_t)j->ops_completed));
	for (uint32_t r = 0; r < j->comm.nranks; r++)
		if (j->clients[r] != NULL)
			j->clients[r]->job = NULL;
	if (j->state == JOB_FAILED)
		job_ctl_remember(j);
	TAILQ_REMOVE(&jobs, j, entry);
	evtimer_del(j->ev_timeout);
	job_blame_cancel(j);
	j->dying = 1;
	TAILQ_INSERT_TAIL(&dying, j, entry);
	p2p_quit(&j->comm);
	engine_quit(&j->comm);
	job_reap(j);
	control_status_changed();
}

/* A local rank detached: orderly (LEAVE) or not (its connection closed). */
void
job_client_gone(struct client *c, int orderly)
{
	struct job *j = c->job;

	if (j == NULL)
		return;
	job_collect(j);
	c->job = NULL;
	j->clients[c->rank] = NULL;
	if (j->state == JOB_FORMING) {
		log_info("job %s: rank %u left before the job formed", j->comm.name,
		    c->rank);
		j->comm.nlocal--;
		job_send_join(j);
		if (j->comm.nlocal == 0)
			job_free(j);
		return;
	}
	subq_leave(&j->comm, c->local_index);	/* the engine stops waiting for it */
	engine_wake(&j->comm);
	if (!orderly || c->inflight > 0 || subq_pending(&j->comm, c->local_index))
		job_fail(j, MCCL_ERR_PEER_FAILED, "job %s: rank %u (%s) on node "
		    "%s %s", j->comm.name, c->rank, c->desc, conf->node_name,
		    orderly ? "left with operations pending" :
		    "disconnected (process died?)");
	log_info("job %s: rank %u left", j->comm.name, c->rank);
	if (++j->nleft == j->comm.nlocal)
		job_free(j);
}

/*
 * Every failed job has told its local ranks why (job_fail_clients), which
 * waits for its engine to end the op it runs: the daemon's exit waits
 * for this, within a bound.
 */
int
job_all_told(void)
{
	struct job *j;

	TAILQ_FOREACH(j, &jobs, entry) {
		job_collect(j);
		if (j->state == JOB_FAILED && !j->fail_told)
			return 0;
	}
	return 1;
}

void
job_shutdown(const char *why)
{
	struct job *j, *next;

	for (j = TAILQ_FIRST(&jobs); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		job_fail(j, MCCL_ERR_ABORTED, "job %s: mccld on node %s is "
		    "shutting down (%s)", j->comm.name, conf->node_name, why);
	}
}
