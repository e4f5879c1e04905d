/*
 * subq.c: the engine's side of the submission rings (ipc.h).  Each local
 * rank of a job writes its collectives' descriptors into the ring in its
 * doorbell segment; the job's engine thread takes one descriptor from every
 * ring at once, checks them as the main thread checks a record, resolves
 * their buffers in the connections' segment tables (seg.c), and runs them
 * as one operation: no socket record and no main-thread hop on the way.
 *
 * The engine holds a reference on each ring's segment and on each
 * connection's segment table, taken when the job formed, so a rank that
 * dies leaves both readable (its table emptied) until the engine is done.
 * The main thread reaches a sleeping engine through subq_wake.
 */
#include <sys/syscall.h>

#include <linux/futex.h>

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine_state.h"
#include "engine/reduce.h"

#define SLEEP_MAX_NS	1000000000ULL	/* longest nap without a deadline */

/* Main thread, as the job forms: every local rank's ring and segments. */
int
subq_attach(struct comm *cm, const struct engine_rank *ranks, char *err,
    size_t errlen)
{
	if ((cm->eng->sq = calloc(cm->nlocal, sizeof(*cm->eng->sq))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (uint32_t i = 0; i < cm->nlocal; i++) {
		struct subq *q = &cm->eng->sq[i];

		if (ranks[i].bell == NULL || ranks[i].segs == NULL) {
			snprintf(err, errlen, "rank %u has no doorbell",
			    ranks[i].rank);
			return -1;
		}
		seg_ref(ranks[i].bell);
		q->bell = ranks[i].bell;
		q->db = (struct ipc_doorbell *)(void *)ranks[i].bell->base;
		segtab_ref(ranks[i].segs);
		q->segs = ranks[i].segs;
		q->rank = ranks[i].rank;
	}
	return 0;
}

/* Main thread, once the engine has returned. */
void
subq_detach(struct comm *cm)
{
	if (cm->eng == NULL)
		return;
	for (uint32_t i = 0; cm->eng->sq != NULL && i < cm->nlocal; i++) {
		if (cm->eng->sq[i].bell != NULL)
			seg_unref(cm->eng->sq[i].bell);
		if (cm->eng->sq[i].segs != NULL)
			segtab_unref(cm->eng->sq[i].segs);
	}
	free(cm->eng->sq);
	cm->eng->sq = NULL;
}

/* Descriptors published and not yet taken, as the client claims. */
static uint64_t
sq_queued(const struct subq *q)
{
	return __atomic_load_n(&q->db->sq_head, __ATOMIC_ACQUIRE) - q->tail;
}

/* The ring of local rank i, or NULL before the engine has the rings. */
static struct subq *
ring_of(const struct comm *cm, uint32_t i)
{
	return cm->eng != NULL && cm->eng->sq != NULL && i < cm->nlocal ?
	    &cm->eng->sq[i] : NULL;
}

/* Any thread: collectives the rank has submitted, as far as we can tell. */
uint64_t
subq_submitted(const struct comm *cm, uint32_t i)
{
	const struct subq *q = ring_of(cm, i);
	uint64_t tail, ahead;

	if (q == NULL)
		return 0;
	tail = __atomic_load_n(&q->db->sq_tail, __ATOMIC_ACQUIRE);
	ahead = __atomic_load_n(&q->db->sq_head, __ATOMIC_ACQUIRE) - tail;
	return tail + (ahead <= IPC_SQ_SLOTS ? ahead : 0);
}

/*
 * Any thread: the next collective's seq, and since when it has waited for
 * some of the local ranks while others submitted it (0: it does not).
 */
uint64_t
subq_waiting_since(const struct comm *cm, uint64_t *next_seq)
{
	*next_seq = 0;
	if (cm->eng == NULL || cm->eng->sq == NULL)
		return 0;
	*next_seq = __atomic_load_n(&cm->eng->ncoll, __ATOMIC_RELAXED) + 1;
	return __atomic_load_n(&cm->eng->sq_since_ns, __ATOMIC_RELAXED);
}

/* Main thread: the rank has collectives that have not ended. */
int
subq_pending(const struct comm *cm, uint32_t i)
{
	const struct subq *q = ring_of(cm, i);

	return q != NULL && __atomic_load_n(&q->db->sq_head, __ATOMIC_ACQUIRE) !=
	    __atomic_load_n(&q->completed, __ATOMIC_ACQUIRE);
}

/*
 * Main thread: local rank i has left the job.  The engine stops waiting
 * for it once it looks again (engine_wake).
 */
void
subq_leave(struct comm *cm, uint32_t i)
{
	struct subq *q = ring_of(cm, i);

	if (q != NULL)
		__atomic_store_n(&q->left, 1, __ATOMIC_RELEASE);
}

/*
 * Engine: op has ended, well or not.  Ops end in the order taken, so every
 * descriptor up to its own is done with; one that failed before it took
 * a ring's (the last op the job runs) ends all that ring's taken.
 */
void
subq_completed(struct comm *cm, const struct op *op)
{
	for (uint32_t i = 0; i < cm->nlocal; i++) {
		const struct subq *q = &cm->eng->sq[i];
		uint64_t to = op->parts[i].ring_to;

		__atomic_store_n(&cm->eng->sq[i].completed, to != 0 ? to :
		    q->tail, __ATOMIC_RELEASE);
	}
}

/* An op's deadline, its own or the job's setting. */
static uint32_t
op_timeout_ms(const struct comm *cm, uint32_t ms)
{
	return ms ? ms : cm->eng->tun.op_timeout_ms;
}

static void
op_failed(struct comm *cm, struct op *op, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
op_failed(struct comm *cm, struct op *op, int code, const char *fmt, ...)
{
	va_list ap;

	op->code = code;
	va_start(ap, fmt);
	vsnprintf(op->err, sizeof(op->err), fmt, ap);
	va_end(ap);
	if (op->desc.seq == 0)
		op->desc.seq = cm->eng->ncoll + 1;
}

static int
desc_same(const struct ipc_op *a, const struct ipc_op *b)
{
	return a->coll == b->coll && a->dtype == b->dtype &&
	    a->redop == b->redop && a->root == b->root && a->count == b->count &&
	    a->algo == b->algo;
}

/* Check rank i's descriptor d against the op's first one, and itself. */
static int
desc_check(struct comm *cm, struct op *op, uint32_t i, const struct ipc_op *d)
{
	const struct subq *q = &cm->eng->sq[i];
	const struct ipc_op *o = &op->desc;
	char err[ERR_MAX];

	if (d->seq <= q->last_seq)
		snprintf(err, sizeof(err), "op %llu follows op %llu: seqs must "
		    "rise", (unsigned long long)d->seq,
		    (unsigned long long)q->last_seq);
	else if (op_check(cm->nranks, d, err, sizeof(err)) != NULL)
		;
	else if (proto_coll_p2p(d->coll))
		snprintf(err, sizeof(err), "a %s in the submission ring: sends "
		    "and receives go in IPC_OP records", proto_coll_name(d->coll));
	else if (i > 0 && d->coll == COLL_ALLGATHERV && o->coll == d->coll &&
	    o->count != d->count)
		snprintf(err, sizeof(err), "its allgatherv recvcounts sum to "
		    "%llu, those of another rank on node %s to %llu",
		    (unsigned long long)d->count, cm->conf.node_name,
		    (unsigned long long)o->count);
	else if (i > 0 && o->wire != d->wire)
		snprintf(err, sizeof(err), "it asks for a %s wire, another rank "
		    "on node %s for a %s one, as collective %llu",
		    d->wire ? dtype_name(d->wire) : "float32",
		    cm->conf.node_name, o->wire ? dtype_name(o->wire) : "float32",
		    (unsigned long long)cm->eng->ncoll + 1);
	else if (i > 0 && !desc_same(o, d))
		snprintf(err, sizeof(err), "it is %s count %llu by %s, but "
		    "another rank on node %s issued %s count %llu by %s as "
		    "collective %llu", proto_coll_name(d->coll),
		    (unsigned long long)d->count, proto_algo_name(d->algo),
		    cm->conf.node_name, proto_coll_name(o->coll),
		    (unsigned long long)o->count, proto_algo_name(o->algo),
		    (unsigned long long)cm->eng->ncoll + 1);
	else
		return 0;
	op_failed(cm, op, proto_coll_p2p(d->coll) || d->seq <= q->last_seq ?
	    MCCL_ERR_PROTOCOL : MCCL_ERR_INVALID_ARGUMENT, "rank %u: %s",
	    q->rank, err);
	return -1;
}

/* Rank i's buffers for op; the local ranks' recvcounts must agree. */
static int
part_attach(struct comm *cm, struct op *op, uint32_t i, const struct ipc_op *d)
{
	struct subq *q = &cm->eng->sq[i];
	char err[ERR_MAX];

	if (op_attach(op, i, q->segs, q->rank, d, err, sizeof(err)) == -1)
		goto fail;
	if (i > 0 && d->coll == COLL_ALLGATHERV && memcmp(op->parts[i].vec,
	    op->parts[0].vec, cm->nranks * sizeof(uint64_t)) != 0) {
		snprintf(err, sizeof(err), "its allgatherv recvcounts differ "
		    "from those of rank %u on node %s", cm->eng->sq[0].rank,
		    cm->conf.node_name);
		goto fail;
	}
	return 0;
fail:
	op_failed(cm, op, MCCL_ERR_INVALID_ARGUMENT, "rank %u: %s", q->rank, err);
	return -1;
}

/* Take rank i's next descriptor into op: a copy, checked, then resolved. */
static int
sq_take_one(struct comm *cm, struct op *op, uint32_t i)
{
	struct subq *q = &cm->eng->sq[i];
	struct ipc_op d;

	/* The client may still write the slot: only the copy is checked. */
	memcpy(&d, &q->db->sq[q->tail % IPC_SQ_SLOTS], sizeof(d));
	if (i == 0)
		op->desc = d;
	if (desc_check(cm, op, i, &d) == -1 || part_attach(cm, op, i, &d) == -1)
		return -1;
	q->last_seq = d.seq;
	op->parts[i].ring_to = ++q->tail;
	__atomic_store_n(&q->db->sq_tail, q->tail, __ATOMIC_RELEASE);
	return 0;
}

/* An op has waited for a rank too long, or for one that left. */
static struct op *
sq_overdue(struct comm *cm, uint32_t missing, uint64_t now, uint64_t *until)
{
	uint32_t first = 0;		/* a rank that did submit */
	const struct ipc_op *d;
	struct op *op;
	uint32_t ms;
	int left = 0;

	while (first < cm->nlocal && sq_queued(&cm->eng->sq[first]) == 0)
		first++;
	if (first == cm->nlocal) {	/* nobody waits */
		__atomic_store_n(&cm->eng->sq_since_ns, 0, __ATOMIC_RELAXED);
		return NULL;
	}
	d = &cm->eng->sq[first].db->sq[cm->eng->sq[first].tail % IPC_SQ_SLOTS];
	ms = op_timeout_ms(cm, __atomic_load_n(&d->timeout_ms, __ATOMIC_RELAXED));
	if (cm->eng->sq_since_ns == 0)
		__atomic_store_n(&cm->eng->sq_since_ns, now, __ATOMIC_RELAXED);
	/* A rank that has left will never submit: fail now, naming it. */
	for (uint32_t i = missing; i < cm->nlocal && !left; i++)
		if (sq_queued(&cm->eng->sq[i]) == 0 &&
		    __atomic_load_n(&cm->eng->sq[i].left, __ATOMIC_ACQUIRE)) {
			left = 1;
			missing = i;
		}
	if (!left && now < cm->eng->sq_since_ns + (uint64_t)ms * 1000000) {
		*until = cm->eng->sq_since_ns + (uint64_t)ms * 1000000;
		return NULL;
	}
	if ((op = op_new(cm)) == NULL)
		return NULL;
	memcpy(&op->desc, d, sizeof(op->desc));
	if (left)
		op_failed(cm, op, MCCL_ERR_PEER_FAILED, "rank %u on node %s has "
		    "left the job", cm->eng->sq[missing].rank, cm->conf.node_name);
	else
		op_failed(cm, op, MCCL_ERR_TIMEOUT, "timeout waiting for rank %u "
		    "on node %s: it has not submitted the op within %u ms",
		    cm->eng->sq[missing].rank, cm->conf.node_name, ms);
	op->desc.seq = cm->eng->ncoll + 1;
	return op;
}

/*
 * Engine: the next collective, once every local rank's ring holds its
 * descriptor; or an op already failed (code set) because a descriptor is
 * bad or a rank is overdue; or NULL, with *until the time an op waiting
 * for ranks times out (0: none waits).
 */
struct op *
subq_take(struct comm *cm, uint64_t *until)
{
	uint32_t ms, i, missing = cm->nlocal;
	uint64_t now;
	struct op *op;

	*until = 0;
	for (i = 0; i < cm->nlocal; i++) {
		uint64_t queued = sq_queued(&cm->eng->sq[i]);

		if (queued > IPC_SQ_SLOTS) {
			if ((op = op_new(cm)) != NULL)
				op_failed(cm, op, MCCL_ERR_PROTOCOL, "rank %u: "
				    "its submission ring's head is %llu "
				    "descriptors past the %llu taken, more than "
				    "its %u slots", cm->eng->sq[i].rank,
				    (unsigned long long)queued,
				    (unsigned long long)cm->eng->sq[i].tail,
				    IPC_SQ_SLOTS);
			return op;
		}
		if (queued == 0 && missing == cm->nlocal)
			missing = i;
	}
	if (missing < cm->nlocal)
		return sq_overdue(cm, missing, now_ns(), until);
	if ((op = op_new(cm)) == NULL)
		return NULL;	/* taken at the next look */
	for (i = 0; i < cm->nlocal; i++)
		if (sq_take_one(cm, op, i) == -1)
			return op;
	op->desc.seq = __atomic_add_fetch(&cm->eng->ncoll, 1, __ATOMIC_RELAXED);
	if (op->desc.algo == ALGO_AUTO)		/* itself maybe AUTO */
		op->desc.algo = (uint8_t)cm->eng->tun.algo;
	ms = op_timeout_ms(cm, op->desc.timeout_ms);
	now = now_ns();
	op->ready_ns = now;
	op->deadline_ns = now + (uint64_t)ms * 1000000;
	__atomic_store_n(&cm->eng->sq_since_ns, 0, __ATOMIC_RELAXED);
	return op;
}

/*
 * Engine, while an op runs: the next one, taken now if every ring holds
 * its descriptor, so that it can start some of its work beside the op
 * before it (coll_segments); or NULL.  engine_next hands it out next, by
 * subq_next_ahead.  An aborted job takes none.
 */
struct op *
subq_take_ahead(struct comm *cm)
{
	uint64_t until;

	if (cm->eng->ahead != NULL || __atomic_load_n(&cm->eng->aborted,
	    __ATOMIC_ACQUIRE) || !subq_ready(cm))
		return cm->eng->ahead;
	cm->eng->ahead = subq_take(cm, &until);
	return cm->eng->ahead;
}

/*
 * Engine: the op taken ahead, to run now, or NULL.  If the job has ended
 * or failed meanwhile (ended), it fails without running.
 */
struct op *
subq_next_ahead(struct comm *cm, int ended)
{
	struct op *op = cm->eng->ahead;

	if (op == NULL)
		return NULL;
	cm->eng->ahead = NULL;
	if (ended && op->code == 0)
		op_failed(cm, op, MCCL_ERR_ABORTED, "collective %llu did not "
		    "run: the job failed or ended while it waited for the one "
		    "before", (unsigned long long)op->desc.seq);
	return op;
}

/* Engine: every ring holds a descriptor (a cheap look, for spinning). */
int
subq_ready(struct comm *cm)
{
	for (uint32_t i = 0; i < cm->nlocal; i++)
		if (sq_queued(&cm->eng->sq[i]) == 0)
			return 0;
	return 1;
}

static void
futex_wait(uint32_t *word, uint32_t val, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000),
	    (long)(ns % 1000000000) };

	syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0);
}

