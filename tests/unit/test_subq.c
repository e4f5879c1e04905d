/*
 * test_subq.c: the engine's side of the submission rings (subq.c) and an
 * operation's check and attach (op.c), alone: a job of two local ranks
 * whose doorbells and segments are plain anonymous mappings, written here
 * as libmccl writes them.  What subq_take makes of them: an op when every
 * ring holds one, its seq, deadline and algorithm; a wait, then a timeout
 * naming the rank that never submitted; a rank that left; descriptors that
 * disagree, fall back in seq, overflow the ring or carry a send; buffers
 * outside their segment.
 */

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine_state.h"
#include "transport/transport.h"
#include "testlib.h"


/*
 * The transports' cache of registered memory (transport/link.c), which
 * seg.c must tell before a segment's pages go: counted here.
 */
static int forgotten;

void
link_mem_forget(const void *key)
{
	(void)key;
	forgotten++;
}

#define NLOCAL		2
#define SEG_ID		7
#define SEG_BYTES	65536
#define BELL_ID		1

struct fixture {
	struct comm	*cm;
	struct segtab	*segs[NLOCAL];
	struct ipc_doorbell *db[NLOCAL];
	uint8_t		*mem[NLOCAL];	/* each rank's data segment */
};


/*
 * A job of ranks 3 and 5 of 8 here, each with a doorbell and a data
 * segment in its connection's table, attached as engine_start attaches
 * them.
 */
static void
fixture_up(struct fixture *f)
{
	struct engine_rank ranks[NLOCAL];
	char err[ERR_MAX] = "";

	memset(f, 0, sizeof(*f));
	f->cm = calloc(1, sizeof(*f->cm));
	ck_assert_ptr_nonnull(f->cm);
	strcpy(f->cm->conf.node_name, "n0");
	f->cm->nranks = 8;
	f->cm->nlocal = NLOCAL;
	f->cm->eng = calloc(1, sizeof(*f->cm->eng));
	ck_assert_ptr_nonnull(f->cm->eng);
	f->cm->eng->tun = (struct engine_tunables){ .op_timeout_ms = 60000,
	    .algo = ALGO_RING };
	for (uint32_t i = 0; i < NLOCAL; i++) {
		f->segs[i] = segtab_new();
		f->db[i] = map(IPC_BELL_SIZE);
		f->mem[i] = map(SEG_BYTES);
		ck_assert_int_eq(segtab_add(f->segs[i], SEG_ID, f->mem[i],
		    SEG_BYTES), 0);
		ck_assert_int_eq(segtab_add(f->segs[i], BELL_ID,
		    (uint8_t *)f->db[i], IPC_BELL_SIZE), 0);
		ranks[i] = (struct engine_rank){ i == 0 ? 3 : 5,
		    segtab_find(f->segs[i], BELL_ID), f->segs[i] };
	}
	ck_assert_int_eq(subq_attach(f->cm, ranks, err, sizeof(err)), 0);
}

/* The engine lets go of the rings, then the connections of their tables. */
static void
fixture_down(struct fixture *f)
{
	int before = forgotten;

	subq_detach(f->cm);
	for (uint32_t i = 0; i < NLOCAL; i++)
		segtab_unref(f->segs[i]);	/* unmaps its segments */
	ck_assert_int_eq(forgotten - before, 2 * NLOCAL);	/* told first */
	free(f->cm->eng);
	free(f->cm);
}

/* Rank i publishes d, as mccl.c does: the slot, then the head. */
static void
submit(struct fixture *f, uint32_t i, const struct ipc_op *d)
{
	struct ipc_doorbell *db = f->db[i];

	db->sq[db->sq_head % IPC_SQ_SLOTS] = *d;
	__atomic_store_n(&db->sq_head, db->sq_head + 1, __ATOMIC_RELEASE);
}

