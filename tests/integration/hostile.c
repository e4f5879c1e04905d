/*
 * mccl-hostile: a hostile client and a hostile peer for the integration
 * tests (hostile.sh).  Each case opens a fresh connection and sends one
 * kind of bad message; the daemon must close that connection, or answer
 * with an error where the message is well formed but refused.  After every
 * case the daemon must still serve a well-behaved client.  Modes:
 *
 *   client SOCKET [LOG]              bad records on the Unix socket, bad
 *                                    segments, buffers outside segments,
 *                                    a client that floods or never reads;
 *                                    at the end, the daemon must hold no
 *                                    descriptor or mapping of ours.  With
 *                                    LOG (the daemon's log), each close
 *                                    must add one "closing client" line
 *   peer HOST PORT SOCKET [MS]       bad frames on the peer port of a
 *                                    daemon that has a key_file; SOCKET is
 *                                    its Unix socket, MS its
 *                                    connect_timeout_ms (default 3000)
 *   unauth HOST PORT [SOCKET]        a peer without the key gets nothing
 *   unread SOCKET N                  N connections that never read replies
 *   early HOST PORT KEYFILE NODE N   N authenticated data links of no job
 *   checklinks HOST PORT KEYFILE NODE N   the same, as mcclctl check's
 *                                    links (job id PEER_CHECK_JOB | i)
 *   flood HOST PORT N MS [reopen]    hold N idle connections for MS ms,
 *                                    reopening those the daemon closes
 *   junk HOST PORT N BYTES           N connections, each sending BYTES of
 *                                    a request line that never ends;
 *                                    prints how many the daemon closed
 *
 * One line per case, "ok CASE" or "FAIL CASE: why", then "N passed, N
 * failed"; the exit status is 1 if any case failed.
 */
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <linux/futex.h>


#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mccl.h"
#include "mccld.h"
#include "transport/transport.h"	/* auth.c: the early links authenticate */
#include "conn.h"
#include "ipc.h"
#include "peer.h"

#define WHY_MAX		512
#define CLOSE_MS	2000		/* a bad message closes within this */
#define REPLY_MS	5000
#define SEG_SIZE	4096
#define BELL_BYTES	8192		/* a doorbell: IPC_BELL_SIZE, rounded */
#define SEG_SEALS	(F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define HUGE_RECORD	(300 * 1024)	/* more than IPC_MSG_MAX */

typedef int (*case_fn)(char *, size_t);

static const char	*sock_path;	/* the daemon's Unix socket */
static const char	*log_path;	/* its log, when given */
static const char	*peer_host;
static const char	*peer_port;
static uint32_t		 self_index;	/* of the daemon under test */
static uint32_t		 nnodes;
static int		 connect_timeout_ms = 3000;
static int		 check_peers;	/* after each case, peers must be up */
static int		 npassed, nfailed;

static uint8_t		 out[HUGE_RECORD + 64];	/* the record we send */
static struct ipc_msg	 in;			/* the record we receive */

/* ---- helpers ---- */

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static int
contains(const uint8_t *buf, size_t len, const char *want)
{
	size_t n = strlen(want);

	for (size_t i = 0; i + n <= len; i++)
		if (memcmp(buf + i, want, n) == 0)
			return 1;
	return 0;
}

static const char *
type_name(const struct wire_proto *proto, const uint8_t *buf, size_t len)
{
	struct wire_hdr h;
	const struct wire_type *t;

	if (len < WIRE_HDR_LEN)
		return "a fragment";
	wire_hdr_decode(buf, &h);
	t = wire_type_lookup(proto, h.type);
	return t != NULL ? t->name : "an unknown type";
}

static size_t
ipc_enc(uint16_t type, const void *msg, const void *trailer, size_t tlen)
{
	return wire_encode(&ipc_proto, type, msg, trailer, tlen, out,
	    sizeof(out));
}

static size_t
peer_enc(uint16_t type, const void *msg)
{
	return wire_encode(&peer_proto, type, msg, NULL, 0, out, sizeof(out));
}

/* A memfd of size bytes with the given seals, or -1. */
static int
memfd_make(size_t size, unsigned seals)
{
	int fd;

	if ((fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING)) ==
	    -1)
		return -1;
	if (ftruncate(fd, (off_t)size) == -1 ||
	    (seals != 0 && fcntl(fd, F_ADD_SEALS, seals) == -1)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- the Unix socket, raw ---- */

static int
unix_connect(char *why, size_t len)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock_path);
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		snprintf(why, len, "connect %s: %s", sock_path, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	return fd;
}

/* Send buf as one record with nfds copies of fd attached, exactly. */
static int
send_record(int sfd, size_t len, int fd, int nfds, char *why, size_t whylen)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(8 * sizeof(int))];
	} cmsg;
	struct iovec iov = { out, len };
	struct msghdr mh;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfds > 0) {
		memset(&cmsg, 0, sizeof(cmsg));
		mh.msg_control = cmsg.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cmsg.hdr.cmsg_level = SOL_SOCKET;
		cmsg.hdr.cmsg_type = SCM_RIGHTS;
		cmsg.hdr.cmsg_len = CMSG_LEN(nfds * sizeof(int));
		for (int i = 0; i < nfds; i++)
			memcpy(CMSG_DATA(&cmsg.hdr) + i * sizeof(int), &fd,
			    sizeof(int));
	}
	if (sendmsg(sfd, &mh, MSG_NOSIGNAL) != (ssize_t)len) {
		snprintf(why, whylen, "sendmsg of %zu bytes: %s", len,
		    strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The daemon must close fd within ms without sending anything: recv gives
 * 0 or ECONNRESET.  Works on both sockets (a record or a byte stream).
 */
static int
expect_closed(int fd, const struct wire_proto *proto, int ms, char *why,
    size_t len)
{
	static uint8_t buf[IPC_MSG_MAX];
	uint64_t deadline = conn_now_ms() + (uint64_t)ms;

	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		uint64_t now = conn_now_ms();
		ssize_t n;
		int rc = 0;

		if (now >= deadline ||
		    (rc = poll(&pfd, 1, (int)(deadline - now))) == 0) {
			snprintf(why, len, "connection still open after %d ms",
			    ms);
			return -1;
		}
		if (rc < 0 && errno == EINTR)
			continue;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 0;
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			snprintf(why, len, "recv: %s", strerror(errno));
		else
			snprintf(why, len, "the daemon sent %zd bytes (%s) "
			    "instead of closing", n, type_name(proto, buf,
			    (size_t)n));
		return -1;
	}
}

/* Receive one record of the given type within REPLY_MS. */
static int
expect_record(int fd, uint16_t type, char *why, size_t len)
{
	char err[WHY_MAX];
	int rc;

	if ((rc = conn_recv(fd, REPLY_MS, &in, err, sizeof(err))) !=
	    MCCL_SUCCESS) {
		snprintf(why, len, "waiting for %s: %s",
		    wire_type_lookup(&ipc_proto, type)->name, err);
		return -1;
	}
	if (in.hdr.type != type) {
		snprintf(why, len, "expected %s, got %s%s%.*s",
		    wire_type_lookup(&ipc_proto, type)->name, in.type->name,
		    in.trailer_len > 0 ? ": " : "", (int)in.trailer_len,
		    (const char *)in.trailer);
		return -1;
	}
	return 0;
}

static int
raw_hello(int fd, char *why, size_t len)
{
	struct ipc_hello h = { IPC_VERSION, (uint32_t)getpid(), 0, 0 };

	if (send_record(fd, ipc_enc(IPC_HELLO, &h, NULL, 0), -1, 0, why,
	    len) == -1)
		return -1;
	return expect_record(fd, IPC_HELLO_OK, why, len);
}

/* Send a request of type on fd; its answer must be a record of reply. */
static int
request(int fd, uint16_t type, const void *msg, uint16_t reply, char *why,
    size_t len)
{
	char err[WHY_MAX];

	if (conn_send(fd, type, msg, NULL, 0, -1, err, sizeof(err)) !=
	    MCCL_SUCCESS) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	return expect_record(fd, reply, why, len);
}

/* A control request on fd; its JSON reply NUL-terminated in json. */
static int
ctl_on(int fd, uint32_t cmd, char *json, size_t jlen, char *why, size_t len)
{
	struct ipc_ctl ctl = { cmd };

	if (request(fd, IPC_CTL, &ctl, IPC_CTL_REPLY, why, len) == -1)
		return -1;
	snprintf(json, jlen, "%.*s", (int)in.trailer_len,
	    (const char *)in.trailer);
	return 0;
}

static int
ctl(uint32_t cmd, char *json, size_t jlen, char *why, size_t len)
{
	struct ipc_hello_ok ok;
	char err[WHY_MAX];
	int fd, rc;

	if ((fd = conn_open(sock_path, REPLY_MS, 0, &ok, NULL, err, sizeof(err))) ==
	    -1) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	rc = ctl_on(fd, cmd, json, jlen, why, len);
	close(fd);
	return rc;
}

/* How many "state" keys of a CTL_PEERS document say "up". */
static uint32_t
peers_up(const char *json)
{
	const char *p = json;
	uint32_t n = 0;

	while ((p = strstr(p, "\"state\"")) != NULL) {
		p += strlen("\"state\"");
		while (*p == ' ' || *p == ':')
			p++;
		if (strncmp(p, "\"up\"", 4) == 0)
			n++;
	}
	return n;
}

/* The daemon answers a new client, and (peer mode) its peers are up. */
static int
daemon_serves(char *why, size_t len)
{
	static char json[IPC_MSG_MAX];
	char err[WHY_MAX];
	uint32_t up = 0;

	if (ctl(CTL_STATUS, json, sizeof(json), err, sizeof(err)) == -1) {
		snprintf(why, len, "the daemon no longer serves: %.400s", err);
		return -1;
	}
	if (strstr(json, "\"node\"") == NULL) {
		snprintf(why, len, "odd status reply: %.200s", json);
		return -1;
	}
	if (!check_peers)
		return 0;
	/* Give a peer that was knocked down a moment to come back. */
	for (int i = 0; i < 20; i++) {
		if (ctl(CTL_PEERS, json, sizeof(json), err, sizeof(err)) == -1) {
			snprintf(why, len, "the daemon no longer serves: %.400s",
			    err);
			return -1;
		}
		if ((up = peers_up(json)) == nnodes - 1)
			return i == 0 ? 0 : (snprintf(why, len, "a peer was "
			    "down, back after %d ms: %.300s", i * 100, json), -1);
		usleep(100000);
	}
	snprintf(why, len, "%u of %u peers up: %.300s", up, nnodes - 1, json);
	return -1;
}

/* Run one case, then check the daemon still serves; fn may leave a note. */
static void
run_case(const char *name, case_fn fn)
{
	char why[WHY_MAX] = "", note[WHY_MAX] = "";

	if (fn(note, sizeof(note)) == -1)
		snprintf(why, sizeof(why), "%s", note);
	else
		daemon_serves(why, sizeof(why));
	if (why[0] == '\0') {
		printf("ok %s%s%s\n", name, note[0] ? " " : "", note);
		npassed++;
	} else {
		printf("FAIL %s: %s\n", name, why);
		nfailed++;
	}
	fflush(stdout);
}

/* ---- client: records that close the connection ---- */

static off_t
log_size(void)
{
	struct stat st;

	return log_path != NULL && stat(log_path, &st) == 0 ? st.st_size : 0;
}

/*
 * The daemon logs before it closes: by now the log must have exactly one
 * "closing client" line since off.  Its reason goes into note.
 */
static int
log_one_close(off_t off, char *note, size_t len)
{
	char line[1024], reason[256] = "";
	const char *p;
	FILE *f;
	int n = 0;

	if (log_path == NULL)
		return 0;
	if ((f = fopen(log_path, "r")) == NULL || fseeko(f, off, SEEK_SET)) {
		snprintf(note, len, "%s: %s", log_path, strerror(errno));
		if (f != NULL)
			fclose(f);
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if ((p = strstr(line, "closing client pid ")) == NULL)
			continue;
		n++;
		if ((p = strstr(p, ": ")) != NULL)
			snprintf(reason, sizeof(reason), "%.*s",
			    (int)strcspn(p + 2, "\n"), p + 2);
	}
	fclose(f);
	if (n != 1) {
		snprintf(note, len, "closed, but %d \"closing client\" log "
		    "lines, expected 1", n);
		return -1;
	}
	snprintf(note, len, "(log: %s)", reason);
	return 0;
}

struct bad_record {
	const char	*name;
	int		 hello;		/* a valid HELLO first */
	int		 nfds;		/* copies of a sealed memfd attached */
	size_t		(*build)(void);
};

static size_t
b_hello(void)
{
	struct ipc_hello h = { IPC_VERSION, (uint32_t)getpid(), 0, 0 };

	return ipc_enc(IPC_HELLO, &h, NULL, 0);
}

static size_t
b_magic(void)
{
	size_t n = b_hello();

	put32(out, 0xdeadbeef);
	return n;
}

static size_t
b_version(void)
{
	size_t n = b_hello();

	put16(out + 4, IPC_VERSION + 1);
	return n;
}

static size_t
b_type(void)
{
	size_t n = b_hello();

	put16(out + 6, 999);
	return n;
}

static size_t
b_short(void)
{
	b_hello();
	return 5;
}

static size_t
b_header_only(void)
{
	b_hello();
	put32(out + 8, 0);
	return WIRE_HDR_LEN;
}

/* IPC_CTL has a trailer, so only the record length can be wrong. */
static size_t
b_len_longer(void)
{
	struct ipc_ctl c = { CTL_STATUS };
	size_t n = ipc_enc(IPC_CTL, &c, "abcde", 5);

	put32(out + 8, 4 + 5 + 10);
	return n;
}

static size_t
b_len_shorter(void)
{
	struct ipc_ctl c = { CTL_STATUS };
	size_t n = ipc_enc(IPC_CTL, &c, "abcdefghij", 10);

	put32(out + 8, 4 + 2);
	return n;
}

static size_t
b_len_type(void)
{
	size_t n = b_hello();

	memset(out + n, 0, 4);
	put32(out + 8, (uint32_t)(n + 4 - WIRE_HDR_LEN));
	return n + 4;
}

static size_t
b_huge_len(void)
{
	size_t n = b_hello();

	put32(out + 8, 0xffffffffU);
	return n;
}

static size_t
b_huge_record(void)
{
	struct ipc_ctl c = { CTL_STATUS };

	ipc_enc(IPC_CTL, &c, NULL, 0);
	memset(out + WIRE_HDR_LEN + 4, 'x', HUGE_RECORD - WIRE_HDR_LEN - 4);
	put32(out + 8, HUGE_RECORD - WIRE_HDR_LEN);
	return HUGE_RECORD;
}

static size_t
b_op(void)
{
	struct ipc_op op;

	memset(&op, 0, sizeof(op));
	op.seq = 1;
	op.coll = COLL_BARRIER;
	return ipc_enc(IPC_OP, &op, NULL, 0);
}

static size_t
b_op_done(void)
{
	struct ipc_op_done d = { 1, 0, 0, 0 };

	return ipc_enc(IPC_OP_DONE, &d, NULL, 0);
}

static size_t
b_error(void)
{
	struct ipc_error e = { MCCL_ERR_INTERNAL, IPC_OP };

	return ipc_enc(IPC_ERROR, &e, "x", 1);
}

static size_t
b_join_unterminated(void)
{
	struct ipc_join j;

	memset(&j, 0, sizeof(j));
	j.nranks = 1;
	memset(j.job, 'j', sizeof(j.job));
	return ipc_enc(IPC_JOIN, &j, NULL, 0);
}

static size_t
b_ctl(void)
{
	struct ipc_ctl c = { CTL_STATUS };

	return ipc_enc(IPC_CTL, &c, NULL, 0);
}

static size_t
b_seg_add(void)
{
	struct ipc_seg_add s = { 1, SEG_SIZE };

	return ipc_enc(IPC_SEG_ADD, &s, NULL, 0);
}

static const struct bad_record bad_records[] = {
	{ "wrong magic", 0, 0, b_magic },
	{ "wrong version", 0, 0, b_version },
	{ "unknown type", 1, 0, b_type },
	{ "record shorter than a header (5 bytes)", 1, 0, b_short },
	{ "header without its body", 1, 0, b_header_only },
	{ "header length longer than the record", 1, 0, b_len_longer },
	{ "header length shorter than the record", 1, 0, b_len_shorter },
	{ "body longer than its type allows", 1, 0, b_len_type },
	{ "length 0xffffffff in a small record", 1, 0, b_huge_len },
	{ "300 KiB record (over IPC_MSG_MAX)", 1, 0, b_huge_record },
	{ "first message not HELLO (IPC_OP)", 0, 0, b_op },
	{ "first message not HELLO (IPC_CTL)", 0, 0, b_ctl },
	{ "second HELLO", 1, 0, b_hello },
	{ "daemon-only type IPC_OP_DONE", 1, 0, b_op_done },
	{ "daemon-only type IPC_ERROR", 1, 0, b_error },
	{ "unterminated job name in IPC_JOIN", 1, 0, b_join_unterminated },
	{ "descriptor attached to HELLO", 0, 1, b_hello },
	{ "descriptor attached to IPC_CTL", 1, 1, b_ctl },
	{ "IPC_SEG_ADD without a descriptor", 1, 0, b_seg_add },
	{ "IPC_SEG_ADD with 2 descriptors", 1, 2, b_seg_add },
	{ "IPC_SEG_ADD with 5 descriptors (too many)", 1, 5, b_seg_add },
	{ "IPC_SEG_ADD with 8 descriptors", 1, 8, b_seg_add },
};

static const struct bad_record *cur_record;

static int
c_bad_record(char *why, size_t len)
{
	const struct bad_record *r = cur_record;
	off_t off = log_size();
	int fd, memfd = -1, rc = -1;
	size_t n;

	if ((fd = unix_connect(why, len)) == -1)
		return -1;
	if (r->hello && raw_hello(fd, why, len) == -1)
		goto done;
	if (r->nfds > 0 && (memfd = memfd_make(SEG_SIZE, SEG_SEALS)) == -1) {
		snprintf(why, len, "memfd: %s", strerror(errno));
		goto done;
	}
	n = r->build();
	/* A record over the default send buffer needs a bigger one. */
	if (n > 65536 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &(int){ 2 *
	    HUGE_RECORD }, sizeof(int)) == -1) {
		snprintf(why, len, "SO_SNDBUF: %s", strerror(errno));
		goto done;
	}
	if (send_record(fd, n, memfd, r->nfds, why, len) == 0 &&
	    expect_closed(fd, &ipc_proto, CLOSE_MS, why, len) == 0)
		rc = log_one_close(off, why, len);
done:
	if (memfd != -1)
		close(memfd);
	close(fd);
	return rc;
}

