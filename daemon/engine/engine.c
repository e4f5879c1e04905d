/*
 * engine.c: a job's data plane.  Each formed job has one engine thread on
 * each of its nodes.  It opens the job's data links (transport/: TCP or
 * RDMA, set up alike; the send/recv ones go to p2p.c), then runs the job's
 * operations in order: combine the local ranks' buffers in shared memory,
 * run the inter-node part (ring.c) on one buffer for the whole node, and
 * write the result into every local rank's buffer.  It never touches the
 * main thread's structures: operations come in from the local ranks'
 * submission rings (subq.c) and go back through its completion queue
 * (struct engine's out, under mtx), and ev_engine tells the main loop,
 * which takes them with engine_collect.
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

#include "engine/engine_state.h"
#include "spin.h"
#include "engine/algo.h"
#include "engine/pass.h"
#include "transport/transport.h"

#define LINGER_MS	3000	/* a failed job's links, before closing */
#define LAZY_NS		2000000	/* ops answered by doorbell: see */
#define QUIET_BATCH	32	/* engine_lazy */
#define IDLE_NS		1000000000	/* scratch kept while idle: engine_idle */

static void	engine_report_links(struct job *, int, int, const char *);

/* Any thread: wake the main thread for this job (job_engine_cb). */
void
engine_notify(struct job *j)
{
	event_active(j->ev_engine, EV_READ, 0);
}

/* ---- data links ---- */

#define FD_TAKEN	(-2)	/* fds: an accepted link the engine took */
#define ROWS(j)		((j)->nlanes)	/* a row of links per lane */

static uint64_t links_open;	/* lanes' links of every job (metrics) */

/* The lanes' data links open on this node, all jobs (metrics). */
uint64_t
engine_links_open(void)
{
	return __atomic_load_n(&links_open, __ATOMIC_RELAXED);
}

static int
ring_neighbour(const struct job *j, uint32_t p)
{
	uint32_t n = j->nnodes;

	return p != j->me && (p == (j->me + 1) % n || p == (j->me + n - 1) % n);
}

/*
 * Whether lane k's link to position p may be made.  Lane 0 may go to every
 * node (the pairwise algorithms, the tree, the chain); the other lanes
 * carry only a large ring allreduce's other rings, between neighbours.
 */
