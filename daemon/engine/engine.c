/*
 * engine.c: a job's data plane.  Each formed job has one engine thread on
 * each of its nodes.  It opens the job's data links (transport/: TCP or
 * RDMA, set up alike; the send/recv ones go to p2p.c), then runs the job's
 * operations in order, each by coll.c: combine the local ranks' buffers in
 * shared memory, run the inter-node part (ring.c, allreduce.c) on one
 * buffer for the whole node, and write the result into every local rank's
 * buffer.  It
 * never touches the main thread's structures: operations come in from the
 * local ranks' submission rings (subq.c) and go back through its
 * completion queue (struct engine's out, under mtx), and ev_engine tells
 * the main loop, which takes them with engine_collect.
 */
#include <sys/eventfd.h>
#include <poll.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "engine/bigmem.h"
#include "engine/engine_state.h"
#include "spin.h"
#include "engine/algo.h"
#include "engine/xfer.h"
#include "engine/crew.h"
#include "transport/transport.h"

#define LINGER_MS	3000	/* a failed job's links, before closing */
#define LAZY_NS		2000000	/* ops answered by doorbell: see */
#define QUIET_BATCH	32	/* engine_lazy */
#define IDLE_NS		1000000000	/* scratch kept while idle: engine_idle */

static void	engine_report_links(struct comm *, int, int, const char *);

/* Any thread: wake the main thread for this job (job_engine_cb). */
void
engine_notify(struct comm *cm)
{
	event_active(cm->ev_engine, EV_READ, 0);
}

/* ---- data links ---- */

#define FD_TAKEN	(-2)	/* fds: an accepted link the engine took */
#define ROWS(cm)		((cm)->nlanes)	/* a row of links per lane */

static uint64_t links_open;	/* lanes' links of every job (metrics) */

/* The lanes' data links open on this node, all jobs (metrics). */
uint64_t
engine_links_open(void)
{
	return __atomic_load_n(&links_open, __ATOMIC_RELAXED);
}

static int
ring_neighbour(const struct comm *cm, uint32_t p)
{
	uint32_t n = cm->nnodes;

	return p != cm->me && (p == (cm->me + 1) % n || p == (cm->me + n - 1) % n);
}

/*
 * Whether lane k's link to position p may be made.  Lane 0 may go to every
 * node (the pairwise algorithms, the tree, the chain); the other lanes
 * carry only a large ring allreduce's other rings, between neighbours.
 */
static int
row_allowed(const struct comm *cm, uint32_t k, uint32_t p)
{
	return k == 0 || ring_neighbour(cm, p);
}

/*
 * The links made at the job's start, side by side: the ring neighbours',
 * on every lane, and on lane 0 recursive doubling's partners (log2 n),
 * whom AUTO's small allreduces and Rabenseifner's talk to; made on first
 * use, one round's at a time, they were most of a job's first operation.
 * Lane 0's others are made on first use (engine_links_on_use): the tree's,
 * the direct exchange's.  Send/recv's links are p2p.c's.
 */
static int
start_link(const struct comm *cm, uint32_t k, uint32_t p)
{
	return ring_neighbour(cm, p) ||
	    (k == 0 && ring_pairs_with(cm->me, p, cm->nnodes));
}

/* The set-up of a link to the node at pos, as the job's settings say. */
void
engine_link_setup(const struct comm *cm, uint32_t pos, int choice,
    struct link_setup *s)
{
	const struct conf_node *n = &cm->conf.nodes[pos];

	*s = (struct link_setup){ .fd = -1, .node = cm->node_index[pos],
	    .want = { cm->conf.node_name, n->name, n->rdma_dev, choice } };
}

/* Connect to the nodes after us that we want links to, offer on each. */
static int
engine_connect_links(struct comm *cm, const uint8_t *want,
    struct link_setup *su, char *err, size_t errlen)
{
	for (uint32_t p = cm->me + 1; p < cm->nnodes; p++)
		for (uint32_t k = 0; k < ROWS(cm); k++) {
			struct link_setup *s = &su[k * cm->nnodes + p];
			char why[ERR_MAX] = "";
			uint32_t node = cm->node_index[p];

			if (!want[k * cm->nnodes + p])
				continue;
			if ((s->fd = dial_data_link(&cm->conf.nodes[p].addr,
			    cm->conf.node_index, node, cm->id, PEER_STREAM_LANE(k),
			    cm->eng->abort_fd, ms_from_now(cm->eng->tun.
			    connect_timeout_ms), why, sizeof(why))) == -1 ||
			    link_offer(s, why, sizeof(why)) == -1) {
				snprintf(err, errlen, "cannot open a data link "
				    "to node %s: %s", cm->names[p], why);
				return -1;
			}
		}
	return 0;
}

