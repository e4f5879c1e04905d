/*
 * test_engine.c: a job's engine (engine.c with subq.c, p2p.c, ring.c and
 * the transports), alone, through engine.h: the control plane's calls are
 * the test's.  The engine is node n1, position 1 of a job of two nodes,
 * with two local ranks (ranks 1 and 2 of 3) whose doorbells and segments
 * are plain mappings written as libmccl writes them.  Node n0 (rank 0) is
 * a thread of the test: it takes the other end of each data link (loopback
 * TCP, handed to the engine with engine_adopt_link as the main thread
 * hands accepted links), sets it up as link.c does, and runs the same
 * inter-node algorithm.  An operation's life: descriptors in the rings,
 * the result in every rank's buffer, the doorbells rung, the op on the
 * completion queue (engine_collect); a peer that hangs up; an abort while
 * the engine waits for a rank; quitting; large allreduces in segments, the
 * next one's first combined beside the last of the one before.  Each over
 * TCP and over the RDMA transport on the tests' verbs provider.
 */
#include <sys/eventfd.h>
#include <sys/syscall.h>

#include <linux/futex.h>

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "engine/engine.h"
#include "engine/xfer.h"
#include "engine/reduce.h"
#include "engine/algo.h"
#include "transport/transport.h"
#include "spin.h"
#include "testlib.h"

static struct event_base *base;
static struct engine_conf job_conf;	/* each job's, from setup */

#define NLANES		3
#define ROWS		NLANES		/* a row of links per lane */
#define NLOCAL		2
#define COUNT		100000		/* floats: past one pipeline chunk */
#define SEG_FLOATS	((8u << 20) / 4)	/* pipeline.c's SEGMENT_BYTES */
#define BIG		(3 * SEG_FLOATS + 1000)	/* floats: three segments, the
						   last with the remainder */
#define MEM		(2 * BIG)	/* floats in each rank's segment */
#define ONE_SEG		(SEG_FLOATS / 4)	/* floats: 2 MiB, one segment */
#define MAX_OPS		3
#define SEG_ID		7
#define BELL_ID		1
#define SEC		1000000000ULL

static struct conf_node conf_nodes[2] = { { .name = "n0" },
    { .name = "n1" } };
static const char *names[2] = { "n0", "n1" };
static uint32_t node_index[2] = { 0, 1 };
static uint32_t rank_pos[3] = { 0, 1, 1 };
static uint32_t rank_slot[3] = { 0, 1, 2 };
static uint32_t pos_first[2] = { 0, 1 }, pos_count[2] = { 1, 2 };
static uint32_t local_ranks[NLOCAL] = { 1, 2 };
static char verbs_dir[] = "/tmp/test_engine.XXXXXX";

/* Node n0, played by a thread of the test. */
enum peer_role {
	PEER_RUN,		/* an allreduce of COUNT */
	PEER_HANG_UP,
	PEER_SEGMENTS,		/* nops allreduces, in segments */
	PEER_STALL_LAST,	/* the first of them but its last segment */
	PEER_HANG_UP_SECOND,	/* the first of them, then hangs up */
	PEER_LATE_SECOND	/* the first; at its last segment, waits for
				   go, then the second (of count[1]) */
};

struct peer {
	int		 fd[ROWS];	/* its ends of the links */
	struct link	*links[ROWS * 2];	/* [k * 2 + 1]: to n1 on row k */
	int		 abort_fd;
	enum peer_role	 role;
	float		*buf;		/* MEM floats */
	size_t		 off[MAX_OPS];	/* PEER_SEGMENTS: each op's, in floats */
	size_t		 count[MAX_OPS];	/* elements */
	int		 nops;
	mccl_dtype_t	 dtype2;	/* the second op's type */
	int		 at_last;	/* PEER_LATE_SECOND (atomic) */
	int		 go;
	int		 rc;
	char		 err[ERR_MAX];
	pthread_t	 th;
	int		 joined;
};

struct fixture {
	struct comm	*cm;
	struct segtab	*segs[NLOCAL];
	struct ipc_doorbell *db[NLOCAL];
	float		*mem[NLOCAL];	/* each rank's data segment */
	struct peer	 peer;
	int		 mine[ROWS];	/* the engine's ends, until adopted */
	int		 started;
};

static struct fixture f;




static void
nonblocking(int fd)
{
	ck_assert_int_ne(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK),
	    -1);
}

/* ---- node n0 ---- */

/* Set up every link as the dialling end does (engine_links), in its order. */
static int
peer_links(struct peer *p)
{
	struct link_setup su[ROWS];
	uint64_t deadline = now_ns() + 10 * SEC;
	int rc = 0;

	memset(su, 0, sizeof(su));
	for (int k = 0; k < ROWS; k++) {
		su[k].fd = p->fd[k];
		su[k].node = 1;
		su[k].want = (struct link_want){ "n0", "n1", "", LINK_ANY };
		p->fd[k] = -1;			/* the set-up's now */
		if (rc == 0)
			rc = link_offer(&su[k], p->err, sizeof(p->err));
	}
	for (int step = 0; step < 2; step++)
		for (int k = 0; k < ROWS && rc == 0; k++) {
			rc = (step == 0 ? link_answer : link_ready)(&su[k],
			    p->abort_fd, deadline, p->err, sizeof(p->err));
			p->links[k * 2 + 1] = su[k].link;	/* closed by
							   the teardown */
		}
	for (int k = 0; k < ROWS; k++)
		link_setup_drop(&su[k]);
	return rc;
}

