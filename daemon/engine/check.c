/*
 * check.c: "mcclctl check" over the data path.  A measurement dials the
 * peer's data port like a job's engine does (authenticated, DATA_HELLO
 * with a job id no job has, the transport agreed as for a job: TCP or
 * RDMA), on as many links as a job has lanes, then on those links:
 *
 *   16 round trips of a 24-byte command on the first link (the median);
 *   PUSH: every link streams records to the peer for ms, the peer counts
 *         them and says how many bytes in how long;
 *   PULL: the peer streams to us for ms, and we count.
 *
 * Each phase runs on all links at once, a thread per link, and ends on
 * all before the next starts, so the directions are measured apart.  The
 * peer serves each link on a thread of its own (check_serve).  Everything
 * waits with a deadline and gives up when aborted.
 */
#include <sys/eventfd.h>

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/check.h"
#include "transport/transport.h"

#define RECORD_BYTES	(256 * 1024)	/* payload of one streamed record */
#define PINGS		16
#define IDLE_MS		10000	/* a served link waits this long per command */
#define SLACK_MS	5000	/* past a phase's own length */
#define SERVERS_MAX	64	/* links served at once */

enum { CK_PING = 1, CK_PUSH, CK_PULL, CK_RESULT,
	CK_BUSY };	/* the answer of a node that runs jobs: a = how many */

/* A command or an answer on a check link: 24 bytes, big-endian. */
struct ck_msg {
	uint32_t	 cmd;
	uint64_t	 a, b;	/* PULL: a = ms; RESULT: a = bytes, b = ns */
};

/* ---- blocking I/O on a link, by a deadline ---- */

struct io {
	struct link	*link;
	int		 abort_fd;
	uint64_t	 deadline_ns;
	char		*err;
	size_t		 errlen;
};

/*
 * The peer hung up, seen on a pollfd armed for it alone (a transport whose
 * data arrives apart from its connection: its calls would only say EAGAIN
 * until the deadline): -1 with err set; else 0.
 */
static int
io_hung_up(const struct io *io, const struct pollfd *pfd, int n)
{
	char why[LINK_WHY_MAX + 32];
	int hup = 0;

	if (link_polled_ready(pfd, (size_t)n))
		return 0;
	for (int i = 0; i < n; i++)
		hup |= link_polled_hangup(&pfd[i]);
	if (!hup)
		return 0;
	snprintf(io->err, io->errlen, "the link to node %u %s", io->link->node,
	    link_strerror(io->link, link_hangup_errno(io->link), why,
	    sizeof(why)));
	return -1;
}

/* Sleep until the link can move the way asked: 0, or -1 with err set. */
static int
io_wait(const struct io *io, short want)
{
	struct pollfd pfd[3];
	uint64_t now = now_ns();
	int n;

	if ((n = link_arm(io->link, want, pfd)) == 0)
		return 0;
	if (now >= io->deadline_ns) {
		snprintf(io->err, io->errlen, "timeout: the link to node %u did "
		    "not move", io->link->node);
		return -1;
	}
	pfd[n++] = (struct pollfd){ io->abort_fd, POLLIN, 0 };
	if (poll(pfd, (nfds_t)n, (int)((io->deadline_ns - now) / 1000000 +
	    1)) == -1 && errno != EINTR) {
		snprintf(io->err, io->errlen, "poll: %s", strerror(errno));
		return -1;
	}
	if (pfd[n - 1].revents != 0) {
		snprintf(io->err, io->errlen, "aborted");
		return -1;
	}
	return io_hung_up(io, pfd, n - 1);
}

/* Move all len bytes of buf, sending or receiving. */
static int
io_full(const struct io *io, void *buf, size_t len, int sending)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		struct iovec iov = { (char *)buf + done, len - done };

		n = sending ? link_send(io->link, &iov, 1) :
		    link_recv(io->link, &iov, 1);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0) {
			snprintf(io->err, io->errlen, "node %u closed the link",
			    io->link->node);
			return -1;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			snprintf(io->err, io->errlen, "%s", io->link->why[0] ?
			    io->link->why : strerror(errno));
			return -1;
		}
		if (io_wait(io, sending ? POLLOUT : POLLIN) == -1)
			return -1;
	}
	return 0;
}

static int
msg_send(const struct io *io, uint32_t cmd, uint64_t a, uint64_t b)
{
	uint8_t buf[24];
	uint32_t c = htobe32(cmd);
	uint64_t ba = htobe64(a), bb = htobe64(b);

	memcpy(buf, &c, 4);
	memset(buf + 4, 0, 4);
	memcpy(buf + 8, &ba, 8);
	memcpy(buf + 16, &bb, 8);
	return io_full(io, buf, sizeof(buf), 1);
}