/* The first node before us whose wanted link has not come (-1: none), and
   in *have how many have. */
static int
engine_links_missing(const struct comm *cm, const uint8_t *want,
    uint32_t *have)
{
	int first = -1;

	*have = 0;
	for (uint32_t p = 0; p < cm->me; p++)
		for (uint32_t k = 0; k < ROWS(cm); k++) {
			if (!want[k * cm->nnodes + p])
				continue;
			if (cm->eng->fds[k * cm->nnodes + p] != -1)
				(*have)++;
			else if (first == -1)
				first = (int)p;
		}
	return first;
}

static void
timespec_at_ns(struct timespec *ts, uint64_t ns)
{
	ts->tv_sec = (time_t)(ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
}

/*
 * Wait for the nodes before us to connect; called with mtx held.  At the
 * job's start (until_ns 0) each node dials the nodes after it one at a
 * time, so the last of a large job waits for many dials before its own:
 * the deadline is connect_timeout_ms from the last link that came (or from
 * the start), not for all of them together.  On first use the op's
 * deadline: the peer may still be in an earlier op.
 */
static int
engine_await_links(struct comm *cm, const uint8_t *want, uint64_t until_ns,
    char *err, size_t errlen)
{
	uint32_t ms = cm->eng->tun.connect_timeout_ms, have, had = UINT32_MAX;
	struct timespec ts;
	int missing, timed_out = 0;

	if (until_ns != 0)
		timespec_at_ns(&ts, until_ns);
	while ((missing = engine_links_missing(cm, want, &have)) != -1 &&
	    !cm->eng->quit && !cm->eng->aborted) {
		if (until_ns == 0 && have != had) {	/* progress */
			had = have;
			timespec_at_ns(&ts, now_ns() + (uint64_t)ms * 1000000);
		} else if (timed_out)
			break;
		timed_out = pthread_cond_timedwait(&cm->eng->cond,
		    &cm->eng->mtx, &ts) == ETIMEDOUT;
	}
	if (missing == -1)
		return 0;
	if (until_ns == 0)
		snprintf(err, errlen, "node %s did not open its data link "
		    "within %u ms", cm->names[missing], ms);
	else
		snprintf(err, errlen, "node %s did not open its data link "
		    "by the operation's deadline", cm->names[missing]);
	return -1;
}

/* Take the wanted links the nodes before us opened, and offer on each. */
static int
engine_accepted_links(struct comm *cm, const uint8_t *want, uint64_t until_ns,
    struct link_setup *su, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&cm->eng->mtx);
	if ((rc = engine_await_links(cm, want, until_ns, err, errlen)) == 0)
		for (uint32_t p = 0; p < cm->me; p++)
			for (uint32_t k = 0; k < ROWS(cm); k++) {
				uint32_t i = k * cm->nnodes + p;

				if (!want[i])
					continue;
				su[i].fd = cm->eng->fds[i];
				cm->eng->fds[i] = FD_TAKEN;
			}
	pthread_mutex_unlock(&cm->eng->mtx);
	for (uint32_t p = 0; rc == 0 && p < cm->me; p++)
		for (uint32_t k = 0; rc == 0 && k < ROWS(cm); k++)
			if (want[k * cm->nnodes + p] && (rc = link_offer(
			    &su[k * cm->nnodes + p], err, errlen)) == -1)
				snprintf(err, errlen, "data link from node %s: "
				    "sending its set-up failed", cm->names[p]);
	return rc;
}

/* Set-up's last two steps on every wanted link, each on all before the
   next. */
static int
engine_complete_links(struct comm *cm, const uint8_t *want, uint64_t until_ns,
    struct link_setup *su, char *err, size_t errlen)
{
	uint32_t n = ROWS(cm) * cm->nnodes;
	char why[ERR_MAX] = "";
	uint64_t deadline;