/*
 * Engine: sleep until the first ring without a descriptor gets one (the
 * op can't start before), the main thread wakes us (subq_wake), or
 * until_ns (0: a while).  kicks is the engine's kicks as read before the caller
 * last looked for work.  With no ring to watch (an aborted job), sleep on
 * the condition variable for the main thread alone.
 */
void
subq_sleep(struct comm *cm, uint32_t kicks, uint64_t until_ns)
{
	uint64_t now = now_ns(), nap = SLEEP_MAX_NS;
	struct subq *w = NULL;
	uint32_t v = 0;

	if (until_ns != 0)
		nap = until_ns > now ? until_ns - now : 0;
	if (nap > SLEEP_MAX_NS)
		nap = SLEEP_MAX_NS;
	pthread_mutex_lock(&cm->eng->mtx);
	for (uint32_t i = 0; !cm->eng->aborted && i < cm->nlocal && w == NULL; i++)
		if (sq_queued(&cm->eng->sq[i]) == 0)
			w = &cm->eng->sq[i];
	/* Every ring has a descriptor now (w NULL, not aborted): go. */
	if (cm->eng->quit || nap == 0 || (w == NULL && !cm->eng->aborted) ||
	    __atomic_load_n(&cm->eng->kicks, __ATOMIC_ACQUIRE) != kicks) {
		pthread_mutex_unlock(&cm->eng->mtx);
		return;
	}
	if (w == NULL) {
		uint64_t at = now + nap;
		struct timespec ts = { (time_t)(at / 1000000000),
		    (long)(at % 1000000000) };

		pthread_cond_timedwait(&cm->eng->cond, &cm->eng->mtx, &ts);
		pthread_mutex_unlock(&cm->eng->mtx);
		return;
	}
	cm->eng->wait_word = &w->db->sq_bell;
	v = __atomic_load_n(&w->db->sq_bell, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&cm->eng->mtx);
	/* Dekker with the client: it publishes, then reads sq_sleeping. */
	__atomic_store_n(&w->db->sq_sleeping, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->db->sq_head, __ATOMIC_SEQ_CST) == w->tail)
		futex_wait(&w->db->sq_bell, v, nap);
	__atomic_store_n(&w->db->sq_sleeping, 0, __ATOMIC_RELAXED);
	pthread_mutex_lock(&cm->eng->mtx);
	cm->eng->wait_word = NULL;
	pthread_mutex_unlock(&cm->eng->mtx);
}

/* Any thread, with the engine's mtx held: wake the engine wherever it sleeps. */
void
subq_wake(struct comm *cm)
{
	__atomic_add_fetch(&cm->eng->kicks, 1, __ATOMIC_RELEASE);
	if (cm->eng->wait_word != NULL) {
		__atomic_add_fetch(cm->eng->wait_word, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, cm->eng->wait_word, FUTEX_WAKE, INT_MAX, NULL,
		    NULL, 0);
	}
	pthread_cond_broadcast(&cm->eng->cond);
}