static int
msg_recv(const struct io *io, struct ck_msg *m)
{
	uint8_t buf[24];
	uint32_t c;

	if (io_full(io, buf, sizeof(buf), 0) == -1)
		return -1;
	memcpy(&c, buf, 4);
	memcpy(&m->a, buf + 8, 8);
	memcpy(&m->b, buf + 16, 8);
	m->cmd = be32toh(c);
	m->a = be64toh(m->a);
	m->b = be64toh(m->b);
	return 0;
}

/* Records of RECORD_BYTES for ms, then the empty record that ends them. */
static int
stream_out(const struct io *io, uint8_t *payload, uint64_t ms)
{
	uint64_t until = ms_from_now(ms), len = htobe64(RECORD_BYTES), end = 0;

	while (now_ns() < until)
		if (io_full(io, &len, 8, 1) == -1 ||
		    io_full(io, payload, RECORD_BYTES, 1) == -1)
			return -1;
	return io_full(io, &end, 8, 1);
}

/* Records until the empty one: their bytes, and first byte to end. */
static int
stream_in(const struct io *io, uint8_t *payload, uint64_t *bytes,
    uint64_t *ns)
{
	uint64_t len, t0 = 0;

	*bytes = 0;
	for (;;) {
		if (io_full(io, &len, 8, 0) == -1)
			return -1;
		if (t0 == 0)
			t0 = now_ns();
		if ((len = be64toh(len)) == 0)
			break;
		if (len > RECORD_BYTES) {
			snprintf(io->err, io->errlen, "a record of %llu bytes: "
			    "not a check link", (unsigned long long)len);
			return -1;
		}
		if (io_full(io, payload, len, 0) == -1)
			return -1;
		*bytes += len;
	}
	*ns = now_ns() - t0;
	return 0;
}

/* ---- measuring ---- */

struct lane_run {
	struct check_measure	*m;
	struct link		*link;
	uint8_t			*payload;
	int			 push;		/* this phase: PUSH or PULL */
	uint64_t		 bytes, ns;
	int			 failed;
	char			 err[ERR_MAX];
	pthread_t		 thread;
};

static void *
lane_main(void *arg)
{
	struct lane_run *r = arg;
	struct io io = { r->link, r->m->abort_fd, ms_from_now(r->m->ms +
	    SLACK_MS), r->err, sizeof(r->err) };
	struct ck_msg res = { 0, 0, 0 };

	if (r->push)
		r->failed = msg_send(&io, CK_PUSH, 0, 0) == -1 ||
		    stream_out(&io, r->payload, r->m->ms) == -1 ||
		    msg_recv(&io, &res) == -1;
	else
		r->failed = msg_send(&io, CK_PULL, r->m->ms, 0) == -1 ||
		    stream_in(&io, r->payload, &r->bytes, &r->ns) == -1;
	if (r->push && !r->failed) {
		if (res.cmd != CK_RESULT) {
			snprintf(r->err, sizeof(r->err), "answer %u to PUSH",
			    res.cmd);
			r->failed = 1;
		}
		r->bytes = res.a;
		r->ns = res.b;
	}
	return NULL;
}