	/* a deadline for each link's step, as engine_await_links says why */
	for (int step = 0; step < 2; step++)
		for (uint32_t i = 0; i < n; i++) {
			if (!want[i])
				continue;
			deadline = until_ns != 0 ? until_ns :
			    ms_from_now(cm->eng->tun.connect_timeout_ms);
			if ((step == 0 ? link_answer(&su[i], cm->eng->abort_fd,
			    deadline, why, sizeof(why)) : link_ready(&su[i],
			    cm->eng->abort_fd, deadline, why, sizeof(why))) ==
			    -1) {
				snprintf(err, errlen, "data link between nodes "
				    "%s and %s: %s", cm->names[cm->me],
				    cm->names[i % cm->nnodes], why);
				return -1;
			}
			if (cm->eng->links[i] == NULL)
				__atomic_add_fetch(&links_open, 1,
				    __ATOMIC_RELAXED);
			cm->eng->links[i] = su[i].link;
			if (su[i].link->tp->mem_add != NULL)
				cm->eng->registers = 1;
		}
	return 0;
}

/*
 * Make the wanted links ([k * nnodes + p]), as both ends of each do at
 * once: the end before dials.  until_ns: as engine_await_links says.
 */
static int
engine_make_links(struct comm *cm, const uint8_t *want, uint64_t until_ns,
    char *err, size_t errlen)
{
	uint32_t n = ROWS(cm) * cm->nnodes;
	struct link_setup *su;
	int rc;

	if ((su = calloc(n, sizeof(*su))) == NULL) {
		snprintf(err, errlen, "out of memory for data links");
		return -1;
	}
	for (uint32_t i = 0; i < n; i++)
		engine_link_setup(cm, i % cm->nnodes, cm->eng->tun.link_choice,
		    &su[i]);
	rc = engine_connect_links(cm, want, su, err, errlen) == 0 &&
	    engine_accepted_links(cm, want, until_ns, su, err, errlen) == 0 &&
	    engine_complete_links(cm, want, until_ns, su, err, errlen) == 0 ?
	    0 : -1;
	for (uint32_t i = 0; i < n; i++)
		link_setup_drop(&su[i]);
	free(su);
	return rc;
}

/* At the job's start: start_link's. */
static int
engine_links(struct comm *cm)
{
	uint32_t n = ROWS(cm) * cm->nnodes;
	char err[ERR_MAX] = "";
	uint8_t *want;
	int rc = -1;

	if ((want = calloc(n, 1)) == NULL)
		snprintf(err, sizeof(err), "out of memory for data links");
	else {
		for (uint32_t i = 0; i < n; i++)
			want[i] = (uint8_t)start_link(cm, i / cm->nnodes,
			    i % cm->nnodes);
		rc = engine_make_links(cm, want, 0, err, sizeof(err));
		free(want);
	}
	engine_report_links(cm, rc == 0, MCCL_ERR_PEER_FAILED, err);
	return rc;
}

/*
 * A link set up on first use failed.  A node that failed the op first (a
 * mismatch it saw on another link) drops its half-made links, and its word
 * of why, the job's failure, may still be on the way: as duplex.c does on
 * a hang-up, the job's abort gets LINK_GRACE_NS (not past the op's deadline)
 * to come before the link's failure is called the op's.  1: it came.
 */
static int
engine_abort_within_grace(struct comm *cm, uint64_t deadline_ns)
{
	uint64_t now = now_ns(), end = now + LINK_GRACE_NS;
	struct pollfd pfd = { cm->eng->abort_fd, POLLIN, 0 };

	if (deadline_ns != 0 && end > deadline_ns)
		end = deadline_ns;
	/* readable: aborted, or told to quit (then no reason will come) */
	while (!__atomic_load_n(&cm->eng->aborted, __ATOMIC_ACQUIRE) &&
	    (now = now_ns()) < end)
		if (poll(&pfd, 1, (int)((end - now + 999999) / 1000000)) == 1)
			break;
	return __atomic_load_n(&cm->eng->aborted, __ATOMIC_ACQUIRE);
}

/*
 * duplex.c, on the engine thread: an algorithm talks over lane 0 to these
 * positions, whose links are not made yet.  Every node of the op comes
 * here for the same pairs in the same step (the algorithm is the same on
 * every node, and who talks to whom is symmetric), so both ends of each
 * set it up as at the job's start, by the op's deadline; each step waits
 * only on steps before it, so no two nodes wait on each other.
 */