/* An allreduce of count floats in place at the start of the segment. */
static struct ipc_op
allreduce(uint64_t seq, uint64_t count)
{
	return (struct ipc_op){ .seq = seq, .coll = COLL_ALLREDUCE,
	    .dtype = MCCL_FLOAT32, .redop = MCCL_SUM, .algo = ALGO_AUTO,
	    .count = count, .send_seg = SEG_ID, .recv_seg = SEG_ID };
}

static struct op *
take(struct fixture *f, uint64_t *until)
{
	uint64_t u;

	return subq_take(f->cm, until != NULL ? until : &u);
}

static void
take_fails(struct fixture *f, int code, const char *words)
{
	struct op *op = take(f, NULL);

	ck_assert_ptr_nonnull(op);
	ck_assert_int_eq(op->code, code);
	ck_assert_msg(strstr(op->err, words) != NULL, "\"%s\" lacks \"%s\"",
	    op->err, words);
	op_free(op);
}

START_TEST(every_ring_holds_one)
{
	struct fixture f;
	uint64_t until = 1, before = now_ns();
	struct op *op;

	fixture_up(&f);
	for (uint32_t i = 0; i < NLOCAL; i++) {
		struct ipc_op d = allreduce(1, 100);

		submit(&f, i, &d);
	}
	op = take(&f, &until);
	ck_assert_ptr_nonnull(op);
	ck_assert_int_eq(op->code, 0);
	ck_assert_uint_eq(op->desc.seq, 1);
	ck_assert_uint_eq(op->desc.algo, ALGO_RING);	/* AUTO: the node's */
	ck_assert_uint_ge(op->deadline_ns, before + 60000ULL * 1000000);
	for (uint32_t i = 0; i < NLOCAL; i++) {
		ck_assert_ptr_eq(op->parts[i].send, f.mem[i]);
		ck_assert_ptr_eq(op->parts[i].recv, f.mem[i]);
		ck_assert_uint_eq(f.db[i]->sq_tail, 1);	/* taken, published */
	}
	ck_assert_ptr_null(take(&f, &until));		/* nothing more */
	ck_assert_uint_eq(until, 0);
	op_free(op);
	fixture_down(&f);
}
END_TEST

START_TEST(a_missing_rank_times_out_named)
{
	struct fixture f;
	struct ipc_op d = allreduce(1, 4);
	uint64_t until = 0, next, since;
	struct timespec ms2 = { 0, 2000000 };

	fixture_up(&f);
	d.timeout_ms = 1;
	submit(&f, 0, &d);
	ck_assert_ptr_null(take(&f, &until));	/* waits for rank 5 */
	ck_assert_uint_gt(until, 0);
	since = subq_waiting_since(f.cm, &next);
	ck_assert_uint_gt(since, 0);
	ck_assert_uint_eq(next, 1);
	nanosleep(&ms2, NULL);
	take_fails(&f, MCCL_ERR_TIMEOUT, "timeout waiting for rank 5 on node "
	    "n0: it has not submitted the op within 1 ms");
	fixture_down(&f);
}
END_TEST

START_TEST(a_rank_that_left_fails_at_once)
{
	struct fixture f;
	struct ipc_op d = allreduce(1, 4);

	fixture_up(&f);
	submit(&f, 1, &d);
	subq_leave(f.cm, 0);
	take_fails(&f, MCCL_ERR_PEER_FAILED, "rank 3 on node n0 has left the "
	    "job");
	fixture_down(&f);
}
END_TEST

START_TEST(local_ranks_that_disagree)
{
	struct fixture f;
	struct ipc_op a = allreduce(1, 4), b = allreduce(1, 5);

	fixture_up(&f);
	submit(&f, 0, &a);
	submit(&f, 1, &b);
	take_fails(&f, MCCL_ERR_INVALID_ARGUMENT, "rank 5: it is allreduce "
	    "count 5 by auto, but another rank on node n0 issued allreduce "
	    "count 4 by auto as collective 1");
	fixture_down(&f);
}
END_TEST