static int
row_allowed(const struct job *j, uint32_t k, uint32_t p)
{
	return k == 0 || ring_neighbour(j, p);
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
start_link(const struct job *j, uint32_t k, uint32_t p)
{
	return ring_neighbour(j, p) ||
	    (k == 0 && ring_pairs_with(j->me, p, j->nnodes));
}

/* Connect to the nodes after us that we want links to, offer on each. */
static int
engine_connect_links(struct job *j, const uint8_t *want,
    struct link_setup *su, char *err, size_t errlen)
{
	for (uint32_t p = j->me + 1; p < j->nnodes; p++)
		for (uint32_t k = 0; k < ROWS(j); k++) {
			struct link_setup *s = &su[k * j->nnodes + p];
			char why[ERR_MAX] = "";
			uint32_t node = j->node_index[p];

			if (!want[k * j->nnodes + p])
				continue;
			if ((s->fd = dial_data_link(&md.conf.nodes[node].addr,
			    md.conf.node_index, node, j->id, PEER_STREAM_LANE(k),
			    j->eng->abort_fd, link_deadline(), why,
			    sizeof(why))) == -1 ||
			    link_offer(s, why, sizeof(why)) == -1) {
				snprintf(err, errlen, "cannot open a data link "
				    "to node %s: %s", j->names[p], why);
				return -1;
			}
		}
	return 0;
}

/* The first node before us whose wanted link has not come (-1: none), and
   in *have how many have. */
static int
engine_links_missing(const struct job *j, const uint8_t *want,
    uint32_t *have)
{
	int first = -1;

	*have = 0;
	for (uint32_t p = 0; p < j->me; p++)
		for (uint32_t k = 0; k < ROWS(j); k++) {
			if (!want[k * j->nnodes + p])
				continue;
			if (j->eng->fds[k * j->nnodes + p] != -1)
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
engine_await_links(struct job *j, const uint8_t *want, uint64_t until_ns,
    char *err, size_t errlen)
{
	uint32_t ms = __atomic_load_n(&md.conf.connect_timeout_ms,
	    __ATOMIC_RELAXED), have, had = UINT32_MAX;
	struct timespec ts;
	int missing, timed_out = 0;

	if (until_ns != 0)
		timespec_at_ns(&ts, until_ns);
	while ((missing = engine_links_missing(j, want, &have)) != -1 &&
	    !j->eng->quit && !j->eng->aborted) {
		if (until_ns == 0 && have != had) {	/* progress */
			had = have;
			timespec_at_ns(&ts, now_ns() + (uint64_t)ms * 1000000);
		} else if (timed_out)
			break;
		timed_out = pthread_cond_timedwait(&j->eng->cond,
		    &j->eng->mtx, &ts) == ETIMEDOUT;
	}
	if (missing == -1)
		return 0;
	if (until_ns == 0)
		snprintf(err, errlen, "node %s did not open its data link "
		    "within %u ms", j->names[missing], ms);
	else
		snprintf(err, errlen, "node %s did not open its data link "
		    "by the operation's deadline", j->names[missing]);
	return -1;
}

/* Take the wanted links the nodes before us opened, and offer on each. */
static int
engine_accepted_links(struct job *j, const uint8_t *want, uint64_t until_ns,
    struct link_setup *su, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&j->eng->mtx);
	if ((rc = engine_await_links(j, want, until_ns, err, errlen)) == 0)
		for (uint32_t p = 0; p < j->me; p++)
			for (uint32_t k = 0; k < ROWS(j); k++) {
				uint32_t i = k * j->nnodes + p;

				if (!want[i])
					continue;
				su[i].fd = j->eng->fds[i];
				j->eng->fds[i] = FD_TAKEN;
			}
	pthread_mutex_unlock(&j->eng->mtx);
	for (uint32_t p = 0; rc == 0 && p < j->me; p++)
		for (uint32_t k = 0; rc == 0 && k < ROWS(j); k++)
			if (want[k * j->nnodes + p] && (rc = link_offer(
			    &su[k * j->nnodes + p], err, errlen)) == -1)
				snprintf(err, errlen, "data link from node %s: "
				    "sending its set-up failed", j->names[p]);
	return rc;
}

/* Set-up's last two steps on every wanted link, each on all before the
   next. */
static int
engine_complete_links(struct job *j, const uint8_t *want, uint64_t until_ns,
    struct link_setup *su, char *err, size_t errlen)
{
	uint32_t n = ROWS(j) * j->nnodes;
	char why[ERR_MAX] = "";
	uint64_t deadline;

	/* a deadline for each link's step, as engine_await_links says why */
	for (int step = 0; step < 2; step++)
		for (uint32_t i = 0; i < n; i++) {
			if (!want[i])
				continue;
			deadline = until_ns != 0 ? until_ns : link_deadline();
			if ((step == 0 ? link_answer(&su[i], j->eng->abort_fd,
			    deadline, why, sizeof(why)) : link_ready(&su[i],
			    j->eng->abort_fd, deadline, why, sizeof(why))) ==
			    -1) {
				snprintf(err, errlen, "data link between nodes "
				    "%s and %s: %s", j->names[j->me],
				    j->names[i % j->nnodes], why);
				return -1;
			}
			if (j->eng->links[i] == NULL)
				__atomic_add_fetch(&links_open, 1,
				    __ATOMIC_RELAXED);
			j->eng->links[i] = su[i].link;
			if (su[i].link->tp->mem_add != NULL)
				j->eng->registers = 1;
		}
	return 0;
}

/*
 * Make the wanted links ([k * nnodes + p]), as both ends of each do at
 * once: the end before dials.  until_ns: as engine_await_links says.
 */
static int
engine_make_links(struct job *j, const uint8_t *want, uint64_t until_ns,
    char *err, size_t errlen)
{
	uint32_t n = ROWS(j) * j->nnodes;
	struct link_setup *su;
	int rc;

	if ((su = calloc(n, sizeof(*su))) == NULL) {
		snprintf(err, errlen, "out of memory for data links");
		return -1;
	}
	for (uint32_t i = 0; i < n; i++) {
		su[i].fd = -1;
		su[i].node = j->node_index[i % j->nnodes];
	}
	rc = engine_connect_links(j, want, su, err, errlen) == 0 &&
	    engine_accepted_links(j, want, until_ns, su, err, errlen) == 0 &&
	    engine_complete_links(j, want, until_ns, su, err, errlen) == 0 ?
	    0 : -1;
	for (uint32_t i = 0; i < n; i++)
		link_setup_drop(&su[i]);
	free(su);
	return rc;
}

/* At the job's start: start_link's. */
static int
engine_links(struct job *j)
{
	uint32_t n = ROWS(j) * j->nnodes;
	char err[ERR_MAX] = "";
	uint8_t *want;
	int rc = -1;

	if ((want = calloc(n, 1)) == NULL)
		snprintf(err, sizeof(err), "out of memory for data links");
	else {
		for (uint32_t i = 0; i < n; i++)
			want[i] = (uint8_t)start_link(j, i / j->nnodes,
			    i % j->nnodes);
		rc = engine_make_links(j, want, 0, err, sizeof(err));
		free(want);
	}
	engine_report_links(j, rc == 0, MCCL_ERR_PEER_FAILED, err);
	return rc;
}

/*
 * A link set up on first use failed.  A node that failed the op first (a
 * mismatch it saw on another link) drops its half-made links, and its word
 * of why, the job's failure, may still be on the way: as ring.c does on a
 * hang-up, the job's abort gets LINK_GRACE_NS (not past the op's deadline)
 * to come before the link's failure is called the op's.  1: it came.
 */
static int
engine_abort_within_grace(struct job *j, uint64_t deadline_ns)
{
	uint64_t now = now_ns(), end = now + LINK_GRACE_NS;
	struct pollfd pfd = { j->eng->abort_fd, POLLIN, 0 };

	if (deadline_ns != 0 && end > deadline_ns)
		end = deadline_ns;
	/* readable: aborted, or told to quit (then no reason will come) */
	while (!__atomic_load_n(&j->eng->aborted, __ATOMIC_ACQUIRE) &&
	    (now = now_ns()) < end)
		if (poll(&pfd, 1, (int)((end - now + 999999) / 1000000)) == 1)
			break;
	return __atomic_load_n(&j->eng->aborted, __ATOMIC_ACQUIRE);
}

/*
 * ring.c, on the engine thread: an algorithm talks over lane 0 to these
 * positions, whose links are not made yet.  Every node of the op comes
 * here for the same pairs in the same step (the algorithm is the same on
 * every node, and who talks to whom is symmetric), so both ends of each
 * set it up as at the job's start, by the op's deadline; each step waits
 * only on steps before it, so no two nodes wait on each other.
 */
static int
engine_links_on_use(struct xfer *x, const uint32_t *pos, uint32_t npos)
{
	struct job *j = x->link_arg;
	uint8_t *want;
	int rc = -1;

	if ((want = calloc((size_t)ROWS(j) * j->nnodes, 1)) == NULL) {
		x->code = MCCL_ERR_NO_MEMORY;
		snprintf(x->err, sizeof(x->err), "out of memory for data links");
		return -1;
	}
	for (uint32_t i = 0; i < npos; i++)
		want[pos[i]] = pos[i] < j->nnodes && pos[i] != j->me &&
		    j->eng->links[pos[i]] == NULL;
	if ((rc = engine_make_links(j, want, x->deadline_ns, x->err,
	    sizeof(x->err))) == -1)
		x->code = engine_abort_within_grace(j, x->deadline_ns) ?
		    MCCL_ERR_ABORTED : MCCL_ERR_PEER_FAILED;
	else
		log_debug("job %s: %u data links made on first use", j->name,
		    npos);
	free(want);
	return rc;
}

/* ---- operations ---- */

static uint32_t
local_index_of(const struct job *j, uint32_t rank)
{
	for (uint32_t i = 0; i < j->nlocal; i++)
		if (j->local_ranks[i] == rank)
			return i;
	return UINT32_MAX;
}

static int
engine_nomem(struct xfer *x)
{
	x->code = MCCL_ERR_NO_MEMORY;
	snprintf(x->err, sizeof(x->err), "out of memory");
	return -1;
}

/*
 * The engine's node buffer, of at least bytes (its budget permitting: else
 * NULL, with x's error saying which limit).  Given back when the job is
 * idle (engine_idle).
 */
static uint8_t *
engine_tmp(struct job *j, size_t bytes, struct xfer *x)
{
	uint8_t *p;

	if (bytes == 0 || (p = scratch_get(&j->eng->tmp, bytes, x->err,
	    sizeof(x->err))) != NULL)
		return j->eng->tmp.buf;
	x->code = MCCL_ERR_NO_MEMORY;
	return NULL;
}

/* Forget the node buffer's registration before its pages go. */
static void
engine_tmp_release(struct job *j)
{
	if (j->eng->registers && j->eng->tmp.buf != NULL)
		link_mem_forget(&j->eng->tmp);
	scratch_release(&j->eng->tmp);
}

/*
 * A pass's fault, as the op's error: whose buffer, which way, why.  A
 * rank's memory that went away mid-op is its own doing (the invalid
 * argument of a buffer freed before its op ended); a rank whose process
 * went away failed as a rank that dies does.
 */
static void
engine_pass_fault(const struct job *j, const struct op *op,
    const struct pass_fault *f, struct xfer *x)
{
	uint32_t rank = UINT32_MAX;

	for (uint32_t i = 0; i < j->nlocal; i++)
		if (op->parts[i].xm == f->xm)
			rank = j->local_ranks[i];
	x->code = f->err == ESRCH ? MCCL_ERR_PEER_FAILED :
	    MCCL_ERR_INVALID_ARGUMENT;
	snprintf(x->err, sizeof(x->err), "rank %u's %s buffer: the daemon "
	    "could not %s %zu bytes at 0x%llx in its memory: %s%s", rank,
	    f->writing ? "receive" : "send", f->writing ? "write" : "read",
	    f->len, (unsigned long long)f->addr, strerror(f->err),
	    f->err == EFAULT ? " (was it freed or unmapped before the "
	    "allreduce ended?)" : f->err == ESRCH ? " (the process has "
	    "gone)" : "");
}

/* One pass over the op's local buffers (pass.c), on the job's crew. */
static int
engine_pass(struct job *j, const struct op *op, void *const *dsts,
    const struct xmem *const *dxm, uint32_t ndsts, const void *const *srcs,
    const struct xmem *const *sxm, uint32_t nsrcs, size_t count,
    uint32_t avg_div, struct xfer *x)
{
	struct pass p;
	int rc = 0;

	if (pass_init(&p, dsts, ndsts, srcs, nsrcs, count, op->desc.dtype,
	    op->desc.redop, avg_div, PASS_PARTS_MAX) == -1 ||
	    pass_xmem(&p, sxm, dxm) == -1) {
		pass_free(&p);
		return engine_nomem(x);
	}
	if (pass_run(&p, j->eng->crew) == -1) {
		engine_pass_fault(j, op, &p.fault, x);
		rc = -1;
	}
	pass_free(&p);
	return rc;
}

/* 1 if some local rank's buffers are in its own memory (IPC_OP_XMEM). */
static int
op_in_xmem(const struct job *j, const struct op *op)
{
	for (uint32_t i = 0; i < j->nlocal; i++)
		if (op->parts[i].xm != NULL)
			return 1;
	return 0;
}

/*
 * The local ranks' send buffers at byte offset off, the one dst aliases
 * (in place) first, as reduce_many needs, and in sxm whose own memory each
 * is in (NULL: a segment).  Their number.  A client's address never
 * aliases the daemon's.
 */
static uint32_t
combine_srcs(const struct job *j, const struct op *op, const uint8_t *dst,
    size_t off, const void **srcs, const struct xmem **sxm)
{
	uint32_t n = 0;

	for (int first = 1; first >= 0; first--)
		for (uint32_t i = 0; i < j->nlocal; i++) {
			const struct op_part *pt = &op->parts[i];
			int alias = pt->xm == NULL && pt->send + off == dst;

			if (alias != first)
				continue;
			sxm[n] = pt->xm;
			srcs[n++] = pt->send + off;
		}
	return n;
}

/*
 * Where the node's result at src (byte offset off of the op) goes: every
 * local rank's buffer but src, and src itself (first) where an average is
 * divided on the way; dxm as combine_srcs' sxm.  Their number.
 */
static uint32_t
fan_dsts(const struct job *j, const struct op *op, uint8_t *src, size_t off,
    uint32_t avg_div, void **dsts, const struct xmem **dxm)
{
	uint32_t n = 0;

	if (avg_div > 1) {
		dxm[n] = NULL;
		dsts[n++] = src;
	}
	for (uint32_t i = 0; i < j->nlocal; i++) {
		const struct op_part *pt = &op->parts[i];

		if (pt->xm != NULL || pt->recv + off != src) {
			dxm[n] = pt->xm;
			dsts[n++] = pt->recv + off;
		}
	}
	return n;
}

/* Combine the local ranks' send buffers, each at byte offset off, into dst. */
static int
engine_combine(struct job *j, const struct op *op, uint8_t *dst, size_t off,
    size_t count, struct xfer *x)
{
	/* one allocation: a small op's time is mostly such calls */
	const void **srcs = calloc(j->nlocal, sizeof(*srcs) + sizeof(void *));
	const struct xmem **sxm = (const struct xmem **)(srcs + j->nlocal);
	uint32_t n;
	int rc;

	if (srcs == NULL)
		return engine_nomem(x);
	n = combine_srcs(j, op, dst, off, srcs, sxm);
	rc = count == 0 ? 0 : engine_pass(j, op, (void *const *)&dst, NULL, 1,
	    srcs, op_in_xmem(j, op) ? sxm : NULL, n, count, 0, x);
	free(srcs);
	return rc;
}

/*
 * count elements of the node's result, at src (byte offset off of the op),
 * to every local rank's buffer, divided by avg_div on the way when that is
 * above 1.
 */
static int
engine_fan_out(struct job *j, const struct op *op, uint8_t *src, size_t off,
    size_t count, uint32_t avg_div, struct xfer *x)
{
	void **dsts = calloc(j->nlocal + 1, sizeof(*dsts) + sizeof(void *));
	const struct xmem **dxm = (const struct xmem **)(dsts + j->nlocal + 1);
	uint32_t n;
	int rc;

	if (dsts == NULL)
		return engine_nomem(x);
	n = fan_dsts(j, op, src, off, avg_div, dsts, dxm);
	rc = engine_pass(j, op, dsts, op_in_xmem(j, op) ? dxm : NULL, n,
	    (const void *const *)&src, NULL, 1, count, avg_div, x);
	free(dsts);
	return rc;
}

/*
 * The buffer an allreduce's node result is built in: the first local
 * rank's, or the engine's own where some rank's buffers are in its own
 * memory.  NULL: out of memory, x says so.
 */
static uint8_t *
engine_node_buf(struct job *j, const struct op *op, struct xfer *x)
{
	size_t bytes = (size_t)op->desc.count * dtype_size(op->desc.dtype);

	if (!op_in_xmem(j, op))
		return op->parts[0].recv;
	return engine_tmp(j, bytes, x);
}

/* All ranks on this node: one pass from the send buffers to the results. */
static int
engine_local_allreduce(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint32_t n = j->nlocal, avg = d->redop == MCCL_AVG ? j->nranks : 0;
	void **dsts;
	const void **srcs;
	uint8_t *buf;
	int rc;

	if (op_in_xmem(j, op))		/* in the engine's buffer, between */
		return (buf = engine_node_buf(j, op, x)) == NULL ? -1 :
		    engine_combine(j, op, buf, 0, d->count, x) == -1 ? -1 :
		    engine_fan_out(j, op, buf, 0, d->count, avg, x);
	dsts = calloc(n, sizeof(*dsts));
	srcs = calloc(n, sizeof(*srcs));
	if (srcs == NULL || dsts == NULL) {
		free(srcs);
		free(dsts);
		return engine_nomem(x);
	}
	for (uint32_t i = 0; i < n; i++) {
		srcs[i] = op->parts[i].send;
		dsts[i] = op->parts[i].recv;
	}
	rc = engine_pass(j, op, dsts, NULL, n, srcs, NULL, n, d->count, avg,
	    x);
	free(srcs);
	free(dsts);
	return rc;
}

/*
 * The node's contribution to a reduction whose result goes to dst: a lone
 * local rank's send buffer as it is (the algorithm reads it from there, an
 * out-of-place op costs no copy), else the local ranks' combined into dst.
 */
static int
engine_contribution(struct job *j, const struct op *op, uint8_t *dst,
    const uint8_t **src, struct xfer *x)
{
	if (j->nlocal == 1 && op->parts[0].xm == NULL) {
		*src = op->parts[0].send;
		return 0;
	}
	*src = dst;
	return engine_combine(j, op, dst, 0, op->desc.count, x);
}

/* The inter-node part, timed: the control plane fits the link cost to it. */
static int
engine_node_allreduce(struct op *op, struct xfer *x, const void *src,
    void *dst)
{
	const struct ipc_op *d = &op->desc;
	uint64_t t0 = now_ns();
	int rc = node_allreduce(x, src, dst, d->count, d->dtype, d->redop);

	op->node_ns = now_ns() - t0;
	return rc;
}

/*
 * A large allreduce of a job where some node has several ranks runs in
 * segments: while the network carries segment s, the side crew hands out
 * segment s - 1 and combines segment s + 1, so that a node's passes over
 * memory hide behind the wire instead of adding to it.  Every node cuts
 * the same, by what all of them know (the count, the job's shape); each
 * segment's operation header still names the whole op.
 */
#define SEGMENT_BYTES	(8u << 20)
#define SIDE_PARTS	3		/* threads of each side pass */

static int
engine_segmented(const struct job *j, size_t bytes)
{
	return j->nnodes > 1 && j->nranks > j->nnodes &&
	    bytes >= 2 * (size_t)SEGMENT_BYTES;
}

struct side {
	struct pass	 pass[2];	/* the fan-out, the combine */
	uint8_t		*fan_src;	/* what the passes point at */
	uint8_t		*comb_dst;
	void		**fan;		/* their buffers (nlocal + 1 each) */
	const struct xmem **fan_xm;
	const void	**comb;
	const struct xmem **comb_xm;
	int		 xmem;		/* the op has parts in clients' memory */
	int		 started;	/* on the side crew */
};

static void
side_part(void *arg, unsigned t)
{
	struct side *s = arg;

	if (t < s->pass[0].nparts)
		pass_part(&s->pass[0], t);
	else
		pass_part(&s->pass[1], t - s->pass[0].nparts);
}

/*
 * Segment prev (of count_prev elements, byte offset off_prev) handed out
 * from the node's buffer buf, and segment next combined into it, on the
 * side crew if it can, else here.
 */
static int
side_begin(struct job *j, const struct op *op, struct side *s, uint8_t *buf,
    uint32_t avg, size_t off_prev, size_t count_prev, size_t off_next,
    size_t count_next)
{
	const struct ipc_op *d = &op->desc;
	uint32_t nfan, ncomb;
	unsigned n;

	s->fan_src = buf + off_prev;
	s->comb_dst = buf + off_next;
	s->started = 0;
	nfan = count_prev == 0 ? 0 : fan_dsts(j, op, s->fan_src, off_prev, avg,
	    s->fan, s->fan_xm);
	ncomb = count_next == 0 ? 0 : combine_srcs(j, op, s->comb_dst,
	    off_next, s->comb, s->comb_xm);
	if (pass_init(&s->pass[0], s->fan, nfan,
	    (const void *const *)&s->fan_src, 1, count_prev, d->dtype,
	    d->redop, avg, SIDE_PARTS) == -1 ||
	    pass_xmem(&s->pass[0], NULL, s->xmem ? s->fan_xm : NULL) == -1) {
		pass_free(&s->pass[0]);
		return -1;
	}
	if (pass_init(&s->pass[1], (void *const *)&s->comb_dst,
	    count_next == 0 ? 0 : 1, s->comb, ncomb, count_next, d->dtype,
	    d->redop, 0, SIDE_PARTS) == -1 || pass_xmem(&s->pass[1],
	    s->xmem ? s->comb_xm : NULL, NULL) == -1) {
		pass_free(&s->pass[0]);
		pass_free(&s->pass[1]);
		return -1;
	}
	n = s->pass[0].nparts + s->pass[1].nparts;
	if (n > 0 && crew_start(j->eng->side, n, side_part, s) == 0)
		s->started = 1;
	else
		for (unsigned t = 0; t < n; t++)	/* no threads: here */
			side_part(s, t);
	return 0;
}

/* The side passes ended; -1 with x's error if one of them failed. */
static int
side_end(struct job *j, const struct op *op, struct side *s, struct xfer *x)
{
	int rc = 0;

	if (s->started)
		crew_wait(j->eng->side);
	for (int k = 0; k < 2; k++)
		if (rc == 0 && s->pass[k].fault.err != 0) {
			engine_pass_fault(j, op, &s->pass[k].fault, x);
			rc = -1;
		}
	pass_free(&s->pass[0]);
	pass_free(&s->pass[1]);
	return rc;
}

static int
side_new(struct side *s, const struct job *j, const struct op *op)
{
	memset(s, 0, sizeof(*s));
	s->xmem = op_in_xmem(j, op);
	s->fan = calloc(j->nlocal + 1, sizeof(*s->fan));
	s->fan_xm = calloc(j->nlocal + 1, sizeof(*s->fan_xm));
	s->comb = calloc(j->nlocal, sizeof(*s->comb));
	s->comb_xm = calloc(j->nlocal, sizeof(*s->comb_xm));
	return s->fan && s->fan_xm && s->comb && s->comb_xm ? 0 : -1;
}

static void
side_free(struct side *s)
{
	free(s->fan);
	free(s->fan_xm);
	free(s->comb);
	free(s->comb_xm);
}

static int
engine_segments(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	size_t es = dtype_size(d->dtype), seg = SEGMENT_BYTES / es,
	    nseg = (d->count + seg - 1) / seg, last = d->count - (nseg - 1) * seg;
	uint32_t avg = d->redop == MCCL_AVG ? j->nranks : 0;
	uint8_t *dst = engine_node_buf(j, op, x);
	int combines = j->nlocal > 1 || op_in_xmem(j, op);
	const uint8_t *src = combines ? dst : op->parts[0].send;
	uint64_t node_ns = 0, t0;
	struct side side;
	int rc = 0;

	if (dst == NULL)
		return -1;
	if (side_new(&side, j, op) == -1) {
		side_free(&side);
		return engine_nomem(x);
	}
	if (combines)
		rc = engine_combine(j, op, dst, 0, seg, x);
	for (size_t s = 0; rc == 0 && s < nseg; s++) {
		size_t at = s * seg * es, n = s + 1 < nseg ? seg : last,
		    next = combines && s + 1 < nseg ? (s + 2 < nseg ? seg :
		    last) : 0;

		if (side_begin(j, op, &side, dst, avg, s > 0 ? at - seg * es :
		    0, s > 0 ? seg : 0, next > 0 ? at + seg * es : 0,
		    next) == -1) {
			rc = engine_nomem(x);
			break;
		}
		t0 = now_ns();
		rc = node_allreduce(x, src + at, dst + at, n, d->dtype,
		    d->redop);
		node_ns += now_ns() - t0;
		if (side_end(j, op, &side, x) == -1)
			rc = -1;
	}
	if (rc == 0)
		rc = engine_fan_out(j, op, dst + (nseg - 1) * seg * es,
		    (nseg - 1) * seg * es, last, avg, x);
	op->node_ns = node_ns;
	side_free(&side);
	return rc;
}

/* Bytes the op read and wrote in its ranks' own memory. */
static uint64_t
engine_xmem_bytes(const struct job *j, const struct op *op)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < j->nlocal; i++)
		if (op->parts[i].xm != NULL)
			n += 2 * op->desc.count * dtype_size(op->desc.dtype);
	return n;
}