static int
engine_links_on_use(struct xfer *x, const uint32_t *pos, uint32_t npos)
{
	struct comm *cm = x->link_arg;
	uint8_t *want;
	int rc = -1;

	if ((want = calloc((size_t)ROWS(cm) * cm->nnodes, 1)) == NULL) {
		x->code = MCCL_ERR_NO_MEMORY;
		snprintf(x->err, sizeof(x->err), "out of memory for data links");
		return -1;
	}
	for (uint32_t i = 0; i < npos; i++)
		want[pos[i]] = pos[i] < cm->nnodes && pos[i] != cm->me &&
		    cm->eng->links[pos[i]] == NULL;
	if ((rc = engine_make_links(cm, want, x->deadline_ns, x->err,
	    sizeof(x->err))) == -1)
		x->code = engine_abort_within_grace(cm, x->deadline_ns) ?
		    MCCL_ERR_ABORTED : MCCL_ERR_PEER_FAILED;
	else
		log_debug("job %s: %u data links made on first use", cm->name,
		    npos);
	free(want);
	return rc;
}

/* ---- operations ---- */

/*
 * Links that send from registered memory learn the op's buffers first: the
 * local ranks' segments (registered once, then found in a cache) and the
 * engine's node buffer.
 */
static void
engine_register(struct comm *cm, const struct op *op)
{
	for (uint32_t i = 0; i < cm->nlocal; i++) {
		const struct seg *s[2] = { op->parts[i].send_seg,
		    op->parts[i].recv_seg };

		for (int k = 0; k < 2; k++)
			if (s[k] != NULL && (k == 0 || s[1] != s[0]))
				link_mem_add(s[k], s[k]->base, s[k]->size);
	}
	if (cm->eng->tmp.buf != NULL)
		link_mem_add(&cm->eng->tmp, cm->eng->tmp.buf, cm->eng->tmp.len);
	if (cm->eng->tmp_alt.buf != NULL)
		link_mem_add(&cm->eng->tmp_alt, cm->eng->tmp_alt.buf,
		    cm->eng->tmp_alt.len);
}

static void
engine_run(struct comm *cm, struct op *op, uint8_t *scratch)
{
	struct xfer x;
	int rc;

	op->start_ns = now_ns();
	if (cm->eng->registers)
		engine_register(cm, op);
	memset(&x, 0, sizeof(x));
	x.nnodes = cm->nnodes;
	x.me = cm->me;
	x.links = cm->eng->links;
	x.link_on_use = engine_links_on_use;
	x.link_arg = cm;
	x.nlanes = cm->nlanes;
	x.names = cm->names;
	x.abort_fd = cm->eng->abort_fd;
	x.aborted = &cm->eng->aborted;
	x.deadline_ns = op->deadline_ns;
	x.chunk = cm->conf.chunk_bytes;
	x.algo = op->desc.algo;
	x.cost = cm->cost;
	x.spin_ns = spin_budget_ns(cm->eng->tun.spin_us);
	x.scratch = scratch;
	x.crew = cm->eng->crew;
	x.node_index = cm->node_index;
	x.waiting = &op->wait_pos;
	x.blame = NO_POS;
	x.wire = op->desc.wire;
	x.hdr = (struct peer_ophdr){ op->desc.seq, op->desc.coll,
	    op->desc.dtype, op->desc.redop, 0, op->desc.root, op->desc.count,
	    op->desc.wire };
	rc = coll_run(cm, op, &x);
	op->code = rc == 0 ? 0 : x.code;
	op->blame_pos = x.blame;
	op->algo_run = x.hdr.algo;
	op->wire_run = x.wire_run;
	op->wire_saved = x.wire_saved;
	op->lane_ns = x.lane_ns;
	op->lane_wait_ns = x.lane_wait_ns;
	wire_strlcpy(op->err, x.err, sizeof(op->err));
}

/*
 * Before sleeping for work, spin a while (spin.h): the next op of a tight
 * loop then starts without a wake-up.  1 if there is work, or the main
 * thread kicked us (its kicks moved past `kicks`).
 */
static int
engine_spin(struct comm *cm, uint32_t kicks)
{
	uint64_t budget, until;

	if ((budget = spin_budget_ns(cm->eng->tun.spin_us)) == 0)
		return 0;
	until = now_ns() + budget;
	do {
		for (int k = 0; k < 16; k++) {
			if (subq_ready(cm) || __atomic_load_n(&cm->eng->kicks,
			    __ATOMIC_ACQUIRE) != kicks)
				return 1;
			spin_pause();
		}
	} while (now_ns() < until);
	return 0;
}