/* One phase on every lane at once: the bytes, and the slowest lane's time. */
static int
phase(struct check_measure *m, struct lane_run *runs, int push,
    uint64_t *bytes, uint64_t *ns)
{
	uint32_t started = 0, k;
	int rc = 0;

	*bytes = *ns = 0;
	for (k = 0; k < m->lanes; k++, started++) {
		runs[k].push = push;
		runs[k].failed = 0;
		if ((errno = pthread_create(&runs[k].thread, NULL, lane_main,
		    &runs[k])) != 0) {
			snprintf(m->err, sizeof(m->err), "cannot start a "
			    "thread: %s", strerror(errno));
			rc = -1;
			break;
		}
	}
	for (k = 0; k < started; k++) {
		pthread_join(runs[k].thread, NULL);
		if (runs[k].failed && rc == 0) {
			snprintf(m->err, sizeof(m->err), "%s, link %u: %s",
			    push ? "sending" : "receiving", k, runs[k].err);
			rc = -1;
		}
		*bytes += runs[k].bytes;
		if (runs[k].ns > *ns)
			*ns = runs[k].ns;
	}
	return rc;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
round_trips(struct check_measure *m, struct link *l)
{
	struct io io = { l, m->abort_fd, ms_from_now(SLACK_MS), m->err,
	    sizeof(m->err) };
	uint64_t t[PINGS];
	struct ck_msg echo;

	for (int i = 0; i < PINGS; i++) {
		t[i] = now_ns();
		if (msg_send(&io, CK_PING, (uint64_t)i, 0) == -1 ||
		    msg_recv(&io, &echo) == -1)
			return -1;
		t[i] = now_ns() - t[i];
		if (echo.cmd == CK_BUSY) {
			m->code = MCCL_ERR_PERMISSION;
			snprintf(m->err, sizeof(m->err), "node %s runs %llu "
			    "job%s: not measured (mcclctl check --force "
			    "measures anyway)", m->peer.name,
			    (unsigned long long)echo.a, echo.a == 1 ? "" : "s");
			return -1;
		}
		if (echo.cmd != CK_PING || echo.a != (uint64_t)i) {
			snprintf(m->err, sizeof(m->err), "a wrong echo");
			return -1;
		}
	}
	qsort(t, PINGS, sizeof(t[0]), cmp_u64);
	m->rtt_ns = t[PINGS / 2];
	return 0;
}

/* A link's set-up to or from the peer: its strings are the peer's. */
static struct link_setup
peer_setup(const struct check_peer *p, int fd)
{
	return (struct link_setup){ .fd = fd, .node = p->node, .want = {
	    p->me, p->name, p->rdma_dev, p->choice } };
}

static int
measure(struct check_measure *m, struct lane_run *runs)
{
	uint64_t deadline = ms_from_now(m->peer.connect_timeout_ms);
	char why[ERR_MAX] = "";

	for (uint32_t k = 0; k < m->lanes; k++) {
		struct link_setup s = peer_setup(&m->peer, -1);

		if ((s.fd = dial_data_link(&m->peer.addr, m->peer.me_index,
		    m->peer.node, m->link_id, k, m->abort_fd, deadline, why,
		    sizeof(why))) == -1 ||
		    (runs[k].link = link_make(&s, m->abort_fd, ms_from_now(
		    m->peer.connect_timeout_ms), why, sizeof(why))) == NULL) {
			m->code = MCCL_ERR_CONNECT;
			snprintf(m->err, sizeof(m->err), "data link %u: %s", k,
			    why);
			return -1;
		}
	}
	m->code = MCCL_ERR_PEER_FAILED;
	if (round_trips(m, runs[0].link) == -1 ||
	    phase(m, runs, 1, &m->tx_bytes, &m->tx_ns) == -1 ||
	    phase(m, runs, 0, &m->rx_bytes, &m->rx_ns) == -1)
		return -1;
	m->code = 0;
	return 0;
}

static void *
measure_main(void *arg)
{
	struct check_measure *m = arg;
	struct lane_run *runs;
	uint64_t one = 1;

	if ((runs = calloc(m->lanes, sizeof(*runs))) == NULL) {
		m->code = MCCL_ERR_NO_MEMORY;
		snprintf(m->err, sizeof(m->err), "out of memory");
	} else {
		for (uint32_t k = 0; k < m->lanes; k++) {
			runs[k].m = m;
			if ((runs[k].payload = calloc(1, RECORD_BYTES)) == NULL)
				m->code = MCCL_ERR_NO_MEMORY;
		}
		if (m->code != 0)
			snprintf(m->err, sizeof(m->err), "out of memory");
		else
			measure(m, runs);
		for (uint32_t k = 0; k < m->lanes; k++) {
			link_close(runs[k].link);
			free(runs[k].payload);
		}
		free(runs);
	}
	if (write(m->done_fd, &one, sizeof(one)) == -1)
		log_warn("check: telling the main thread");
	return NULL;
}

int
check_measure_start(struct check_measure *m, char *err, size_t errlen)
{
	m->code = 0;
	m->err[0] = '\0';
	if ((m->abort_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) == -1) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		return -1;
	}
	if ((errno = pthread_create(&m->thread, NULL, measure_main, m)) != 0) {
		snprintf(err, errlen, "cannot start a thread: %s",
		    strerror(errno));
		close(m->abort_fd);
		return -1;
	}
	return 0;
}

/* Give up (if it still runs) and wait for its thread: it ends at once. */
void
check_measure_end(struct check_measure *m)
{
	uint64_t one = 1;

	if (write(m->abort_fd, &one, sizeof(one)) == -1)
		log_warn("check: aborting a measurement");
	pthread_join(m->thread, NULL);
	close(m->abort_fd);
}

/* ---- serving the links another node measures over ---- */

struct server {
	struct check_peer	 peer;		/* the setup's strings */
	struct link_setup	 setup;
	pthread_t		 thread;
	uint32_t		 busy;		/* jobs here: answer CK_BUSY */
	int			 done;		/* under servers_mtx */
};

static pthread_mutex_t servers_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct server *servers[SERVERS_MAX];
static int servers_quit_fd = -1;	/* readable: every server stops */