/* Rank 0's part of collective seq, an allreduce of count floats. */
static void
peer_xfer(struct peer *p, struct xfer *x, uint64_t seq, size_t count)
{
	memset(x, 0, sizeof(*x));
	x->nnodes = 2;
	x->me = 0;
	x->links = p->links;
	x->nlanes = NLANES;
	x->names = names;
	x->abort_fd = p->abort_fd;
	x->deadline_ns = now_ns() + 20 * SEC;
	x->chunk = job_conf.chunk_bytes;
	x->algo = ALGO_AUTO;
	x->cost = (struct link_cost){ LINK_ALPHA_NS_DEFAULT,
	    LINK_BETA_PS_DEFAULT, LINK_GAMMA_PS_DEFAULT, 0 };
	x->scratch = malloc(2 * job_conf.chunk_bytes * NLANES);
	x->node_index = node_index;
	x->blame = NO_POS;
	x->hdr = (struct peer_ophdr){ seq, COLL_ALLREDUCE, MCCL_FLOAT32,
	    MCCL_SUM, 0, 0, count, 0 };
}

/* Collective 1: an allreduce of COUNT floats of 1. */
static int
peer_allreduce(struct peer *p)
{
	struct xfer x;
	int rc;

	peer_xfer(p, &x, 1, COUNT);
	for (size_t i = 0; i < COUNT; i++)
		p->buf[i] = 1.0f;
	rc = node_allreduce(&x, p->buf, p->buf, COUNT, MCCL_FLOAT32, MCCL_SUM);
	if (rc != 0)
		snprintf(p->err, sizeof(p->err), "%s", x.err);
	free(x.scratch);
	return rc;
}

/*
 * Collective seq, an allreduce of count elements of type t in place at
 * buf, cut as a node of several ranks cuts one of two segments or more
 * (coll_segments: the last takes the remainder): nseg segments from
 * segment from.
 */
static int
peer_op(struct peer *p, uint64_t seq, void *buf, mccl_dtype_t t,
    size_t count, size_t from, size_t nseg)
{
	size_t es = dtype_size(t), seg = (8u << 20) / es, total;
	uint8_t *b = buf;
	struct xfer x;
	int rc = 0;

	if (count < 2 * seg)		/* one piece */
		seg = count;
	total = count / seg;
	peer_xfer(p, &x, seq, count);
	x.hdr.dtype = t;
	x.algo = ALGO_RING;		/* as submit_two asks */
	for (size_t s = from; rc == 0 && s < total && nseg-- > 0; s++)
		rc = node_allreduce(&x, b + s * seg * es, b + s * seg * es,
		    s + 1 < total ? seg : count - s * seg, t, MCCL_SUM);
	if (rc != 0)
		snprintf(p->err, sizeof(p->err), "op %llu: %s",
		    (unsigned long long)seq, x.err);
	free(x.scratch);
	return rc;
}

/* The same, BIG floats. */
static int
peer_segments(struct peer *p, uint64_t seq, float *buf, size_t nseg)
{
	return peer_op(p, seq, buf, MCCL_FLOAT32, BIG, 0, nseg);
}

/* PEER_LATE_SECOND's part. */
static int
peer_late_second(struct peer *p)
{
	int rc = peer_segments(p, 1, p->buf + p->off[0], 2);

	__atomic_store_n(&p->at_last, 1, __ATOMIC_RELEASE);
	for (int t = 0; rc == 0 && t < 10000 &&
	    !__atomic_load_n(&p->go, __ATOMIC_ACQUIRE); t++)
		msleep(1);
	if (rc == 0)
		rc = peer_op(p, 1, p->buf + p->off[0], MCCL_FLOAT32, BIG, 2, 1);
	if (rc == 0)
		rc = peer_op(p, 2, p->buf + p->off[1], MCCL_FLOAT32,
		    p->count[1], 0, SIZE_MAX);
	return rc;
}

static void *
peer_main(void *arg)
{
	struct peer *p = arg;

	if ((p->rc = peer_links(p)) != 0)
		return NULL;
	if (p->role == PEER_HANG_UP) {
		for (int k = 0; k < ROWS; k++) {
			link_close(p->links[k * 2 + 1]);
			p->links[k * 2 + 1] = NULL;
		}
		return NULL;
	}
	for (size_t i = 0; p->role != PEER_RUN && i < MEM; i++)
		p->buf[i] = 1.0f;			/* rank 0's */
	for (size_t i = 0; p->dtype2 == MCCL_FLOAT64 && i < p->count[1]; i++)
		((double *)(void *)(p->buf + p->off[1]))[i] = 1.0;
	if (p->role == PEER_RUN)
		p->rc = peer_allreduce(p);
	else if (p->role == PEER_STALL_LAST)
		p->rc = peer_segments(p, 1, p->buf + p->off[0], 2);
	else if (p->role == PEER_HANG_UP_SECOND &&
	    (p->rc = peer_segments(p, 1, p->buf + p->off[0], SIZE_MAX)) == 0)
		for (int k = 0; k < ROWS; k++) {
			link_close(p->links[k * 2 + 1]);
			p->links[k * 2 + 1] = NULL;
		}
	if (p->role == PEER_LATE_SECOND)
		p->rc = peer_late_second(p);
	for (int k = 0; p->role == PEER_SEGMENTS && p->rc == 0 &&
	    k < p->nops; k++)
		p->rc = peer_op(p, (uint64_t)k + 1, p->buf + p->off[k], k == 1 ?
		    p->dtype2 : MCCL_FLOAT32, p->count[k], 0, SIZE_MAX);
	return NULL;
}