/*
 * Ops the doorbells answered wait on the out queue for the main thread to free
 * them, which it is woken for once QUIET_BATCH of them are there, or when
 * the engine has had nothing to do for LAZY_NS: a tight loop of small
 * collectives costs it a wake-up per batch, not per op.
 */
static uint64_t
engine_lazy(struct comm *cm, uint64_t lazy)
{
	uint64_t now = now_ns();
	int notify = 0;

	pthread_mutex_lock(&cm->eng->mtx);
	if (cm->eng->out_quiet == 0)
		lazy = 0;
	else if (lazy == 0)
		lazy = now + LAZY_NS;
	else if (now >= lazy) {
		cm->eng->out_quiet = 0;
		notify = 1;
		lazy = 0;
	}
	pthread_mutex_unlock(&cm->eng->mtx);
	if (notify)
		engine_notify(cm);
	return lazy;
}

/*
 * The node buffer goes back to its budget once the engine has waited
 * IDLE_NS for work since its last op: a loop of large ops keeps it, an
 * idle job holds none.  The time to wake at, or 0.
 */
static uint64_t
engine_idle(struct comm *cm, uint64_t idle)
{
	uint64_t now;

	if (cm->eng->tmp.buf == NULL && cm->eng->tmp_alt.buf == NULL)
		return 0;
	now = now_ns();
	if (idle == 0)
		return now + IDLE_NS;
	if (now < idle)
		return idle;
	coll_tmp_release(cm);
	return 0;
}

static uint64_t
earliest(uint64_t a, uint64_t b)
{
	return a == 0 ? b : b == 0 ? a : a < b ? a : b;
}

/*
 * The next operation to run: one the submission rings assembled, or one
 * that failed there (code set); NULL when told to quit.  A failed or
 * aborted job takes no more, and an op it took ahead fails unrun.
 */
static struct op *
engine_next(struct comm *cm)
{
	uint64_t until, lazy = 0, idle = 0;
	uint32_t kicks;
	struct op *op;
	int quit, take;

	for (;;) {
		kicks = __atomic_load_n(&cm->eng->kicks, __ATOMIC_ACQUIRE);
		pthread_mutex_lock(&cm->eng->mtx);
		if (cm->eng->tun_pending) {	/* a reload's, between ops */
			cm->eng->tun = cm->eng->tun_next;
			cm->eng->tun_pending = 0;
		}
		quit = cm->eng->quit;
		take = !cm->eng->aborted;
		if ((op = subq_next_ahead(cm, quit || !take)) != NULL) {
			cm->eng->current = op;
			pthread_mutex_unlock(&cm->eng->mtx);
			return op;
		}
		if (!take && !cm->eng->stopped) {	/* see job_fail_clients */
			cm->eng->stopped = 1;
			engine_notify(cm);
		}
		pthread_mutex_unlock(&cm->eng->mtx);
		if (quit)
			return NULL;
		until = 0;
		if (take && (op = subq_take(cm, &until)) != NULL) {
			pthread_mutex_lock(&cm->eng->mtx);
			cm->eng->current = op;
			pthread_mutex_unlock(&cm->eng->mtx);
			return op;
		}
		if (engine_spin(cm, kicks))
			continue;
		lazy = engine_lazy(cm, lazy);
		idle = engine_idle(cm, idle);
		subq_sleep(cm, kicks, earliest(earliest(until, lazy), idle));
	}
}

/*
 * Hand op back to the main thread.  One that ended well is answered at
 * once through its ranks' doorbells, under mtx with op already on
 * out: a rank that wakes and leaves at once finds its descriptors
 * completed (subq_pending), and the main thread can't free op before the
 * ringing is over.  One that failed stops the engine taking more.  On
 * the engine thread, or on a side crew thread for an op whose last
 * segment the next op handed out (coll_segments).
 */