static int
engine_allreduce(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint8_t *dst;
	const uint8_t *src;
	int rc;

	if (j->nnodes == 1)
		rc = engine_local_allreduce(j, op, x);
	else if (engine_segmented(j, (size_t)d->count * dtype_size(d->dtype)))
		rc = engine_segments(j, op, x);
	else if ((dst = engine_node_buf(j, op, x)) == NULL ||
	    engine_contribution(j, op, dst, &src, x) == -1 ||
	    engine_node_allreduce(op, x, src, dst) == -1)
		rc = -1;
	else
		rc = engine_fan_out(j, op, dst, 0, d->count,
		    d->redop == MCCL_AVG ? j->nranks : 0, x);
	if (rc == 0)
		op->xmem_bytes = engine_xmem_bytes(j, op);
	return rc;
}

static int
engine_reduce(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint32_t root = local_index_of(j, d->root);
	size_t bytes = (size_t)d->count * dtype_size(d->dtype);
	uint8_t *dst = root != UINT32_MAX ? op->parts[root].recv :
	    engine_tmp(j, bytes, x);
	const uint8_t *src;

	if (dst == NULL && bytes > 0)
		return -1;
	if (engine_contribution(j, op, dst, &src, x) == -1 ||
	    engine_node_allreduce(op, x, src, dst) == -1)
		return -1;
	if (d->redop == MCCL_AVG && bytes > 0 && root != UINT32_MAX)
		reduce_scale_avg(dst, d->count, d->dtype, j->nranks);
	return 0;
}

