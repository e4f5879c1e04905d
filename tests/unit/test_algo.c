/*
 * test_algo.c: the rule AUTO stands for (engine/algo.c), and that the
 * ranges mcclctl job shows are that rule: for every node count and size,
 * the choice equals the range's.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "engine/algo.h"

/* The algorithm the ranges give for bytes. */
static int
by_ranges(uint32_t n, size_t bytes)
{
	struct algo_range r[4];
	size_t k = algo_auto_ranges(n, ALGO_SMALL_BYTES, r, 4);

	for (size_t i = 0; i < k; i++)
		if (bytes <= r[i].up_to)
			return r[i].algo;
	return -1;
}

START_TEST(auto_by_node_count_and_size)
{
	/* node count, bytes, expected */
	static const struct { uint32_t n; size_t bytes; int algo; } want[] = {
		{ 2, 0, ALGO_DOUBLING }, { 2, 8, ALGO_DOUBLING },
		{ 2, 65536, ALGO_DOUBLING },
		{ 2, 65537, ALGO_RING },
		{ 3, 8, ALGO_DIRECT }, { 3, 16384, ALGO_DIRECT },
		{ 3, 16385, ALGO_DOUBLING }, { 3, 1 << 20, ALGO_RING },
		{ 4, 8, ALGO_DOUBLING },
		{ 5, 8192, ALGO_DIRECT }, { 5, 8193, ALGO_DOUBLING },
		{ 6, 6553, ALGO_DIRECT }, { 6, 6554, ALGO_DOUBLING },
		{ 7, 8, ALGO_DOUBLING }, { 9, 8, ALGO_DOUBLING },
		{ 128, 8, ALGO_DOUBLING }, { 128, 1 << 30, ALGO_RING },
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(algo_choose(ALGO_AUTO, want[i].n, want[i].bytes,
		    ALGO_SMALL_BYTES) == want[i].algo, "%u nodes, %zu bytes: "
		    "%s, not %s", want[i].n, want[i].bytes,
		    proto_algo_name(algo_choose(ALGO_AUTO, want[i].n,
		    want[i].bytes, ALGO_SMALL_BYTES)),
		    proto_algo_name(want[i].algo));
}
END_TEST

START_TEST(requested_runs_as_asked)
{
	for (int a = ALGO_RING; a <= ALGO_MAX; a++)
		ck_assert_int_eq(algo_choose(a, 5, 1 << 20, ALGO_SMALL_BYTES), a);
}
END_TEST

START_TEST(the_ranges_are_the_rule)
{
	struct algo_range r[4];

	ck_assert_uint_eq(algo_auto_ranges(1, ALGO_SMALL_BYTES, r, 4), 0);
	for (uint32_t n = 2; n <= 300; n++)
		for (size_t b = 0; b <= 3 * ALGO_SMALL_BYTES; b += 97)
			ck_assert_msg(by_ranges(n, b) == algo_choose(ALGO_AUTO,
			    n, b, ALGO_SMALL_BYTES), "%u nodes, %zu bytes", n,
			    b);
	ck_assert_uint_eq(algo_auto_ranges(3, ALGO_SMALL_BYTES, r, 4), 3);
	ck_assert_int_eq(r[0].algo, ALGO_DIRECT);
	ck_assert_uint_eq(r[0].up_to, 16384);
	ck_assert_uint_eq(r[2].up_to, SIZE_MAX);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("algo");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, auto_by_node_count_and_size);
	tcase_add_test(tc, requested_runs_as_asked);
	tcase_add_test(tc, the_ranges_are_the_rule);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