/* ---- client: well-formed requests that are refused ---- */

/* SEG_ADD must get an IPC_ERROR saying want, and change nothing. */
static int
seg_refused(int fd, uint32_t id, uint64_t size, int segfd, const char *want,
    char *why, size_t len)
{
	struct ipc_seg_add m = { id, size };
	char err[WHY_MAX];

	if (conn_send(fd, IPC_SEG_ADD, &m, NULL, 0, segfd, err,
	    sizeof(err)) != MCCL_SUCCESS) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	if (expect_record(fd, IPC_ERROR, why, len) == -1)
		return -1;
	if (in.u.error.code != MCCL_ERR_INVALID_ARGUMENT ||
	    in.u.error.request != IPC_SEG_ADD ||
	    !contains(in.trailer, in.trailer_len, want)) {
		snprintf(why, len, "IPC_ERROR code %u request %u \"%.*s\", "
		    "expected code %d request %d mentioning \"%s\"",
		    in.u.error.code, in.u.error.request, (int)in.trailer_len,
		    (const char *)in.trailer, MCCL_ERR_INVALID_ARGUMENT,
		    IPC_SEG_ADD, want);
		return -1;
	}
	return 0;
}

static int
seg_accepted(int fd, uint32_t id, uint64_t size, int segfd, char *why,
    size_t len)
{
	struct ipc_seg_add m = { id, size };
	char err[WHY_MAX];

	if (conn_send(fd, IPC_SEG_ADD, &m, NULL, 0, segfd, err,
	    sizeof(err)) != MCCL_SUCCESS) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	if (expect_record(fd, IPC_SEG_OK, why, len) == -1)
		return -1;
	if (in.u.seg_ok.seg_id != id) {
		snprintf(why, len, "SEG_OK for segment %u, expected %u",
		    in.u.seg_ok.seg_id, id);
		return -1;
	}
	return 0;
}

/*
 * One refused segment: the connection stays usable and the id stays free
 * (a good segment under it is then accepted).
 */
static int
seg_case(int segfd, uint32_t id, uint64_t size, const char *want,
    char *why, size_t len)
{
	static char json[IPC_MSG_MAX];
	struct ipc_hello_ok ok;
	char err[WHY_MAX];
	int fd, good = -1, rc = -1;

	if (segfd == -1) {
		snprintf(why, len, "setting up the descriptor: %s",
		    strerror(errno));
		return -1;
	}
	if ((fd = conn_open(sock_path, REPLY_MS, 0, &ok, NULL, err, sizeof(err))) ==
	    -1) {
		snprintf(why, len, "%s", err);
		close(segfd);
		return -1;
	}
	if (seg_refused(fd, id, size, segfd, want, why, len) == 0 &&
	    ctl_on(fd, CTL_STATUS, json, sizeof(json), why, len) == 0) {
		if (id == 0)
			rc = 0;
		else if ((good = memfd_make(SEG_SIZE, SEG_SEALS)) != -1)
			rc = seg_accepted(fd, id, SEG_SIZE, good, why, len);
		else
			snprintf(why, len, "memfd: %s", strerror(errno));
	}
	if (good != -1)
		close(good);
	close(segfd);
	close(fd);
	return rc;
}

static int
c_unsealed(char *why, size_t len)
{
	return seg_case(memfd_make(SEG_SIZE, 0), 1, SEG_SIZE, "F_SEAL_SHRINK",
	    why, len);
}

static int
c_grow_sealed(char *why, size_t len)
{
	return seg_case(memfd_make(SEG_SIZE, F_SEAL_GROW | F_SEAL_SEAL), 1,
	    SEG_SIZE, "F_SEAL_SHRINK", why, len);
}

/* Without MFD_ALLOW_SEALING a memfd carries F_SEAL_SEAL and nothing else. */
static int
c_not_sealable(char *why, size_t len)
{
	int fd;

	if ((fd = memfd_create("hostile", MFD_CLOEXEC)) != -1 &&
	    ftruncate(fd, SEG_SIZE) == -1) {
		close(fd);
		fd = -1;
	}
	return seg_case(fd, 1, SEG_SIZE, "F_SEAL_SHRINK", why, len);
}

static int
c_regular_file(char *why, size_t len)
{
	char path[] = "/tmp/mccl-hostile.XXXXXX";
	int fd;

	if ((fd = mkstemp(path)) != -1) {
		unlink(path);
		if (ftruncate(fd, SEG_SIZE) == -1) {
			close(fd);
			fd = -1;
		}
	}
	/* tmpfs files say "not sealed", others "not a sealable memfd" */
	return seg_case(fd, 1, SEG_SIZE, "seal", why, len);
}

static int
c_pipe(char *why, size_t len)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) == -1)
		return seg_case(-1, 1, SEG_SIZE, "", why, len);
	close(p[1]);
	return seg_case(p[0], 1, SEG_SIZE, "not a sealable memfd", why, len);
}

/*
 * A memfd of two huge pages, sealed as the daemon asks.  Hole-punched and
 * with the pool taken by another memfd, touching it would be SIGBUS in the
 * daemon: it must be refused at SEG_ADD (hostile.sh gives the host a pool,
 * so that the daemon could map it).
 */