static int
engine_broadcast(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint32_t root_pos = j->rank_pos[d->root];
	size_t bytes = (size_t)d->count * dtype_size(d->dtype);
	uint8_t *buf = op->parts[0].recv;

	if (root_pos == j->me)
		buf = op->parts[local_index_of(j, d->root)].recv;
	if (node_broadcast(x, buf, bytes, root_pos) == -1)
		return -1;
	return engine_fan_out(j, op, buf, 0, d->count, 0, x);
}

/* Each position's block of a buffer in node order, blk bytes per rank. */
static int
engine_blocks(const struct job *j, size_t blk, size_t **offs, size_t **lens)
{
	*offs = calloc(j->nnodes, sizeof(size_t));
	*lens = calloc(j->nnodes, sizeof(size_t));
	if (*offs == NULL || *lens == NULL) {
		free(*offs);
		free(*lens);
		return -1;
	}
	for (uint32_t p = 0; p < j->nnodes; p++) {
		(*offs)[p] = (size_t)j->pos_first[p] * blk;
		(*lens)[p] = (size_t)j->pos_count[p] * blk;
	}
	return 0;
}

/* Copy a buffer in rank order (blk bytes per rank) into node order. */
static void
engine_reslot(const struct job *j, uint8_t *dst, const uint8_t *src,
    size_t blk)
{
	for (uint32_t r = 0; r < j->nranks && blk > 0; r++)
		memcpy(dst + (size_t)j->rank_slot[r] * blk, src + (size_t)r * blk,
		    blk);
}

/* Copy a buffer in node order (blk bytes per rank) into rank order. */
static void
engine_unslot(const struct job *j, uint8_t *dst, const uint8_t *src,
    size_t blk)
{
	if (blk == 0)		/* nothing, and the buffers may be NULL */
		return;
	if (j->slots_are_ranks) {
		if (dst != src)
			memcpy(dst, src, (size_t)j->nranks * blk);
		return;
	}
	for (uint32_t r = 0; r < j->nranks; r++)
		memcpy(dst + (size_t)r * blk, src + (size_t)j->rank_slot[r] * blk,
		    blk);
}

/*
 * The local ranks' sends into their slots of dst, blk bytes each, slots
 * counted from first_slot (0: dst holds every slot of the job).
 */
static void
engine_slot_sends(const struct job *j, const struct op *op, uint8_t *dst,
    size_t blk, uint32_t first_slot)
{
	for (uint32_t i = 0; i < j->nlocal && blk > 0; i++) {
		uint8_t *slot = dst + (size_t)(j->rank_slot[j->local_ranks[i]] -
		    first_slot) * blk;

		if (slot != op->parts[i].send)
			memcpy(slot, op->parts[i].send, blk);
	}
}

/* The other way: each local rank's block of src into its receive. */
static void
engine_slot_recvs(const struct job *j, const struct op *op,
    const uint8_t *src, size_t blk, uint32_t first_slot)
{
	for (uint32_t i = 0; i < j->nlocal && blk > 0; i++) {
		const uint8_t *slot = src + (size_t)(j->rank_slot[
		    j->local_ranks[i]] - first_slot) * blk;

		if (slot != op->parts[i].recv)
			memcpy(op->parts[i].recv, slot, blk);
	}
}

static int
engine_allgather(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	size_t blk = (size_t)d->count * dtype_size(d->dtype);
	size_t total = blk * j->nranks, *offs, *lens;
	uint8_t *buf;
	int rc;

	buf = j->slots_are_ranks ? op->parts[0].recv :
	    engine_tmp(j, total, x);
	if (buf == NULL && total > 0)
		return -1;
	if (engine_blocks(j, blk, &offs, &lens))
		return engine_nomem(x);
	engine_slot_sends(j, op, buf, blk, 0);
	rc = ring_allgather(x, buf, offs, lens);
	free(offs);
	free(lens);
	for (uint32_t i = 0; rc == 0 && i < j->nlocal && total > 0; i++)
		engine_unslot(j, op->parts[i].recv, buf, blk);
	return rc;
}

