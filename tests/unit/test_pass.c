/*
 * test_pass.c: a node's passes over local buffers (pass.c) and a client's
 * own memory (xmem.c), alone.  The "client" is this process: the kernel
 * lets it read itself through process_vm_readv.  A combine of sources in a
 * client's memory and in ours, and a fan-out to both, give what the plain
 * passes give, on one thread and on a crew, with parts and chunks uneven;
 * an unmapped buffer stops the pass with EFAULT and its address, and
 * leaves what it had not reached alone; xmem_open refuses a wrong probe,
 * another uid, and a process that has gone.
 */

#include <sys/mman.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/pass.h"

#define COUNT	((size_t)(5u << 20) / 4 + 37)	/* 5 MiB of floats: split */

static struct xmem self;

static void
open_self(void)
{
	static volatile uint64_t probe = 0x1234567890abcdefULL;
	char why[256];

	ck_assert_msg(xmem_open(&self, getpid(), geteuid(),
	    (uint64_t)(uintptr_t)&probe, probe, why, sizeof(why)) == 0,
	    "%s", why);
}

static float *
filled(size_t n, float base)
{
	float *p = malloc(n * sizeof(float));

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < n; i++)
		p[i] = base + (float)(i % 1000);
	return p;
}

/* A combine of three sources, the first and last in "client memory". */
static void
combine(struct crew *crew)
{
	float *a = filled(COUNT, 1), *b = filled(COUNT, 2), *c = filled(COUNT, 3),
	    *dst = calloc(COUNT, sizeof(float));
	const void *srcs[3] = { a, b, c };
	struct xmem *sxm[3] = { &self, NULL, &self };
	void *dsts[1] = { dst };
	struct pass p;

	ck_assert_int_eq(pass_init(&p, dsts, 1, srcs, 3, COUNT, MCCL_FLOAT32,
	    MCCL_SUM, 0, PASS_PARTS_MAX), 0);
	ck_assert_int_eq(pass_xmem(&p, sxm, NULL), 0);
	ck_assert_int_eq(pass_run(&p, crew), 0);
	pass_free(&p);
	for (size_t i = 0; i < COUNT; i++)
		ck_assert_msg(dst[i] == 6 + 3 * (float)(i % 1000),
		    "[%zu] = %g", i, dst[i]);
	free(a);
	free(b);
	free(c);
	free(dst);
}

START_TEST(combine_reads_client_memory)
{
	struct crew *crew = crew_new();

	open_self();
	combine(NULL);
	combine(crew);
	crew_free(crew);
	xmem_close(&self);
}
END_TEST

/* An average handed out: to our buffer and to two in "client memory". */
START_TEST(fan_out_writes_client_memory)
{
	float *src = filled(COUNT, 4), *mine = calloc(COUNT, sizeof(float)),
	    *x = calloc(COUNT, sizeof(float)), *y = calloc(COUNT, sizeof(float));
	void *dsts[4] = { src, x, mine, y };
	struct xmem *dxm[4] = { NULL, &self, NULL, &self };
	const void *srcs[1] = { src };
	struct crew *crew = crew_new();
	struct pass p;

	open_self();
	ck_assert_int_eq(pass_init(&p, dsts, 4, srcs, 1, COUNT, MCCL_FLOAT32,
	    MCCL_AVG, 2, PASS_PARTS_MAX), 0);
	ck_assert_int_eq(pass_xmem(&p, NULL, dxm), 0);
	ck_assert_int_eq(pass_run(&p, crew), 0);
	pass_free(&p);
	for (size_t i = 0; i < COUNT; i++) {
		float want = (4 + (float)(i % 1000)) / 2;

		ck_assert_msg(src[i] == want && mine[i] == want &&
		    x[i] == want && y[i] == want, "[%zu]: %g %g %g %g", i,
		    src[i], mine[i], x[i], y[i]);
	}
	crew_free(crew);
	xmem_close(&self);
	free(src);
	free(mine);
	free(x);
	free(y);
}
END_TEST

/* Both at once, or a combine of several destinations: refused. */
START_TEST(one_side_only)
{
	float a[64], b[64];
	void *dsts[2] = { a, b };
	const void *srcs[2] = { a, b };
	struct xmem *xm[2] = { &self, NULL };
	struct pass p;

	ck_assert_int_eq(pass_init(&p, dsts, 1, srcs, 2, 64, MCCL_FLOAT32,
	    MCCL_SUM, 0, 1), 0);
	ck_assert_int_eq(pass_xmem(&p, xm, xm), -1);
	pass_free(&p);
	ck_assert_int_eq(pass_init(&p, dsts, 2, srcs, 2, 64, MCCL_FLOAT32,
	    MCCL_SUM, 0, 1), 0);
	ck_assert_int_eq(pass_xmem(&p, xm, NULL), -1);
	pass_free(&p);
}
END_TEST

/*
 * A source unmapped: the pass stops with EFAULT at the chunk it could not
 * read, and says whose and where.
 */