static void
engine_done(struct comm *cm, struct op *op)
{
	int notify = 1;

	op->done_ns = now_ns();
	pthread_mutex_lock(&cm->eng->mtx);
	if (cm->eng->current == op)	/* not the next, which ends it */
		cm->eng->current = NULL;
	TAILQ_INSERT_TAIL(&cm->eng->out, op, entry);
	subq_completed(cm, op);
	if (op->code == 0) {
		for (uint32_t i = 0; i < cm->nlocal; i++)
			bell_ring(cm->eng->sq[i].bell, op->parts[i].req);
		if ((notify = ++cm->eng->out_quiet >= QUIET_BATCH))
			cm->eng->out_quiet = 0;
	} else		/* atomic: ring_start reads it unlocked */
		__atomic_store_n(&cm->eng->aborted, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&cm->eng->mtx);
	if (notify)
		engine_notify(cm);
}

/* Any thread: hand a finished op back to the main thread. */
void
engine_op_done(struct comm *cm, struct op *op)
{
	if (cm->eng == NULL) {	/* no engine_start: no op was ever taken */
		op_free(op);
		return;
	}
	pthread_mutex_lock(&cm->eng->mtx);
	TAILQ_INSERT_TAIL(&cm->eng->out, op, entry);
	pthread_mutex_unlock(&cm->eng->mtx);
	engine_notify(cm);
}

static void
engine_report_links(struct comm *cm, int ok, int code, const char *err)
{
	pthread_mutex_lock(&cm->eng->mtx);
	cm->eng->link_state = ok ? 1 : -1;
	cm->eng->link_code = code;
	wire_strlcpy(cm->eng->link_err, err, sizeof(cm->eng->link_err));
	pthread_mutex_unlock(&cm->eng->mtx);
	engine_notify(cm);
}

static void *
engine_main(void *arg)
{
	struct comm *cm = arg;
	size_t scratch_len = 2 * cm->conf.chunk_bytes * cm->nlanes;
	uint8_t *scratch;
	struct op *op;
	int ok = 0;

	if ((scratch = bigmem_alloc(scratch_len)) == NULL)
		engine_report_links(cm, 0, MCCL_ERR_NO_MEMORY,
		    "out of memory for the pipeline");
	else
		ok = engine_links(cm) == 0;
	if (ok && cm->eng->registers)
		link_mem_add(scratch, scratch, scratch_len);
	while ((op = engine_next(cm)) != NULL) {
		if (op->code == 0 && ok)
			engine_run(cm, op, scratch);
		else if (op->code == 0) {
			op->code = cm->eng->link_code;
			wire_strlcpy(op->err, cm->eng->link_err, sizeof(op->err));
		}
		coll_end_before(cm, op);
		if (!op->handed_on)	/* else the next op ends it */
			engine_done(cm, op);
	}
	if (cm->eng->registers)
		link_mem_forget(scratch);
	bigmem_free(scratch, scratch_len);
	coll_tmp_release(cm);
	/* Under the lock: the main thread frees the event only after it. */
	pthread_mutex_lock(&cm->eng->mtx);
	cm->eng->exited = 1;
	engine_notify(cm);
	pthread_mutex_unlock(&cm->eng->mtx);
	return NULL;
}

/* ---- the main thread's side ---- */

/* The job's engine, if its thread runs. */
static struct engine *
engine_running(const struct comm *cm)
{
	return cm->eng != NULL && cm->eng->running ? cm->eng : NULL;
}