/*
 * Gather and scatter: the root's node holds every block, in node order (in
 * the root's own buffer when that order is the ranks'); another node only
 * its ranks' blocks, side by side in `mine` (in place for a lone rank).
 */
static int
engine_rooted(struct job *j, struct op *op, struct xfer *x, int gather)
{
	const struct ipc_op *d = &op->desc;
	size_t blk = (size_t)d->count * dtype_size(d->dtype);
	size_t total = blk * j->nranks, ours = blk * j->nlocal, *offs, *lens;
	uint32_t root = local_index_of(j, d->root), first = j->pos_first[j->me];
	uint8_t *buf = NULL, *mine = NULL, *user = NULL;
	int rc;

	if (root != UINT32_MAX) {
		user = gather ? op->parts[root].recv : op->parts[root].send;
		buf = j->slots_are_ranks ? user : engine_tmp(j, total, x);
		if (buf == NULL && total > 0)
			return -1;
		if (gather)
			engine_slot_sends(j, op, buf, blk, 0);
		else if (buf != user)
			engine_reslot(j, buf, user, blk);
	} else {
		mine = j->nlocal == 1 ? (gather ? op->parts[0].send :
		    op->parts[0].recv) : engine_tmp(j, ours, x);
		if (mine == NULL && ours > 0)
			return -1;
		if (gather && j->nlocal > 1)
			engine_slot_sends(j, op, mine, blk, first);
	}
	if (engine_blocks(j, blk, &offs, &lens))
		return engine_nomem(x);
	rc = (gather ? ring_gather : ring_scatter)(x, buf, offs, lens,
	    j->rank_pos[d->root], mine);
	free(offs);
	free(lens);
	if (rc == 0 && gather && buf != NULL && buf != user && total > 0)
		engine_unslot(j, user, buf, blk);
	if (rc == 0 && !gather)
		engine_slot_recvs(j, op, buf != NULL ? buf : mine, blk,
		    buf != NULL ? 0 : first);
	return rc;
}

static int
engine_gather(struct job *j, struct op *op, struct xfer *x)
{
	return engine_rooted(j, op, x, 1);
}

static int
engine_scatter(struct job *j, struct op *op, struct xfer *x)
{
	return engine_rooted(j, op, x, 0);
}

static int
engine_reduce_scatter(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	size_t blk = (size_t)d->count * dtype_size(d->dtype);
	uint8_t *buf = engine_tmp(j, blk * j->nranks, x);

	if (buf == NULL && blk > 0)
		return -1;
	if (j->slots_are_ranks) {
		if (engine_combine(j, op, buf, 0, d->count * j->nranks, x) == -1)
			return -1;
	} else
		for (uint32_t r = 0; r < j->nranks; r++)
			if (engine_combine(j, op, buf + (size_t)j->rank_slot[r] *
			    blk, (size_t)r * blk, d->count, x) == -1)
				return -1;
	if (ring_allreduce_wire(x, buf, buf, d->count * j->nranks, d->dtype,
	    d->redop) == -1)
		return -1;
	for (uint32_t i = 0; i < j->nlocal && blk > 0; i++) {
		uint8_t *mine = buf + (size_t)j->rank_slot[j->local_ranks[i]] *
		    blk;

		if (d->redop == MCCL_AVG)
			reduce_scale_avg(mine, d->count, d->dtype, j->nranks);
		memcpy(op->parts[i].recv, mine, blk);
	}
	return 0;
}

/*
 * Alltoall in pairwise steps: at step s this node sends to the node s
 * places to its right everything its ranks have for that node's ranks,
 * packed in one stream, and receives the same from the node s places to
 * its left.  Blocks between local ranks are copied directly.
 */
struct a2a {
	const uint8_t	**send;		/* each local rank's send buffer */
	size_t		  blk;
	uint8_t		 *spack, *rpack;
};

static size_t
a2a_pack(const struct job *j, const struct a2a *a, uint32_t to)
{
	size_t k = 0;

	for (uint32_t i = 0; i < j->nlocal; i++)
		for (uint32_t r = 0; r < j->nranks; r++)
			if (j->rank_pos[r] == to)
				memcpy(a->spack + a->blk * k++, a->send[i] +
				    (size_t)r * a->blk, a->blk);
	return k * a->blk;
}

static void
a2a_unpack(const struct job *j, const struct op *op, const struct a2a *a,
    uint32_t from)
{
	size_t k = 0;

	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->rank_pos[r] == from)
			for (uint32_t i = 0; i < j->nlocal; i++)
				memcpy(op->parts[i].recv + (size_t)r * a->blk,
				    a->rpack + a->blk * k++, a->blk);
}

static void
a2a_local(const struct job *j, const struct op *op, const struct a2a *a)
{
	for (uint32_t i = 0; i < j->nlocal; i++)
		for (uint32_t k = 0; k < j->nlocal; k++)
			memcpy(op->parts[k].recv + (size_t)j->local_ranks[i] *
			    a->blk, a->send[i] + (size_t)j->local_ranks[k] *
			    a->blk, a->blk);
}

/*
 * Scratch for an alltoall: a copy of the sends of the ranks that run it in
 * place (their receives overwrite them), then one packing buffer each way,
 * as large as the most this node exchanges with one node.
 */
static size_t
a2a_scratch(const struct job *j, const struct op *op, size_t blk,
    size_t *copies, size_t *pack)
{
	uint32_t most = 0;

	*copies = 0;
	for (uint32_t i = 0; i < j->nlocal; i++)
		if (op->parts[i].send == op->parts[i].recv)
			*copies += blk * j->nranks;
	for (uint32_t p = 0; p < j->nnodes; p++)
		if (p != j->me && j->pos_count[p] > most)
			most = j->pos_count[p];
	*pack = (size_t)most * j->nlocal * blk;
	return *copies + 2 * *pack;
}

static int
engine_alltoall(struct job *j, struct op *op, struct xfer *x)
{
	size_t blk = (size_t)op->desc.count * dtype_size(op->desc.dtype);
	size_t copies, pack, need = a2a_scratch(j, op, blk, &copies, &pack);
	struct a2a a = { NULL, blk, NULL, NULL };
	uint8_t *tmp = engine_tmp(j, need, x), *copy;
	int rc = 0;

	if (tmp == NULL && need > 0)
		return -1;
	if ((a.send = calloc(j->nlocal, sizeof(*a.send))) == NULL)
		return engine_nomem(x);
	copy = tmp;
	for (uint32_t i = 0; i < j->nlocal; i++) {
		a.send[i] = op->parts[i].send;
		if (blk > 0 && op->parts[i].send == op->parts[i].recv) {
			memcpy(copy, a.send[i], blk * j->nranks);
			a.send[i] = copy;
			copy += blk * j->nranks;
		}
	}
	a.spack = tmp + copies;
	a.rpack = tmp + copies + pack;
	if (blk > 0)
		a2a_local(j, op, &a);
	/* Count 0 still exchanges headers: mismatches are found all the same. */
	for (uint32_t s = 1; rc == 0 && s < j->nnodes; s++) {
		uint32_t to = (j->me + s) % j->nnodes;
		uint32_t from = (j->me + j->nnodes - s) % j->nnodes;
		size_t sbytes = blk > 0 ? a2a_pack(j, &a, to) : 0;
		size_t rbytes = (size_t)j->pos_count[from] * j->nlocal * blk;

		if ((rc = xfer_exchange(x, to, a.spack, sbytes, from, a.rpack,
		    rbytes)) == 0 && blk > 0)
			a2a_unpack(j, op, &a, from);
	}
	free(a.send);
	return rc;
}

/*
 * Allgatherv: as allgather, with each slot as long as its rank's count.
 * at[s] is where slot s starts in the node-order buffer (at[nranks]: its
 * length); every position's region follows from it.
 */