static int
c_hugetlb(char *why, size_t len)
{
	struct stat st;
	int fd;

	memset(&st, 0, sizeof(st));
	if ((fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING |
	    MFD_HUGETLB)) == -1) {
		snprintf(why, len, "(skipped: no hugetlbfs memfd here: %s)",
		    strerror(errno));
		return 0;
	}
	/* hugetlbfs gives its page size as the block size */
	if (fstat(fd, &st) == -1 || ftruncate(fd, 2 * st.st_blksize) == -1 ||
	    fcntl(fd, F_ADD_SEALS, SEG_SEALS) == -1) {
		close(fd);
		fd = -1;
	}
	return seg_case(fd, 1, 2 * (uint64_t)st.st_blksize, "hugetlbfs", why,
	    len);
}

static int
c_size_larger(char *why, size_t len)
{
	return seg_case(memfd_make(SEG_SIZE, SEG_SEALS), 1, 2 * SEG_SIZE,
	    "does not match", why, len);
}

static int
c_size_smaller(char *why, size_t len)
{
	return seg_case(memfd_make(SEG_SIZE, SEG_SEALS), 1, SEG_SIZE / 2,
	    "does not match", why, len);
}

static int
c_size_zero(char *why, size_t len)
{
	return seg_case(memfd_make(0, SEG_SEALS), 1, 0, "empty", why, len);
}

static int
c_size_limit(char *why, size_t len)
{
	return seg_case(memfd_make(SEG_SIZE, SEG_SEALS), 1, 1ULL << 62,
	    "over the limit of 68719476736 bytes per client (max_segment_bytes",
	    why, len);
}

static int
c_write_sealed(char *why, size_t len)
{
	return seg_case(memfd_make(SEG_SIZE, SEG_SEALS | F_SEAL_WRITE), 1,
	    SEG_SIZE, "cannot map", why, len);
}

static int
c_seg_zero(char *why, size_t len)
{
	return seg_case(memfd_make(SEG_SIZE, SEG_SEALS), 0, SEG_SIZE,
	    "reserved", why, len);
}

static int
c_seg_dup(char *why, size_t len)
{
	static char json[IPC_MSG_MAX];
	struct ipc_hello_ok ok;
	char err[WHY_MAX];
	int fd, a, b, rc = -1;

	if ((fd = conn_open(sock_path, REPLY_MS, 0, &ok, NULL, err, sizeof(err))) ==
	    -1) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	a = memfd_make(SEG_SIZE, SEG_SEALS);
	b = memfd_make(2 * SEG_SIZE, SEG_SEALS);
	if (a == -1 || b == -1)
		snprintf(why, len, "memfd: %s", strerror(errno));
	else if (seg_accepted(fd, 7, SEG_SIZE, a, why, len) == 0 &&
	    seg_refused(fd, 7, 2 * SEG_SIZE, b, "already registered", why,
	    len) == 0 &&
	    seg_refused(fd, 7, SEG_SIZE, a, "already registered", why,
	    len) == 0 &&
	    ctl_on(fd, CTL_STATUS, json, sizeof(json), why, len) == 0)
		rc = 0;
	if (a != -1)
		close(a);
	if (b != -1)
		close(b);
	close(fd);
	return rc;
}

static int
c_bad_ctl(char *why, size_t len)
{
	struct ipc_hello_ok ok;
	struct ipc_ctl c = { 99 };
	char err[WHY_MAX];
	int fd, rc = -1;

	if ((fd = conn_open(sock_path, REPLY_MS, 0, &ok, NULL, err, sizeof(err))) ==
	    -1) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	if (conn_send(fd, IPC_CTL, &c, NULL, 0, -1, err, sizeof(err)) !=
	    MCCL_SUCCESS)
		snprintf(why, len, "%s", err);
	else if (expect_record(fd, IPC_ERROR, why, len) == 0 &&
	    ctl_on(fd, CTL_STATUS, (char *)out, sizeof(out), why, len) == 0)
		rc = 0;
	close(fd);
	return rc;
}

/*
 * JOIN of a 1-rank job named name, on a connection with no doorbell: an
 * INVALID_ARGUMENT whose message holds want, and the connection stays
 * usable.
 */
static int
join_refused(const char *name, const char *want, char *why, size_t len)
{
	struct ipc_hello_ok ok;
	struct ipc_join j;
	char err[WHY_MAX];
	int fd, rc = -1;

	if ((fd = conn_open(sock_path, REPLY_MS, 0, &ok, NULL, err,
	    sizeof(err))) == -1) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	memset(&j, 0, sizeof(j));
	j.nranks = 1;
	snprintf(j.job, sizeof(j.job), "%s", name);
	if (conn_send(fd, IPC_JOIN, &j, NULL, 0, -1, err, sizeof(err)) !=
	    MCCL_SUCCESS)
		snprintf(why, len, "%s", err);
	else if (expect_record(fd, IPC_ERROR, why, len) == 0) {
		if (in.u.error.code == MCCL_ERR_INVALID_ARGUMENT &&
		    in.u.error.request == IPC_JOIN &&
		    contains(in.trailer, in.trailer_len, want))
			rc = ctl_on(fd, CTL_STATUS, (char *)out, sizeof(out),
			    why, len);
		else
			snprintf(why, len, "ERROR code %u \"%.*s\", expected "
			    "one mentioning \"%s\"", in.u.error.code,
			    (int)in.trailer_len, (const char *)in.trailer, want);
	}
	close(fd);
	return rc;
}

/*
 * A job name carrying a forged log line: refused with a clear error, and
 * (checked by hostile.sh) the log shows it escaped, never as a line.
 */
static int
c_join_newline(char *why, size_t len)
{
	return join_refused("x\n<3>mccld: FORGED line", "control character",
	    why, len);
}

/* Names that are not UTF-8 could not be shown by mcclctl -j (JSON). */
static int
c_join_not_utf8(char *why, size_t len)
{
	if (join_refused("x\xff\xfe", "not UTF-8", why, len) == -1)
		return -1;
	if (join_refused("ov\xc0\xaf" "er", "not UTF-8", why, len) == -1)
		return -1;
	return join_refused("c1\xc2\x9b", "control character", why, len);
}

/* ---- client: operations on a 1-rank job ---- */

#define BELL_SEG	3	/* job_open's doorbell segment */

struct job_conn {
	int		 fd;
	int		 segfd;
	uint8_t		*base;
	int		 bellfd;
	struct ipc_doorbell *db;
	uint64_t	 seq;		/* of the last descriptor */
};

/* IPC_BELL must get an IPC_ERROR saying want; the connection stays usable. */
static int
bell_refused(int fd, uint32_t id, const char *want, char *why, size_t len)
{
	struct ipc_bell b = { id };

	if (request(fd, IPC_BELL, &b, IPC_ERROR, why, len) == -1)
		return -1;
	if (in.u.error.request != IPC_BELL ||
	    !contains(in.trailer, in.trailer_len, want)) {
		snprintf(why, len, "IPC_ERROR request %u \"%.*s\", expected "
		    "request %d mentioning \"%s\"", in.u.error.request,
		    (int)in.trailer_len, (const char *)in.trailer, IPC_BELL,
		    want);
		return -1;
	}
	return ctl_on(fd, CTL_STATUS, (char *)out, sizeof(out), why, len);
}

static int
bell_accepted(int fd, uint32_t id, char *why, size_t len)
{
	struct ipc_bell b = { id };

	return request(fd, IPC_BELL, &b, IPC_SEG_OK, why, len);
}

/*
 * A doorbell page, registered as segment BELL_SEG; with garbage, every
 * byte the daemon writes or ignores is 0xff (the ring's head stays 0).
 */
static int
bell_open(struct job_conn *jc, int garbage, char *why, size_t len)
{
	void *page;

	if ((jc->bellfd = memfd_make(BELL_BYTES, SEG_SEALS)) == -1 ||
	    (page = mmap(NULL, BELL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
	    jc->bellfd, 0)) == MAP_FAILED) {
		snprintf(why, len, "memfd: %s", strerror(errno));
		return -1;
	}
	jc->db = page;
	if (garbage) {
		memset(page, 0xff, BELL_BYTES);
		jc->db->sq_head = 0;
	}
	if (seg_accepted(jc->fd, BELL_SEG, BELL_BYTES, jc->bellfd, why, len) ==
	    -1)
		return -1;
	return bell_accepted(jc->fd, BELL_SEG, why, len);
}

/* The next job_open offers its memory to the daemon (ipc_hello.probe_addr). */
static int offer_memory;

/* A 1-rank job on a connection of its own, with a data segment (1). */
static int
job_open_bell(struct job_conn *jc, const char *tag, int garbage, char *why,
    size_t len)
{
	static unsigned n;
	struct ipc_hello_ok ok;
	struct ipc_join j;
	char err[WHY_MAX];

	memset(jc, 0, sizeof(*jc));
	jc->fd = jc->segfd = jc->bellfd = -1;
	jc->base = MAP_FAILED;
	if ((jc->fd = conn_open(sock_path, REPLY_MS, offer_memory, &ok, NULL,
	    err, sizeof(err))) == -1) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	if ((jc->segfd = memfd_make(SEG_SIZE, SEG_SEALS)) == -1 ||
	    (jc->base = mmap(NULL, SEG_SIZE, PROT_READ | PROT_WRITE,
	    MAP_SHARED, jc->segfd, 0)) == MAP_FAILED) {
		snprintf(why, len, "memfd: %s", strerror(errno));
		return -1;
	}
	if (seg_accepted(jc->fd, 1, SEG_SIZE, jc->segfd, why, len) == -1 ||
	    bell_open(jc, garbage, why, len) == -1)
		return -1;
	memset(&j, 0, sizeof(j));
	j.nranks = 1;
	j.timeout_ms = 10000;
	snprintf(j.job, sizeof(j.job), "hostile-%d-%u-%s", (int)getpid(), n++,
	    tag);
	if (conn_send(jc->fd, IPC_JOIN, &j, NULL, 0, -1, err, sizeof(err)) !=
	    MCCL_SUCCESS) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	if (offer_memory && !ok.xmem) {
		snprintf(why, len, "the daemon did not open our memory (its "
		    "log says why)");
		return -1;
	}
	return expect_record(jc->fd, IPC_JOINED, why, len);
}

static int
job_open(struct job_conn *jc, const char *tag, char *why, size_t len)
{
	return job_open_bell(jc, tag, 0, why, len);
}

static void
job_close(struct job_conn *jc)
{
	if (jc->base != MAP_FAILED)
		munmap(jc->base, SEG_SIZE);
	if (jc->db != NULL)
		munmap(jc->db, BELL_BYTES);
	if (jc->segfd != -1)
		close(jc->segfd);
	if (jc->bellfd != -1)
		close(jc->bellfd);
	if (jc->fd != -1)
		close(jc->fd);
}

/* Publish d in the submission ring, as the library does, and wake. */
static void
ring_put(struct job_conn *jc, const struct ipc_op *d)
{
	uint64_t head = jc->db->sq_head;

	jc->db->sq[head % IPC_SQ_SLOTS] = *d;
	__atomic_store_n(&jc->db->sq_head, head + 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&jc->db->sq_sleeping, __ATOMIC_SEQ_CST)) {
		__atomic_add_fetch(&jc->db->sq_bell, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &jc->db->sq_bell, FUTEX_WAKE, 1, NULL, NULL,
		    0);
	}
}

/*
 * The answer to the descriptors up to seq: 0 if the doorbell says they
 * ended well, else the code of the IPC_JOB_FAILED that came (its message
 * left in `in`); -1, with why, if neither came in time.
 */
static int
ring_answer(struct job_conn *jc, uint64_t seq, char *why, size_t len)
{
	char err[WHY_MAX];
	int rc;

	for (int ms = 0; ms < REPLY_MS; ms += 10) {
		if (__atomic_load_n(&jc->db->done_seq, __ATOMIC_ACQUIRE) == seq)
			return 0;
		rc = conn_recv(jc->fd, 10, &in, err, sizeof(err));
		if (rc == MCCL_ERR_TIMEOUT)
			continue;
		if (rc != MCCL_SUCCESS) {
			snprintf(why, len, "%s", err);
			return -1;
		}
		if (in.hdr.type == IPC_JOB_FAILED)
			return (int)in.u.job_failed.code;
		if (in.hdr.type != IPC_OP_DONE) {
			snprintf(why, len, "%s came, not JOB_FAILED",
			    in.type->name);
			return -1;
		}
	}
	snprintf(why, len, "no answer within %d ms (done_seq %llu)", REPLY_MS,
	    (unsigned long long)jc->db->done_seq);
	return -1;
}

