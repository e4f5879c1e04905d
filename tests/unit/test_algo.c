/*
 * test_algo.c: the cost model AUTO stands for (engine/algo.c): its
 * predictions, worked by hand here; the choice it makes for each node
 * count and size, on either side of each boundary; that a requested
 * algorithm runs where the collective has it; that the ranges mcclctl
 * job shows are the rule, for every node count and size; and the lanes a
 * job's link needs.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "engine/algo.h"

/* The defaults: alpha 25 us, beta 0.8 ns a byte, gamma 0.25. */
static const struct link_cost dflt = { LINK_ALPHA_NS_DEFAULT,
    LINK_BETA_PS_DEFAULT, LINK_GAMMA_PS_DEFAULT, 0 };

#define AR	COLL_ALLREDUCE
#define BC	COLL_BROADCAST

static int
pick(int coll, uint32_t n, size_t bytes, const struct link_cost *c)
{
	return algo_choose(coll, ALGO_AUTO, n, bytes, 0, c);
}

static void
assert_near(double got, double want)
{
	ck_assert_msg(got > want - 0.5 && got < want + 0.5, "predicted %.3f "
	    "ns, expected %.3f", got, want);
}

START_TEST(predictions_by_hand)
{
	size_t m = 1 << 20;

	/* 4 nodes, 1 MiB: 6 alpha + 2 (3/4) n beta */
	assert_near(algo_predict_ns(AR, ALGO_RING, 4, m, 0, &dflt),
	    6 * 25000 + 1.5 * m * 0.8);
	/* 4 nodes: 2 rounds of (alpha + n beta), 2 reductions */
	assert_near(algo_predict_ns(AR, ALGO_DOUBLING, 4, m, 0, &dflt),
	    2 * (25000 + m * 0.8) + 2 * m * 0.25);
	/* 5 nodes fold one in: 3 + 2 rounds, 3 reductions */
	assert_near(algo_predict_ns(AR, ALGO_DOUBLING, 5, m, 0, &dflt),
	    4 * (25000 + m * 0.8) + 3 * m * 0.25);
	/* 8 nodes: 6 alpha, 2 (7/8) n beta, (7/8) n gamma */
	assert_near(algo_predict_ns(AR, ALGO_RABENSEIFNER, 8, m, 0, &dflt),
	    6 * 25000 + 1.75 * m * 0.8 + 0.875 * m * 0.25);
	/* 6 nodes, one round: alpha + 5 (7/12) alpha + 5 n (beta + gamma) */
	assert_near(algo_predict_ns(AR, ALGO_DIRECT, 6, 1000, 0, &dflt),
	    25000 + 5 * 25000 * 7.0 / 12 + 5 * 1000 * 1.05);
	/* 20 nodes: three rounds of 8 peers at most */
	assert_near(algo_predict_ns(AR, ALGO_DIRECT, 20, 0, 0, &dflt),
	    3 * 25000 + 19 * 25000 * 7.0 / 12);
	/* a chain of 5, 64 KiB in one chunk: 4 alpha, 3 chunks' fill, n,
	   and the headers 2 * 3 * (7/12) alpha */
	assert_near(algo_predict_ns(BC, ALGO_RING, 5, 65536, 0, &dflt),
	    4 * 25000 + 3 * 65536 * 0.8 + 65536 * 0.8 + 6 * 25000 * 7.0 / 12);
	/* a chain past one chunk: only the first chunk fills it */
	assert_near(algo_predict_ns(BC, ALGO_RING, 5, 4 * m, 0, &dflt),
	    4 * 25000 + 3 * m * 0.8 + 4 * m * 0.8 + 6 * 25000 * 7.0 / 12);
	/* a tree of 5: depth 3, and a confirmation up and down */
	assert_near(algo_predict_ns(BC, ALGO_TREE, 5, 1000, 0, &dflt),
	    3 * (25000 + 1000 * 0.8) + 6 * 25000);
	/* what a collective does not run, and one node, cost nothing */
	ck_assert(algo_predict_ns(BC, ALGO_DOUBLING, 4, m, 0, &dflt) == 0);
	ck_assert(algo_predict_ns(AR, ALGO_TREE, 4, m, 0, &dflt) == 0);
	ck_assert(algo_predict_ns(AR, ALGO_RING, 1, m, 0, &dflt) == 0);
}
END_TEST