static int
v_layout(const struct job *j, const uint64_t *counts, size_t es,
    size_t **at, size_t **offs, size_t **lens)
{
	*at = calloc(j->nranks + 1, sizeof(size_t));
	*offs = calloc(j->nnodes, sizeof(size_t));
	*lens = calloc(j->nnodes, sizeof(size_t));
	if (*at == NULL || *offs == NULL || *lens == NULL) {
		free(*at);
		free(*offs);
		free(*lens);
		return -1;
	}
	for (uint32_t r = 0; r < j->nranks; r++)	/* slot sizes, shifted */
		(*at)[j->rank_slot[r] + 1] = (size_t)counts[r] * es;
	for (uint32_t s = 0; s < j->nranks; s++)
		(*at)[s + 1] += (*at)[s];
	for (uint32_t p = 0; p < j->nnodes; p++) {
		(*offs)[p] = (*at)[j->pos_first[p]];
		(*lens)[p] = (*at)[j->pos_first[p] + j->pos_count[p]] -
		    (*offs)[p];
	}
	return 0;
}

static int
engine_allgatherv(struct job *j, struct op *op, struct xfer *x)
{
	const uint64_t *counts = op->parts[0].vec;	/* the same on all */
	size_t es = dtype_size(op->desc.dtype), *at, *offs, *lens;
	uint8_t *buf;
	int rc;

	if (v_layout(j, counts, es, &at, &offs, &lens) == -1)
		return engine_nomem(x);
	if ((buf = engine_tmp(j, at[j->nranks], x)) == NULL &&
	    at[j->nranks] > 0) {
		rc = -1;
		goto out;
	}
	for (uint32_t i = 0; i < j->nlocal; i++) {
		uint32_t r = j->local_ranks[i];

		if (counts[r] > 0)
			memcpy(buf + at[j->rank_slot[r]], op->parts[i].send,
			    counts[r] * es);
	}
	/* The nodes must agree on every count: the header carries a digest. */
	x->hdr.root = proto_vec_digest(counts, j->nranks);
	if ((rc = ring_allgather(x, buf, offs, lens)) == 0)
		for (uint32_t i = 0; i < j->nlocal; i++) {
			const uint64_t *displs = op->parts[i].vec + j->nranks;

			for (uint32_t r = 0; r < j->nranks; r++)
				if (counts[r] > 0)
					memcpy(op->parts[i].recv + displs[r] *
					    es, buf + at[j->rank_slot[r]],
					    counts[r] * es);
		}
out:
	free(at);
	free(offs);
	free(lens);
	return rc;
}

/*
 * Alltoallv, rank i's view: sendcounts, sdispls, recvcounts, rdispls,
 * nranks each, in its vector.
 */
#define SCOUNT(op, i, n)	((op)->parts[i].vec)
#define SDISPL(op, i, n)	((op)->parts[i].vec + (n))
#define RCOUNT(op, i, n)	((op)->parts[i].vec + 2 * (size_t)(n))
#define RDISPL(op, i, n)	((op)->parts[i].vec + 3 * (size_t)(n))

/*
 * Each pair's block with the node at pos, in one order on both sides: by
 * sending rank, then receiving rank.  fn sees the local rank i, the other
 * rank r and the pair's count; it returns the block's bytes.
 */
static size_t
a2av_pairs(const struct job *j, const struct op *op, uint32_t pos, int recv,
    size_t (*fn)(const struct job *, const struct op *, uint32_t,
    uint32_t, void *), void *arg)
{
	uint32_t n = j->nranks;
	size_t total = 0;

	for (uint32_t a = 0; a < (recv ? n : j->nlocal); a++)
		for (uint32_t b = 0; b < (recv ? j->nlocal : n); b++) {
			uint32_t r = recv ? a : b, i = recv ? b : a;

			if (j->rank_pos[r] == pos)
				total += fn(j, op, i, r, arg);
		}
	return total;
}

/*
 * A step's stream: for each pair, what the sender sends on it and what it
 * expects back on the same pair of ranks, then the blocks.  The receiver
 * checks both directions, so a pair whose counts disagree fails on the
 * nodes of both its ranks, however the steps pair the nodes.
 */
#define A2AV_PAIR	(2 * sizeof(uint64_t))

struct a2av_cursor {
	int		 recv;
	size_t		 es;
	uint8_t		*counts;	/* the pairs' counts, in order */
	uint8_t		*data;		/* their blocks, in order */
	int		 bad;		/* unpack: a pair's counts differ */
	uint32_t	 from, to;	/* its sending and receiving rank */
	uint64_t	 sends, expects;
};

static size_t
a2av_size(const struct job *j, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	const struct a2av_cursor *c = arg;

	return A2AV_PAIR + (c->recv ? RCOUNT(op, i, j->nranks) :
	    SCOUNT(op, i, j->nranks))[r] * c->es;
}

static size_t
a2av_put(const struct job *j, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	struct a2av_cursor *c = arg;
	uint64_t count[2] = { SCOUNT(op, i, j->nranks)[r],
	    RCOUNT(op, i, j->nranks)[r] };

	memcpy(c->counts, count, A2AV_PAIR);
	c->counts += A2AV_PAIR;
	if (count[0] > 0)	/* else the buffer may be NULL */
		memcpy(c->data, op->parts[i].send + SDISPL(op, i,
		    j->nranks)[r] * c->es, count[0] * c->es);
	c->data += count[0] * c->es;
	return 0;
}

static void
a2av_bad(struct a2av_cursor *c, uint32_t from, uint32_t to, uint64_t sends,
    uint64_t expects)
{
	if (c->bad++)
		return;
	c->from = from;
	c->to = to;
	c->sends = sends;
	c->expects = expects;
}

/* Check every pair's counts first, before any block lands. */
static size_t
a2av_check(const struct job *j, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	struct a2av_cursor *c = arg;
	uint32_t me = j->local_ranks[i];
	uint64_t count[2];

	memcpy(count, c->counts, A2AV_PAIR);
	c->counts += A2AV_PAIR;
	if (count[0] != RCOUNT(op, i, j->nranks)[r])
		a2av_bad(c, r, me, count[0], RCOUNT(op, i, j->nranks)[r]);
	else if (count[1] != SCOUNT(op, i, j->nranks)[r])
		a2av_bad(c, me, r, SCOUNT(op, i, j->nranks)[r], count[1]);
	return 0;
}

static size_t
a2av_get(const struct job *j, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	struct a2av_cursor *c = arg;
	size_t len = RCOUNT(op, i, j->nranks)[r] * c->es;

	if (len > 0)		/* else the buffer may be NULL */
		memcpy(op->parts[i].recv + RDISPL(op, i, j->nranks)[r] *
		    c->es, c->data, len);
	c->data += len;
	return 0;
}

/* The pairs' counts take the stream's first bytes. */
static size_t
a2av_npairs(const struct job *j, uint32_t pos)
{
	return (size_t)j->pos_count[pos] * j->nlocal * A2AV_PAIR;
}

/* Between local ranks: each pair's counts must agree, then a copy. */
static int
a2av_local(const struct job *j, const struct op *op, size_t es,
    struct xfer *x)
{
	uint32_t n = j->nranks;

	for (uint32_t i = 0; i < j->nlocal; i++)
		for (uint32_t k = 0; k < j->nlocal; k++) {
			uint32_t src = j->local_ranks[i], dst = j->local_ranks[k];
			uint64_t c = SCOUNT(op, i, n)[dst];

			if (c != RCOUNT(op, k, n)[src]) {
				x->code = MCCL_ERR_INVALID_ARGUMENT;
				snprintf(x->err, sizeof(x->err), "alltoallv: rank "
				    "%u sends %llu elements to rank %u, which "
				    "expects %llu", src, (unsigned long long)c,
				    dst, (unsigned long long)RCOUNT(op, k, n)[src]);
				return -1;
			}
			if (c > 0)
				memcpy(op->parts[k].recv + RDISPL(op, k, n)[src] *
				    es, op->parts[i].send + SDISPL(op, i, n)[dst] *
				    es, c * es);
		}
	return 0;
}