/* Publish op (its seq set here) and wait: as ring_answer. */
static int
job_submit(struct job_conn *jc, struct ipc_op *op, char *why, size_t len)
{
	op->seq = ++jc->seq;
	op->timeout_ms = REPLY_MS;
	ring_put(jc, op);
	return ring_answer(jc, op->seq, why, len);
}

/* A collective of count floats: 0, a failure's code, or -1 (see above). */
static int
job_coll(struct job_conn *jc, uint8_t coll, uint32_t send_seg,
    uint64_t send_off, uint32_t recv_seg, uint64_t recv_off, uint64_t count,
    char *why, size_t len)
{
	struct ipc_op op;

	memset(&op, 0, sizeof(op));
	op.coll = coll;
	op.dtype = MCCL_FLOAT32;
	op.redop = MCCL_SUM;
	op.count = count;
	op.send_seg = send_seg;
	op.recv_seg = recv_seg;
	op.send_off = send_off;
	op.recv_off = recv_off;
	return job_submit(jc, &op, why, len);
}

static int
job_op(struct job_conn *jc, uint32_t send_seg, uint64_t send_off,
    uint32_t recv_seg, uint64_t recv_off, uint64_t count, char *why,
    size_t len)
{
	return job_coll(jc, COLL_ALLREDUCE, send_seg, send_off, recv_seg,
	    recv_off, count, why, len);
}

/* A failure code and message, as job_op's answer must be. */
static int
failed_with(int code, int want, const char *text, char *why, size_t len)
{
	if (code == -1)
		return -1;
	if (code == want && contains(in.trailer, in.trailer_len, text))
		return 0;
	if (code == 0)
		snprintf(why, len, "it ended well, expected code %d "
		    "mentioning \"%s\"", want, text);
	else
		snprintf(why, len, "JOB_FAILED code %d \"%.*s\", expected "
		    "code %d mentioning \"%s\"", code, (int)in.trailer_len,
		    (const char *)in.trailer, want, text);
	return -1;
}

/* An operation on the job must fail with INVALID_ARGUMENT saying want. */
static int
op_refused(const char *tag, uint32_t send_seg, uint64_t send_off,
    uint32_t recv_seg, uint64_t recv_off, uint64_t count, const char *want,
    char *why, size_t len)
{
	struct job_conn jc;
	int rc = -1;

	if (job_open(&jc, tag, why, len) == 0)
		rc = failed_with(job_op(&jc, send_seg, send_off, recv_seg,
		    recv_off, count, why, len), MCCL_ERR_INVALID_ARGUMENT, want,
		    why, len);
	job_close(&jc);
	return rc;
}

/*
 * Overlapping send and receive buffers, not in place: the library refuses
 * them, and so must the daemon, whose copies assume they don't overlap.
 */
static int
c_overlap(char *why, size_t len)
{
	static const uint8_t colls[] = { COLL_ALLGATHER, COLL_ALLREDUCE,
	    COLL_ALLTOALL, COLL_REDUCE_SCATTER };
	struct job_conn jc;
	int rc = 0;

	for (size_t i = 0; i < sizeof(colls) && rc == 0; i++) {
		if ((rc = job_open(&jc, "overlap", why, len)) == 0)
			rc = failed_with(job_coll(&jc, colls[i], 1, 0, 1, 8,
			    100, why, len), MCCL_ERR_INVALID_ARGUMENT,
			    "overlap", why, len);
		job_close(&jc);
		if (rc == 0 && (rc = job_open(&jc, "inplace", why, len)) == 0 &&
		    (rc = job_coll(&jc, colls[i], 1, 0, 1, 0, 100, why,
		    len)) > 0)
			snprintf(why, len, "%s in place: code %d",
			    proto_coll_name(colls[i]), rc);
		job_close(&jc);
	}
	return rc == 0 ? 0 : -1;
}

/*
 * A v-collective's vector from a raw client: outside its segment, giving
 * blocks outside the buffers' segment, or an alltoallv with a count.  The
 * vector of a 1-rank alltoallv is 4 uint64s, at offset 3000 of segment 1.
 */
static int
vec_refused(uint64_t vec_off, const uint64_t v[4], uint64_t count,
    const char *want, char *why, size_t len)
{
	struct job_conn jc;
	struct ipc_op op;
	int rc = -1;

	if (job_open(&jc, "vec", why, len) == 0) {
		memcpy(jc.base + 3000, v, 4 * sizeof(uint64_t));
		memset(&op, 0, sizeof(op));
		op.coll = COLL_ALLTOALLV;
		op.dtype = MCCL_FLOAT32;
		op.count = count;
		op.send_seg = op.recv_seg = op.vec_seg = 1;
		op.recv_off = 1000;
		op.vec_off = vec_off;
		rc = failed_with(job_submit(&jc, &op, why, len),
		    MCCL_ERR_INVALID_ARGUMENT, want, why, len);
	}
	job_close(&jc);
	return rc;
}

static int
c_vec_bad(char *why, size_t len)
{
	static const uint64_t ok[4] = { 10, 0, 10, 0 };
	static const uint64_t far[4] = { 10, 0, 10, 4000 };
	static const uint64_t huge[4] = { 1ULL << 62, 0, 10, 0 };

	if (vec_refused(SEG_SIZE - 16, ok, 0, "outside segment", why, len) ==
	    -1 || vec_refused(3000, far, 0, "outside segment", why, len) == -1 ||
	    vec_refused(3000, huge, 0, "too large", why, len) == -1 ||
	    vec_refused(3000, ok, 5, "with count 5, not 0", why, len) == -1)
		return -1;
	return 0;
}

static int
c_send_outside(char *why, size_t len)
{
	return op_refused("send", 1, 4000, 1, 0, 100, "outside segment", why,
	    len);
}

static int
c_recv_outside(char *why, size_t len)
{
	return op_refused("recv", 1, 0, 1, 4000, 100, "outside segment", why,
	    len);
}

static int
c_one_byte_over(char *why, size_t len)
{
	return op_refused("edge", 1, SEG_SIZE - 399, 1, 0, 100,
	    "outside segment", why, len);
}

static int
c_off_overflow(char *why, size_t len)
{
	return op_refused("overflow", 1, UINT64_MAX - 100, 1, 0, 100,
	    "outside segment", why, len);
}

static int
c_recv_overflow(char *why, size_t len)
{
	return op_refused("overflow2", 1, 0, 1, UINT64_MAX - 399, 100,
	    "outside segment", why, len);
}

static int
c_count_huge(char *why, size_t len)
{
	return op_refused("count", 1, 0, 1, 0, UINT64_MAX / 2, "too large",
	    why, len);
}

static int
c_count_wraps(char *why, size_t len)
{
	/* 2^62 floats is 2^64 bytes: 0 if the product wrapped */
	return op_refused("wrap", 1, 0, 1, 0, 1ULL << 62, "too large", why,
	    len);
}

static int
c_unregistered(char *why, size_t len)
{
	return op_refused("unreg", 9, 0, 1, 0, 100, "not registered", why,
	    len);
}

static int
c_seg_id_zero(char *why, size_t len)
{
	return op_refused("zero", 0, 0, 1, 0, 100, "not registered", why, len);
}

static int
c_after_del(char *why, size_t len)
{
	struct ipc_seg_del d = { 1 };
	struct job_conn jc;
	char err[WHY_MAX];
	int rc = -1;

	/*
	 * The ring is not ordered with the socket: a status request after
	 * the SEG_DEL is answered only once the daemon has read the SEG_DEL.
	 */
	if (job_open(&jc, "del", why, len) == 0) {
		if (conn_send(jc.fd, IPC_SEG_DEL, &d, NULL, 0, -1, err,
		    sizeof(err)) != MCCL_SUCCESS)
			snprintf(why, len, "%s", err);
		else if (ctl_on(jc.fd, CTL_STATUS, (char *)out, sizeof(out), why,
		    len) == 0)
			rc = failed_with(job_op(&jc, 1, 0, 1, 0, 100, why, len),
			    MCCL_ERR_INVALID_ARGUMENT, "not registered", why,
			    len);
	}
	job_close(&jc);
	return rc;
}

/* A valid allreduce of 100 floats from send_off to recv_off. */
static int
op_works(struct job_conn *jc, uint64_t send_off, uint64_t recv_off,
    int holes, char *why, size_t len)
{
	float *src = (float *)(void *)(jc->base + send_off);
	float *dst = (float *)(void *)(jc->base + recv_off);
	int rc;

	for (int i = 0; i < 100; i++) {
		src[i] = (float)i + 0.5f;
		dst[i] = -1.0f;
	}
	/* Punch the send buffer's page: it reads back as zeros. */
	if (holes && fallocate(jc->segfd, FALLOC_FL_PUNCH_HOLE |
	    FALLOC_FL_KEEP_SIZE, 0, SEG_SIZE) == -1) {
		snprintf(why, len, "fallocate: %s", strerror(errno));
		return -1;
	}
	if ((rc = job_op(jc, 1, send_off, 1, recv_off, 100, why, len)) == -1)
		return -1;
	if (rc != 0) {
		snprintf(why, len, "valid op failed: code %d \"%.*s\"", rc,
		    (int)in.trailer_len, (const char *)in.trailer);
		return -1;
	}
	for (int i = 0; i < 100; i++)
		if (dst[i] != (holes ? 0.0f : (float)i + 0.5f)) {
			snprintf(why, len, "element %d is %g", i,
			    (double)dst[i]);
			return -1;
		}
	return 0;
}

/* ---- client: the doorbell and its submission ring ---- */

static int
c_bell_unregistered(char *why, size_t len)
{
	struct job_conn jc;
	int rc = -1;

	if (job_open(&jc, "bellunreg", why, len) == 0)
		rc = bell_refused(jc.fd, 9, "not registered", why, len);
	job_close(&jc);
	return rc;
}

static int
c_bell_small(char *why, size_t len)
{
	struct job_conn jc;
	int tiny = -1, rc = -1;

	if (job_open(&jc, "bellsmall", why, len) == 0 &&
	    (tiny = memfd_make(1, SEG_SEALS)) != -1 &&
	    seg_accepted(jc.fd, 2, 1, tiny, why, len) == 0)
		rc = bell_refused(jc.fd, 2, "fewer than", why, len);
	if (tiny != -1)
		close(tiny);
	job_close(&jc);
	return rc;
}

static int
c_bell_twice(char *why, size_t len)
{
	struct job_conn jc;
	int rc = -1;

	if (job_open(&jc, "belltwice", why, len) == 0)
		rc = bell_refused(jc.fd, BELL_SEG, "has a doorbell", why, len);
	job_close(&jc);
	return rc;
}

/* JOIN before BELL: refused, since collectives need the ring. */
static int
c_join_no_bell(char *why, size_t len)
{
	char name[64];

	snprintf(name, sizeof(name), "hostile-%d-nobell", (int)getpid());
	return join_refused(name, "no doorbell", why, len);
}

/*
 * A doorbell full of garbage (sleepers, word, done_seq, sq_tail,
 * sq_sleeping): an allreduce that ends well is answered there, done_seq =
 * its seq, and no record comes; the daemon reads nothing else of the page.
 */
static int
c_bell_answers(char *why, size_t len)
{
	struct job_conn jc;
	char err[WHY_MAX];
	int rc = -1;

	if (job_open_bell(&jc, "bellok", 1, why, len) == 0 &&
	    op_works(&jc, 0, 400, 0, why, len) == 0) {
		if (conn_recv(jc.fd, 200, &in, err, sizeof(err)) !=
		    MCCL_ERR_TIMEOUT)
			snprintf(why, len, "a record came as well: %s",
			    in.type != NULL ? in.type->name : err);
		else
			rc = ctl_on(jc.fd, CTL_STATUS, (char *)out, sizeof(out),
			    why, len);
	}
	job_close(&jc);
	return rc;
}