/* Everything but the thread; engine_finish frees what this made. */
static int
engine_new(struct comm *cm, const struct engine_rank *ranks, char *err,
    size_t errlen)
{
	size_t nlinks = (size_t)ROWS(cm) * cm->nnodes;
	pthread_condattr_t ca;
	struct engine *e;

	if ((e = calloc(1, sizeof(*e))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	cm->eng = e;
	pthread_mutex_init(&e->mtx, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);	/* deadlines are */
	pthread_cond_init(&e->cond, &ca);
	pthread_condattr_destroy(&ca);
	TAILQ_INIT(&e->out);
	e->op_ended = engine_done;
	e->abort_fd = -1;
	e->tmp = (struct scratch){ NULL, 0, cm->uid, cm->conf.node_name };
	e->tun = cm->conf.tun;
	e->tmp_alt = e->tmp;
	if ((e->fds = malloc(nlinks * sizeof(int))) == NULL ||
	    (e->links = calloc(nlinks, sizeof(*e->links))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t p = 0; p < nlinks; p++)
		e->fds[p] = -1;
	if (subq_attach(cm, ranks, err, errlen) == -1)
		return -1;
	if ((e->abort_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) == -1) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		return -1;
	}
	if ((e->crew = crew_new()) == NULL || (e->side = crew_new()) == NULL) {
		snprintf(err, errlen, "cannot make the engine's helper threads' "
		    "state: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Start the job's engine on the local ranks' rings and segments (ranks,
 * by local index).  On failure the job has what was made, for
 * engine_finish.
 */
int
engine_start(struct comm *cm, const struct engine_rank *ranks, char *err,
    size_t errlen)
{
	if (engine_new(cm, ranks, err, errlen) == -1)
		return -1;
	if ((errno = pthread_create(&cm->eng->thread, NULL, engine_main, cm)) !=
	    0) {
		snprintf(err, errlen, "cannot start the engine thread: %s",
		    strerror(errno));
		return -1;
	}
	cm->eng->running = 1;
	return 0;
}

/*
 * Settings a reload changed: the engine takes them before its next
 * operation (engine_next), so an operation runs by one set throughout.
 */
void
engine_retune(struct comm *cm, const struct engine_tunables *t)
{
	struct engine *e = engine_running(cm);

	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mtx);
	e->tun_next = *t;
	e->tun_pending = 1;
	pthread_mutex_unlock(&e->mtx);
}

/* Hand an accepted link of a lane, from the node at position pos, over. */
int
engine_adopt_link(struct comm *cm, uint32_t pos, uint32_t lane, int fd)
{
	struct engine *e = engine_running(cm);
	int rc = -1, *slot;

	if (e == NULL || pos >= cm->me || lane >= ROWS(cm) ||
	    !row_allowed(cm, lane, pos))
		return -1;
	slot = &e->fds[lane * cm->nnodes + pos];
	pthread_mutex_lock(&e->mtx);
	if (*slot == -1) {
		*slot = fd;
		pthread_cond_signal(&e->cond);
		rc = 0;
	}
	pthread_mutex_unlock(&e->mtx);
	return rc;
}

/*
 * Take what the engine (and p2p.c) handed back: the ops that ended, onto
 * done; and once, whether the job's links came up: 1 they did, -1 they
 * failed (code and err say why), 0 nothing new.
 */
int
engine_collect(struct comm *cm, struct op_list *done, int *code, char *err,
    size_t errlen)
{
	struct engine *e = cm->eng;
	int links = 0;

	if (e == NULL)
		return 0;
	pthread_mutex_lock(&e->mtx);
	TAILQ_CONCAT(done, &e->out, entry);
	if (e->link_state != 0 && !e->links_reported) {
		e->links_reported = 1;
		links = e->link_state;
		*code = e->link_code;
		wire_strlcpy(err, e->link_err, errlen);
	}
	pthread_mutex_unlock(&e->mtx);
	return links;
}

/* The collective the engine runs now, if one: 1 and *now filled, or 0. */
int
engine_current(struct comm *cm, struct op_now *now)
{
	struct engine *e = engine_running(cm);
	const struct op *op;

	if (e == NULL)
		return 0;
	pthread_mutex_lock(&e->mtx);
	if ((op = e->current) != NULL)
		*now = (struct op_now){ op->desc.seq, op->desc.coll,
		    op->desc.count, op->ready_ns, op->deadline_ns,
		    __atomic_load_n(&op->wait_pos, __ATOMIC_RELAXED) };
	pthread_mutex_unlock(&e->mtx);
	return op != NULL;
}

/* No op runs or will: the engine was aborted and ended its last, or is gone. */
int
engine_stopped(struct comm *cm)
{
	struct engine *e = engine_running(cm);
	int stopped;

	if (e == NULL)
		return 1;
	pthread_mutex_lock(&e->mtx);
	stopped = e->stopped || e->exited;
	pthread_mutex_unlock(&e->mtx);
	return stopped;
}

/*
 * The job failed: the op running ends (duplex.c sees aborted, and abort_fd
 * wakes its poll), and no other starts.  It says so by engine_stopped,
 * through a wake-up of the main loop.
 */
void
engine_abort(struct comm *cm)
{
	struct engine *e = engine_running(cm);
	uint64_t one = 1;

	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mtx);
	__atomic_store_n(&e->aborted, 1, __ATOMIC_RELEASE);
	subq_wake(cm);
	pthread_mutex_unlock(&e->mtx);
	if (write(e->abort_fd, &one, sizeof(one)) == -1)
		log_warn("job %s: waking the engine", cm->name);
}

/* Wake the engine to look again (a rank left, say). */
void
engine_wake(struct comm *cm)
{
	struct engine *e = engine_running(cm);

	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mtx);
	subq_wake(cm);
	pthread_mutex_unlock(&e->mtx);
}

struct lingering_links {
	TAILQ_ENTRY(lingering_links) entry;
	struct link	**links;
	uint32_t	 n;
	struct event	*ev;
};

static TAILQ_HEAD(, lingering_links) lingering =
    TAILQ_HEAD_INITIALIZER(lingering);

static void
links_close(struct link **links, uint32_t n)
{
	for (uint32_t p = 0; p < n; p++)
		if (links[p] != NULL) {
			link_close(links[p]);
			__atomic_sub_fetch(&links_open, 1, __ATOMIC_RELAXED);
		}
	free(links);
}

static void
linger_close(struct lingering_links *l)
{
	TAILQ_REMOVE(&lingering, l, entry);
	links_close(l->links, l->n);
	event_free(l->ev);
	free(l);
}

static void
linger_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	linger_close(arg);
}

