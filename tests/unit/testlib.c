/*
 * testlib.c: the unit tests' shared helpers (testlib.h).
 */
#include <sys/mman.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <check.h>
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