START_TEST(unmapped_source_is_named)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = COUNT * 4;
	float *dst = calloc(COUNT, sizeof(float));
	uint8_t *gone = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	const void *srcs[1];
	struct xmem *sxm[1] = { &self };
	void *dsts[1] = { dst };
	struct pass p;

	ck_assert_ptr_ne(gone, MAP_FAILED);
	open_self();
	/* the second half goes away */
	ck_assert_int_eq(munmap(gone + (bytes / 2 + page - 1) / page * page,
	    bytes - (bytes / 2 + page - 1) / page * page), 0);
	srcs[0] = gone;
	ck_assert_int_eq(pass_init(&p, dsts, 1, srcs, 1, COUNT, MCCL_FLOAT32,
	    MCCL_SUM, 0, 1), 0);
	ck_assert_int_eq(pass_xmem(&p, sxm, NULL), 0);
	ck_assert_int_eq(pass_run(&p, NULL), -1);
	ck_assert_int_eq(p.fault.err, EFAULT);
	ck_assert_ptr_eq(p.fault.xm, &self);
	ck_assert_int_eq(p.fault.writing, 0);
	ck_assert_uint_ge(p.fault.addr, (uint64_t)(uintptr_t)gone + bytes / 2 -
	    256 * 1024);
	ck_assert_uint_lt(p.fault.addr, (uint64_t)(uintptr_t)gone + bytes);
	ck_assert(dst[COUNT - 1] == 0);		/* past the fault: untouched */
	pass_free(&p);
	munmap(gone, bytes / 2);
	xmem_close(&self);
	free(dst);
}
END_TEST

START_TEST(unmapped_destination_is_named)
{
	size_t bytes = COUNT * 4;
	float *src = filled(COUNT, 1);
	uint8_t *gone = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	const void *srcs[1] = { src };
	struct xmem *dxm[1] = { &self };
	void *dsts[1];
	struct pass p;

	ck_assert_ptr_ne(gone, MAP_FAILED);
	ck_assert_int_eq(munmap(gone, bytes), 0);
	dsts[0] = gone;
	open_self();
	ck_assert_int_eq(pass_init(&p, dsts, 1, srcs, 1, COUNT, MCCL_FLOAT32,
	    MCCL_SUM, 0, 1), 0);
	ck_assert_int_eq(pass_xmem(&p, NULL, dxm), 0);
	ck_assert_int_eq(pass_run(&p, NULL), -1);
	ck_assert_int_eq(p.fault.err, EFAULT);
	ck_assert_int_eq(p.fault.writing, 1);
	ck_assert_uint_eq(p.fault.addr, (uint64_t)(uintptr_t)gone);
	pass_free(&p);
	xmem_close(&self);
	free(src);
}
END_TEST

START_TEST(open_refuses)
{
	static volatile uint64_t probe = 42;
	struct xmem x;
	char why[256];
	pid_t pid;
	int st;

	ck_assert_int_eq(xmem_open(&x, getpid(), geteuid(),
	    (uint64_t)(uintptr_t)&probe, 43, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "not the value"));
	ck_assert_int_eq(xmem_open(&x, getpid(), geteuid() + 1,
	    (uint64_t)(uintptr_t)&probe, 42, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "its own user"));
	ck_assert_int_eq(xmem_open(&x, getpid(), geteuid(), 0, 0, why,
	    sizeof(why)), -1);
	ck_assert_int_eq(x.pid, 0);
	/* a process that has gone: no pidfd, or the probe fails */
	if ((pid = fork()) == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(xmem_open(&x, pid, geteuid(),
	    (uint64_t)(uintptr_t)&probe, 42, why, sizeof(why)), -1);
	ck_assert_int_eq(x.pidfd, -1);
}
END_TEST

/* Once the client has gone, nothing is written to its pid. */
START_TEST(no_write_after_exit)
{
	static volatile uint64_t probe = 7;
	int pipefd[2], st;
	struct xmem x;
	char why[256], c = 0;
	uint8_t buf[64] = { 0 };
	pid_t pid;

	ck_assert_int_eq(pipe(pipefd), 0);
	if ((pid = fork()) == 0) {		/* waits, then exits */
		close(pipefd[1]);
		(void)read(pipefd[0], &c, 1);
		_exit(0);
	}
	close(pipefd[0]);
	/* the child's copy of probe is at the same address */
	ck_assert_msg(xmem_open(&x, pid, geteuid(), (uint64_t)(uintptr_t)&probe,
	    7, why, sizeof(why)) == 0, "%s", why);
	ck_assert_int_eq(xmem_write(&x, (uint64_t)(uintptr_t)buf, "hello", 5),
	    0);
	close(pipefd[1]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(xmem_write(&x, (uint64_t)(uintptr_t)buf, "again", 5),
	    ESRCH);
	ck_assert_int_ne(xmem_read(&x, buf, (uint64_t)(uintptr_t)buf, 5), 0);
	xmem_close(&x);
	ck_assert_int_eq(x.pidfd, -1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pass");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, combine_reads_client_memory);
	tcase_add_test(tc, fan_out_writes_client_memory);
	tcase_add_test(tc, one_side_only);
	tcase_add_test(tc, unmapped_source_is_named);
	tcase_add_test(tc, unmapped_destination_is_named);
	tcase_add_test(tc, open_refuses);
	tcase_add_test(tc, no_write_after_exit);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