START_TEST(seqs_must_rise)
{
	struct fixture f;
	struct ipc_op d = allreduce(4, 4);
	struct op *op;

	fixture_up(&f);
	for (uint32_t i = 0; i < NLOCAL; i++)
		submit(&f, i, &d);
	op = take(&f, NULL);
	ck_assert_int_eq(op->code, 0);
	op_free(op);
	d.seq = 4;			/* again, on rank 3's ring */
	for (uint32_t i = 0; i < NLOCAL; i++)
		submit(&f, i, &d);
	take_fails(&f, MCCL_ERR_PROTOCOL, "rank 3: op 4 follows op 4: seqs "
	    "must rise");
	fixture_down(&f);
}
END_TEST

START_TEST(a_head_past_the_ring)
{
	struct fixture f;

	fixture_up(&f);
	f.db[1]->sq_head = IPC_SQ_SLOTS + 1;
	take_fails(&f, MCCL_ERR_PROTOCOL, "rank 5: its submission ring's head "
	    "is");
	fixture_down(&f);
}
END_TEST

START_TEST(no_sends_in_the_ring)
{
	struct fixture f;
	struct ipc_op d = allreduce(1, 4);

	fixture_up(&f);
	d.coll = COLL_SEND;
	d.root = 0;
	for (uint32_t i = 0; i < NLOCAL; i++)
		submit(&f, i, &d);
	take_fails(&f, MCCL_ERR_PROTOCOL, "a send in the submission ring");
	fixture_down(&f);
}
END_TEST

START_TEST(buffers_outside_their_segment)
{
	struct fixture f;
	struct ipc_op d = allreduce(1, SEG_BYTES / 4 + 1);	/* one too many */

	fixture_up(&f);
	for (uint32_t i = 0; i < NLOCAL; i++)
		submit(&f, i, &d);
	take_fails(&f, MCCL_ERR_INVALID_ARGUMENT, "rank 3: ");
	d = allreduce(2, 4);
	d.send_seg = SEG_ID + 1;				/* unknown */
	for (uint32_t i = 0; i < NLOCAL; i++)
		submit(&f, i, &d);
	take_fails(&f, MCCL_ERR_INVALID_ARGUMENT, "rank 3: ");
	fixture_down(&f);
}
END_TEST

START_TEST(op_check_names_what_is_wrong)
{
	struct ipc_op d = allreduce(1, 4);
	char err[256];

	ck_assert_ptr_null(op_check(8, &d, err, sizeof(err)));
	d.coll = COLL_MAX + 1;
	ck_assert_str_eq(op_check(8, &d, err, sizeof(err)),
	    "unknown collective 14");
	d = allreduce(1, 4);
	d.redop = MCCL_BXOR;
	ck_assert_str_eq(op_check(8, &d, err, sizeof(err)),
	    "reduction bxor on float32 is not supported");
	d = allreduce(1, 4);
	d.coll = COLL_BROADCAST;
	d.root = 8;
	ck_assert_str_eq(op_check(8, &d, err, sizeof(err)),
	    "root 8 is out of range for 8 ranks");
	d = allreduce(1, UINT64_MAX / 2);
	ck_assert_ptr_nonnull(strstr(op_check(8, &d, err, sizeof(err)),
	    "is too large"));
}
END_TEST

static Suite *
subq_suite(void)
{
	Suite *s = suite_create("subq");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, every_ring_holds_one);
	tcase_add_test(tc, a_missing_rank_times_out_named);
	tcase_add_test(tc, a_rank_that_left_fails_at_once);
	tcase_add_test(tc, local_ranks_that_disagree);
	tcase_add_test(tc, seqs_must_rise);
	tcase_add_test(tc, a_head_past_the_ring);
	tcase_add_test(tc, no_sends_in_the_ring);
	tcase_add_test(tc, buffers_outside_their_segment);
	tcase_add_test(tc, op_check_names_what_is_wrong);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(subq_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