/* Two descriptors: the second one fails the job with want. */
static int
ring_second_refused(const char *tag, const struct ipc_op *second, int code,
    const char *want, char *why, size_t len)
{
	struct job_conn jc;
	int rc = -1;

	if (job_open(&jc, tag, why, len) == 0 &&
	    op_works(&jc, 0, 400, 0, why, len) == 0) {
		ring_put(&jc, second);
		rc = failed_with(ring_answer(&jc, UINT64_MAX, why, len), code,
		    want, why, len);
	}
	job_close(&jc);
	return rc;
}

static int
c_ring_seq_falls(char *why, size_t len)
{
	struct ipc_op d = { .seq = 1, .coll = COLL_BARRIER };

	return ring_second_refused("seqfall", &d, MCCL_ERR_PROTOCOL,
	    "seqs must rise", why, len);
}

static int
c_ring_send(char *why, size_t len)
{
	struct ipc_op d = { .seq = 2, .coll = COLL_SEND, .dtype = MCCL_INT8,
	    .tag = 1 };

	return ring_second_refused("ringsend", &d, MCCL_ERR_PROTOCOL,
	    "submission ring", why, len);
}

static int
c_ring_bad_dtype(char *why, size_t len)
{
	struct ipc_op d = { .seq = 2, .coll = COLL_ALLREDUCE, .dtype = 200,
	    .count = 1, .send_seg = 1, .recv_seg = 1 };

	return ring_second_refused("ringdtype", &d, MCCL_ERR_INVALID_ARGUMENT,
	    "unknown dtype", why, len);
}

static int
c_ring_bad_wire(char *why, size_t len)
{
	struct ipc_op d = { .seq = 2, .coll = COLL_ALLREDUCE,
	    .dtype = MCCL_FLOAT32, .count = 1, .send_seg = 1, .recv_seg = 1,
	    .wire = 99 };

	return ring_second_refused("ringwire", &d, MCCL_ERR_INVALID_ARGUMENT,
	    "unknown wire format 99", why, len);
}

/* A 16-bit wire asked for where there is no float32 sum to narrow. */
static int
c_ring_wire_int(char *why, size_t len)
{
	struct ipc_op d = { .seq = 2, .coll = COLL_ALLREDUCE,
	    .dtype = MCCL_INT32, .count = 1, .send_seg = 1, .recv_seg = 1,
	    .wire = MCCL_BFLOAT16 };

	return ring_second_refused("ringwireint", &d,
	    MCCL_ERR_INVALID_ARGUMENT, "a bfloat16 wire is for float32 sums "
	    "and averages, not allreduce of int32", why, len);
}

/*
 * Buffers in the client's own memory (IPC_OP_XMEM): refused from a
 * connection that did not offer it, for a collective other than
 * allreduce, with a segment; an address the kernel cannot reach fails the
 * op, naming it; one that wraps is refused; the daemon stays up.
 */
static int
c_xmem_not_offered(char *why, size_t len)
{
	static float buf[256];
	struct ipc_op d = { .seq = 2, .coll = COLL_ALLREDUCE,
	    .dtype = MCCL_FLOAT32, .count = 256, .flags = IPC_OP_XMEM,
	    .send_off = (uintptr_t)buf, .recv_off = (uintptr_t)buf };

	return ring_second_refused("xmemoff", &d, MCCL_ERR_INVALID_ARGUMENT,
	    "has not opened its own memory", why, len);
}

static int
c_xmem_not_allreduce(char *why, size_t len)
{
	static float buf[256];
	struct ipc_op d = { .seq = 2, .coll = COLL_BROADCAST,
	    .dtype = MCCL_FLOAT32, .count = 256, .flags = IPC_OP_XMEM,
	    .send_off = (uintptr_t)buf, .recv_off = (uintptr_t)buf };
	struct ipc_op seg = { .seq = 2, .coll = COLL_ALLREDUCE,
	    .dtype = MCCL_FLOAT32, .count = 256, .flags = IPC_OP_XMEM,
	    .send_seg = 1, .recv_seg = 1 };
	struct ipc_op flags = { .seq = 2, .coll = COLL_ALLREDUCE,
	    .dtype = MCCL_FLOAT32, .count = 1, .send_seg = 1, .recv_seg = 1,
	    .flags = 0x80 };

	if (ring_second_refused("xmembcast", &d, MCCL_ERR_INVALID_ARGUMENT,
	    "are for allreduces, with no segment", why, len) == -1 ||
	    ring_second_refused("xmemseg", &seg, MCCL_ERR_INVALID_ARGUMENT,
	    "are for allreduces, with no segment", why, len) == -1)
		return -1;
	return ring_second_refused("xmemflags", &flags,
	    MCCL_ERR_INVALID_ARGUMENT, "unknown flags 0x80", why, len);
}

/* An XMEM allreduce of count floats at send and recv, on an offering job. */
static int
xmem_op(const char *tag, uint64_t send, uint64_t recv, uint64_t count,
    char *why, size_t len)
{
	struct job_conn jc;
	struct ipc_op op = { .coll = COLL_ALLREDUCE, .dtype = MCCL_FLOAT32,
	    .redop = MCCL_SUM, .count = count, .flags = IPC_OP_XMEM,
	    .send_off = send, .recv_off = recv };
	int rc = -1;

	offer_memory = 1;
	if (job_open(&jc, tag, why, len) == 0)
		rc = job_submit(&jc, &op, why, len);
	offer_memory = 0;
	job_close(&jc);
	return rc;
}

static int
c_xmem_works(char *why, size_t len)
{
	static float src[300000], dst[300000];
	int rc;

	for (size_t i = 0; i < 300000; i++)
		src[i] = (float)i + 0.25f;
	if ((rc = xmem_op("xmemok", (uintptr_t)src, (uintptr_t)dst, 300000,
	    why, len)) != 0)
		return rc == -1 ? -1 : failed_with(rc, 0, "", why, len);
	for (size_t i = 0; i < 300000; i++)
		if (dst[i] != src[i]) {
			snprintf(why, len, "dst[%zu] = %g, not %g", i, dst[i],
			    src[i]);
			return -1;
		}
	return 0;
}

static int
c_xmem_bad_address(char *why, size_t len)
{
	static float dst[1024];

	/* the kernel's half of the address space; then a range that wraps */
	if (failed_with(xmem_op("xmemkernel", 0xffff888000000000ULL,
	    (uintptr_t)dst, 1024, why, len), MCCL_ERR_INVALID_ARGUMENT,
	    "could not read 4096 bytes at 0xffff888000000000", why, len) == -1)
		return -1;
	if (failed_with(xmem_op("xmemnull", (uintptr_t)dst, 4096, 1024, why,
	    len), MCCL_ERR_INVALID_ARGUMENT, "could not write 4096 bytes at "
	    "0x1000", why, len) == -1)
		return -1;
	return failed_with(xmem_op("xmemwrap", 0xfffffffffffff000ULL,
	    (uintptr_t)dst, 1024, why, len), MCCL_ERR_INVALID_ARGUMENT,
	    "is not in its memory", why, len);
}

/* A head that claims more descriptors than the ring holds. */
static int
c_ring_head_past(char *why, size_t len)
{
	struct job_conn jc;
	int rc = -1;

	if (job_open(&jc, "headpast", why, len) == 0) {
		__atomic_store_n(&jc.db->sq_head, 1000, __ATOMIC_SEQ_CST);
		__atomic_add_fetch(&jc.db->sq_bell, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &jc.db->sq_bell, FUTEX_WAKE, 1, NULL, NULL,
		    0);
		rc = failed_with(ring_answer(&jc, 1000, why, len),
		    MCCL_ERR_PROTOCOL, "more than its 64 slots", why, len);
	}
	job_close(&jc);
	return rc;
}

/* A collective as a record: refused, the ring is its only way in. */
static int
c_coll_record(char *why, size_t len)
{
	struct ipc_op d = { .seq = 1, .coll = COLL_BARRIER };
	struct job_conn jc;
	char err[WHY_MAX];
	int rc = -1;

	if (job_open(&jc, "collrec", why, len) == -1)
		goto out;
	if (conn_send(jc.fd, IPC_OP, &d, NULL, 0, -1, err, sizeof(err)) !=
	    MCCL_SUCCESS) {
		snprintf(why, len, "%s", err);
		goto out;
	}
	rc = failed_with(ring_answer(&jc, UINT64_MAX, why, len),
	    MCCL_ERR_PROTOCOL, "submission ring", why, len);
out:
	job_close(&jc);
	return rc;
}

static int
c_exact_fit(char *why, size_t len)
{
	struct job_conn jc;
	int rc = -1;

	if (job_open(&jc, "fit", why, len) == 0)
		rc = op_works(&jc, SEG_SIZE - 400, 0, 0, why, len);
	job_close(&jc);
	return rc;
}

static int
c_truncate(char *why, size_t len)
{
	struct job_conn jc;
	int rc = -1;

	if (job_open(&jc, "trunc", why, len) == 0) {
		if (ftruncate(jc.segfd, 0) != -1 || errno != EPERM)
			snprintf(why, len, "ftruncate to 0 of a sealed segment: "
			    "%s", errno == EPERM ? "succeeded" :
			    strerror(errno));
		else if (ftruncate(jc.segfd, 1) != -1 || errno != EPERM)
			snprintf(why, len, "ftruncate to 1 byte: not EPERM");
		else if (fcntl(jc.segfd, F_ADD_SEALS, 0) != -1 ||
		    errno != EPERM)
			snprintf(why, len, "seals could still be changed");
		else
			rc = op_works(&jc, 0, 2048, 0, why, len);
	}
	job_close(&jc);
	return rc;
}

static int
c_punch_hole(char *why, size_t len)
{
	struct job_conn jc;
	int rc = -1;

	if (job_open(&jc, "hole", why, len) == 0)
		rc = op_works(&jc, 0, SEG_SIZE - 400, 1, why, len);
	job_close(&jc);
	return rc;
}

/* ---- client: the daemon's descriptors and mappings ---- */

static long
daemon_pid(void)
{
	static char json[IPC_MSG_MAX];
	char why[WHY_MAX];
	const char *p;

	if (ctl(CTL_STATUS, json, sizeof(json), why, sizeof(why)) == -1 ||
	    (p = strstr(json, "\"pid\"")) == NULL)
		return -1;
	p += strlen("\"pid\"");
	while (*p == ' ' || *p == ':')
		p++;
	return strtol(p, NULL, 10);
}

/* Descriptors the daemon holds, memfd mappings of ours it keeps. */
static int
daemon_resources(long pid, int *nfd, int *nmap)
{
	char path[64], line[512];
	struct dirent *d;
	DIR *dir;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/fd", pid);
	if ((dir = opendir(path)) == NULL)
		return -1;
	*nfd = 0;
	while ((d = readdir(dir)) != NULL)
		*nfd += d->d_name[0] != '.';
	closedir(dir);
	snprintf(path, sizeof(path), "/proc/%ld/maps", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	*nmap = 0;
	while (fgets(line, sizeof(line), f) != NULL)
		*nmap += strstr(line, "memfd:hostile") != NULL;
	fclose(f);
	return 0;
}

static long	start_pid = -1;
static int	start_fds;

static int
c_no_leak(char *why, size_t len)
{
	int nfd = 0, nmap = 0;

	if (start_pid == -1) {
		snprintf(why, len, "(skipped: the daemon's /proc is not "
		    "readable)");
		return 0;
	}
	/* The daemon closes our last connections asynchronously. */
	for (int i = 0; i < 30; i++) {
		if (daemon_resources(start_pid, &nfd, &nmap) == -1) {
			snprintf(why, len, "cannot read /proc/%ld", start_pid);
			return -1;
		}
		if (nfd <= start_fds && nmap == 0)
			return 0;
		usleep(100000);
	}
	snprintf(why, len, "daemon pid %ld holds %d descriptors (%d before) "
	    "and %d mappings of our segments", start_pid, nfd, start_fds, nmap);
	return -1;
}

static long
daemon_rss_kb(long pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "VmRSS:", 6) == 0)
			kb = atol(line + 6);
	fclose(f);
	return kb;
}

/*
 * A client that sends requests and never reads the replies: the daemon
 * must push back (stop reading) or drop it, not queue replies without
 * bound.
 */
/*
 * Send status requests on fd, reading no reply, until the daemon stops
 * reading (1 s without room) or closes; *how says which.
 */