static void
peer_join(void)
{
	if (!f.peer.joined)
		pthread_join(f.peer.th, NULL);
	f.peer.joined = 1;
}

/* ---- the job here, as the control plane makes it ---- */

static void
engine_event_cb(int fd, short events, void *arg)
{
	(void)fd; (void)events; (void)arg;
}

static struct comm *
job_make(void)
{
	struct comm *cm = calloc(1, sizeof(*cm));

	ck_assert_ptr_nonnull(cm);
	cm->id = 42;
	cm->uid = getuid();
	strcpy(cm->name, "test");
	cm->nranks = 3;
	cm->nlocal = NLOCAL;
	cm->local_ranks = local_ranks;
	cm->nnodes = 2;
	cm->me = 1;
	cm->node_index = node_index;
	cm->rank_pos = rank_pos;
	cm->rank_slot = rank_slot;
	cm->pos_first = pos_first;
	cm->pos_count = pos_count;
	cm->slots_are_ranks = 1;
	cm->names = names;
	cm->nlanes = NLANES;
	cm->conf = job_conf;
	cm->ev_engine = event_new(base, -1, 0, engine_event_cb, cm);
	ck_assert_ptr_nonnull(cm->ev_engine);
	return cm;
}

/*
 * The engine of a formed job, its links handed over and n0 setting up
 * the other ends with `role`: with gap_ms, one link at a time, that long
 * apart, and the first `rows` only.
 */
static void
start_slowly(enum peer_role role, unsigned gap_ms, uint32_t rows);

static void
start(enum peer_role role)
{
	start_slowly(role, 0, ROWS);
}

