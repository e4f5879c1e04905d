/*
 * tcp.c: the TCP transport.  A link is the data connection itself: set-up
 * has nothing to add, and data moves by sendmsg and recvmsg straight from
 * and into the engine's buffers.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport.h"

static int tcp_half;	/* nothing to prepare: any half will do */

static void *
tcp_offer(const struct link_want *w, struct peer_data_link *m, char *why,
    size_t len)
{
	(void)w;
	(void)why;
	(void)len;
	memset(m, 0, sizeof(*m));
	m->transport = PEER_LINK_TCP;
	return &tcp_half;
}

static struct link *
tcp_join(void *half, int fd, const struct peer_data_link *peer, char *why,
    size_t len)
{
	struct link *l;

	(void)half;
	(void)peer;
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		snprintf(why, len, "out of memory");
		close(fd);
		return NULL;
	}
	l->tp = &tcp_transport;
	l->fd = fd;
	return l;
}

static void
tcp_drop(void *half)
{
	(void)half;
}

static ssize_t
tcp_send(struct link *l, const struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)(uintptr_t)iov,
	    .msg_iovlen = (size_t)n };

	return sendmsg(l->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static ssize_t
tcp_recv(struct link *l, const struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)(uintptr_t)iov,
	    .msg_iovlen = (size_t)n };

	return recvmsg(l->fd, &msg, MSG_DONTWAIT);
}

static int
tcp_arm(struct link *l, short want, struct pollfd *pfd)
{
	pfd[0] = (struct pollfd){ l->fd, want, 0 };
	return 1;
}

static void
tcp_close(struct link *l)
{
	close(l->fd);
	free(l);
}

const struct transport tcp_transport = {
	.name = "tcp",
	.wire = PEER_LINK_TCP,
	.offer = tcp_offer,
	.join = tcp_join,
	.drop = tcp_drop,
	.send = tcp_send,
	.recv = tcp_recv,
	.arm = tcp_arm,
	.close = tcp_close,
};

/* A link over a connected socket, without set-up (tests, tools). */
struct link *
link_tcp(int fd, uint32_t node)
{
	char why[LINK_WHY_MAX];
	struct link *l;

	if ((l = tcp_join(NULL, fd, NULL, why, sizeof(why))) != NULL)
		l->node = node;
	return l;
}