/*
 * The boundaries, worked from the model with the defaults:
 *   2 nodes: doubling while n gamma < alpha: n < 100000.
 *   3 nodes: direct 2.167 alpha + 2.1 n against the ring's 4 alpha +
 *     1.067 n: n < 44354.8.
 *   4 nodes: doubling 2 alpha + 2.1 n, rabenseifner 4 alpha + 1.3875 n,
 *     the ring 6 alpha + 1.2 n: n < 70175.4, then n < 266666.7.
 *   128 nodes: doubling 7 alpha + 7.35 n, rabenseifner 14 alpha +
 *     1.8355 n, the ring 254 alpha + 1.5875 n: n < 31734.5, then
 *     n < 24188976.4 (the ring's 2(p-1) steps cost 6 ms of latency).
 */
START_TEST(auto_by_node_count_and_size)
{
	static const struct { uint32_t n; size_t bytes; int algo; } want[] = {
		{ 2, 0, ALGO_DOUBLING }, { 2, 99999, ALGO_DOUBLING },
		{ 2, 100001, ALGO_RING }, { 2, 1 << 30, ALGO_RING },
		{ 3, 8, ALGO_DIRECT }, { 3, 44354, ALGO_DIRECT },
		{ 3, 44355, ALGO_RING },
		{ 4, 8, ALGO_DOUBLING }, { 4, 70175, ALGO_DOUBLING },
		{ 4, 70176, ALGO_RABENSEIFNER },
		{ 4, 266666, ALGO_RABENSEIFNER }, { 4, 266667, ALGO_RING },
		{ 128, 8, ALGO_DOUBLING }, { 128, 31734, ALGO_DOUBLING },
		{ 128, 31735, ALGO_RABENSEIFNER },
		{ 128, 256 << 10, ALGO_RABENSEIFNER },
		{ 128, 24188976, ALGO_RABENSEIFNER },
		{ 128, 24188977, ALGO_RING },
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(pick(AR, want[i].n, want[i].bytes, &dflt) ==
		    want[i].algo, "%u nodes, %zu bytes: %s, not %s", want[i].n,
		    want[i].bytes, proto_algo_name(pick(AR, want[i].n,
		    want[i].bytes, &dflt)), proto_algo_name(want[i].algo));
}
END_TEST

/*
 * Broadcast: the chain on few nodes; the tree for small buffers on many,
 * and the chain again once the tree's log2 p whole copies cost more than
 * the chain's fill.  128 nodes: the tree 7 (alpha + n beta) + 14 alpha,
 * the chain 127 alpha + 126 chunks' fill + n beta + 252 (7/12) alpha.
 */
START_TEST(broadcast_by_node_count_and_size)
{
	ck_assert_int_eq(pick(BC, 2, 8, &dflt), ALGO_RING);
	ck_assert_int_eq(pick(BC, 3, 1 << 20, &dflt), ALGO_RING);
	ck_assert_int_eq(pick(BC, 8, 8, &dflt), ALGO_TREE);
	ck_assert_int_eq(pick(BC, 128, 8, &dflt), ALGO_TREE);
	ck_assert_int_eq(pick(BC, 128, 1 << 20, &dflt), ALGO_TREE);
	ck_assert_int_eq(pick(BC, 128, 64 << 20, &dflt), ALGO_RING);
}
END_TEST

/* Slower messages move the ring's boundary up; a faster reduction too. */
START_TEST(the_choice_follows_the_cost)
{
	const struct link_cost slow_msgs = { 250000, 800, 250, 0 };
	const struct link_cost fast_reduce = { 25000, 800, 10, 0 };

	ck_assert_int_eq(pick(AR, 2, 500000, &dflt), ALGO_RING);
	ck_assert_int_eq(pick(AR, 2, 500000, &slow_msgs), ALGO_DOUBLING);
	ck_assert_int_eq(pick(AR, 128, 64 << 20, &dflt), ALGO_RING);
	ck_assert_int_eq(pick(AR, 128, 64 << 20, &slow_msgs),
	    ALGO_RABENSEIFNER);
	/* rabenseifner sends what the ring sends in 8 steps, not 30, but
	   reduces after each: with a faster reduction it holds past 16 MiB
	   on 16 nodes (to 22 alpha / (15/16 gamma): 2.3 MB, then 58.7 MB) */
	ck_assert_int_eq(pick(AR, 16, 16 << 20, &dflt), ALGO_RING);
	ck_assert_int_eq(pick(AR, 16, 16 << 20, &fast_reduce),
	    ALGO_RABENSEIFNER);
	ck_assert_int_eq(pick(AR, 16, 64 << 20, &fast_reduce), ALGO_RING);
}
END_TEST

/*
 * The ring's beta and the others' are apart: with the others' streams at
 * half the ring's lanes, rabenseifner's bytes cost twice the ring's, and
 * its range on 16 nodes ends far below 2.3 MB (22 alpha = 15/8 n 0.8 +
 * 15/16 n 0.25: 271 kB).
 */
START_TEST(each_kind_sends_at_its_own_beta)
{
	const struct link_cost slow_pair = { 25000, 800, 250, 1600 };

	ck_assert_int_eq(pick(AR, 16, 1 << 20, &dflt), ALGO_RABENSEIFNER);
	ck_assert_int_eq(pick(AR, 16, 1 << 20, &slow_pair), ALGO_RING);
	ck_assert_int_eq(pick(AR, 16, 200000, &slow_pair), ALGO_RABENSEIFNER);
	assert_near(algo_predict_ns(AR, ALGO_DOUBLING, 2, 1000, 0, &slow_pair),
	    25000 + 1000 * 1.6 + 1000 * 0.25);
	assert_near(algo_predict_ns(AR, ALGO_RING, 2, 1000, 0, &slow_pair),
	    50000 + 1000 * 0.8);
}
END_TEST

/*
 * On a 16-bit wire only the ring narrows: half its bytes cross, and AUTO
 * weighs that.  2 nodes, 800 kB, alpha 250 us: doubling 250 + 840 us
 * against the ring's 500 + 640, or 500 + 320 narrowed.
 */
START_TEST(a_narrowed_wire_favours_the_ring)
{
	const struct link_cost slow_msgs = { 250000, 800, 250, 0 };

	ck_assert_int_eq(algo_choose(AR, ALGO_AUTO, 2, 800000, 0, &slow_msgs),
	    ALGO_DOUBLING);
	ck_assert_int_eq(algo_choose(AR, ALGO_AUTO, 2, 800000, 1, &slow_msgs),
	    ALGO_RING);
	assert_near(algo_predict_ns(AR, ALGO_RING, 2, 800000, 1, &slow_msgs),
	    500000 + 800000 * 0.4);
	/* the others do not narrow */
	ck_assert(algo_predict_ns(AR, ALGO_DOUBLING, 2, 800000, 1, &slow_msgs)
	    == algo_predict_ns(AR, ALGO_DOUBLING, 2, 800000, 0, &slow_msgs));
}
END_TEST

START_TEST(requested_runs_as_asked)
{
	for (int a = ALGO_RING; a <= ALGO_DIRECT; a++) {
		ck_assert_int_eq(algo_choose(AR, a, 5, 1 << 20, 0, &dflt), a);
		ck_assert_int_eq(algo_choose(COLL_REDUCE, a, 5, 8, 0, &dflt), a);
	}
	ck_assert_int_eq(algo_choose(BC, ALGO_TREE, 2, 1 << 30, 0, &dflt),
	    ALGO_TREE);
	ck_assert_int_eq(algo_choose(BC, ALGO_RING, 128, 8, 0, &dflt), ALGO_RING);
	/* asked for what the collective has not: the model decides */
	ck_assert_int_eq(algo_choose(BC, ALGO_DOUBLING, 128, 8, 0, &dflt),
	    ALGO_TREE);
	ck_assert_int_eq(algo_choose(AR, ALGO_TREE, 2, 8, 0, &dflt),
	    ALGO_DOUBLING);
	ck_assert(algo_runs_for(AR, ALGO_DIRECT) && !algo_runs_for(AR,
	    ALGO_TREE) && algo_runs_for(BC, ALGO_TREE) &&
	    !algo_runs_for(COLL_ALLGATHER, ALGO_RING));
}
END_TEST

/* The algorithm the ranges give for bytes. */
static int
by_ranges(int coll, uint32_t n, size_t bytes, const struct link_cost *c)
{
	struct algo_range r[ALGO_RANGES_MAX];
	size_t k = algo_auto_ranges(coll, n, c, r, ALGO_RANGES_MAX);

	for (size_t i = 0; i < k; i++)
		if (bytes <= r[i].up_to)
			return r[i].algo;
	return -1;
}

static void
ranges_match(int coll, uint32_t n, const struct link_cost *c)
{
	struct algo_range r[ALGO_RANGES_MAX];
	size_t k = algo_auto_ranges(coll, n, c, r, ALGO_RANGES_MAX);

	ck_assert_uint_ge(k, 1);
	ck_assert_uint_eq(r[k - 1].up_to, SIZE_MAX);
	for (size_t i = 0; i < k; i++) {
		ck_assert(i == 0 || r[i].algo != r[i - 1].algo);
		ck_assert(r[i].at_ns == algo_predict_ns(coll, r[i].algo, n,
		    r[i].at_bytes, 0, c));
		if (i + 1 < k) {	/* each boundary, to the byte */
			ck_assert_int_eq(pick(coll, n, r[i].up_to, c),
			    r[i].algo);
			ck_assert_int_eq(pick(coll, n, r[i].up_to + 1, c),
			    r[i + 1].algo);
		}
	}
	for (size_t b = 0; b <= (size_t)64 << 20; b = b * 5 / 4 + 97)
		ck_assert_msg(by_ranges(coll, n, b, c) == pick(coll, n, b, c),
		    "%u nodes, %zu bytes", n, b);
}

START_TEST(the_ranges_are_the_rule)
{
	const struct link_cost slow = { 400000, 8000, 300, 0 };
	struct algo_range r[ALGO_RANGES_MAX];

	ck_assert_uint_eq(algo_auto_ranges(AR, 1, &dflt, r, 4), 0);
	ck_assert_uint_eq(algo_auto_ranges(COLL_ALLGATHER, 4, &dflt, r, 4), 0);
	for (uint32_t n = 2; n <= 600; n += n < 20 ? 1 : 37) {
		ranges_match(AR, n, &dflt);
		ranges_match(BC, n, &dflt);
		ranges_match(AR, n, &slow);
		ranges_match(BC, n, &slow);
	}
	ck_assert_uint_eq(algo_auto_ranges(AR, 4, &dflt, r, ALGO_RANGES_MAX),
	    3);
	ck_assert_int_eq(r[0].algo, ALGO_DOUBLING);
	ck_assert_uint_eq(r[0].up_to, 70175);
	ck_assert_uint_eq(r[1].up_to, 266666);
	ck_assert_uint_eq(r[2].at_bytes, (size_t)1 << 30);
}
END_TEST

/* Lanes: one per 2.5 Gbit/s the link measured, within what the cores allow. */
START_TEST(lanes_by_the_link)
{
	static const struct {
		uint32_t beta_ps, most, want;
	} cases[] = {
		{ 8000, 4, 1 },		/* 1 Gbit/s: one fills it */
		{ LANE_FILL_PS, 4, 1 },	/* 2.5 Gbit/s, exactly */
		{ LANE_FILL_PS - 1, 4, 2 },
		{ 1600, 4, 2 },		/* 5 Gbit/s */
		{ 1599, 4, 3 },
		{ LINK_BETA_PS_DEFAULT, 4, 4 },	/* 10 Gbit/s, assumed */
		{ LINK_BETA_PS_DEFAULT, 2, 2 },	/* ... on a small machine */
		{ 200, 4, 4 },		/* 40 Gbit/s: the cores bound it */
		{ 1, 8, 8 },
		{ 1000000000, 3, 1 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct link_cost c = dflt;

		c.beta_ps = cases[i].beta_ps;
		ck_assert_msg(algo_lanes(&c, cases[i].most) == cases[i].want,
		    "beta %u ps, at most %u: %u lanes, expected %u",
		    cases[i].beta_ps, cases[i].most,
		    algo_lanes(&c, cases[i].most), cases[i].want);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("algo");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, predictions_by_hand);
	tcase_add_test(tc, auto_by_node_count_and_size);
	tcase_add_test(tc, broadcast_by_node_count_and_size);
	tcase_add_test(tc, the_choice_follows_the_cost);
	tcase_add_test(tc, each_kind_sends_at_its_own_beta);
	tcase_add_test(tc, a_narrowed_wire_favours_the_ring);
	tcase_add_test(tc, requested_runs_as_asked);
	tcase_add_test(tc, the_ranges_are_the_rule);
	tcase_add_test(tc, lanes_by_the_link);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
