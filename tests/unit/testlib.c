/*
 * testlib.c: the unit tests' shared helpers (testlib.h).
 */
#include <sys/mman.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

/* A connected pair of loopback TCP sockets, with TCP_NODELAY; or -1. */
int
tcp_pair(int *a, int *b)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int l, one = 1;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	*a = *b = -1;
	if ((l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (bind(l, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    listen(l, 1) == 0 &&
	    getsockname(l, (struct sockaddr *)&sin, &len) == 0 &&
	    (*a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) != -1 &&
	    connect(*a, (struct sockaddr *)&sin, sizeof(sin)) == 0)
		*b = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	close(l);
	if (*b == -1) {
		if (*a != -1)
			close(*a);
		*a = -1;
		return -1;
	}
	setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

void
msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1)
		;
}

/* Anonymous private memory, or the test fails. */
void *
map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	return p;
}

/* A directory of its own, /tmp/NAME.XXXXXX, into dir; the test exits
 * without one. */
void
test_dir_make(char *dir, size_t len, const char *name)
{
	snprintf(dir, len, "/tmp/%s.XXXXXX", name);
	if (mkdtemp(dir) == NULL) {
		perror(name);
		exit(1);
	}
}

/* The directory and all it holds. */
void
test_dir_remove(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

char test_dir[64];
static const char *test_dir_name;

static void
test_dir_up(void)
{
	test_dir_make(test_dir, sizeof(test_dir), test_dir_name);
}

static void
test_dir_down(void)
{
	test_dir_remove(test_dir);
}

/*
 * test_dir, /tmp/NAME.XXXXXX, for the cases of tc: made and removed in the
 * parent around them, so that it goes even when a case fails in its own
 * process.
 */
void
test_dir_fixture(TCase *tc, const char *name)
{
	test_dir_name = name;
	tcase_add_unchecked_fixture(tc, test_dir_up, test_dir_down);
}

/*
 * The i-th port to try from the tests' range: MCCL_TEST_PORTS=LO-HI, which
 * make check gives each part running beside others (tools/ports.sh), else
 * 20000-31999; spread by the process id, so that tests running at once
 * try different ones.
 */
uint16_t
test_port(int i)
{
	const char *range = getenv("MCCL_TEST_PORTS");
	unsigned lo = 20000, hi = 31999;

	if (range != NULL && (sscanf(range, "%u-%u", &lo, &hi) != 2 ||
	    lo >= hi || hi > 65535)) {
		lo = 20000;
		hi = 31999;
	}
	return (uint16_t)(lo + ((unsigned)getpid() * 13 + (unsigned)i * 197) %
	    (hi - lo));
}

/* Run the suite, each case in a process of its own: the exit status. */
int
test_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