static void
start_slowly(enum peer_role role, unsigned gap_ms, uint32_t rows)
{
	struct engine_rank ranks[NLOCAL];
	char err[ERR_MAX] = "";
	int mine;

	f.cm = job_make();
	for (uint32_t i = 0; i < NLOCAL; i++) {
		f.segs[i] = segtab_new();
		f.db[i] = map(IPC_BELL_SIZE);
		f.mem[i] = map(MEM * sizeof(float));
		ck_assert_int_eq(segtab_add(f.segs[i], SEG_ID,
		    (uint8_t *)f.mem[i], MEM * sizeof(float)), 0);
		ck_assert_int_eq(segtab_add(f.segs[i], BELL_ID,
		    (uint8_t *)f.db[i], IPC_BELL_SIZE), 0);
		ranks[i] = (struct engine_rank){ local_ranks[i],
		    segtab_find(f.segs[i], BELL_ID), f.segs[i] };
	}
	ck_assert_int_eq(p2p_init(f.cm, err, sizeof(err)), 0);
	ck_assert_msg(engine_start(f.cm, ranks, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_int_eq(p2p_start(f.cm, err, sizeof(err)), 0);
	f.started = 1;
	f.peer.role = role;
	f.peer.abort_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	f.peer.buf = malloc(MEM * sizeof(float));
	ck_assert_ptr_nonnull(f.peer.buf);
	for (uint32_t k = 0; k < ROWS; k++) {
		ck_assert_int_eq(tcp_pair(&f.peer.fd[k], &mine), 0);
		nonblocking(f.peer.fd[k]);	/* as dialled */
		nonblocking(mine);		/* as accepted */
		f.mine[k] = mine;
	}
	ck_assert_int_eq(pthread_create(&f.peer.th, NULL, peer_main,
	    &f.peer), 0);
	for (uint32_t k = 0; k < rows; k++) {
		if (k > 0 && gap_ms > 0)
			msleep(gap_ms);
		ck_assert_int_eq(engine_adopt_link(f.cm, 0, k, f.mine[k]), 0);
		f.mine[k] = -1;
	}
	if (rows > 0)
		ck_assert_int_eq(engine_adopt_link(f.cm, 0, 0, -1), -1);
}

/* Local rank i publishes d, as mccl.c does: the slot, the head, the bell. */
static void
submit(uint32_t i, const struct ipc_op *d)
{
	struct ipc_doorbell *db = f.db[i];

	db->sq[db->sq_head % IPC_SQ_SLOTS] = *d;
	__atomic_store_n(&db->sq_head, db->sq_head + 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&db->sq_sleeping, __ATOMIC_SEQ_CST)) {
		__atomic_add_fetch(&db->sq_bell, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &db->sq_bell, FUTEX_WAKE, INT_MAX, NULL,
		    NULL, 0);
	}
}

static struct ipc_op
allreduce(uint64_t seq)
{
	return (struct ipc_op){ .seq = seq, .coll = COLL_ALLREDUCE,
	    .dtype = MCCL_FLOAT32, .redop = MCCL_SUM, .algo = ALGO_AUTO,
	    .count = COUNT, .send_seg = SEG_ID, .recv_seg = SEG_ID };
}

/* The n ops the engine handed back, in order, waited for up to 20 s. */
static void
collect(struct op **ops, int n)
{
	struct op_list done = TAILQ_HEAD_INITIALIZER(done);
	uint64_t until = now_ns() + 20 * SEC;
	char err[ERR_MAX];
	struct op *op;
	int code, got = 0;

	while (got < n && now_ns() < until) {
		engine_collect(f.cm, &done, &code, err, sizeof(err));
		while ((op = TAILQ_FIRST(&done)) != NULL) {
			TAILQ_REMOVE(&done, op, entry);
			ck_assert_msg(got < n, "more than %d ops came back", n);
			ops[got++] = op;
		}
		if (got < n)
			msleep(1);
	}
	ck_assert_msg(got == n, "%d of %d ops came back within 20 s", got, n);
}

static struct op *
collect_one(void)
{
	struct op *op;

	collect(&op, 1);
	return op;
}

static int
wait_until(int (*cond)(struct comm *), unsigned ms)
{
	for (unsigned t = 0; t < ms; t++) {
		if (cond(f.cm))
			return 1;
		msleep(1);
	}
	return cond(f.cm);
}

/* Stop it as job_free does, whatever the test left, and free it all. */
static void
teardown(void)
{
	uint64_t one = 1;

	if (f.started) {
		engine_quit(f.cm);
		p2p_quit(f.cm);
		if (write(f.peer.abort_fd, &one, sizeof(one)) == -1)
			perror("test_engine: waking n0");
		peer_join();
		ck_assert(wait_until(engine_exited, 10000));
		ck_assert(wait_until(p2p_exited, 10000));
		p2p_finish(f.cm);
		engine_finish(f.cm);
		ck_assert_ptr_null(f.cm->eng);
		for (int k = 0; k < ROWS; k++) {
			link_close(f.peer.links[k * 2 + 1]);
			if (f.peer.fd[k] >= 0)
				close(f.peer.fd[k]);
			if (f.mine[k] > 0)
				close(f.mine[k]);
		}
		close(f.peer.abort_fd);
		free(f.peer.buf);
		event_free(f.cm->ev_engine);
		for (uint32_t i = 0; i < NLOCAL; i++)
			segtab_unref(f.segs[i]);	/* unmaps */
		free(f.cm);
	}
	memset(&f, 0, sizeof(f));
}

/* ---- the tests ---- */

START_TEST(an_allreduce_from_the_rings_to_the_doorbells_and_back)
{
	struct ipc_op d = allreduce(1);
	uint64_t sent = data_bytes(0, DATA_SENT);
	uint64_t received = data_bytes(0, DATA_RECEIVED);
	struct op *op;

	start(PEER_RUN);
	for (uint32_t i = 0; i < NLOCAL; i++)
		for (size_t e = 0; e < COUNT; e++)
			f.mem[i][e] = (float)(local_ranks[i] + 1);
	submit(0, &d);
	submit(1, &d);
	op = collect_one();
	ck_assert_msg(op->code == 0, "op failed: %s", op->err);
	ck_assert_uint_eq(op->desc.seq, 1);
	ck_assert_uint_ne(op->algo_run, ALGO_AUTO);	/* resolved */
	ck_assert_uint_ge(op->done_ns, op->ready_ns);
	peer_join();
	ck_assert_msg(f.peer.rc == 0, "n0: %s", f.peer.err);
	ck_assert_str_eq(f.peer.links[1]->tp->name,	/* the run's transport */
	    getenv("MCCL_FAKEVERBS_DIR") != NULL ? "rdma" : "tcp");
	for (uint32_t i = 0; i < NLOCAL; i++) {
		ck_assert_uint_eq(__atomic_load_n(&f.db[i]->done_seq,
		    __ATOMIC_ACQUIRE), 1);	/* the doorbell said so */
		ck_assert_uint_ge(f.db[i]->word, 1);
		ck_assert_uint_eq(f.db[i]->sq_tail, 1);
		for (size_t e = 0; e < COUNT; e += 997)
			ck_assert_float_eq(f.mem[i][e], 6.0f);
		ck_assert_float_eq(f.mem[i][COUNT - 1], 6.0f);
	}
	ck_assert_float_eq(f.peer.buf[0], 6.0f);
	ck_assert_float_eq(f.peer.buf[COUNT - 1], 6.0f);
	/* counted, as sent to and received from n0 */
	ck_assert_uint_gt(data_bytes(0, DATA_SENT), sent);
	ck_assert_uint_gt(data_bytes(0, DATA_RECEIVED), received);
	ck_assert(!engine_stopped(f.cm));
	op_free(op);
}
END_TEST

START_TEST(a_peer_that_hangs_up_fails_the_op_naming_it)
{
	struct ipc_op d = allreduce(1);
	struct op *op;

	start(PEER_HANG_UP);
	submit(0, &d);
	submit(1, &d);
	op = collect_one();
	ck_assert_int_eq(op->code, MCCL_ERR_PEER_FAILED);
	ck_assert_msg(strstr(op->err, "n0") != NULL, "%s", op->err);
	ck_assert_uint_eq(f.db[0]->done_seq, 0);	/* never said done */
	ck_assert(wait_until(engine_stopped, 10000));	/* takes no more */
	op_free(op);
}
END_TEST

START_TEST(an_abort_reaches_an_engine_waiting_for_a_rank)
{
	struct ipc_op d = allreduce(1);
	struct op_now now;

	start(PEER_RUN);
	submit(0, &d);			/* rank 2 never submits */
	msleep(50);
	ck_assert(!engine_stopped(f.cm));
	ck_assert_int_eq(engine_current(f.cm, &now), 0);	/* none assembled */
	engine_abort(f.cm);
	ck_assert(wait_until(engine_stopped, 10000));
	ck_assert_uint_eq(f.db[0]->done_seq, 0);
}
END_TEST

/*
 * A reload reaches a running engine before its next op: the op_timeout_ms
 * it gives bounds an op that one rank never submits.
 */
START_TEST(a_retune_applies_to_the_next_op)
{
	struct engine_tunables t = job_conf.tun;
	struct ipc_op d = allreduce(1);
	struct op *op;

	start(PEER_RUN);
	t.op_timeout_ms = 200;
	engine_retune(f.cm, &t);
	submit(0, &d);			/* rank 2 never submits */
	op = collect_one();
	ck_assert_int_eq(op->code, MCCL_ERR_TIMEOUT);
	ck_assert_msg(strstr(op->err, "rank 2 on node n1: it has not "
	    "submitted the op within 200 ms") != NULL, "%s", op->err);
	op_free(op);
}
END_TEST

/*
 * n allreduces in place at float offsets off[k] of each rank's segment (of
 * 1, 2 and 3 everywhere before, ranks 0 to 2), of count[k] elements, the
 * second of type t2, the others float32; all in the rings before the
 * first starts; n0 plays `role`.
 */
static void
submit_ops(enum peer_role role, int n, const size_t *off,
    const size_t *count, mccl_dtype_t t2)
{
	struct ipc_op d[MAX_OPS];

	for (int k = 0; k < n; k++) {
		d[k] = allreduce((uint64_t)k + 1);
		d[k].count = count[k];
		d[k].dtype = k == 1 ? t2 : MCCL_FLOAT32;
		d[k].algo = ALGO_RING;		/* every node's the same */
		d[k].send_off = d[k].recv_off = off[k] * sizeof(float);
		f.peer.off[k] = off[k];
		f.peer.count[k] = count[k];
	}
	f.peer.nops = n;
	f.peer.dtype2 = t2;
	start(role);
	for (uint32_t i = 0; i < NLOCAL; i++)
		for (size_t e = 0; e < MEM; e++)
			f.mem[i][e] = (float)(local_ranks[i] + 1);
	for (uint32_t i = 0; t2 == MCCL_FLOAT64 && i < NLOCAL; i++)
		for (size_t e = 0; e < count[1]; e++)
			((double *)(void *)(f.mem[i] + off[1]))[e] =
			    local_ranks[i] + 1;
	/* rank 2's first last: the first can't start before all are in */
	for (uint32_t i = 0; i < NLOCAL; i++)
		for (int k = 0; k < n; k++)
			submit(i, &d[k]);
}

/* Two: BIG floats at off1, then count2 elements of type t2 at off2. */
static void
submit_two_as(enum peer_role role, size_t off1, size_t off2, mccl_dtype_t t2,
    size_t count2)
{
	size_t off[2] = { off1, off2 }, count[2] = { BIG, count2 };

	submit_ops(role, 2, off, count, t2);
}

static void
submit_two(enum peer_role role, size_t off1, size_t off2)
{
	submit_two_as(role, off1, off2, MCCL_FLOAT32, BIG);
}

/* This node's ranks' floats from..to (sampled, and the last) read v. */
static void
assert_local_range(size_t from, size_t to, float v)
{
	for (uint32_t i = 0; i < NLOCAL; i++) {
		for (size_t e = from; e < to; e += 4999)
			ck_assert_msg(f.mem[i][e] == v, "rank %u float %zu: %g, "
			    "not %g", local_ranks[i], e, f.mem[i][e], v);
		ck_assert_float_eq(f.mem[i][to - 1], v);
	}
}

/* And rank 0's, on n0. */
static void
assert_range(size_t from, size_t to, float v)
{
	assert_local_range(from, to, v);
	for (size_t e = from; e < to; e += 4999)
		ck_assert_msg(f.peer.buf[e] == v, "rank 0 float %zu: %g, not %g",
		    e, f.peer.buf[e], v);
}

/* n0 ended well, and so did the n ops. */
static void
all_ran(struct op **op, int n)
{
	peer_join();
	ck_assert_msg(f.peer.rc == 0, "n0: %s", f.peer.err);
	for (int k = 0; k < n; k++)
		ck_assert_msg(op[k]->code == 0, "op %d: %s", k + 1, op[k]->err);
}

static void
both_ran(struct op **op)
{
	all_ran(op, 2);
}

static void
free_ops(struct op **op, int n)
{
	for (int k = 0; k < n; k++)
		op_free(op[k]);
}

static void
free_both(struct op **op)
{
	free_ops(op, 2);
}

/*
 * The second allreduce was taken while the first's last segment was on
 * the network, and its first segment combined then; the first's last
 * segment was handed out beside the second's first, which ended the
 * first: both results right, each op answered once, in order.
 */
START_TEST(the_next_allreduces_first_segment_is_combined_beside_the_last)
{
	struct op *op[2];

	submit_two(PEER_SEGMENTS, 0, BIG);
	collect(op, 1);			/* its result is there when it ends */
	ck_assert_msg(op[0]->code == 0, "op 1: %s", op[0]->err);
	assert_local_range(0, BIG, 6.0f);
	collect(op + 1, 1);
	peer_join();
	ck_assert_msg(f.peer.rc == 0, "n0: %s", f.peer.err);
	for (int k = 0; k < 2; k++) {
		ck_assert_msg(op[k]->code == 0, "op %d: %s", k + 1, op[k]->err);
		ck_assert_uint_eq(op[k]->desc.seq, (uint64_t)k + 1);
	}
	ck_assert_int_eq(op[0]->combined_ahead, 0);
	ck_assert_int_eq(op[1]->combined_ahead, 1);
	ck_assert_int_eq(op[0]->handed_on, 1);
	ck_assert_int_eq(op[1]->handed_on, 0);	/* the last: nothing after */
	ck_assert_uint_le(op[0]->done_ns, op[1]->done_ns);
	assert_range(0, 2 * BIG, 6.0f);
	for (uint32_t i = 0; i < NLOCAL; i++) {
		ck_assert_uint_eq(f.db[i]->done_seq, 2);
		ck_assert(!subq_pending(f.cm, i));
	}
	free_both(op);
}
END_TEST

/*
 * The second allreduce starts where the first's last segment is: combined
 * early, it would read that segment before the first wrote its result.
 * It is combined in its own turn, and reads the first one's result.
 */
START_TEST(an_allreduce_over_the_last_ones_result_is_not_combined_early)
{
	struct op *op[2];

	submit_two(PEER_SEGMENTS, 0, 2 * SEG_FLOATS);
	collect(op, 2);
	both_ran(op);
	assert_range(0, 2 * SEG_FLOATS, 6.0f);		/* the first's alone */
	assert_range(2 * SEG_FLOATS, BIG, 18.0f);	/* both: 6 + 6 + 6 */
	assert_range(BIG, 2 * SEG_FLOATS + BIG, 6.0f);	/* the second's */
	ck_assert_int_eq(op[1]->combined_ahead, 0);
	free_both(op);
}
END_TEST

/*
 * n0 hangs up once the first allreduce is over: the second, which took
 * the first's last segment to hand out, fails, and the first ends well.
 */
START_TEST(an_op_handed_on_ends_well_though_the_next_one_fails)
{
	struct op *op[2];

	submit_two(PEER_HANG_UP_SECOND, 0, BIG);
	collect(op, 2);
	peer_join();
	ck_assert_msg(f.peer.rc == 0, "n0: %s", f.peer.err);
	ck_assert_msg(op[0]->code == 0, "%s", op[0]->err);
	ck_assert_int_eq(op[0]->handed_on, 1);
	ck_assert_int_eq(op[1]->code, MCCL_ERR_PEER_FAILED);
	ck_assert_msg(strstr(op[1]->err, "n0") != NULL, "%s", op[1]->err);
	assert_range(0, BIG, 6.0f);
	for (uint32_t i = 0; i < NLOCAL; i++)
		ck_assert_uint_eq(f.db[i]->done_seq, 1);
	ck_assert(wait_until(engine_stopped, 10000));
	free_both(op);
}
END_TEST

/*
 * The second allreduce is of doubles: its first segment, combined beside
 * the first one's last, is summed as doubles.
 */
START_TEST(an_allreduce_combined_ahead_is_summed_by_its_own_type)
{
	struct op *op[2];

	submit_two_as(PEER_SEGMENTS, 0, BIG, MCCL_FLOAT64, BIG / 2);
	collect(op, 2);
	both_ran(op);
	ck_assert_int_eq(op[1]->combined_ahead, 1);
	assert_range(0, BIG, 6.0f);
	for (uint32_t i = 0; i < NLOCAL; i++) {
		const double *v = (const double *)(void *)(f.mem[i] + BIG);

		for (size_t e = 0; e < BIG / 2; e += 4999)
			ck_assert_msg(v[e] == 6.0, "rank %u double %zu: %g",
			    local_ranks[i], e, v[e]);
	}
	free_both(op);
}
END_TEST

/*
 * BIG floats, then count2 more right after them: the second op is
 * combined beside the first's last segment and takes its hand-out, or
 * (overlaps 0) runs in its turn while the first ends by itself; both
 * results right either way.
 */
static void
second_op_after_big(size_t count2, int overlaps)
{
	struct op *op[2];

	submit_two_as(PEER_SEGMENTS, 0, BIG, MCCL_FLOAT32, count2);
	collect(op, 2);
	both_ran(op);
	ck_assert_int_eq(op[0]->handed_on, overlaps);
	ck_assert_int_eq(op[1]->combined_ahead, overlaps);
	assert_range(0, BIG + count2, 6.0f);
	for (uint32_t i = 0; i < NLOCAL; i++)
		ck_assert_uint_eq(f.db[i]->done_seq, 2);
	free_both(op);
}

/*
 * A small allreduce (under OVERLAP_BYTES) queued behind a large one is
 * taken while the large one's last segment is on the network, but it is
 * not combined then: it runs in its turn.
 */
START_TEST(a_small_allreduce_taken_ahead_runs_in_its_turn)
{
	second_op_after_big(COUNT, 0);
}
END_TEST

/* One of one segment (under two) overlaps like a segmented one. */
START_TEST(a_one_segment_allreduce_is_combined_beside_the_one_before)
{
	second_op_after_big(ONE_SEG, 1);
}
END_TEST

/*
 * Three queued, all ran: BIG floats, then one segment right after them
 * (combined beside the first's last, and handing out the second's), then
 * one segment at third_off.
 */
static void
three_ops(size_t third_off, struct op **op)
{
	size_t off[3] = { 0, BIG, third_off },
	    count[3] = { BIG, ONE_SEG, ONE_SEG };

	submit_ops(PEER_SEGMENTS, 3, off, count, MCCL_FLOAT32);
	collect(op, 3);
	all_ran(op, 3);
	ck_assert_int_eq(op[0]->handed_on, 1);
	ck_assert_int_eq(op[1]->combined_ahead, 1);
	ck_assert_int_eq(op[1]->handed_on, 1);
}

/*
 * The one-segment second hands out the first's last segment and combines
 * the third's beside its own network, all in one side pass.
 */
START_TEST(a_one_segment_allreduce_overlaps_both_neighbours)
{
	struct op *op[3];

	three_ops(BIG + ONE_SEG, op);
	ck_assert_int_eq(op[2]->combined_ahead, 1);
	assert_range(0, BIG + 2 * ONE_SEG, 6.0f);
	free_ops(op, 3);
}
END_TEST

/*
 * The third starts inside the first's last segment, which the one-segment
 * second hands out beside its network: combined then, it would read
 * what the first had yet to write.  It waits for that hand-out (and
 * still takes the second's), and reads the first one's result.
 */
START_TEST(an_allreduce_over_the_one_before_last_waits_for_its_hand_out)
{
	struct op *op[3];

	three_ops(2 * SEG_FLOATS, op);
	ck_assert_int_eq(op[2]->combined_ahead, 0);
	assert_range(0, 2 * SEG_FLOATS, 6.0f);
	assert_range(2 * SEG_FLOATS, 2 * SEG_FLOATS + ONE_SEG, 18.0f);
	assert_range(2 * SEG_FLOATS + ONE_SEG, BIG + ONE_SEG, 6.0f);
	free_ops(op, 3);
}
END_TEST

static int
peer_at_last(struct comm *cm)
{
	(void)cm;
	return __atomic_load_n(&f.peer.at_last, __ATOMIC_ACQUIRE);
}

/*
 * The second allreduce is submitted only once the first's last segment
 * is on the network: too late to be combined beside it, it still takes
 * the first's last segment to hand out beside its own first.
 */
START_TEST(an_allreduce_that_comes_during_the_last_segment_takes_its_hand_out)
{
	size_t off[1] = { 0 }, count[1] = { BIG };
	struct ipc_op d = allreduce(2);
	struct op *op[2];

	submit_ops(PEER_LATE_SECOND, 1, off, count, MCCL_FLOAT32);
	f.peer.off[1] = BIG;
	f.peer.count[1] = ONE_SEG;
	ck_assert(wait_until(peer_at_last, 10000));
	msleep(50);			/* the engine waits in the last one */
	d.count = ONE_SEG;
	d.algo = ALGO_RING;
	d.send_off = d.recv_off = BIG * sizeof(float);
	submit(0, &d);
	submit(1, &d);
	__atomic_store_n(&f.peer.go, 1, __ATOMIC_RELEASE);
	collect(op, 2);
	both_ran(op);
	ck_assert_int_eq(op[1]->combined_ahead, 0);
	ck_assert_int_eq(op[0]->handed_on, 1);
	assert_range(0, BIG + ONE_SEG, 6.0f);
	free_both(op);
}
END_TEST

/* Both descriptors of each rank taken (the second one ahead). */
static int
both_taken(struct comm *cm)
{
	(void)cm;
	return __atomic_load_n(&f.db[0]->sq_tail, __ATOMIC_ACQUIRE) == 2 &&
	    __atomic_load_n(&f.db[1]->sq_tail, __ATOMIC_ACQUIRE) == 2;
}

/*
 * The job is aborted while the first allreduce's last segment waits on
 * n0 and the second was taken ahead: the first fails, the second comes
 * back failed without running, neither is answered as done, and the
 * engine stops.
 */
START_TEST(an_op_taken_ahead_fails_unrun_when_the_job_is_aborted)
{
	struct op *op[2];

	submit_two(PEER_STALL_LAST, 0, BIG);
	ck_assert(wait_until(both_taken, 10000));
	ck_assert(!engine_stopped(f.cm));
	engine_abort(f.cm);
	collect(op, 2);
	ck_assert_int_ne(op[0]->code, 0);
	ck_assert_int_eq(op[1]->code, MCCL_ERR_ABORTED);
	ck_assert_msg(strstr(op[1]->err, "collective 2 did not run") != NULL,
	    "%s", op[1]->err);
	ck_assert(wait_until(engine_stopped, 10000));
	for (uint32_t i = 0; i < NLOCAL; i++) {
		ck_assert_uint_eq(f.db[i]->done_seq, 0);
		ck_assert(!subq_pending(f.cm, i));
	}
	free_both(op);
}
END_TEST

/* The links the engine reported (1 up, -1 failed), waited for up to 10 s. */
static int
links_reported(int *code, char *err, size_t errlen)
{
	struct op_list done = TAILQ_HEAD_INITIALIZER(done);
	int links = 0;

	for (int t = 0; t < 10000 && links == 0; t++) {
		links = engine_collect(f.cm, &done, code, err, errlen);
		if (links == 0)
			msleep(1);
	}
	ck_assert(TAILQ_EMPTY(&done));
	return links;
}

/*
 * The nodes before this one dial it one link after another: links 250 ms
 * apart, past a 400 ms connect_timeout_ms in all, come up, since each
 * came within it of the last; and an allreduce runs over them.
 */
START_TEST(links_that_come_in_turn_come_up)
{
	struct ipc_op d = allreduce(1);
	char err[ERR_MAX] = "";
	struct op *op;
	int code = 0;

	job_conf.tun.connect_timeout_ms = 400;
	start_slowly(PEER_RUN, 250, ROWS);
	ck_assert_msg(links_reported(&code, err, sizeof(err)) == 1, "%s", err);
	submit(0, &d);
	submit(1, &d);
	op = collect_one();
	ck_assert_msg(op->code == 0, "%s", op->err);
	op_free(op);
}
END_TEST

/* A link that never comes: the set-up fails connect_timeout_ms after the
   last one came, naming the node. */
START_TEST(a_link_that_never_comes_fails_naming_the_node)
{
	char err[ERR_MAX] = "";
	uint64_t t0 = now_ns(), took;
	int code = 0;

	job_conf.tun.connect_timeout_ms = 300;
	start_slowly(PEER_RUN, 100, ROWS - 1);
	ck_assert_int_eq(links_reported(&code, err, sizeof(err)), -1);
	took = (now_ns() - t0) / 1000000;
	ck_assert_int_eq(code, MCCL_ERR_PEER_FAILED);
	ck_assert_msg(strstr(err, "node n0 did not open its data link within "
	    "300 ms") != NULL, "%s", err);
	ck_assert_msg(took >= 100 + 300 - 20 && took < 3000, "%llu ms",
	    (unsigned long long)took);
}
END_TEST

START_TEST(quit_ends_the_thread_and_finish_frees_it)
{
	start(PEER_RUN);
	ck_assert(!engine_exited(f.cm));
	engine_quit(f.cm);
	ck_assert(wait_until(engine_exited, 10000));
}
END_TEST

/* ---- the runs: TCP, then the RDMA transport on the fake verbs ---- */

static void
setup(void)
{
	/* The daemon's defaults, as control/ copies them for a job. */
	job_conf = (struct engine_conf){ .tun = { SPIN_AUTO, ALGO_AUTO,
	    60000, 5000, LINK_ANY }, .chunk_bytes = 1048576, .node_name =
	    "n1", .node_index = 1, .nodes = conf_nodes };
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	p2p_limits(UINT64_MAX, UINT64_MAX);
	memset(&f, 0, sizeof(f));
}

static void
fixture_down(void)
{
	teardown();
	event_base_free(base);
}

/* Unchecked, in check's own process: the fake devices' directory. */
static void
rdma_setup(void)
{
	strcpy(verbs_dir, "/tmp/test_engine.XXXXXX");
	if (mkdtemp(verbs_dir) == NULL) {
		perror("test_engine: mkdtemp");
		exit(1);
	}
	setenv("MCCL_FAKEVERBS_DIR", verbs_dir, 1);
}

static void
rdma_teardown(void)
{
	char cmd[64];

	unsetenv("MCCL_FAKEVERBS_DIR");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", verbs_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "test_engine: cannot remove %s\n", verbs_dir);
}

static TCase *
tcase(const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, fixture_down);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, an_allreduce_from_the_rings_to_the_doorbells_and_back);
	tcase_add_test(tc, a_peer_that_hangs_up_fails_the_op_naming_it);
	tcase_add_test(tc, an_abort_reaches_an_engine_waiting_for_a_rank);
	tcase_add_test(tc, a_retune_applies_to_the_next_op);
	tcase_add_test(tc, quit_ends_the_thread_and_finish_frees_it);
	tcase_add_test(tc, links_that_come_in_turn_come_up);
	tcase_add_test(tc, a_link_that_never_comes_fails_naming_the_node);
	tcase_add_test(tc, the_next_allreduces_first_segment_is_combined_beside_the_last);
	tcase_add_test(tc, an_allreduce_over_the_last_ones_result_is_not_combined_early);
	tcase_add_test(tc, an_op_taken_ahead_fails_unrun_when_the_job_is_aborted);
	tcase_add_test(tc, an_op_handed_on_ends_well_though_the_next_one_fails);
	tcase_add_test(tc, an_allreduce_combined_ahead_is_summed_by_its_own_type);
	tcase_add_test(tc, a_small_allreduce_taken_ahead_runs_in_its_turn);
	tcase_add_test(tc, a_one_segment_allreduce_is_combined_beside_the_one_before);
	tcase_add_test(tc, a_one_segment_allreduce_overlaps_both_neighbours);
	tcase_add_test(tc,
	    an_allreduce_over_the_one_before_last_waits_for_its_hand_out);
	tcase_add_test(tc,
	    an_allreduce_that_comes_during_the_last_segment_takes_its_hand_out);
	return tc;
}

int
main(void)
{
	Suite *s = suite_create("engine");
	TCase *rdma = tcase("rdma");
	SRunner *sr;
	int failed;

	evthread_use_pthreads();	/* the engine wakes the main loop */
	log_init(LOG_ERR, "test_engine");
	suite_add_tcase(s, tcase("tcp"));
	tcase_add_unchecked_fixture(rdma, rdma_setup, rdma_teardown);
	suite_add_tcase(s, rdma);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