/* One pairwise step: to `to`, from `from`, through spack and rpack. */
static int
a2av_step(struct job *j, struct op *op, struct xfer *x, uint32_t to,
    uint32_t from, uint8_t *spack, uint8_t *rpack)
{
	size_t es = dtype_size(op->desc.dtype);
	struct a2av_cursor tx = { .es = es, .counts = spack,
	    .data = spack + a2av_npairs(j, to) };
	struct a2av_cursor rx = { .recv = 1, .es = es, .counts = rpack,
	    .data = rpack + a2av_npairs(j, from) };
	size_t sbytes = a2av_pairs(j, op, to, 0, a2av_size, &tx);
	size_t rbytes = a2av_pairs(j, op, from, 1, a2av_size, &rx);

	a2av_pairs(j, op, to, 0, a2av_put, &tx);
	if (xfer_exchange_sized(x, to, spack, sbytes, from, rpack, rbytes) == -1)
		return -1;
	a2av_pairs(j, op, from, 1, a2av_check, &rx);
	if (rx.bad) {
		x->code = MCCL_ERR_INVALID_ARGUMENT;
		snprintf(x->err, sizeof(x->err), "alltoallv: rank %u sends %llu "
		    "elements to rank %u, which expects %llu", rx.from,
		    (unsigned long long)rx.sends, rx.to,
		    (unsigned long long)rx.expects);
		return -1;
	}
	a2av_pairs(j, op, from, 1, a2av_get, &rx);
	return 0;
}

/*
 * Alltoallv in the pairwise steps of alltoall.  Each step's stream starts
 * with every pair's counts, and its header carries its length: counts that
 * disagree fail the op on the nodes of the pair's ranks, naming them,
 * before any block of that step lands.
 */
static int
engine_alltoallv(struct job *j, struct op *op, struct xfer *x)
{
	size_t es = dtype_size(op->desc.dtype), smax = 0, rmax = 0, b;
	struct a2av_cursor sz = { .es = es };
	uint8_t *tmp;
	int rc = 0;

	for (uint32_t p = 0; p < j->nnodes; p++) {
		if (p == j->me)
			continue;
		sz.recv = 0;
		if ((b = a2av_pairs(j, op, p, 0, a2av_size, &sz)) > smax)
			smax = b;
		sz.recv = 1;
		if ((b = a2av_pairs(j, op, p, 1, a2av_size, &sz)) > rmax)
			rmax = b;
	}
	if ((tmp = engine_tmp(j, smax + rmax, x)) == NULL && smax + rmax > 0)
		return -1;
	/* The other nodes first: they need not wait for a local mismatch. */
	for (uint32_t s = 1; rc == 0 && s < j->nnodes; s++)
		rc = a2av_step(j, op, x, (j->me + s) % j->nnodes,
		    (j->me + j->nnodes - s) % j->nnodes, tmp, tmp + smax);
	return rc == 0 ? a2av_local(j, op, es, x) : rc;
}

/*
 * Links that send from registered memory learn the op's buffers first: the
 * local ranks' segments (registered once, then found in a cache) and the
 * engine's node buffer.
 */
static void
engine_register(struct job *j, const struct op *op)
{
	for (uint32_t i = 0; i < j->nlocal; i++) {
		const struct seg *s[2] = { op->parts[i].send_seg,
		    op->parts[i].recv_seg };

		for (int k = 0; k < 2; k++)
			if (s[k] != NULL && (k == 0 || s[1] != s[0]))
				link_mem_add(s[k], s[k]->base, s[k]->size);
	}
	if (j->eng->tmp.buf != NULL)
		link_mem_add(&j->eng->tmp, j->eng->tmp.buf, j->eng->tmp.len);
}

static void
engine_run(struct job *j, struct op *op, uint8_t *scratch)
{
	struct xfer x;
	int rc = -1;

	if (j->eng->registers)
		engine_register(j, op);
	memset(&x, 0, sizeof(x));
	x.nnodes = j->nnodes;
	x.me = j->me;
	x.links = j->eng->links;
	x.link_on_use = engine_links_on_use;
	x.link_arg = j;
	x.nlanes = j->nlanes;
	x.names = j->names;
	x.abort_fd = j->eng->abort_fd;
	x.aborted = &j->eng->aborted;
	x.deadline_ns = op->deadline_ns;
	x.chunk = md.conf.chunk_bytes;
	x.algo = op->desc.algo;
	x.cost = j->cost;
	x.spin_ns = spin_budget_ns(__atomic_load_n(&md.conf.spin_us,
	    __ATOMIC_RELAXED));
	x.scratch = scratch;
	x.crew = j->eng->crew;
	x.node_index = j->node_index;
	x.tx_ctr = md.data_tx;
	x.rx_ctr = md.data_rx;
	x.waiting = &op->wait_pos;
	x.blame = NO_POS;
	x.wire = op->desc.wire;
	x.hdr = (struct peer_ophdr){ op->desc.seq, op->desc.coll,
	    op->desc.dtype, op->desc.redop, 0, op->desc.root, op->desc.count,
	    0 };
	switch (op->desc.coll) {
	case COLL_ALLREDUCE: rc = engine_allreduce(j, op, &x); break;
	case COLL_BROADCAST: rc = engine_broadcast(j, op, &x); break;
	case COLL_REDUCE: rc = engine_reduce(j, op, &x); break;
	case COLL_ALLGATHER: rc = engine_allgather(j, op, &x); break;
	case COLL_REDUCE_SCATTER: rc = engine_reduce_scatter(j, op, &x); break;
	case COLL_ALLTOALL: rc = engine_alltoall(j, op, &x); break;
	case COLL_GATHER: rc = engine_gather(j, op, &x); break;
	case COLL_SCATTER: rc = engine_scatter(j, op, &x); break;
	case COLL_ALLGATHERV: rc = engine_allgatherv(j, op, &x); break;
	case COLL_ALLTOALLV: rc = engine_alltoallv(j, op, &x); break;
	case COLL_BARRIER: rc = ring_barrier(&x); break;
	default:
		x.code = MCCL_ERR_INTERNAL;
		snprintf(x.err, sizeof(x.err), "collective %u not in the engine",
		    op->desc.coll);
	}
	op->code = rc == 0 ? 0 : x.code;
	op->blame_pos = x.blame;
	op->algo_run = x.hdr.algo;
	op->wire_run = x.hdr.wire;
	op->wire_saved = x.wire_saved;
	wire_strlcpy(op->err, x.err, sizeof(op->err));
}

/*
 * Before sleeping for work, spin a while (spin.h): the next op of a tight
 * loop then starts without a wake-up.  1 if there is work, or the main
 * thread kicked us (its kicks moved past `kicks`).
 */
