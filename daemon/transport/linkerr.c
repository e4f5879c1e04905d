/*
 * linkerr.c: a failed link in words, whatever its transport.  Apart from
 * link.c so that the algorithms' tests link it without the daemon.
 */
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "transport.h"

/*
 * A link's failure in words, after "link to node X ": err is the errno of
 * the failed call, 0 when the peer closed the link.
 */
const char *
link_strerror(const struct link *l, int err, char *buf, size_t len)
{
	char e[128];

	if (err == 0)
		snprintf(buf, len, "closed (peer failed or left the job)");
	else if (err == ECONNRESET || err == EPIPE)
		snprintf(buf, len, "reset (peer failed or left the job)");
	else if (err == EIO && l != NULL && l->why[0] != '\0')
		snprintf(buf, len, "failed: %s", l->why);
	else
		snprintf(buf, len, "failed: %s", strerror_r(err, e, sizeof(e)));
	return buf;
}

/*
 * After poll(2) on what link_arm armed: whether any of the n pollfds can
 * move.  What a peer sent before it hung up is taken before its hang-up
 * is believed, so the callers look at link_polled_hangup only when not.
 */
int
link_polled_ready(const struct pollfd *pfd, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pfd[i].revents & (POLLIN | POLLOUT))
			return 1;
	return 0;
}

/* Whether a pollfd link_arm armed for the peer's hang-up reports one. */
int
link_polled_hangup(const struct pollfd *pfd)
{
	return (pfd->events & POLLRDHUP) &&
	    (pfd->revents & (POLLERR | POLLHUP | POLLRDHUP));
}

/* The errno a hung-up link's connection reports; 0: closed. */
int
link_hangup_errno(const struct link *l)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
		err = errno;
	return err;
}
