/*
 * test_budget: budget.c alone.  Takes within the limits, refusals naming
 * the limit passed (per uid, then in all), bytes given back, limits
 * changed under holders, scratch buffers that grow, refuse and go back,
 * and many threads taking and giving at once.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/budget.h"

static struct budget b = BUDGET_INIT(b, "test bytes", "per_uid_key",
    "total_key");

static void
reset(uint64_t per_uid, uint64_t total)
{
	ck_assert_uint_eq(budget_held(&b, (uid_t)-1), 0);
	budget_limits(&b, per_uid, total);
}

START_TEST(test_take_give)
{
	char err[256];

	reset(100, 150);
	ck_assert_int_eq(budget_take(&b, 1, 60, "n0", err, sizeof(err)), 0);
	ck_assert_int_eq(budget_take(&b, 1, 40, "n0", err, sizeof(err)), 0);
	ck_assert_int_eq(budget_take(&b, 1, 1, "n0", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "1 bytes of test bytes more would pass the limit "
	    "of 100 for uid 1 on node n0 (per_uid_key; 100 held)");
	ck_assert_int_eq(budget_take(&b, 2, 51, "n0", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "51 bytes of test bytes more would pass the "
	    "limit of 150 on node n0 (total_key; 100 held)");
	ck_assert_uint_eq(budget_held(&b, 2), 0);	/* refused: nothing */
	ck_assert_int_eq(budget_take(&b, 2, 50, "n0", err, sizeof(err)), 0);
	ck_assert_uint_eq(budget_held(&b, 1), 100);
	ck_assert_uint_eq(budget_held(&b, 2), 50);
	ck_assert_uint_eq(budget_held(&b, (uid_t)-1), 150);
	budget_give(&b, 1, 100);
	budget_give(&b, 2, 50);
	ck_assert_uint_eq(budget_held(&b, 1), 0);
	ck_assert_uint_eq(budget_held(&b, (uid_t)-1), 0);
	ck_assert(TAILQ_EMPTY(&b.uids));		/* entries go with bytes */
}
END_TEST

/* A limit lowered below what is held refuses new takes only. */
START_TEST(test_lowered)
{
	char err[256];

	reset(100, 1000);
	ck_assert_int_eq(budget_take(&b, 7, 80, "n0", err, sizeof(err)), 0);
	budget_limits(&b, 50, 1000);
	ck_assert_int_eq(budget_take(&b, 7, 1, "n0", err, sizeof(err)), -1);
	ck_assert_uint_eq(budget_held(&b, 7), 80);
	budget_give(&b, 7, 80);
	ck_assert_int_eq(budget_take(&b, 7, 50, "n0", err, sizeof(err)), 0);
	budget_give(&b, 7, 50);
}
END_TEST

START_TEST(test_scratch)
{
	struct scratch s = { NULL, 0, 42, "n1" };
	char err[256];
	uint8_t *p;

	budget_limits(&scratch_budget, 1 << 20, 1 << 21);
	ck_assert_ptr_nonnull(p = scratch_get(&s, 1000, err, sizeof(err)));
	memset(p, 1, 1000);
	ck_assert_uint_eq(budget_held(&scratch_budget, 42), 1000);
	ck_assert_ptr_eq(scratch_get(&s, 10, err, sizeof(err)), p);
	ck_assert_ptr_nonnull(scratch_get(&s, 1 << 20, err, sizeof(err)));
	ck_assert_uint_eq(budget_held(&scratch_budget, 42), 1 << 20);
	ck_assert_ptr_null(scratch_get(&s, (1 << 20) + 1, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "engine scratch memory more would "
	    "pass the limit of 1048576 for uid 42 on node n1 "
	    "(max_scratch_bytes_per_uid; 1048576 held)"));
	ck_assert_uint_eq(s.len, 1 << 20);		/* refused: kept */
	scratch_release(&s);
	ck_assert_ptr_null(s.buf);
	ck_assert_uint_eq(budget_held(&scratch_budget, (uid_t)-1), 0);
	scratch_release(&s);				/* twice: nothing */
	ck_assert_uint_eq(budget_held(&scratch_budget, (uid_t)-1), 0);
}
END_TEST

#define THREADS	8
#define ROUNDS	20000

static void *
churn(void *arg)
{
	uid_t uid = (uid_t)(uintptr_t)arg % 3;
	char err[256];

	for (int i = 0; i < ROUNDS; i++)
		if (budget_take(&b, uid, 10, "n0", err, sizeof(err)) == 0)
			budget_give(&b, uid, 10);
	return NULL;
}

/* Many threads at once: every byte taken is given back, none lost. */
START_TEST(test_threads)
{
	pthread_t t[THREADS];

	reset(40, 60);
	for (uintptr_t i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, churn,
		    (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	ck_assert_uint_eq(budget_held(&b, (uid_t)-1), 0);
	ck_assert(TAILQ_EMPTY(&b.uids));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("budget");
	TCase *tc = tcase_create("budget");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_take_give);
	tcase_add_test(tc, test_lowered);
	tcase_add_test(tc, test_scratch);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
