/*
 * dial.c: the TCP connection under every data link, and the small frames
 * of a connection's first moments, for any thread.  A job's engine thread
 * dials the nodes after it (dial_data_link: connect, authenticate, say
 * DATA_HELLO) and swaps the links' set-up frames (dial_frame_send,
 * dial_frame_read); the main thread's peer.c uses the same frames, address
 * resolution and socket options for the control connections.  Every wait
 * has the caller's deadline and gives up as soon as the job's abort_fd is
 * readable.
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "transport/transport.h"

#define FRAME_MAX	256	/* bytes of a set-up frame's body */

int
dial_resolve(const struct conf_addr *a, int passive,
    struct sockaddr_storage *ss, socklen_t *len, char *err, size_t errlen)
{
	struct addrinfo hints, *res;
	char port[8];
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = passive ? AI_PASSIVE : 0;
	snprintf(port, sizeof(port), "%u", a->port);
	if ((rc = getaddrinfo(a->host, port, &hints, &res)) != 0) {
		snprintf(err, errlen, "%s:%u: %s", a->host, a->port,
		    gai_strerror(rc));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

void
dial_tune(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* The data links' congestion control, "" for the system's: set at start. */
static char data_cc[16];

void
dial_set_data_cc(const char *cc)
{
	wire_strlcpy(data_cc, cc, sizeof(data_cc));
}

/*
 * A data link also takes the configured congestion control, if any.  It
 * was tried at start, so a failure means the host changed since: said
 * once, and the link goes on with the system's.
 */
void
dial_tune_data(int fd)
{
	static int warned;
	const char *cc = data_cc;

	dial_tune(fd);
	if (*cc != '\0' && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc,
	    strlen(cc)) == -1 && !__atomic_exchange_n(&warned, 1,
	    __ATOMIC_RELAXED))
		log_warn("data links: tcp_congestion \"%s\", tried at start, "
		    "now fails; they keep the system's", cc);
}

/* Send a small frame on a fresh socket; it fits the empty send buffer. */
int
dial_frame_send(int fd, uint16_t type, const void *msg)
{
	uint8_t buf[WIRE_HDR_LEN + FRAME_MAX];
	size_t len;

	len = wire_encode(&peer_proto, type, msg, NULL, 0, buf, sizeof(buf));
	return len > 0 && send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len ?
	    0 : -1;
}

/*
 * Wait until fd is ready for events, at most until deadline_ns, and only
 * while abort_fd (the job's) stays quiet: a thread setting up a job's
 * links must give up at once when the job is aborted or torn down.
 */
static int
wait_ready(int fd, short events, int abort_fd, uint64_t deadline_ns,
    char *err, size_t errlen)
{
	struct pollfd pfd[2] = { { fd, events, 0 }, { abort_fd, POLLIN, 0 } };
	uint64_t now;
	int n;

	for (;;) {
		if ((now = now_ns()) >= deadline_ns) {
			snprintf(err, errlen, "timed out (connect_timeout_ms)");
			return -1;
		}
		n = poll(pfd, abort_fd == -1 ? 1 : 2,
		    (int)((deadline_ns - now) / 1000000) + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "poll: %s", strerror(errno));
			return -1;
		}
		if (abort_fd != -1 && pfd[1].revents != 0) {
			snprintf(err, errlen, "the job was aborted");
			return -1;
		}
		if (pfd[0].revents != 0)
			return 0;
	}
}

static int
await_connected(int fd, int abort_fd, uint64_t deadline_ns, char *err,
    size_t errlen)
{
	socklen_t len = sizeof(int);
	int soerr = 0;

	if (wait_ready(fd, POLLOUT, abort_fd, deadline_ns, err, errlen) == -1)
		return -1;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == -1 ||
	    soerr != 0) {
		snprintf(err, errlen, "connect: %s", strerror(soerr ? soerr :
		    errno));
		return -1;
	}
	return 0;
}

/* Read exactly len bytes by deadline_ns; `when` says what it was in. */
static int
read_exact(int fd, int abort_fd, uint8_t *buf, size_t len,
    uint64_t deadline_ns, const char *when, char *err, size_t errlen)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		if (wait_ready(fd, POLLIN, abort_fd, deadline_ns, err,
		    errlen) == -1)
			return -1;
		if ((n = recv(fd, buf + got, len - got, MSG_DONTWAIT)) == 0 ||
		    (n < 0 && errno != EAGAIN && errno != EINTR)) {
			snprintf(err, errlen, "it closed the connection %s%s%s",
			    when, n < 0 ? ": " : "", n < 0 ? strerror(errno) :
			    "");
			return -1;
		}
		got += n > 0 ? (size_t)n : 0;
	}
	return 0;
}

