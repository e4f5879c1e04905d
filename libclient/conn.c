/*
 * conn.c: client side of the IPC protocol (see conn.h).  Every call has a
 * deadline; every failure leaves a message saying what and why.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <pwd.h>
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
 * MCCL_SOCKET, else the system daemon's socket (mccld.service) when there
 * is one, else the default of a daemon run by this user (see mccld(8)).
 * The system daemon comes first: a directory another user could have made
 * (under /tmp) is the last place to look.
 */
void
conn_socket_path(char *buf, size_t len)
{
	const char *env = getenv("MCCL_SOCKET");

	if (env != NULL && *env != '\0')
		snprintf(buf, len, "%s", env);
	else if (access(PROTO_SYSTEM_SOCKET, F_OK) == 0)
		snprintf(buf, len, "%s", PROTO_SYSTEM_SOCKET);
	else
		proto_default_socket(buf, len);
}

/* Why conn_socket_path chose path, for people (mcclctl, MCCL_DEBUG). */
const char *
conn_socket_origin(const char *path, int given)
{
	const char *env = getenv("MCCL_SOCKET");

	if (given)
		return "given with -s";
	if (env != NULL && *env != '\0')
		return "MCCL_SOCKET";
	if (strcmp(path, PROTO_SYSTEM_SOCKET) == 0)
		return "the system daemon's, looked for first; MCCL_SOCKET "
		    "chooses another";
	return "this user's own daemon's default (no system daemon)";
}

/* Who may run the daemon we hand memory to: root, mccl, or ourselves. */
static size_t
conn_trusted_uids(uid_t *uids)
{
	struct passwd pw, *res = NULL;
	char pwbuf[1024];
	size_t n = 0;

	uids[n++] = 0;
	uids[n++] = geteuid();
	if (getpwnam_r("mccl", &pw, pwbuf, sizeof(pwbuf), &res) == 0 &&
	    res != NULL)
		uids[n++] = res->pw_uid;
	return n;
}

/*
 * Before we connect: the socket's directory must belong to a trusted user
 * and be writable by nobody else, or another user could have put an
 * impostor's socket there.
 */
static int
conn_check_dir(const char *path, char *err, size_t errlen)
{
	uid_t uids[3];
	size_t n = conn_trusted_uids(uids);
	char why[512];

	/* Nothing there: connect says so, naming the socket. */
	if (access(path, F_OK) == -1)
		return 0;
	if (proto_dir_check(path, uids, n, why, sizeof(why)) == -1) {
		snprintf(err, errlen, "refusing the socket %s: %s", path, why);
		return -1;
	}
	return 0;
}

/* Before anything is sent: the process behind the socket is trusted. */
static int
conn_check_peer(int fd, const char *path, char *err, size_t errlen)
{
	uid_t uids[3];
	size_t n = conn_trusted_uids(uids), i;
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		snprintf(err, errlen, "%s: SO_PEERCRED: %s", path,
		    strerror(errno));
		return -1;
	}
	for (i = 0; i < n && uids[i] != cred.uid; i++)
		;
	if (i == n) {
		snprintf(err, errlen, "refusing the daemon at %s: it runs as "
		    "uid %u (pid %d), not as root, mccl or this user (uid %u)",
		    path, (unsigned)cred.uid, (int)cred.pid,
		    (unsigned)geteuid());
		return -1;
	}
	return 0;
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

/*
 * A control reply's document, joined from its pieces (protocol 8), in
 * *doc (NUL-terminated, malloc'd: the caller frees it) and *len; m holds
 * the last record.  A record that is not a reply (an IPC_ERROR) before
 * any piece: MCCL_SUCCESS with *doc NULL, the record in m for the caller.
 */
