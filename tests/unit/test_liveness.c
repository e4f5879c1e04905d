/*
 * test_liveness: liveness.c alone.  Whom each node heartbeats, for every
 * cluster size to 1024: all pairs up to heartbeat_mesh_max_nodes, past it
 * a symmetric overlay of at most 2 log2 N peers a node that still joins
 * every node to every other; and the verdict on a peer at a tick, case by
 * case.
 */
#include <check.h>
#include <stdlib.h>

#include "control/control.h"

#define MS	1000000ULL
#define TIMEOUT	(5000 * MS)

/* Whom n's nodes heartbeat, in a cluster of n with mesh_max. */
static uint8_t *
watch_matrix(uint32_t n, uint32_t mesh_max)
{
	uint8_t *w = calloc((size_t)n * n, 1);

	ck_assert_ptr_nonnull(w);
	for (uint32_t a = 0; a < n; a++)
		for (uint32_t b = 0; b < n; b++)
			w[a * n + b] = (uint8_t)liveness_watches(a, b, n,
			    mesh_max);
	return w;
}

static uint32_t
ceil_log2(uint32_t n)
{
	uint32_t k = 0;

	while ((1u << k) < n)
		k++;
	return k;
}

START_TEST(test_every_pair_up_to_the_limit)
{
	for (uint32_t n = 1; n <= 64; n++) {
		uint8_t *w = watch_matrix(n, 64);

		for (uint32_t a = 0; a < n; a++)
			for (uint32_t b = 0; b < n; b++)
				ck_assert_int_eq(w[a * n + b], a != b);
		free(w);
		ck_assert(!liveness_sparse(n, 64));
	}
	ck_assert(liveness_sparse(65, 64));
	ck_assert_int_eq(liveness_watches(3, 3, 8, 64), 0);
	ck_assert_int_eq(liveness_watches(0, 8, 8, 64), 0);	/* no node 8 */
}
END_TEST

/*
 * Past the limit: symmetric, at most 2 log2 N a node, all connected.  Every
 * size to 130, then those about the powers of two to 1024.
 */
START_TEST(test_sparse_overlay)
{
	static const uint32_t big[] = { 255, 256, 257, 383, 511, 512, 513,
	    1000, 1023, 1024 };

	for (uint32_t i = 0; i < 126 + sizeof(big) / sizeof(big[0]); i++) {
		uint32_t n = i < 126 ? 5 + i : big[i - 126];
		uint8_t *w = watch_matrix(n, 4), *seen = calloc(n, 1);
		uint32_t stack[1024], top = 0, reached = 1;

		ck_assert_ptr_nonnull(seen);
		for (uint32_t a = 0; a < n; a++) {
			uint32_t deg = 0;

			for (uint32_t b = 0; b < n; b++) {
				ck_assert_int_eq(w[a * n + b], w[b * n + a]);
				deg += w[a * n + b];
			}
			ck_assert_uint_ge(deg, 2);
			ck_assert_msg(deg <= 2 * ceil_log2(n), "%u nodes: node "
			    "%u heartbeats %u", n, a, deg);
		}
		/* Every node reaches every other through watchers. */
		seen[0] = 1;
		stack[top++] = 0;
		while (top > 0) {
			uint32_t a = stack[--top];

			for (uint32_t b = 0; b < n; b++)
				if (w[a * n + b] && !seen[b]) {
					seen[b] = 1;
					reached++;
					stack[top++] = b;
				}
		}
		ck_assert_uint_eq(reached, n);
		free(seen);
		free(w);
	}
}
END_TEST

/* The sets the README's model counts: 6 of 9 at 10 nodes, 17 of 511 at 512. */
START_TEST(test_sparse_sizes)
{
	static const uint32_t want10[] = { 1, 2, 4, 6, 8, 9 };
	uint32_t deg = 0, k = 0;

	for (uint32_t b = 0; b < 10; b++)
		if (liveness_watches(0, b, 10, 4)) {
			ck_assert_uint_lt(k, 6);
			ck_assert_uint_eq(b, want10[k++]);
		}
	ck_assert_uint_eq(k, 6);
	for (uint32_t b = 0; b < 512; b++)
		deg += (uint32_t)liveness_watches(100, b, 512, 64);
	ck_assert_uint_eq(deg, 17);
}
END_TEST

struct verdict_case {
	const char	*what;
	int		 watched;
	uint64_t	 heard, watched_since, suspect, now;
	enum liveness	 want;
};

START_TEST(test_verdicts)
{
	static const struct verdict_case c[] = {
		{ "watched, heard lately", 1, 9000, 0, 0, 10000,
		    LIVE_PING },
		{ "watched, silent past the timeout", 1, 4000, 0, 0, 10000,
		    LIVE_SILENT },
		{ "watched, silent just to the timeout", 1, 5000, 0, 0,
		    10000, LIVE_PING },
		{ "newly watched, not heard for long", 1, 100, 9000, 0,
		    10000, LIVE_PING },
		{ "watched long, not heard since", 1, 100, 4000, 0, 10000,
		    LIVE_SILENT },
		{ "neither, not heard for long", 0, 100, 0, 0, 10000,
		    LIVE_QUIET },
		{ "reported, no answer yet", 0, 100, 0, 9000, 10000,
		    LIVE_PING },
		{ "reported, no answer for half the timeout", 0, 100, 0,
		    7000, 10000, LIVE_UNANSWERED },
		{ "reported and watched, no answer", 1, 9000, 0, 9000,
		    12000, LIVE_UNANSWERED },
		{ "reported, answered", 0, 9500, 0, 9000, 20000,
		    LIVE_QUIET },
		{ "reported, answered, watched", 1, 9500, 0, 9000, 10000,
		    LIVE_PING },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct liveness_clock k = { c[i].heard * MS,
		    c[i].watched_since * MS, c[i].suspect * MS };

		ck_assert_msg(liveness_verdict(&k, c[i].watched, c[i].now * MS,
		    TIMEOUT) == c[i].want, "%s: verdict %d, want %d",
		    c[i].what, liveness_verdict(&k, c[i].watched,
		    c[i].now * MS, TIMEOUT), c[i].want);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("liveness");
	TCase *tc = tcase_create("liveness");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_every_pair_up_to_the_limit);
	tcase_add_test(tc, test_sparse_overlay);
	tcase_add_test(tc, test_sparse_sizes);
	tcase_add_test(tc, test_verdicts);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