static int
engine_spin(struct job *j, uint32_t kicks)
{
	uint64_t budget, until;

	if ((budget = spin_budget_ns(__atomic_load_n(&md.conf.spin_us,
	    __ATOMIC_RELAXED))) == 0)
		return 0;
	until = now_ns() + budget;
	do {
		for (int k = 0; k < 16; k++) {
			if (subq_ready(j) || __atomic_load_n(&j->eng->kicks,
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
engine_lazy(struct job *j, uint64_t lazy)
{
	uint64_t now = now_ns();
	int notify = 0;

	pthread_mutex_lock(&j->eng->mtx);
	if (j->eng->out_quiet == 0)
		lazy = 0;
	else if (lazy == 0)
		lazy = now + LAZY_NS;
	else if (now >= lazy) {
		j->eng->out_quiet = 0;
		notify = 1;
		lazy = 0;
	}
	pthread_mutex_unlock(&j->eng->mtx);
	if (notify)
		engine_notify(j);
	return lazy;
}

/*
 * The node buffer goes back to its budget once the engine has waited
 * IDLE_NS for work since its last op: a loop of large ops keeps it, an
 * idle job holds none.  The time to wake at, or 0.
 */
static uint64_t
engine_idle(struct job *j, uint64_t idle)
{
	uint64_t now;

	if (j->eng->tmp.buf == NULL)
		return 0;
	now = now_ns();
	if (idle == 0)
		return now + IDLE_NS;
	if (now < idle)
		return idle;
	engine_tmp_release(j);
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
 * aborted job takes no more.
 */
static struct op *
engine_next(struct job *j)
{
	uint64_t until, lazy = 0, idle = 0;
	uint32_t kicks;
	struct op *op;
	int quit, take;

	for (;;) {
		kicks = __atomic_load_n(&j->eng->kicks, __ATOMIC_ACQUIRE);
		pthread_mutex_lock(&j->eng->mtx);
		quit = j->eng->quit;
		take = !j->eng->aborted;
		if (!take && !j->eng->stopped) {	/* see job_fail_clients */
			j->eng->stopped = 1;
			engine_notify(j);
		}
		pthread_mutex_unlock(&j->eng->mtx);
		if (quit)
			return NULL;
		until = 0;
		if (take && (op = subq_take(j, &until)) != NULL) {
			pthread_mutex_lock(&j->eng->mtx);
			j->eng->current = op;
			pthread_mutex_unlock(&j->eng->mtx);
			return op;
		}
		if (engine_spin(j, kicks))
			continue;
		lazy = engine_lazy(j, lazy);
		idle = engine_idle(j, idle);
		subq_sleep(j, kicks, earliest(earliest(until, lazy), idle));
	}
}

/*
 * Hand op back to the main thread.  One that ended well is answered at
 * once through its ranks' doorbells, under mtx with op already on
 * out: a rank that wakes and leaves at once finds its descriptors
 * completed (subq_pending), and the main thread can't free op before the
 * ringing is over.  One that failed stops the engine taking more.
 */
static void
engine_done(struct job *j, struct op *op)
{
	int notify = 1;

	op->done_ns = now_ns();
	pthread_mutex_lock(&j->eng->mtx);
	j->eng->current = NULL;
	TAILQ_INSERT_TAIL(&j->eng->out, op, entry);
	subq_completed(j);
	if (op->code == 0) {
		for (uint32_t i = 0; i < j->nlocal; i++)
			bell_ring(j->eng->sq[i].bell, op->parts[i].req);
		if ((notify = ++j->eng->out_quiet >= QUIET_BATCH))
			j->eng->out_quiet = 0;
	} else		/* atomic: ring_start reads it unlocked */
		__atomic_store_n(&j->eng->aborted, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&j->eng->mtx);
	if (notify)
		engine_notify(j);
}

/* Any thread: hand a finished op back to the main thread. */
void
engine_op_done(struct job *j, struct op *op)
{
	if (j->eng == NULL) {	/* no engine_start: no op was ever taken */
		op_free(op);
		return;
	}
	pthread_mutex_lock(&j->eng->mtx);
	TAILQ_INSERT_TAIL(&j->eng->out, op, entry);
	pthread_mutex_unlock(&j->eng->mtx);
	engine_notify(j);
}

static void
engine_report_links(struct job *j, int ok, int code, const char *err)
{
	pthread_mutex_lock(&j->eng->mtx);
	j->eng->link_state = ok ? 1 : -1;
	j->eng->link_code = code;
	wire_strlcpy(j->eng->link_err, err, sizeof(j->eng->link_err));
	pthread_mutex_unlock(&j->eng->mtx);
	engine_notify(j);
}

static void *
engine_main(void *arg)
{
	struct job *j = arg;
	size_t scratch_len = 2 * md.conf.chunk_bytes * j->nlanes;
	uint8_t *scratch;
	struct op *op;
	int ok = 0;

	if ((scratch = malloc(scratch_len)) == NULL)
		engine_report_links(j, 0, MCCL_ERR_NO_MEMORY,
		    "out of memory for the pipeline");
	else
		ok = engine_links(j) == 0;
	if (ok && j->eng->registers)
		link_mem_add(scratch, scratch, scratch_len);
	while ((op = engine_next(j)) != NULL) {
		if (op->code == 0 && ok)
			engine_run(j, op, scratch);
		else if (op->code == 0) {
			op->code = j->eng->link_code;
			wire_strlcpy(op->err, j->eng->link_err, sizeof(op->err));
		}
		engine_done(j, op);
	}
	if (j->eng->registers)
		link_mem_forget(scratch);
	free(scratch);
	engine_tmp_release(j);
	/* Under the lock: the main thread frees the event only after it. */
	pthread_mutex_lock(&j->eng->mtx);
	j->eng->exited = 1;
	engine_notify(j);
	pthread_mutex_unlock(&j->eng->mtx);
	return NULL;
}

/* ---- the main thread's side ---- */

/* The job's engine, if its thread runs. */
static struct engine *
engine_running(const struct job *j)
{
	return j->eng != NULL && j->eng->running ? j->eng : NULL;
}

/* Everything but the thread; engine_finish frees what this made. */
static int
engine_new(struct job *j, const struct engine_rank *ranks, char *err,
    size_t errlen)
{
	size_t nlinks = (size_t)ROWS(j) * j->nnodes;
	pthread_condattr_t ca;
	struct engine *e;

	if ((e = calloc(1, sizeof(*e))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	j->eng = e;
	pthread_mutex_init(&e->mtx, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);	/* deadlines are */
	pthread_cond_init(&e->cond, &ca);
	pthread_condattr_destroy(&ca);
	TAILQ_INIT(&e->out);
	e->abort_fd = -1;
	e->tmp = (struct scratch){ NULL, 0, j->uid, md.conf.node_name };
	if ((e->fds = malloc(nlinks * sizeof(int))) == NULL ||
	    (e->links = calloc(nlinks, sizeof(*e->links))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t p = 0; p < nlinks; p++)
		e->fds[p] = -1;
	if (subq_attach(j, ranks, err, errlen) == -1)
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
engine_start(struct job *j, const struct engine_rank *ranks, char *err,
    size_t errlen)
{
	if (engine_new(j, ranks, err, errlen) == -1)
		return -1;
	if ((errno = pthread_create(&j->eng->thread, NULL, engine_main, j)) !=
	    0) {
		snprintf(err, errlen, "cannot start the engine thread: %s",
		    strerror(errno));
		return -1;
	}
	j->eng->running = 1;
	return 0;
}

/* Hand an accepted link of a lane, from the node at position pos, over. */
int
engine_adopt_link(struct job *j, uint32_t pos, uint32_t lane, int fd)
{
	struct engine *e = engine_running(j);
	int rc = -1, *slot;

	if (e == NULL || pos >= j->me || lane >= ROWS(j) ||
	    !row_allowed(j, lane, pos))
		return -1;
	slot = &e->fds[lane * j->nnodes + pos];
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
engine_collect(struct job *j, struct op_list *done, int *code, char *err,
    size_t errlen)
{
	struct engine *e = j->eng;
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
engine_current(struct job *j, struct op_now *now)
{
	struct engine *e = engine_running(j);
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
engine_stopped(struct job *j)
{
	struct engine *e = engine_running(j);
	int stopped;

	if (e == NULL)
		return 1;
	pthread_mutex_lock(&e->mtx);
	stopped = e->stopped || e->exited;
	pthread_mutex_unlock(&e->mtx);
	return stopped;
}

/*
 * The job failed: the op running ends (ring.c sees aborted, and abort_fd
 * wakes its poll), and no other starts.  It says so by engine_stopped,
 * through a wake-up of the main loop.
 */
void
engine_abort(struct job *j)
{
	struct engine *e = engine_running(j);
	uint64_t one = 1;

	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mtx);
	__atomic_store_n(&e->aborted, 1, __ATOMIC_RELEASE);
	subq_wake(j);
	pthread_mutex_unlock(&e->mtx);
	if (write(e->abort_fd, &one, sizeof(one)) == -1)
		log_warn("job %s: waking the engine", j->name);
}

/* Wake the engine to look again (a rank left, say). */
void
engine_wake(struct job *j)
{
	struct engine *e = engine_running(j);

	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mtx);
	subq_wake(j);
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
engine_linger(struct link **links, uint32_t n)
{
	struct timeval tv = { LINGER_MS / 1000, (LINGER_MS % 1000) * 1000 };
	struct lingering_links *l;

	if ((l = calloc(1, sizeof(*l))) == NULL ||
	    (l->ev = evtimer_new(md.base, linger_cb, l)) == NULL) {
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
engine_quit(struct job *j)
{
	struct engine *e = engine_running(j);
	uint64_t one = 1;

	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mtx);
	e->quit = 1;
	subq_wake(j);
	pthread_mutex_unlock(&e->mtx);
	/* Also gives up a data link being connected (dial_data_link). */
	if (write(e->abort_fd, &one, sizeof(one)) == -1)
		log_warn("job %s: stopping the engine", j->name);
}

/* The thread has returned, or never ran: engine_finish won't block. */
int
engine_exited(struct job *j)
{
	struct engine *e = engine_running(j);
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
engine_finish(struct job *j)
{
	size_t nlinks = (size_t)ROWS(j) * j->nnodes;
	struct engine *e = j->eng;
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
		engine_linger(e->links, nlinks);
	else if (e->links != NULL)
		links_close(e->links, nlinks);
	if (e->abort_fd != -1)
		close(e->abort_fd);
	crew_free(e->crew);
	crew_free(e->side);
	subq_detach(j);
	while ((op = TAILQ_FIRST(&e->out)) != NULL) {
		TAILQ_REMOVE(&e->out, op, entry);
		op_free(op);
	}
	pthread_mutex_destroy(&e->mtx);
	pthread_cond_destroy(&e->cond);
	free(e);
	j->eng = NULL;
}