static int
unread_pump(int fd, const char **how)
{
	struct ipc_ctl c = { CTL_STATUS };
	int n, sent = 0;

	*how = "sent them all";
	n = (int)ipc_enc(IPC_CTL, &c, NULL, 0);
	while (sent < 200000) {
		struct pollfd pfd = { fd, POLLOUT, 0 };

		if (send(fd, out, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n) {
			sent++;
			continue;
		}
		if (errno != EAGAIN && errno != EINTR) {
			*how = "then it closed the connection";
			break;
		}
		if (poll(&pfd, 1, 1000) == 0) {
			*how = "then it stopped reading";
			break;
		}
	}
	return sent;
}

static int
c_unread_replies(char *why, size_t len)
{
	struct ipc_hello_ok ok;
	char err[WHY_MAX];
	long before, after;
	int fd, sent;
	const char *how;

	if (start_pid == -1 || (before = daemon_rss_kb(start_pid)) == -1) {
		snprintf(why, len, "(skipped: the daemon's /proc is not "
		    "readable)");
		return 0;
	}
	if ((fd = conn_open(sock_path, REPLY_MS, 0, &ok, NULL, err, sizeof(err))) ==
	    -1) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	sent = unread_pump(fd, &how);
	usleep(300000);
	after = daemon_rss_kb(start_pid);
	close(fd);
	if (after - before > 16384) {
		snprintf(why, len, "the daemon grew by %ld kB queueing replies "
		    "to %d unread requests", after - before, sent);
		return -1;
	}
	snprintf(why, len, "(%d requests, %s; the daemon grew %ld kB)", sent,
	    how, after - before);
	return 0;
}

/*
 * Rank `rank` of a 2-rank job on its own connection, with a doorbell that
 * only the daemon keeps mapped; JOINED comes later.
 */
static int
join_rank(const char *job, uint32_t rank, char *why, size_t len)
{
	struct ipc_hello_ok ok;
	struct ipc_join j;
	char err[WHY_MAX];
	int fd, bfd;

	if ((fd = conn_open(sock_path, REPLY_MS, 0, &ok, NULL, err, sizeof(err))) ==
	    -1) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	if ((bfd = memfd_make(BELL_BYTES, SEG_SEALS)) == -1) {
		snprintf(why, len, "memfd: %s", strerror(errno));
		close(fd);
		return -1;
	}
	if (seg_accepted(fd, BELL_SEG, BELL_BYTES, bfd, why, len) == -1 ||
	    bell_accepted(fd, BELL_SEG, why, len) == -1) {
		close(bfd);
		close(fd);
		return -1;
	}
	close(bfd);
	memset(&j, 0, sizeof(j));
	j.nranks = 2;
	j.rank = rank;
	j.timeout_ms = 10000;
	snprintf(j.job, sizeof(j.job), "%s", job);
	if (conn_send(fd, IPC_JOIN, &j, NULL, 0, -1, err, sizeof(err)) !=
	    MCCL_SUCCESS) {
		snprintf(why, len, "%s", err);
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Rank 0 of a 2-rank job posts receive after receive that rank 1 never
 * sends to: the daemon must bound what one client keeps in flight, in
 * memory and in the time each new operation costs.
 */
static int
c_ops_flood(char *why, size_t len)
{
	static char json[IPC_MSG_MAX];
	struct ipc_op op;
	char job[64], err[WHY_MAX];
	long before, after;
	int fd0 = -1, fd1 = -1, n, sent = 0, rc = -1;
	const char *how = "sent them all";
	uint64_t t0, t1;
	double t, lat;

	if (start_pid == -1 || (before = daemon_rss_kb(start_pid)) == -1) {
		snprintf(why, len, "(skipped: the daemon's /proc is not "
		    "readable)");
		return 0;
	}
	snprintf(job, sizeof(job), "hostile-%d-inflight", (int)getpid());
	if ((fd0 = join_rank(job, 0, why, len)) == -1 ||
	    (fd1 = join_rank(job, 1, why, len)) == -1 ||
	    expect_record(fd0, IPC_JOINED, why, len) == -1 ||
	    expect_record(fd1, IPC_JOINED, why, len) == -1)
		goto done;
	memset(&op, 0, sizeof(op));
	op.coll = COLL_RECV;
	op.dtype = MCCL_INT8;
	op.root = 1;
	op.tag = 1;
	t0 = conn_now_ms();
	while (sent < 100000) {
		struct pollfd pfd = { fd0, POLLOUT, 0 };

		if (conn_now_ms() - t0 > 10000) {
			how = "time out";
			break;
		}
		op.seq = (uint64_t)sent + 1;
		n = (int)ipc_enc(IPC_OP, &op, NULL, 0);
		if (send(fd0, out, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n) {
			sent++;
			continue;
		}
		if (errno != EAGAIN && errno != EINTR) {
			how = "then it closed the connection";
			break;
		}
		if (poll(&pfd, 1, 5000) == 0) {
			how = "then it stopped reading";
			break;
		}
	}
	t = (double)(conn_now_ms() - t0) / 1000;
	/* How long another client waits while these are in flight. */
	t1 = conn_now_ms();
	if (ctl(CTL_STATUS, json, sizeof(json), err, sizeof(err)) == -1)
		snprintf(json, sizeof(json), "failed");
	lat = (double)(conn_now_ms() - t1) / 1000;
	usleep(300000);
	after = daemon_rss_kb(start_pid);
	if (after - before > 16384)
		snprintf(why, len, "the daemon grew by %ld kB holding %d "
		    "operations of one client", after - before, sent);
	else if (strcmp(how, "time out") == 0)
		snprintf(why, len, "the daemon took in only %d operations in "
		    "%.1f s: each one costs more the more are in flight "
		    "(another client's status took %.2f s)", sent, t, lat);
	else {
		snprintf(why, len, "(%d ops in %.1f s, %s; the daemon grew %ld "
		    "kB)", sent, t, how, after - before);
		rc = 0;
	}
done:
	if (fd0 != -1)
		close(fd0);
	if (fd1 != -1)
		close(fd1);
	return rc;
}

static const struct {
	const char	*name;
	case_fn		 fn;
} client_cases[] = {
	{ "SEG_ADD of an unsealed memfd", c_unsealed },
	{ "SEG_ADD of a memfd sealed against growing only", c_grow_sealed },
	{ "SEG_ADD of a memfd without sealing", c_not_sealable },
	{ "SEG_ADD of a regular file", c_regular_file },
	{ "SEG_ADD of a pipe", c_pipe },
	{ "SEG_ADD of a hugetlbfs memfd", c_hugetlb },
	{ "SEG_ADD announcing more than the memfd's size", c_size_larger },
	{ "SEG_ADD announcing less than the memfd's size", c_size_smaller },
	{ "SEG_ADD of an empty segment", c_size_zero },
	{ "SEG_ADD over the per-client byte limit", c_size_limit },
	{ "SEG_ADD of a write-sealed memfd", c_write_sealed },
	{ "SEG_ADD of segment id 0", c_seg_zero },
	{ "SEG_ADD of a duplicate segment id", c_seg_dup },
	{ "unknown control command", c_bad_ctl },
	{ "JOIN with a newline in the job name", c_join_newline },
	{ "JOIN with a job name that is not UTF-8, or has a C1 control",
	    c_join_not_utf8 },
	{ "op: send buffer outside the segment (off 4000)", c_send_outside },
	{ "op: recv buffer outside the segment (off 4000)", c_recv_outside },
	{ "op: buffer one byte past the segment", c_one_byte_over },
	{ "op: send offset near UINT64_MAX", c_off_overflow },
	{ "op: recv offset near UINT64_MAX", c_recv_overflow },
	{ "op: count too large", c_count_huge },
	{ "op: count whose byte size wraps to 0", c_count_wraps },
	{ "op: unregistered segment id", c_unregistered },
	{ "op: a v-collective's vector outside its segment, or out of range",
	    c_vec_bad },
	{ "op: send and recv buffers overlapping, not in place: refused; "
	    "in place: run", c_overlap },
	{ "op: segment id 0 with a length", c_seg_id_zero },
	{ "op: segment deleted before the op", c_after_del },
	{ "BELL on an unregistered segment", c_bell_unregistered },
	{ "BELL on a 1-byte segment", c_bell_small },
	{ "a second BELL", c_bell_twice },
	{ "JOIN before BELL", c_join_no_bell },
	{ "BELL page of garbage: an op is answered there, no record",
	    c_bell_answers },
	{ "ring: a descriptor whose seq falls", c_ring_seq_falls },
	{ "ring: a send in the submission ring", c_ring_send },
	{ "ring: a descriptor with an unknown dtype", c_ring_bad_dtype },
	{ "ring: a descriptor with an unknown wire format", c_ring_bad_wire },
	{ "ring: a bfloat16 wire on an int32 sum", c_ring_wire_int },
	{ "ring: a head 1000 past the tail", c_ring_head_past },
	{ "xmem: from a connection that did not offer its memory",
	    c_xmem_not_offered },
	{ "xmem: a broadcast, a segment, an unknown flag", c_xmem_not_allreduce },
	{ "xmem: an allreduce of the client's own memory works",
	    c_xmem_works },
	{ "xmem: kernel, unmapped and wrapping addresses fail the op, named",
	    c_xmem_bad_address },
	{ "a collective in an IPC_OP record", c_coll_record },
	{ "op: buffer ending exactly at the segment end works", c_exact_fit },
	{ "truncating a sealed segment fails with EPERM, ops work",
	    c_truncate },
	{ "punching a hole in a segment: op works, reads zeros",
	    c_punch_hole },
	{ "client with 100000 operations in flight", c_ops_flood },
	{ "client that never reads its replies", c_unread_replies },
};

static void
client_mode(void)
{
	int nmap;

	if ((start_pid = daemon_pid()) != -1 &&
	    daemon_resources(start_pid, &start_fds, &nmap) == -1)
		start_pid = -1;
	for (size_t i = 0; i < sizeof(bad_records) / sizeof(bad_records[0]);
	    i++) {
		char name[256];

		cur_record = &bad_records[i];
		snprintf(name, sizeof(name), "closes: %s", cur_record->name);
		run_case(name, c_bad_record);
	}
	for (size_t i = 0; i < sizeof(client_cases) / sizeof(client_cases[0]);
	    i++)
		run_case(client_cases[i].name, client_cases[i].fn);
	run_case("no descriptor or mapping leaked", c_no_leak);
}

/* ---- peer ---- */

static int
tcp_connect(char *why, size_t len)
{
	struct addrinfo hints, *res;
	int fd, one = 1, rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(peer_host, peer_port, &hints, &res)) != 0) {
		snprintf(why, len, "%s:%s: %s", peer_host, peer_port,
		    gai_strerror(rc));
		return -1;
	}
	if ((fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) ==
	    -1 || connect(fd, res->ai_addr, res->ai_addrlen) == -1) {
		snprintf(why, len, "connect %s:%s: %s", peer_host, peer_port,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
	} else
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	freeaddrinfo(res);
	return fd;
}

static int
tcp_send(int fd, size_t len, char *why, size_t whylen)
{
	if (send(fd, out, len, MSG_NOSIGNAL) != (ssize_t)len) {
		snprintf(why, whylen, "send: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Read exactly len bytes within ms. */
static int
tcp_read(int fd, uint8_t *buf, size_t len, int ms, char *why, size_t whylen)
{
	uint64_t deadline = conn_now_ms() + (uint64_t)ms;
	size_t got = 0;

	while (got < len) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		uint64_t now = conn_now_ms();
		ssize_t n;

		if (now >= deadline || poll(&pfd, 1, (int)(deadline - now)) ==
		    0) {
			snprintf(why, whylen, "%zu of %zu bytes within %d ms",
			    got, len, ms);
			return -1;
		}
		if ((n = recv(fd, buf + got, len - got, MSG_DONTWAIT)) == 0 ||
		    (n < 0 && errno != EAGAIN && errno != EINTR)) {
			snprintf(why, whylen, "connection closed after %zu of "
			    "%zu bytes", got, len);
			return -1;
		}
		got += n > 0 ? (size_t)n : 0;
	}
	return 0;
}

/* Send a frame of len bytes from out; the daemon must close within ms. */
static int
peer_closes(size_t len, int ms, char *why, size_t whylen)
{
	int fd, rc = -1;

	if ((fd = tcp_connect(why, whylen)) == -1)
		return -1;
	if (len == 0 || tcp_send(fd, len, why, whylen) == 0)
		rc = expect_closed(fd, &peer_proto, ms, why, whylen);
	close(fd);
	return rc;
}

/* A timed close: report how long the daemon waited. */
static int
peer_closes_timed(size_t len, char *why, size_t whylen)
{
	uint64_t t0 = conn_now_ms();
	int ms = connect_timeout_ms + 2000;

	if (peer_closes(len, ms, why, whylen) == -1)
		return -1;
	snprintf(why, whylen, "(closed after %.1f s)",
	    (double)(conn_now_ms() - t0) / 1000);
	return 0;
}

static void
auth_hello(uint32_t node)
{
	struct peer_auth_hello ah;

	ah.node = node;
	for (size_t i = 0; i < sizeof(ah.nonce); i++)
		ah.nonce[i] = (uint8_t)rand();
	peer_enc(PEER_AUTH_HELLO, &ah);
}

static uint32_t
other_index(void)
{
	return self_index == 0 ? 1 : 0;
}

static int
p_garbage(char *why, size_t len)
{
	memset(out, 0x5a, 64);
	return peer_closes(64, CLOSE_MS, why, len);
}

static int
p_magic(char *why, size_t len)
{
	auth_hello(other_index());
	put32(out, IPC_MAGIC);
	return peer_closes(WIRE_HDR_LEN + 36, CLOSE_MS, why, len);
}

static int
p_version(char *why, size_t len)
{
	auth_hello(other_index());
	put16(out + 4, PEER_VERSION + 1);
	return peer_closes(WIRE_HDR_LEN + 36, CLOSE_MS, why, len);
}

static int
p_type(char *why, size_t len)
{
	auth_hello(other_index());
	put16(out + 6, 999);
	return peer_closes(WIRE_HDR_LEN + 36, CLOSE_MS, why, len);
}

static int
p_huge_len(char *why, size_t len)
{
	auth_hello(other_index());
	put32(out + 8, 0xffffffffU);
	return peer_closes(WIRE_HDR_LEN + 36, CLOSE_MS, why, len);
}

/* A PEER_DATA header announcing 64 MiB, which the daemon never reads. */
static int
p_oversized(char *why, size_t len)
{
	struct wire_hdr h = { PEER_MAGIC, PEER_VERSION, PEER_DATA,
	    PEER_DATA_MAX };

	wire_hdr_encode(out, &h);
	memset(out + WIRE_HDR_LEN, 0, 200);
	return peer_closes(WIRE_HDR_LEN + 200, CLOSE_MS, why, len);
}

static int
p_hello_noauth(char *why, size_t len)
{
	struct peer_hello h;

	memset(&h, 0, sizeof(h));
	h.version = PEER_VERSION;
	h.node_index = other_index();
	h.nnodes = nnodes;
	h.cluster_hash = 0x0123456789abcdefULL;
	snprintf(h.node_name, sizeof(h.node_name), "n%u", h.node_index);
	return peer_closes(peer_enc(PEER_HELLO, &h), CLOSE_MS, why, len);
}

static int
p_data_hello(char *why, size_t len)
{
	struct peer_data_hello d = { 0x1234abcdULL, other_index(), 0 };

	return peer_closes(peer_enc(PEER_DATA_HELLO, &d), CLOSE_MS, why, len);
}

static int
p_ping(char *why, size_t len)
{
	struct peer_ping p = { 42 };

	return peer_closes(peer_enc(PEER_PING, &p), CLOSE_MS, why, len);
}

/* A stranger's word that a node is silent: refused, no node pinged. */
static int
p_silent(char *why, size_t len)
{
	struct peer_silent m = { self_index == 0 ? 1 : 0, 99999 };

	return peer_closes(peer_enc(PEER_SILENT, &m), CLOSE_MS, why, len);
}

static int
p_index(uint32_t node, char *why, size_t len)
{
	auth_hello(node);
	return peer_closes(WIRE_HDR_LEN + 36, CLOSE_MS, why, len);
}

static int
p_index_self(char *why, size_t len)
{
	return p_index(self_index, why, len);
}

static int
p_index_nnodes(char *why, size_t len)
{
	return p_index(nnodes, why, len);
}

static int
p_index_max(char *why, size_t len)
{
	return p_index(UINT32_MAX, why, len);
}

/*
 * AUTH_HELLO as the other node, get the challenge, then send what
 * respond() puts in out: the daemon must close.
 */
static int
p_challenged(size_t (*respond)(const struct peer_auth_challenge *), int ms,
    char *why, size_t len)
{
	uint8_t buf[WIRE_HDR_LEN + 68];
	const struct wire_type *t;
	struct peer_auth_challenge c;
	struct wire_hdr h;
	char err[WHY_MAX];
	int fd, rc = -1;
	size_t n;

	if ((fd = tcp_connect(why, len)) == -1)
		return -1;
	auth_hello(other_index());
	if (tcp_send(fd, WIRE_HDR_LEN + 36, why, len) == -1 ||
	    tcp_read(fd, buf, sizeof(buf), CLOSE_MS, why, len) == -1)
		goto done;
	if (wire_hdr_check(&peer_proto, buf, &h, &t, err, sizeof(err)) == -1 ||
	    h.type != PEER_AUTH_CHALLENGE || wire_decode(t, buf + WIRE_HDR_LEN,
	    h.len, &c, NULL, NULL, err, sizeof(err)) == -1) {
		snprintf(why, len, "expected AUTH_CHALLENGE: %s", h.type !=
		    PEER_AUTH_CHALLENGE ? t->name : err);
		goto done;
	}
	if (c.node != self_index) {
		snprintf(why, len, "AUTH_CHALLENGE says node %u, expected %u",
		    c.node, self_index);
		goto done;
	}
	n = respond(&c);
	if (tcp_send(fd, n, why, len) == 0)
		rc = expect_closed(fd, &peer_proto, ms, why, len);
done:
	close(fd);
	return rc;
}

static size_t
r_wrong_mac(const struct peer_auth_challenge *c)
{
	struct peer_auth_response r;

	(void)c;
	memset(r.mac, 0xa5, sizeof(r.mac));
	return peer_enc(PEER_AUTH_RESPONSE, &r);
}

/* The acceptor's own proof sent back: roles differ, so it must fail. */
static size_t
r_reflected(const struct peer_auth_challenge *c)
{
	struct peer_auth_response r;

	memcpy(r.mac, c->mac, sizeof(r.mac));
	return peer_enc(PEER_AUTH_RESPONSE, &r);
}

static size_t
r_hello(const struct peer_auth_challenge *c)
{
	struct peer_hello h;

	(void)c;
	memset(&h, 0, sizeof(h));
	h.version = PEER_VERSION;
	h.node_index = other_index();
	h.nnodes = nnodes;
	snprintf(h.node_name, sizeof(h.node_name), "n%u", h.node_index);
	return peer_enc(PEER_HELLO, &h);
}

static size_t
r_data_hello(const struct peer_auth_challenge *c)
{
	struct peer_data_hello d = { 0x1234abcdULL, other_index(), 0 };

	(void)c;
	return peer_enc(PEER_DATA_HELLO, &d);
}

static size_t
r_truncated(const struct peer_auth_challenge *c)
{
	size_t n = r_wrong_mac(c);

	return n - 20;		/* then silence */
}

static int
p_wrong_mac(char *why, size_t len)
{
	return p_challenged(r_wrong_mac, CLOSE_MS, why, len);
}

static int
p_reflected(char *why, size_t len)
{
	return p_challenged(r_reflected, CLOSE_MS, why, len);
}

static int
p_hello_for_response(char *why, size_t len)
{
	return p_challenged(r_hello, CLOSE_MS, why, len);
}

static int
p_data_for_response(char *why, size_t len)
{
	return p_challenged(r_data_hello, CLOSE_MS, why, len);
}

static int
p_truncated_response(char *why, size_t len)
{
	uint64_t t0 = conn_now_ms();

	if (p_challenged(r_truncated, connect_timeout_ms + 2000, why,
	    len) == -1)
		return -1;
	snprintf(why, len, "(closed after %.1f s)",
	    (double)(conn_now_ms() - t0) / 1000);
	return 0;
}

static int
p_truncated_header(char *why, size_t len)
{
	auth_hello(other_index());
	return peer_closes_timed(6, why, len);
}

static int
p_truncated_body(char *why, size_t len)
{
	auth_hello(other_index());
	return peer_closes_timed(WIRE_HDR_LEN + 10, why, len);
}

static int
p_silence(char *why, size_t len)
{
	return peer_closes_timed(0, why, len);
}

static const struct {
	const char	*name;
	case_fn		 fn;
} peer_cases[] = {
	{ "garbage bytes", p_garbage },
	{ "wrong magic", p_magic },
	{ "wrong version", p_version },
	{ "unknown type", p_type },
	{ "length 0xffffffff", p_huge_len },
	{ "PEER_DATA announcing 64 MiB as first frame", p_oversized },
	{ "PEER_HELLO without authentication", p_hello_noauth },
	{ "PEER_DATA_HELLO of no job, without authentication", p_data_hello },
	{ "PEER_PING without authentication", p_ping },
	{ "PEER_SILENT without authentication", p_silent },
	{ "AUTH_HELLO claiming the daemon's own index", p_index_self },
	{ "AUTH_HELLO claiming index nnodes", p_index_nnodes },
	{ "AUTH_HELLO claiming index 0xffffffff", p_index_max },
	{ "AUTH_RESPONSE with a wrong MAC", p_wrong_mac },
	{ "AUTH_RESPONSE reflecting the daemon's own MAC", p_reflected },
	{ "PEER_HELLO instead of AUTH_RESPONSE", p_hello_for_response },
	{ "PEER_DATA_HELLO instead of AUTH_RESPONSE", p_data_for_response },
	{ "truncated AUTH_RESPONSE then silence", p_truncated_response },
	{ "truncated header then silence", p_truncated_header },
	{ "truncated body then silence", p_truncated_body },
	{ "connection without a byte", p_silence },
};

/* The daemon under test, by its socket: its index and cluster size. */
static int
daemon_identify(void)
{
	struct ipc_hello_ok ok;
	char err[WHY_MAX];
	int fd;

	if ((fd = conn_open(sock_path, REPLY_MS, 0, &ok, NULL, err, sizeof(err))) ==
	    -1) {
		fprintf(stderr, "mccl-hostile: %s\n", err);
		return -1;
	}
	close(fd);
	self_index = ok.node_index;
	nnodes = ok.nnodes;
	return 0;
}

static int
peer_mode(void)
{
	char why[WHY_MAX] = "";

	if (daemon_identify() == -1)
		return -1;
	if (nnodes < 2) {
		fprintf(stderr, "mccl-hostile: the daemon has no peers\n");
		return -1;
	}
	check_peers = 1;
	if (daemon_serves(why, sizeof(why)) == -1) {
		fprintf(stderr, "mccl-hostile: before the first case: %s\n",
		    why);
		return -1;
	}
	for (size_t i = 0; i < sizeof(peer_cases) / sizeof(peer_cases[0]); i++)
		run_case(peer_cases[i].name, peer_cases[i].fn);
	return 0;
}

/* ---- unauthenticated peer ---- */

/* Connect, hear nothing for a while, send out[0..len): nothing comes back. */
static int
u_silent_daemon(size_t len, char *why, size_t whylen)
{
	struct pollfd pfd;
	int fd, rc = -1;

	if ((fd = tcp_connect(why, whylen)) == -1)
		return -1;
	pfd.fd = fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 300) != 0)
		snprintf(why, whylen, "the daemon spoke (or closed) before "
		    "we sent anything");
	else if (tcp_send(fd, len, why, whylen) == 0)
		rc = expect_closed(fd, &peer_proto, CLOSE_MS, why, whylen);
	close(fd);
	return rc;
}

static int
u_hello(char *why, size_t len)
{
	struct peer_hello h;

	memset(&h, 0, sizeof(h));
	h.version = PEER_VERSION;
	h.node_index = other_index();
	h.nnodes = nnodes;
	h.cluster_hash = 0x0123456789abcdefULL;
	snprintf(h.node_name, sizeof(h.node_name), "n%u", h.node_index);
	return u_silent_daemon(peer_enc(PEER_HELLO, &h), why, len);
}

static int
u_data_hello(char *why, size_t len)
{
	struct peer_data_hello d = { 1, other_index(), PEER_STREAM_COLL };

	return u_silent_daemon(peer_enc(PEER_DATA_HELLO, &d), why, len);
}

static int
u_join(char *why, size_t len)
{
	struct peer_join j;

	memset(&j, 0, sizeof(j));
	j.nranks = 1;
	j.node = other_index();
	snprintf(j.job, sizeof(j.job), "intruder");
	return u_silent_daemon(peer_enc(PEER_JOIN, &j), why, len);
}

static int
u_abort(char *why, size_t len)
{
	struct peer_abort a = { 1, MCCL_ERR_ABORTED, other_index() };

	return u_silent_daemon(peer_enc(PEER_ABORT, &a), why, len);
}

static const struct {
	const char	*name;
	case_fn		 fn;
} unauth_cases[] = {
	{ "unauthenticated PEER_HELLO: no byte back, closed", u_hello },
	{ "unauthenticated PEER_DATA_HELLO: no byte back, closed",
	    u_data_hello },
	{ "unauthenticated PEER_JOIN: no byte back, closed", u_join },
	{ "unauthenticated PEER_ABORT: no byte back, closed", u_abort },
};

static int
unauth_mode(void)
{
	if (sock_path != NULL) {
		if (daemon_identify() == -1)
			return -1;
		check_peers = nnodes > 1;
	} else {
		self_index = 1;
		nnodes = 2;
	}
	for (size_t i = 0; i < sizeof(unauth_cases) / sizeof(unauth_cases[0]);
	    i++) {
		char why[WHY_MAX] = "";

		if (sock_path != NULL) {
			run_case(unauth_cases[i].name, unauth_cases[i].fn);
			continue;
		}
		/* Without the daemon's socket: the case alone. */
		if (unauth_cases[i].fn(why, sizeof(why)) == 0) {
			printf("ok %s\n", unauth_cases[i].name);
			npassed++;
		} else {
			printf("FAIL %s: %s\n", unauth_cases[i].name, why);
			nfailed++;
		}
		fflush(stdout);
	}
	return 0;
}

/* ---- early: an authenticated peer opens data links of no job ---- */

/* Authenticate as node on fd with the key auth_init loaded. */
static int
early_auth(int fd, uint32_t node, char *why, size_t len)
{
	struct peer_auth_hello ah = { node, { 0 } };
	struct peer_auth_challenge c;
	struct peer_auth_response r;
	const struct wire_type *t;
	uint8_t buf[WIRE_HDR_LEN + sizeof(c)];
	size_t want = WIRE_HDR_LEN + 4 + 2 * AUTH_NONCE_LEN, got = 0;
	struct wire_hdr h;
	ssize_t n;

	auth_nonce(ah.nonce);
	if (tcp_send(fd, peer_enc(PEER_AUTH_HELLO, &ah), why, len) == -1)
		return -1;
	while (got < want && (n = recv(fd, buf + got, want - got, 0)) > 0)
		got += (size_t)n;
	if (got < want || wire_hdr_check(&peer_proto, buf, &h, &t, why,
	    len) == -1 || wire_decode(t, buf + WIRE_HDR_LEN, h.len, &c, NULL,
	    NULL, why, len) == -1) {
		if (got < want)
			snprintf(why, len, "no challenge");
		return -1;
	}
	auth_mac(r.mac, 'C', c.nonce, ah.nonce, node);
	return tcp_send(fd, peer_enc(PEER_AUTH_RESPONSE, &r), why, len);
}

/*
 * n data links of unknown jobs (ids from id_base), authenticated as node:
 * the daemon may keep some until their jobs form, or serve some as check
 * links, never all of them.
 */
static int
early_mode(const char *key_file, uint32_t node, int n, uint64_t id_base)
{
	char why[WHY_MAX] = "";
	int *fds, kept = 0, sent = 0;

	if (auth_init(key_file, "", why, sizeof(why)) == -1 ||
	    (fds = malloc((size_t)n * sizeof(int))) == NULL) {
		printf("FAIL early: %s\n", why);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct peer_data_hello d = { id_base + (uint64_t)i, node,
		    PEER_STREAM_COLL };

		if ((fds[i] = tcp_connect(why, sizeof(why))) == -1 ||
		    early_auth(fds[i], node, why, sizeof(why)) == -1 ||
		    tcp_send(fds[i], peer_enc(PEER_DATA_HELLO, &d), why,
		    sizeof(why)) == -1) {
			printf("FAIL early: link %d: %s\n", i, why);
			break;
		}
		sent++;
	}
	usleep(500000);
	for (int i = 0; i < sent; i++) {
		char c;

		ssize_t got = recv(fds[i], &c, 1, MSG_DONTWAIT);

		/* Open: nothing yet, or a check link's transport offer. */
		kept += got == 1 || (got == -1 && errno == EAGAIN);
		close(fds[i]);
	}
	free(fds);
	printf("%d data links sent, %d kept\n", sent, kept);
	return sent == n ? 0 : -1;
}

/* ---- unread: many connections of one user leave replies unread ---- */

static int
unread_mode(int n)
{
	const char *how;
	char err[WHY_MAX];
	struct ipc_hello_ok ok;
	int *fds, stopped = 0, sent = 0;

	if ((fds = malloc((size_t)n * sizeof(int))) == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		fds[i] = -1;
	for (int i = 0; i < n; i++) {
		if ((fds[i] = conn_open(sock_path, REPLY_MS, 0, &ok, NULL, err,
		    sizeof(err))) == -1) {
			printf("FAIL connection %d: %s\n", i, err);
			nfailed++;
			break;
		}
		sent += unread_pump(fds[i], &how);
		stopped += strcmp(how, "then it stopped reading") == 0;
	}
	printf("%d requests sent on %d connections, %d stopped\n", sent, n,
	    stopped);
	for (int i = 0; i < n; i++)
		if (fds[i] != -1)
			close(fds[i]);
	free(fds);
	return 0;
}

/* ---- flood: idle connections held open ---- */

/* Open connections until n are open or one fails; returns how many. */
static int
flood_fill(int *fds, int n)
{
	char why[WHY_MAX];
	int got = 0;

	for (int i = 0; i < n; i++)
		if (fds[i] == -1 &&
		    (fds[i] = tcp_connect(why, sizeof(why))) == -1)
			break;
	for (int i = 0; i < n; i++)
		got += fds[i] != -1;
	return got;
}

/*
 * Hold n idle connections for ms; with reopen, open a new one for each
 * the daemon closes, as an attacker bent on keeping its table full would.
 */
static int
flood_mode(int n, int ms, int reopen)
{
	uint64_t end;
	unsigned reopened = 0;
	int *fds, got;

	if ((fds = malloc((size_t)n * sizeof(int))) == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		fds[i] = -1;
	got = flood_fill(fds, n);
	printf("%d connections open\n", got);
	fflush(stdout);
	end = conn_now_ms() + (uint64_t)ms;
	while (conn_now_ms() < end) {
		char c;

		usleep(reopen ? 20000 : (useconds_t)ms * 1000);
		for (int i = 0; reopen && i < n; i++)
			if (fds[i] != -1 && recv(fds[i], &c, 1, MSG_DONTWAIT) == 0) {
				close(fds[i]);
				fds[i] = -1;
				reopened++;
			}
		if (reopen)
			flood_fill(fds, n);
	}
	if (reopen)
		printf("%u connections reopened\n", reopened);
	for (int i = 0; i < n; i++)
		if (fds[i] != -1)
			close(fds[i]);
	free(fds);
	return got > 0 ? 0 : -1;
}

/* ---- junk: request lines that never end ---- */

/* Send up to bytes of 'A' on fd within 2 s; 1 if the daemon closed it. */
static int
junk_send(int fd, size_t bytes)
{
	static char buf[65536];
	uint64_t end = conn_now_ms() + 2000;
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	memset(buf, 'A', sizeof(buf));
	while (bytes > 0 && conn_now_ms() < end) {
		ssize_t n = send(fd, buf, bytes < sizeof(buf) ? bytes :
		    sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0)
			bytes -= (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EINTR)
			return 1;
		else
			poll(&p, 1, 100);
	}
	return 0;
}

/* All n connections open together, each sending its junk in turn. */
static int
junk_mode(int n, size_t bytes)
{
	char why[WHY_MAX];
	int closed = 0, opened = 0, *fds;

	if ((fds = calloc((size_t)n, sizeof(int))) == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		opened += (fds[i] = tcp_connect(why, sizeof(why))) != -1;
	for (int i = 0; i < n; i++)
		if (fds[i] != -1)
			closed += junk_send(fds[i], bytes);
	for (int i = 0; i < n; i++)
		if (fds[i] != -1)
			close(fds[i]);
	free(fds);
	printf("%d connections, %d closed by the daemon mid-request\n",
	    opened, closed);
	return opened > 0 ? 0 : -1;
}

static void
usage(void)
{
	fprintf(stderr, "usage: mccl-hostile client SOCKET [LOG]\n"
	    "       mccl-hostile peer HOST PORT SOCKET [CONNECT_TIMEOUT_MS]\n"
	    "       mccl-hostile unauth HOST PORT [SOCKET]\n"
	    "       mccl-hostile flood HOST PORT N MS [reopen]\n"
	    "       mccl-hostile junk HOST PORT N BYTES\n"
	    "       mccl-hostile unread SOCKET N\n"
	    "       mccl-hostile early HOST PORT KEYFILE NODE N\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	int rc;

	srand((unsigned)getpid());
	if ((argc == 3 || argc == 4) && strcmp(argv[1], "client") == 0) {
		sock_path = argv[2];
		log_path = argc == 4 ? argv[3] : NULL;
		client_mode();
		rc = 0;
	} else if ((argc == 5 || argc == 6) && strcmp(argv[1], "peer") == 0) {
		peer_host = argv[2];
		peer_port = argv[3];
		sock_path = argv[4];
		if (argc == 6 && (connect_timeout_ms = atoi(argv[5])) <= 0)
			usage();
		rc = peer_mode();
	} else if ((argc == 4 || argc == 5) &&
	    strcmp(argv[1], "unauth") == 0) {
		peer_host = argv[2];
		peer_port = argv[3];
		sock_path = argc == 5 ? argv[4] : NULL;
		rc = unauth_mode();
	} else if (argc == 7 && strcmp(argv[1], "early") == 0) {
		peer_host = argv[2];
		peer_port = argv[3];
		return early_mode(argv[4], (uint32_t)atoi(argv[5]),
		    atoi(argv[6]), 0x7e570000ULL) == 0 ? 0 : 1;
	} else if (argc == 7 && strcmp(argv[1], "checklinks") == 0) {
		peer_host = argv[2];
		peer_port = argv[3];
		return early_mode(argv[4], (uint32_t)atoi(argv[5]),
		    atoi(argv[6]), PEER_CHECK_JOB) == 0 ? 0 : 1;
	} else if (argc == 4 && strcmp(argv[1], "unread") == 0) {
		sock_path = argv[2];
		return unread_mode(atoi(argv[3])) == 0 && nfailed == 0 ? 0 : 1;
	} else if ((argc == 6 || (argc == 7 && strcmp(argv[6], "reopen") ==
	    0)) && strcmp(argv[1], "flood") == 0) {
		peer_host = argv[2];
		peer_port = argv[3];
		return flood_mode(atoi(argv[4]), atoi(argv[5]), argc == 7) == 0 ?
		    0 : 2;
	} else if (argc == 6 && strcmp(argv[1], "junk") == 0) {
		peer_host = argv[2];
		peer_port = argv[3];
		return junk_mode(atoi(argv[4]), strtoull(argv[5], NULL, 10)) ==
		    0 ? 0 : 2;
	} else
		usage();
	if (rc == -1)
		return 2;
	printf("%d passed, %d failed\n", npassed, nfailed);
	return nfailed > 0 ? 1 : 0;
}