int
conn_recv_doc(int fd, int timeout_ms, struct ipc_msg *m, char **doc,
    size_t *len, char *err, size_t errlen)
{
	char *buf = NULL, *grown;
	size_t n = 0;
	int rc;

	*doc = NULL;
	*len = 0;
	while ((rc = conn_recv(fd, timeout_ms, m, err, errlen)) ==
	    MCCL_SUCCESS) {
		if (m->hdr.type != IPC_CTL_REPLY) {
			if (buf != NULL) {
				snprintf(err, errlen, "the daemon sent %s in "
				    "the middle of a reply", m->type->name);
				rc = MCCL_ERR_PROTOCOL;
			}
			break;
		}
		if (n + m->trailer_len > CTL_DOC_MAX) {
			snprintf(err, errlen, "the daemon's reply goes past "
			    "%u bytes", CTL_DOC_MAX);
			rc = MCCL_ERR_PROTOCOL;
			break;
		}
		if ((grown = realloc(buf, n + m->trailer_len + 1)) == NULL) {
			snprintf(err, errlen, "out of memory");
			rc = MCCL_ERR_NO_MEMORY;
			break;
		}
		buf = grown;
		memcpy(buf + n, m->trailer, m->trailer_len);
		n += m->trailer_len;
		buf[n] = '\0';
		if (!m->u.ctl_reply.more) {
			*doc = buf;
			*len = n;
			return MCCL_SUCCESS;
		}
	}
	free(buf);
	return rc;
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
 * The daemon's answer to HELLO.  A daemon that refuses a connection (a
 * limit, shutting down) sends the reason and closes: read it even when
 * our HELLO found the socket closed.  offer_memory: let the daemon try to
 * read ours (ipc_hello.probe_addr), at a word that differs from one
 * process and call to the next.
 */
static int
conn_hello(int fd, const char *path, int timeout_ms, int offer_memory,
    struct ipc_hello_ok *ok, struct ipc_msg *m, char *err, size_t errlen)
{
	struct ipc_hello hello = { IPC_VERSION, (uint32_t)getpid(), 0, 0 };
	volatile uint64_t probe = ((uint64_t)getpid() << 32) ^
	    (uint64_t)(uintptr_t)&hello ^ (uint64_t)time(NULL) ^ 0x6d63636cU;
	int rc;

	if (offer_memory) {
		hello.probe_addr = (uint64_t)(uintptr_t)&probe;
		hello.probe_val = probe;
	}
	rc = conn_send(fd, IPC_HELLO, &hello, NULL, 0, -1, err, errlen);
	if (rc == MCCL_SUCCESS || rc == MCCL_ERR_CONNECT) {
		int sent = rc;

		rc = conn_recv(fd, sent == MCCL_SUCCESS ? timeout_ms : 0, m,
		    err, errlen);
		if (rc != MCCL_SUCCESS && sent != MCCL_SUCCESS)
			rc = sent;
	}
	if (rc == MCCL_SUCCESS && m->hdr.type == IPC_ERROR) {
		snprintf(err, errlen, "daemon at %s refused the connection: "
		    "%.*s", path, (int)m->trailer_len, m->trailer);
		rc = m->u.error.code > MCCL_SUCCESS &&
		    m->u.error.code <= MCCL_ERR_INTERNAL ?
		    (int)m->u.error.code : MCCL_ERR_CONNECT;
	} else if (rc == MCCL_SUCCESS && m->hdr.type != IPC_HELLO_OK) {
		snprintf(err, errlen, "daemon at %s answered HELLO with %s",
		    path, m->type->name);
		rc = MCCL_ERR_PROTOCOL;
	} else if (rc == MCCL_SUCCESS)
		*ok = m->u.hello_ok;
	return rc;
}

/*
 * Connect, check who answers, and say hello.  Returns the socket, or -1
 * with the reason in err and its mccl_result_t in *code (when not NULL):
 * the daemon is absent, not trusted, refused us, or spoke another protocol.
 */
int
conn_open(const char *path, int timeout_ms, int offer_memory,
    struct ipc_hello_ok *ok, int *code, char *err, size_t errlen)
{
	struct ipc_msg *m = NULL;
	int fd = -1, rc;

	if (conn_check_dir(path, err, errlen) == -1)
		rc = MCCL_ERR_PERMISSION;
	else if ((fd = conn_connect(path, err, errlen)) == -1)
		rc = MCCL_ERR_CONNECT;
	else if (conn_check_peer(fd, path, err, errlen) == -1)
		rc = MCCL_ERR_PERMISSION;
	else if ((m = malloc(sizeof(*m))) == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = MCCL_ERR_NO_MEMORY;
	} else
		rc = conn_hello(fd, path, timeout_ms, offer_memory, ok, m, err,
		    errlen);
	free(m);
	if (rc == MCCL_SUCCESS)
		return fd;
	if (fd != -1)
		close(fd);
	if (code != NULL)
		*code = rc;
	return -1;
}
