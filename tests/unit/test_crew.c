/*
 * test_crew.c: a job's helper threads (crew.c), alone.  crew_run runs
 * every part once, part 0 on the caller, and returns when all ended;
 * crew_start runs them all on the crew and returns at once, crew_wait
 * until they ended; tasks follow one another on the same threads; a task
 * of more parts than the crew may have is refused.
 */

#include <check.h>
#include <pthread.h>
#include <stdlib.h>

#include "engine/crew.h"

struct task {
	pthread_mutex_t	 mtx;
	pthread_cond_t	 cv;
	int		 open;		/* the parts may end */
	unsigned	 runs[CREW_MAX + 2];
	pthread_t	 who[CREW_MAX + 2];
};

static void
task_init(struct task *t, int open)
{
	*t = (struct task){ .open = open };
	pthread_mutex_init(&t->mtx, NULL);
	pthread_cond_init(&t->cv, NULL);
}

static void
task_free(struct task *t)
{
	pthread_mutex_destroy(&t->mtx);
	pthread_cond_destroy(&t->cv);
}

/* Count the part, then wait until the test opens the task. */
static void
part(void *arg, unsigned k)
{
	struct task *t = arg;

	pthread_mutex_lock(&t->mtx);
	t->runs[k]++;
	t->who[k] = pthread_self();
	while (!t->open)
		pthread_cond_wait(&t->cv, &t->mtx);
	pthread_mutex_unlock(&t->mtx);
}

static unsigned
runs(struct task *t, unsigned k)
{
	unsigned n;

	pthread_mutex_lock(&t->mtx);
	n = t->runs[k];
	pthread_mutex_unlock(&t->mtx);
	return n;
}

START_TEST(run_does_every_part_once_part_0_here)
{
	struct crew *c = crew_new();
	struct task t;

	ck_assert_ptr_nonnull(c);
	for (unsigned n = 1; n <= CREW_MAX + 1; n++) {
		task_init(&t, 1);
		ck_assert_int_eq(crew_run(c, n, part, &t), 0);
		for (unsigned k = 0; k < n; k++)
			ck_assert_uint_eq(t.runs[k], 1);
		ck_assert_uint_eq(t.runs[n], 0);
		ck_assert(pthread_equal(t.who[0], pthread_self()));
		for (unsigned k = 1; k < n; k++)
			ck_assert(!pthread_equal(t.who[k], pthread_self()));
		task_free(&t);
	}
	ck_assert_uint_eq(crew_size(c), CREW_MAX);
	task_init(&t, 1);
	ck_assert_int_eq(crew_run(c, CREW_MAX + 2, part, &t), -1);
	ck_assert_int_eq(crew_run(c, 0, part, &t), -1);
	ck_assert_uint_eq(t.runs[0], 0);
	task_free(&t);
	crew_free(c);
}
END_TEST

START_TEST(start_returns_at_once_and_wait_waits)
{
	struct crew *c = crew_new();
	struct task t;
	unsigned n = 3;

	ck_assert_ptr_nonnull(c);
	task_init(&t, 0);
	ck_assert_int_eq(crew_start(c, n, part, &t), 0);
	/* the parts are held until the task opens: we got here before */
	for (unsigned k = 0; k < n; k++)
		while (runs(&t, k) == 0)
			sched_yield();
	pthread_mutex_lock(&t.mtx);
	t.open = 1;
	pthread_cond_broadcast(&t.cv);
	pthread_mutex_unlock(&t.mtx);
	crew_wait(c);
	for (unsigned k = 0; k < n; k++) {
		ck_assert_uint_eq(t.runs[k], 1);
		ck_assert(!pthread_equal(t.who[k], pthread_self()));
	}
	ck_assert_uint_eq(t.runs[n], 0);
	task_free(&t);
	/* then a synchronous task on the same threads */
	task_init(&t, 1);
	ck_assert_int_eq(crew_run(c, 2, part, &t), 0);
	ck_assert_uint_eq(t.runs[0] + t.runs[1], 2);
	task_free(&t);
	ck_assert_int_eq(crew_start(c, CREW_MAX + 1, part, &t), -1);
	ck_assert_int_eq(crew_start(c, 0, part, &t), -1);
	crew_free(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("crew");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, run_does_every_part_once_part_0_here);
	tcase_add_test(tc, start_returns_at_once_and_wait_waits);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