/* Answer commands until the peer closes the link, is idle, or we quit. */
static void
serve(struct link *l, uint32_t busy, uint8_t *payload, char *err,
    size_t errlen)
{
	struct io io = { l, servers_quit_fd, 0, err, errlen };
	struct ck_msg m;
	uint64_t bytes, ns;

	for (;;) {
		io.deadline_ns = ms_from_now(IDLE_MS);
		if (msg_recv(&io, &m) == -1)
			return;
		io.deadline_ns = ms_from_now(PEER_CHECK_MS_MAX + SLACK_MS);
		if (busy > 0) {		/* no traffic beside our jobs */
			msg_send(&io, CK_BUSY, busy, 0);
			return;
		}
		switch (m.cmd) {
		case CK_PING:
			if (msg_send(&io, CK_PING, m.a, 0) == -1)
				return;
			break;
		case CK_PUSH:
			if (stream_in(&io, payload, &bytes, &ns) == -1 ||
			    msg_send(&io, CK_RESULT, bytes, ns) == -1)
				return;
			break;
		case CK_PULL:
			if (stream_out(&io, payload, m.a < PEER_CHECK_MS_MAX ?
			    m.a : PEER_CHECK_MS_MAX) == -1)
				return;
			break;
		default:
			snprintf(err, errlen, "unknown command %u", m.cmd);
			return;
		}
	}
}

static void *
server_main(void *arg)
{
	struct server *s = arg;
	char err[ERR_MAX] = "";
	uint8_t *payload = malloc(RECORD_BYTES);
	struct link *l;

	if (payload == NULL)
		link_setup_drop(&s->setup);
	else if ((l = link_make(&s->setup, servers_quit_fd, ms_from_now(
	    s->peer.connect_timeout_ms), err, sizeof(err))) != NULL) {
		memset(payload, 0, RECORD_BYTES);
		serve(l, s->busy, payload, err, sizeof(err));
		link_close(l);
	}
	if (err[0] != '\0' && strcmp(err, "aborted") != 0)
		log_debug("check: a link from node %s ends: %s", s->peer.name,
		    err);
	free(payload);
	pthread_mutex_lock(&servers_mtx);
	s->done = 1;
	pthread_mutex_unlock(&servers_mtx);
	return NULL;
}

/* Join servers that have ended; called with servers_mtx held. */
static int
servers_reap(void)
{
	int free_slot = -1;

	for (int i = 0; i < SERVERS_MAX; i++) {
		if (servers[i] != NULL && servers[i]->done) {
			pthread_join(servers[i]->thread, NULL);
			free(servers[i]);
			servers[i] = NULL;
		}
		if (servers[i] == NULL && free_slot == -1)
			free_slot = i;
	}
	return free_slot;
}

/*
 * A check link node opened to us (past DATA_HELLO): serve it; with busy
 * (jobs running here, the check not forced), answer that and end.
 */
int
check_serve(int fd, const struct check_peer *peer, uint32_t busy, char *err,
    size_t errlen)
{
	struct server *s = NULL;
	int slot, rc = -1;

	pthread_mutex_lock(&servers_mtx);
	if (servers_quit_fd == -1 && (servers_quit_fd = eventfd(0,
	    EFD_CLOEXEC | EFD_NONBLOCK)) == -1)
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
	else if ((slot = servers_reap()) == -1)
		snprintf(err, errlen, "%d check links are served already",
		    SERVERS_MAX);
	else if ((s = calloc(1, sizeof(*s))) == NULL)
		snprintf(err, errlen, "out of memory");
	else {
		s->peer = *peer;
		s->setup = peer_setup(&s->peer, fd);
		s->busy = busy;
		if ((errno = pthread_create(&s->thread, NULL, server_main,
		    s)) != 0)
			snprintf(err, errlen, "cannot start a thread: %s",
			    strerror(errno));
		else {
			servers[slot] = s;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&servers_mtx);
	if (rc == -1) {
		free(s);
		close(fd);
	}
	return rc;
}

/* The daemon is exiting: stop every server and wait for it. */
void
check_shutdown(void)
{
	struct server *all[SERVERS_MAX];
	uint64_t one = 1;

	/* Out of the lock: an ending server takes it to say so. */
	pthread_mutex_lock(&servers_mtx);
	if (servers_quit_fd != -1 && write(servers_quit_fd, &one,
	    sizeof(one)) == -1)
		log_warn("check: stopping the servers");
	memcpy(all, servers, sizeof(all));
	memset(servers, 0, sizeof(servers));
	pthread_mutex_unlock(&servers_mtx);
	for (int i = 0; i < SERVERS_MAX; i++)
		if (all[i] != NULL) {
			pthread_join(all[i]->thread, NULL);
			free(all[i]);
		}
	if (servers_quit_fd != -1)
		close(servers_quit_fd);
	servers_quit_fd = -1;
}
