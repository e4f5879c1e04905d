/*
 * conn.c: client side of the IPC protocol (see conn.h).  Every call has a
 * deadline; every failure leaves a message saying what and why.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mccl.h"
#include "conn.h"

uint64_t
conn_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * MCCL_SOCKET, else the daemon's default for this user (see mccld(8)),
 * else the system daemon's socket.
 */
void
conn_socket_path(char *buf, size_t len)
{
	const char *env = getenv("MCCL_SOCKET");

	if (env != NULL && *env != '\0') {
		snprintf(buf, len, "%s", env);
		return;
	}
	proto_default_socket(buf, len);
	/* No daemon of this user's own: the system's (mccld.service). */
	if (access(buf, F_OK) == -1 && access(PROTO_SYSTEM_SOCKET, F_OK) == 0)
		snprintf(buf, len, "%s", PROTO_SYSTEM_SOCKET);
}

/* Wait until fd is ready for events, at most timeout_ms (< 0: forever). */
static int
conn_poll(int fd, short events, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int n;

	do
		n = poll(&pfd, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	return n;
}

int
conn_send(int fd, uint16_t type, const void *msg, const void *trailer,
    size_t trailer_len, int pass_fd, char *err, size_t errlen)
{
	uint8_t buf[IPC_MSG_MAX];
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	} cmsg;
	struct iovec iov;
	struct msghdr mh;
	size_t len;

	if ((len = wire_encode(&ipc_proto, type, msg, trailer, trailer_len,
	    buf, sizeof(buf))) == 0) {
		snprintf(err, errlen, "cannot encode IPC message %u", type);
		return MCCL_ERR_INTERNAL;
	}
	iov.iov_base = buf;
	iov.iov_len = len;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (pass_fd >= 0) {
		memset(&cmsg, 0, sizeof(cmsg));
		mh.msg_control = cmsg.buf;
		mh.msg_controllen = sizeof(cmsg.buf);
		cmsg.hdr.cmsg_level = SOL_SOCKET;
		cmsg.hdr.cmsg_type = SCM_RIGHTS;
		cmsg.hdr.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&cmsg.hdr), &pass_fd, sizeof(int));
	}
	while (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0) {
		if (errno == EINTR)
			continue;
		snprintf(err, errlen, "send to daemon: %s", strerror(errno));
		return errno == EPIPE || errno == ECONNRESET ?
		    MCCL_ERR_CONNECT : MCCL_ERR_INTERNAL;
	}
	return MCCL_SUCCESS;
}

static int
conn_decode(struct ipc_msg *m, size_t n, char *err, size_t errlen)
{
	if (n < WIRE_HDR_LEN) {
		snprintf(err, errlen, "daemon sent a %zu-byte record", n);
		return MCCL_ERR_PROTOCOL;
	}
	if (wire_hdr_check(&ipc_proto, m->buf, &m->hdr, &m->type, err,
	    errlen) == -1)
		return MCCL_ERR_PROTOCOL;
	if (m->hdr.len != n - WIRE_HDR_LEN) {
		snprintf(err, errlen, "daemon sent %s with length %u in a "
		    "%zu-byte record", m->type->name, m->hdr.len, n);
		return MCCL_ERR_PROTOCOL;
	}
	m->len = n;
	/* Only replies fit m->u: anything else is not for a client. */
	if (m->type->host_size > sizeof(m->u)) {
		snprintf(err, errlen, "daemon sent %s, which is not a reply",
		    m->type->name);
		return MCCL_ERR_PROTOCOL;
	}
	if (wire_decode(m->type, m->buf + WIRE_HDR_LEN, m->hdr.len, &m->u,
	    &m->trailer, &m->trailer_len, err, errlen) == -1)
		return MCCL_ERR_PROTOCOL;
	return MCCL_SUCCESS;
}

/*
 * Receive one record, waiting at most timeout_ms (0: don't wait, < 0:
 * forever).  Returns MCCL_SUCCESS, MCCL_ERR_TIMEOUT if nothing came, or
 * an error.
 */
int
conn_recv(int fd, int timeout_ms, struct ipc_msg *m, char *err, size_t errlen)
{
	ssize_t n;
	int ready;

	if ((ready = conn_poll(fd, POLLIN, timeout_ms)) < 0) {
		snprintf(err, errlen, "poll: %s", strerror(errno));
		return MCCL_ERR_INTERNAL;
	}
	if (ready == 0) {
		snprintf(err, errlen, "no answer from the daemon within %d ms",
		    timeout_ms);
		return MCCL_ERR_TIMEOUT;
	}
	do
		n = recv(fd, m->buf, sizeof(m->buf), MSG_DONTWAIT | MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN) {
		snprintf(err, errlen, "no answer from the daemon yet");
		return MCCL_ERR_TIMEOUT;
	}
	if (n <= 0) {
		snprintf(err, errlen, "the daemon closed the connection%s%s",
		    n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
		return MCCL_ERR_CONNECT;
	}
	if ((size_t)n > sizeof(m->buf)) {
		snprintf(err, errlen, "daemon sent a %zd-byte record, the "
		    "limit is %zu", n, sizeof(m->buf));
		return MCCL_ERR_PROTOCOL;
	}
	return conn_decode(m, (size_t)n, err, errlen);
}

static int
conn_connect(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "socket path %s is too long", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		snprintf(err, errlen, "cannot connect to mccld at %s: %s "
		    "(is the daemon running? set MCCL_SOCKET to its socket)",
		    path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Connect and say hello.  Returns the socket, or -1 with the reason in err
 * (the daemon is absent, refused us, or spoke another protocol).
 */
int
conn_open(const char *path, int timeout_ms, struct ipc_hello_ok *ok,
    char *err, size_t errlen)
{
	struct ipc_hello hello = { IPC_VERSION, (uint32_t)getpid() };
	struct ipc_msg *m;
	int fd, rc;

	if ((fd = conn_connect(path, err, errlen)) == -1)
		return -1;
	if ((m = malloc(sizeof(*m))) == NULL) {
		snprintf(err, errlen, "out of memory");
		close(fd);
		return -1;
	}
	rc = conn_send(fd, IPC_HELLO, &hello, NULL, 0, -1, err, errlen);
	if (rc == MCCL_SUCCESS)
		rc = conn_recv(fd, timeout_ms, m, err, errlen);
	if (rc == MCCL_SUCCESS && m->hdr.type == IPC_ERROR) {
		snprintf(err, errlen, "daemon at %s refused the connection: "
		    "%.*s", path, (int)m->trailer_len, m->trailer);
		rc = MCCL_ERR_CONNECT;
	} else if (rc == MCCL_SUCCESS && m->hdr.type != IPC_HELLO_OK) {
		snprintf(err, errlen, "daemon at %s answered HELLO with %s",
		    path, m->type->name);
		rc = MCCL_ERR_PROTOCOL;
	} else if (rc == MCCL_SUCCESS)
		*ok = m->u.hello_ok;
	free(m);
	if (rc != MCCL_SUCCESS) {
		close(fd);
		return -1;
	}
	return fd;
}