/* The connector's side of authentication (auth.c), by the deadline. */
static int
data_auth(int fd, uint32_t me, uint32_t peer, int abort_fd,
    uint64_t deadline_ns, char *err, size_t errlen)
{
	const struct wire_type *t = NULL;
	struct peer_auth_hello ah = { me, { 0 } };
	struct peer_auth_challenge c;
	struct peer_auth_response r;
	uint8_t buf[WIRE_HDR_LEN + sizeof(c)];
	size_t want = WIRE_HDR_LEN + 4 + 2 * AUTH_NONCE_LEN;
	struct wire_hdr h;

	auth_nonce(ah.nonce);
	if (dial_frame_send(fd, PEER_AUTH_HELLO, &ah) == -1) {
		snprintf(err, errlen, "sending AUTH_HELLO: %s", strerror(errno));
		return -1;
	}
	if (read_exact(fd, abort_fd, buf, want, deadline_ns, "before "
	    "authenticating (peer port full, or not our cluster key?)", err,
	    errlen) == -1 ||
	    wire_hdr_check(&peer_proto, buf, &h, &t, err, errlen) == -1)
		return -1;
	if (h.type != PEER_AUTH_CHALLENGE || wire_decode(t, buf + WIRE_HDR_LEN,
	    h.len, &c, NULL, NULL, err, errlen) == -1) {
		snprintf(err, errlen, "it answered AUTH_HELLO with %s", t->name);
		return -1;
	}
	if (c.node != peer || auth_check(c.mac, 'A', ah.nonce, c.nonce,
	    peer) == -1) {
		snprintf(err, errlen, "it failed authentication (not our "
		    "cluster key)");
		return -1;
	}
	auth_mac(r.mac, 'C', c.nonce, ah.nonce, me);
	return dial_frame_send(fd, PEER_AUTH_RESPONSE, &r);
}

/*
 * Open a data link (stream) of job job_id from cluster node `me` to node
 * `peer` at `to`, authenticate, send DATA_HELLO, all by deadline_ns and
 * given up as soon as abort_fd is readable.  Returns a connected
 * non-blocking socket, or -1 with err set.
 */
int
dial_data_link(const struct conf_addr *to, uint32_t me, uint32_t peer,
    uint64_t job_id, uint32_t stream, int abort_fd, uint64_t deadline_ns,
    char *err, size_t errlen)
{
	struct peer_data_hello dh = { job_id, me, stream };
	struct sockaddr_storage ss;
	socklen_t sslen;
	int fd;

	if (dial_resolve(to, 0, &ss, &sslen, err, errlen) == -1)
		return -1;
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&ss, sslen) == -1 &&
	    errno != EINPROGRESS) {
		snprintf(err, errlen, "connect: %s", strerror(errno));
		close(fd);
		return -1;
	}
	dial_tune_data(fd);
	if (await_connected(fd, abort_fd, deadline_ns, err, errlen) == -1 ||
	    data_auth(fd, me, peer, abort_fd, deadline_ns, err, errlen) == -1) {
		close(fd);
		return -1;
	}
	if (dial_frame_send(fd, PEER_DATA_HELLO, &dh) == -1) {
		snprintf(err, errlen, "sending DATA_HELLO: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Read the link's next frame, which must be `type`, by deadline_ns. */
int
dial_frame_read(int fd, uint16_t type, void *msg, int abort_fd,
    uint64_t deadline_ns, char *err, size_t errlen)
{
	const struct wire_type *t = wire_type_lookup(&peer_proto, type), *got;
	uint8_t buf[WIRE_HDR_LEN + FRAME_MAX];
	const char *when = "during the link's set-up";
	struct wire_hdr h;
	size_t fixed = wire_fixed_len(t);

	if (read_exact(fd, abort_fd, buf, WIRE_HDR_LEN, deadline_ns, when, err,
	    errlen) == -1 || wire_hdr_check(&peer_proto, buf, &h, &got, err,
	    errlen) == -1)
		return -1;
	if (h.type != type || h.len != fixed) {
		snprintf(err, errlen, "it sent %s where %s was due", got->name,
		    t->name);
		return -1;
	}
	return read_exact(fd, abort_fd, buf + WIRE_HDR_LEN, fixed, deadline_ns,
	    when, err, errlen) == -1 || (fixed > 0 && wire_decode(t, buf +
	    WIRE_HDR_LEN, fixed, msg, NULL, NULL, err, errlen) == -1) ? -1 : 0;
}