/*
 * A failed job's links stay open a little: the other nodes must learn why
 * it failed (PEER_ABORT, on the control connection) before they see the
 * links close, or they would report a dead peer instead of the reason.
 */
static void
engine_linger(const struct comm *cm, struct link **links, uint32_t n)
{
	struct timeval tv = { LINGER_MS / 1000, (LINGER_MS % 1000) * 1000 };
	struct lingering_links *l = NULL;

	if (cm->ev_engine == NULL || (l = calloc(1, sizeof(*l))) == NULL ||
	    (l->ev = evtimer_new(event_get_base(cm->ev_engine), linger_cb,
	    l)) == NULL) {
		free(l);
		links_close(links, n);
		return;
	}
	l->links = links;
	l->n = n;
	TAILQ_INSERT_TAIL(&lingering, l, entry);
	evtimer_add(l->ev, &tv);
}

/* The daemon is exiting: close what still lingers. */
void
engine_shutdown(void)
{
	while (!TAILQ_EMPTY(&lingering))
		linger_close(TAILQ_FIRST(&lingering));
}

/* Tell the thread to stop; it wakes the main thread when it has. */
void
engine_quit(struct comm *cm)
{
	struct engine *e = engine_running(cm);
	uint64_t one = 1;

	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mtx);
	e->quit = 1;
	subq_wake(cm);
	pthread_mutex_unlock(&e->mtx);
	/* Also gives up a data link being connected (dial_data_link). */
	if (write(e->abort_fd, &one, sizeof(one)) == -1)
		log_warn("job %s: stopping the engine", cm->name);
}

/* The thread has returned, or never ran: engine_finish won't block. */
int
engine_exited(struct comm *cm)
{
	struct engine *e = engine_running(cm);
	int exited;

	if (e == NULL)
		return 1;
	pthread_mutex_lock(&e->mtx);
	exited = e->exited;
	pthread_mutex_unlock(&e->mtx);
	return exited;
}

/*
 * After engine_quit: join the thread, close the links, free the ops still
 * queued, and give back what the engine holds.  Blocks until the thread
 * returns: the main loop calls it once engine_exited says so, only the
 * exit path sooner.  Also frees what a failed engine_start made.
 */
void
engine_finish(struct comm *cm)
{
	size_t nlinks = (size_t)ROWS(cm) * cm->nnodes;
	struct engine *e = cm->eng;
	struct op *op;

	if (e == NULL)
		return;
	if (e->running)
		pthread_join(e->thread, NULL);
	for (size_t p = 0; e->fds != NULL && p < nlinks; p++)
		if (e->fds[p] >= 0)		/* handed over, never taken */
			close(e->fds[p]);
	free(e->fds);
	if (e->links != NULL && e->aborted)
		engine_linger(cm, e->links, nlinks);
	else if (e->links != NULL)
		links_close(e->links, nlinks);
	if (e->abort_fd != -1)
		close(e->abort_fd);
	crew_free(e->crew);
	crew_free(e->side);
	subq_detach(cm);
	while ((op = TAILQ_FIRST(&e->out)) != NULL) {
		TAILQ_REMOVE(&e->out, op, entry);
		op_free(op);
	}
	pthread_mutex_destroy(&e->mtx);
	pthread_cond_destroy(&e->cond);
	free(e);
	cm->eng = NULL;
}
