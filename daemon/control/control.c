/*
 * control.c: the daemon's Unix socket.  Applications (libmccl) and mcclctl
 * connect here; each record is checked (size, version, type, exact length,
 * descriptors) before dispatch, and a bad one closes only that connection.
 * Clients are identified by SO_PEERCRED, never by what they claim.
 */
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/magic.h>
#include <time.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>
#include <systemd/sd-daemon.h>

#include "mccld.h"
#include "control/control.h"

#define CLIENT_FDS_MAX	4	/* room to notice a record carrying too many */
#define OUTQ_MAX	(4U * 1024 * 1024)	/* replies a client left unread */
#define REFUSING_MAX	16	/* refused connections being answered */

struct outmsg {
	TAILQ_ENTRY(outmsg) entry;
	size_t		len;
	uint8_t		buf[];
};

static struct client_list clients = TAILQ_HEAD_INITIALIZER(clients);
static uint32_t		 nclients;

static int		 control_fd = -1;
static struct event	*control_ev;
static char		 control_path[108];
static int		 control_activated;	/* the socket is systemd's */

static void	client_read_cb(int, short, void *);
static void	client_write_cb(int, short, void *);
static void	client_close(struct client *, const char *);
static int	port_send(struct client *, uint16_t, const void *, const void *,
		    size_t);
static int	port_reply(struct client *, const char *);
static void	port_error(struct client *, uint32_t, uint16_t, const char *);
static void	port_op_done(struct client *, const struct op *, uint64_t, int,
		    const char *);
static int	port_sees(const struct client *, uid_t);
static void	port_event(const char *, const uid_t *, json_t *);

/* The daemon is going down: no new clients, no new peer connections,
 * every job told. */
void
control_shutdown(const char *why)
{
	ctl_stopping = 1;
	job_shutdown(why);
}

uint32_t
client_count(void)
{
	return nclients;
}

/* Remove a stale socket at path; never anything that is not a socket. */
static int
control_unlink_stale(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(path, &st) == -1)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a socket (%s): "
		    "refusing to replace it", path, S_ISDIR(st.st_mode) ?
		    "a directory" : S_ISREG(st.st_mode) ? "a regular file" :
		    "another kind of file");
		return -1;
	}
	if (unlink(path) == -1) {
		snprintf(err, errlen, "removing the stale socket %s: %s", path,
		    strerror(errno));
		return -1;
	}
	return 0;
}

static int
control_bind(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	wire_strlcpy(sun.sun_path, path, sizeof(sun.sun_path));
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* A socket that still answers belongs to a running daemon. */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
		snprintf(err, errlen, "%s: another mccld is listening there",
		    path);
		close(fd);
		return -1;
	}
	if (control_unlink_stale(path, err, errlen) == -1) {
		close(fd);
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    chmod(path, 0666) == -1 || listen(fd, 128) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Make the socket's directory, world-searchable (access is per
 * SO_PEERCRED), and check that it is ours: a directory another user made
 * or may write into could hold an impostor's socket or read our host key.
 */
static int
control_mkdir(const char *path, char *err, size_t errlen)
{
	uid_t ok[] = { geteuid(), 0 };
	char dir[108], why[ERR_MAX];
	char *slash;

	wire_strlcpy(dir, path, sizeof(dir));
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0755) == -1 && errno != EEXIST) {
			snprintf(err, errlen, "mkdir %s: %s", dir,
			    strerror(errno));
			return -1;
		}
	}
	if (proto_dir_check(path, ok, geteuid() == 0 ? 1 : 2, why,
	    sizeof(why)) == -1) {
		snprintf(err, errlen, "socket %s: %s", path, why);
		return -1;
	}
	return 0;
}

static uint32_t
uid_clients(uid_t uid)
{
	struct client *c;
	uint32_t n = 0;

	TAILQ_FOREACH(c, &clients, entry)
		n += c->uid == uid;
	return n;
}

/* A refused connection, answered once its HELLO is in. */
struct refusal {
	TAILQ_ENTRY(refusal) entry;
	int		 fd;
	struct event	*ev;
	size_t		 len;
	uint8_t		 buf[WIRE_HDR_LEN + 8 + ERR_MAX];
};

static TAILQ_HEAD(, refusal) refusing = TAILQ_HEAD_INITIALIZER(refusing);
static int	nrefusing;

static void
refusal_free(struct refusal *r)
{
	close(r->fd);
	event_free(r->ev);
	TAILQ_REMOVE(&refusing, r, entry);
	free(r);
	nrefusing--;
}

/*
 * Send the refusal and close.  Closing a Unix socket with a record still
 * unread resets the connection and loses what we sent, so the client's
 * HELLO is read first (or the wait for it is given up after a second).
 */
static void
refusal_cb(int fd, short events, void *arg)
{
	struct refusal *r = arg;
	uint8_t hello[256];

	if (events & EV_READ)
		recv(fd, hello, sizeof(hello), MSG_DONTWAIT);
	send(fd, r->buf, r->len, MSG_NOSIGNAL | MSG_DONTWAIT);
	refusal_free(r);
}

/*
 * Over a limit, or shutting down: tell the client why rather than leave
 * it a broken pipe.  Returns 1 when the connection was refused.
 */
static int
control_refuse(int fd, const struct ucred *cred)
{
	struct ipc_error e = { MCCL_ERR_NO_MEMORY, IPC_HELLO };
	struct timeval tv = { 1, 0 };
	struct refusal *r;
	char why[ERR_MAX];

	if (ctl_stopping) {
		e.code = MCCL_ERR_ABORTED;
		snprintf(why, sizeof(why), "mccld on node %s is shutting down",
		    conf->node_name);
	} else if (nclients >= conf->max_clients)
		snprintf(why, sizeof(why), "the daemon has max_clients (%u) "
		    "connections", conf->max_clients);
	else if (uid_clients(cred->uid) >= conf->max_connections_per_uid)
		snprintf(why, sizeof(why), "uid %u already has %u connections "
		    "(max_connections_per_uid)", (unsigned)cred->uid,
		    conf->max_connections_per_uid);
	else
		return 0;
	log_warnx("control: refusing pid %d uid %u: %s", (int)cred->pid,
	    (unsigned)cred->uid, why);
	/* A few at a time: past that, a flood gets the bare close. */
	if (nrefusing >= REFUSING_MAX || (r = calloc(1, sizeof(*r))) == NULL) {
		close(fd);
		return 1;
	}
	r->len = wire_encode(&ipc_proto, IPC_ERROR, &e, why, strlen(why),
	    r->buf, sizeof(r->buf));
	r->fd = fd;
	r->ev = event_new(ctl_base, fd, EV_READ, refusal_cb, r);
	event_add(r->ev, &tv);
	TAILQ_INSERT_TAIL(&refusing, r, entry);
	nrefusing++;
	return 1;
}

static void
control_accept_cb(int fd, short events, void *arg)
{
	struct client *c;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int cfd;

	(void)events;
	(void)arg;
	if ((cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) == -1) {
		if (errno == EMFILE || errno == ENFILE)
			listener_pause(control_ev, "control");
		else if (errno != EAGAIN && errno != EINTR)
			log_warn("control: accept");
		return;
	}
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		log_warn("control: SO_PEERCRED");
		close(cfd);
		return;
	}
	if (control_refuse(cfd, &cred))
		return;
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->segs = segtab_new()) == NULL) {
		log_warn("control: calloc");
		free(c);
		close(cfd);
		return;
	}
	c->fd = cfd;
	c->uid = cred.uid;
	c->gid = cred.gid;
	c->pid = cred.pid;
	snprintf(c->desc, sizeof(c->desc), "pid %d uid %u", (int)cred.pid,
	    (unsigned)cred.uid);
	TAILQ_INIT(&c->outq);
	c->ev_read = event_new(ctl_base, cfd, EV_READ | EV_PERSIST,
	    client_read_cb, c);
	c->ev_write = event_new(ctl_base, cfd, EV_WRITE, client_write_cb, c);
	event_add(c->ev_read, NULL);
	TAILQ_INSERT_TAIL(&clients, c, entry);
	nclients++;
	log_debug("control: client %s connected", c->desc);
}

/* A listening SOCK_SEQPACKET Unix socket passed by systemd, or -1. */
static int
control_activated_fd(void)
{
	int n = sd_listen_fds(1);

	for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; fd++)
		if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) > 0) {
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
			fcntl(fd, F_SETFD, FD_CLOEXEC);
			return fd;
		}
	return -1;
}

/* Listen on path, or adopt an already listening descriptor (systemd). */
int
control_listen(const char *path, char *err, size_t errlen)
{
	int fd = -1;

	wire_strlcpy(control_path, path, sizeof(control_path));
	if ((fd = control_activated_fd()) != -1) {
		control_activated = 1;
		log_info("control: listening on the socket systemd passed");
	} else if (control_mkdir(path, err, errlen) == -1 ||
	    (fd = control_bind(path, err, errlen)) == -1)
		return -1;
	control_fd = fd;
	control_ev = event_new(ctl_base, fd, EV_READ | EV_PERSIST,
	    control_accept_cb, NULL);
	event_add(control_ev, NULL);
	client_port_set(&(struct client_port){ port_send, port_reply,
	    port_error, port_op_done, port_sees, port_event });
	return 0;
}

void
control_close(void)
{
	struct client *c;

	while ((c = TAILQ_FIRST(&clients)) != NULL)
		client_close(c, NULL);
	while (!TAILQ_EMPTY(&refusing))
		refusal_free(TAILQ_FIRST(&refusing));
	if (control_ev != NULL)
		event_free(control_ev);
	if (control_fd != -1) {
		close(control_fd);
		if (!control_activated)	/* systemd's socket outlives us */
			unlink(control_path);
	}
}

/* ---- segments ---- */

/*
 * A client's memory must never be able to fault the daemon.  Only shmem
 * memfds pass: sealed against shrinking, nothing can end the mapping early,
 * and a page punched out of one is given again, zeroed, when touched (the
 * kernel's own shm mount has no size limit; out of memory is the OOM
 * killer's, never SIGBUS).  hugetlbfs is refused: a punched huge page is
 * given again only while the pool has one free, else the access is SIGBUS.
 */
static int
seg_check_fs(int fd, char *err, size_t errlen)
{
	struct statfs fs;

	if (fstatfs(fd, &fs) == -1) {
		snprintf(err, errlen, "fstatfs: %s", strerror(errno));
		return -1;
	}
	if (fs.f_type == TMPFS_MAGIC)
		return 0;
	snprintf(err, errlen, "segment is %s, not an ordinary memfd (shmem): "
	    "only memfd_create() memory without MFD_HUGETLB is accepted",
	    fs.f_type == HUGETLBFS_MAGIC ? "hugetlbfs memory (MFD_HUGETLB), "
	    "which faults when its pool runs dry," : "on another file system");
	return -1;
}

static int
seg_check_fd(int fd, uint64_t size, char *err, size_t errlen)
{
	struct stat st;
	int seals;

	if ((seals = fcntl(fd, F_GET_SEALS)) == -1) {
		snprintf(err, errlen, "not a sealable memfd: %s",
		    strerror(errno));
		return -1;
	}
	if (!(seals & F_SEAL_SHRINK)) {
		snprintf(err, errlen, "segment is not sealed against "
		    "shrinking (F_SEAL_SHRINK)");
		return -1;
	}
	if (seg_check_fs(fd, err, errlen) == -1)
		return -1;
	if (fstat(fd, &st) == -1 || (uint64_t)st.st_size != size) {
		snprintf(err, errlen, "segment size %llu does not match the "
		    "announced %llu", (unsigned long long)st.st_size,
		    (unsigned long long)size);
		return -1;
	}
	return 0;
}

static void
client_seg_add(struct client *c, const struct ipc_seg_add *m, int fd)
{
	struct ipc_seg_ok ok = { m->seg_id };
	struct segtab *t = c->segs;
	char err[ERR_MAX];
	void *base;

	if (m->seg_id == 0 || segtab_find(t, m->seg_id) != NULL)
		snprintf(err, sizeof(err), "segment id %u is %s", m->seg_id,
		    m->seg_id == 0 ? "reserved" : "already registered");
	else if (m->size == 0)
		snprintf(err, sizeof(err), "segment %u is empty", m->seg_id);
	else if (t->nsegs >= conf->max_segments)
		snprintf(err, sizeof(err), "segment %u: the client already has "
		    "%u segments (max_segments)", m->seg_id, t->nsegs);
	else if (m->size > conf->max_segment_bytes - t->bytes)
		snprintf(err, sizeof(err), "segment %u of %llu bytes: over the "
		    "limit of %llu bytes per client (max_segment_bytes; %llu "
		    "in use)", m->seg_id, (unsigned long long)m->size,
		    (unsigned long long)conf->max_segment_bytes,
		    (unsigned long long)t->bytes);
	else if (seg_check_fd(fd, m->size, err, sizeof(err)) == 0) {
		base = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		    fd, 0);
		if (base != MAP_FAILED && segtab_add(t, m->seg_id, base,
		    m->size) == 0) {
			close(fd);
			client_send(c, IPC_SEG_OK, &ok, NULL, 0);
			return;
		}
		if (base != MAP_FAILED)
			munmap(base, m->size);
		snprintf(err, sizeof(err), "cannot map segment %u: %s",
		    m->seg_id, strerror(errno));
	}
	close(fd);
	log_debug("control: client %s: %s", c->desc, err);
	client_error(c, MCCL_ERR_INVALID_ARGUMENT, IPC_SEG_ADD, err);
}

/* A registered segment becomes the connection's doorbell. */
static void
client_bell(struct client *c, const struct ipc_bell *m)
{
	struct ipc_seg_ok ok = { m->seg_id };
	char err[ERR_MAX];
	struct seg *s;

	if ((s = segtab_find(c->segs, m->seg_id)) == NULL)
		snprintf(err, sizeof(err), "doorbell: segment %u is not "
		    "registered", m->seg_id);
	else if (s->size < IPC_BELL_SIZE)
		snprintf(err, sizeof(err), "doorbell: segment %u has %llu "
		    "bytes, fewer than %zu", m->seg_id,
		    (unsigned long long)s->size, IPC_BELL_SIZE);
	else if (c->bell != NULL)
		snprintf(err, sizeof(err), "this connection has a doorbell");
	else {
		seg_ref(s);
		c->bell = s;
		client_send(c, IPC_SEG_OK, &ok, NULL, 0);
		return;
	}
	client_error(c, MCCL_ERR_INVALID_ARGUMENT, IPC_BELL, err);
}

static void
client_seg_del(struct client *c, const struct ipc_seg_del *m)
{
	segtab_del(c->segs, m->seg_id);
}

/* ---- output ---- */

/* Replies queued for the connections of uid. */
static uint64_t
uid_outq_bytes(uid_t uid)
{
	struct client *c;
	uint64_t n = 0;

	TAILQ_FOREACH(c, &clients, entry)
		n += c->uid == uid ? c->outq_bytes : 0;
	return n;
}

static int
port_send(struct client *c, uint16_t type, const void *msg,
    const void *trailer, size_t trailer_len)
{
	struct outmsg *o;
	uint8_t buf[IPC_MSG_MAX];
	size_t len;

	if ((len = wire_encode(&ipc_proto, type, msg, trailer, trailer_len, buf,
	    sizeof(buf))) == 0) {
		log_warnx("control: cannot encode %u for %s", type, c->desc);
		return -1;
	}
	if (TAILQ_EMPTY(&c->outq) && send(c->fd, buf, len, MSG_NOSIGNAL |
	    MSG_DONTWAIT) == (ssize_t)len) {
		if (c->bell != NULL)
			bell_ring(c->bell, 0);
		return 0;
	}
	/*
	 * The client is slow to read: keep the record, in order, and stop
	 * reading its requests past a cap per connection and one per uid
	 * (a user's many connections together).
	 */
	if (c->outq_bytes + len > OUTQ_MAX || uid_outq_bytes(c->uid) + len >
	    conf->max_reply_bytes_per_uid) {
		if (!c->outq_full)
			log_warnx("control: client %s leaves its replies unread "
			    "(%u bytes queued, %llu for uid %u): reading nothing "
			    "more from it until it does", c->desc, c->outq_bytes,
			    (unsigned long long)uid_outq_bytes(c->uid),
			    (unsigned)c->uid);
		c->outq_full = 1;
		event_del(c->ev_read);
	}
	if ((o = malloc(sizeof(*o) + len)) == NULL) {
		log_warn("control: queueing for %s", c->desc);
		return -1;
	}
	o->len = len;
	memcpy(o->buf, buf, len);
	TAILQ_INSERT_TAIL(&c->outq, o, entry);
	c->outq_bytes += (uint32_t)len;
	event_add(c->ev_write, NULL);
	return 0;
}

/*
 * A JSON document to c as IPC_CTL_REPLY records: in pieces where it is
 * longer than one record, each but the last marked more (protocol 8).
 * One past CTL_DOC_MAX is refused with an error instead.
 */
static int
port_reply(struct client *c, const char *text)
{
	struct ipc_ctl_reply r = { 0, 0 };
	size_t len = strlen(text), at = 0, n;
	char err[ERR_MAX];

	if (len > CTL_DOC_MAX) {
		snprintf(err, sizeof(err), "a reply of %zu bytes is past the "
		    "limit of %u", len, CTL_DOC_MAX);
		client_error(c, MCCL_ERR_NO_MEMORY, IPC_CTL, err);
		return -1;
	}
	do {
		n = len - at < CTL_PIECE_MAX ? len - at : CTL_PIECE_MAX;
		r.more = at + n < len;
		if (client_send(c, IPC_CTL_REPLY, &r, text + at, n) == -1)
			return -1;
		at += n;
	} while (at < len);
	return 0;
}

static void
client_write_cb(int fd, short events, void *arg)
{
	struct client *c = arg;
	struct outmsg *o;

	(void)events;
	while ((o = TAILQ_FIRST(&c->outq)) != NULL) {
		if (send(fd, o->buf, o->len, MSG_NOSIGNAL | MSG_DONTWAIT) !=
		    (ssize_t)o->len) {
			if (errno == EAGAIN || errno == EINTR)
				event_add(c->ev_write, NULL);
			else	/* gone: we may not be reading it to notice */
				client_close(c, NULL);
			return;
		}
		TAILQ_REMOVE(&c->outq, o, entry);
		c->outq_bytes -= (uint32_t)o->len;
		free(o);
		if (c->bell != NULL)
			bell_ring(c->bell, 0);
	}
	/* All caught up: read its requests again. */
	if (c->outq_full) {
		c->outq_full = 0;
		event_add(c->ev_read, NULL);
	}
}

static void
port_error(struct client *c, uint32_t code, uint16_t request,
    const char *msg)
{
	struct ipc_error e = { code, request };

	client_send(c, IPC_ERROR, &e, msg, strnlen(msg, IPC_TEXT_MAX));
}

static void
port_op_done(struct client *c, const struct op *op, uint64_t seq, int code,
    const char *msg)
{
	struct ipc_op_done d = { seq, (uint32_t)code, 0, 0 };

	if (op != NULL && code == 0 && op->desc.coll == COLL_RECV) {
		d.source = op->p2p_source;
		d.tag = op->p2p_tag;
	}
	if (c->inflight > 0)
		c->inflight--;
	client_send(c, IPC_OP_DONE, &d, msg, code == 0 ? 0 :
	    strnlen(msg, IPC_TEXT_MAX));
}

/* ---- mcclctl ---- */

/* mcclctl status: what a user may know, counts of its own jobs and
 * connections. */
json_t *
control_status(const struct client *c)
{
	int priv = client_privileged(c);
	json_t *listen = json_array();
	uint32_t up = 0;

	for (size_t i = 0; i < conf->nlisten; i++)
		json_array_append_new(listen, json_sprintf("%s:%u",
		    conf->listen[i].host, conf->listen[i].port));
	for (uint32_t i = 0; i < conf->nnodes; i++)
		up += i != conf->node_index && peer_is_up(i);
	return json_pack("{s:s, s:i, s:s, s:i, s:I, s:s, s:o, s:i, s:i, s:i, "
	    "s:i, s:s, s:o}",
	    "node", conf->node_name, "node_index", (int)conf->node_index,
	    "version", MCCLD_VERSION, "pid", (int)getpid(),
	    "uptime_s", (json_int_t)((now_ns() - ctl_started_ns) / 1000000000),
	    "socket", control_path, "listen", listen,
	    "cluster_size", (int)conf->nnodes, "peers_up", (int)up,
	    "clients", (int)(priv ? nclients : uid_clients(c->uid)),
	    "jobs", job_count(c),
	    "log_level", log_level_name(log_getlevel()),
	    "link_cost", linkcost_ctl());
}

/*
 * mcclctl monitor: every event, as a reply, to each monitoring client
 * that may see it (a job's events: its uid and the privileged).  A monitor
 * that does not keep up loses events rather than our memory.
 */
static void
port_event(const char *event, const uid_t *owner, json_t *fields)
{
	struct client *c;
	char when[32], *text;

	utc_time(time(NULL), when, sizeof(when));
	json_object_set_new(fields, "time", json_string(when));
	json_object_set_new(fields, "event", json_string(event));
	json_object_set_new(fields, "node", json_string(conf->node_name));
	if ((text = json_dumps(fields, JSON_COMPACT | JSON_SORT_KEYS)) != NULL)
		TAILQ_FOREACH(c, &clients, entry)
			if (c->monitor && !c->outq_full &&
			    (owner == NULL || client_sees(c, *owner)))
				client_reply(c, text);
	free(text);
	json_decref(fields);
}

/*
 * Root, the daemon's own user (who may stop or read it anyway: a daemon
 * from the build tree is its user's), or a member of admin_group may
 * change the daemon's state and see every user's jobs.
 */
int
client_privileged(const struct client *c)
{
	struct group *gr;
	struct passwd *pw;
	gid_t groups[256];
	int n = 256;

	if (c->uid == 0 || c->uid == geteuid())
		return 1;
	if (conf->admin_group[0] == '\0' ||
	    (gr = getgrnam(conf->admin_group)) == NULL)
		return 0;
	if (c->gid == gr->gr_gid)
		return 1;
	if ((pw = getpwuid(c->uid)) == NULL ||
	    getgrouplist(pw->pw_name, c->gid, groups, &n) == -1)
		return 0;
	for (int i = 0; i < n; i++)
		if (groups[i] == gr->gr_gid)
			return 1;
	return 0;
}

/* c may see what belongs to uid: its own, or everything if privileged. */
static int
port_sees(const struct client *c, uid_t uid)
{
	return c->uid == uid || client_privileged(c);
}

/* ---- input ---- */

static void
client_hello(struct client *c, const struct ipc_hello *m)
{
	struct ipc_hello_ok ok;
	char why[ERR_MAX];

	if (c->hello_done) {
		client_close(c, "second HELLO");
		return;
	}
	c->hello_done = 1;
	memset(&ok, 0, sizeof(ok));
	ok.version = IPC_VERSION;
	ok.node_index = conf->node_index;
	ok.nnodes = (uint32_t)conf->nnodes;
	ok.init_timeout_ms = conf->init_timeout_ms;
	ok.op_timeout_ms = conf->op_timeout_ms;
	wire_strlcpy(ok.node_name, conf->node_name, sizeof(ok.node_name));
	snprintf(c->desc, sizeof(c->desc), "pid %d uid %u", (int)c->pid,
	    (unsigned)c->uid);
	ok.xmem = xmem_open(&c->segs->xm, c->pid, c->uid, m->probe_addr,
	    m->probe_val, why, sizeof(why)) == 0;
	if (!ok.xmem && m->probe_addr != 0)	/* once per client */
		log_info("control: client %s: its large allreduces of its own "
		    "memory are staged through shared memory: %s", c->desc,
		    why);
	client_send(c, IPC_HELLO_OK, &ok, NULL, 0);
}

static void
client_dispatch(struct client *c, uint16_t type, const void *msg, int fd,
    const uint8_t *trailer, size_t tlen)
{
	switch (type) {
	case IPC_HELLO: client_hello(c, msg); break;
	case IPC_SEG_ADD: client_seg_add(c, msg, fd); break;
	case IPC_SEG_DEL: client_seg_del(c, msg); break;
	case IPC_BELL: client_bell(c, msg); break;
	case IPC_JOIN: job_client_join(c, msg); break;
	case IPC_LEAVE: job_client_gone(c, 1); break;
	case IPC_ABORT: job_client_abort(c); break;
	case IPC_OP: job_client_op(c, msg); break;
	case IPC_CTL: control_command(c, msg, trailer, tlen); break;
	default: client_close(c, "message type not accepted from clients");
	}
}

/* Descriptors that came with the record; -1 on a control-data error. */
static int
client_take_fds(struct msghdr *mh, int *fds, int max)
{
	struct cmsghdr *cm;
	int n = 0;

	for (cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		    i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

static void
close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* Check and decode one record; returns the reason on failure. */
static const char *
client_check(struct client *c, const uint8_t *buf, size_t n, int nfds,
    const struct wire_type **tp, void *msg, const uint8_t **trailer,
    size_t *tlen, char *err, size_t errlen)
{
	struct wire_hdr h;

	if (n < WIRE_HDR_LEN)
		return "record shorter than a header";
	if (wire_hdr_check(&ipc_proto, buf, &h, tp, err, errlen) == -1)
		return err;
	if (h.len != n - WIRE_HDR_LEN) {
		snprintf(err, errlen, "%s: header says %u bytes, record has %zu",
		    (*tp)->name, h.len, n - WIRE_HDR_LEN);
		return err;
	}
	if ((*tp)->nfds != nfds) {
		snprintf(err, errlen, "%s: %d descriptors, expected %u",
		    (*tp)->name, nfds, (*tp)->nfds);
		return err;
	}
	if (!c->hello_done && h.type != IPC_HELLO)
		return "first message is not HELLO";
	if (wire_decode(*tp, buf + WIRE_HDR_LEN, h.len, msg, trailer, tlen, err,
	    errlen) == -1)
		return err;
	return NULL;
}

static void
client_read_cb(int fd, short events, void *arg)
{
	struct client *c = arg;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(CLIENT_FDS_MAX * sizeof(int))];
	} cmsg;
	union {
		struct ipc_ctl ctl;
		struct ipc_op op;
		struct ipc_join join;
		struct ipc_seg_add seg_add;
		struct ipc_hello hello;
		uint8_t raw[256];
	} msg;
	static uint8_t buf[IPC_MSG_MAX];
	const struct wire_type *t;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = cmsg.buf, .msg_controllen = sizeof(cmsg.buf) };
	char err[ERR_MAX];
	const char *why;
	const uint8_t *trailer = NULL;
	size_t tlen = 0;
	int fds[CLIENT_FDS_MAX], nfds;
	ssize_t n;

	(void)events;
	if ((n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) == -1) {
		/* A reset is a client gone with replies unread: like EOF. */
		if (errno == ECONNRESET)
			client_close(c, NULL);
		else if (errno != EAGAIN && errno != EINTR)
			client_close(c, strerror(errno));
		return;
	}
	nfds = client_take_fds(&mh, fds, CLIENT_FDS_MAX);
	if (n == 0) {
		close_fds(fds, nfds);
		client_close(c, NULL);
		return;
	}
	if ((mh.msg_flags & MSG_TRUNC) || (size_t)n > conf->max_message_bytes)
		why = "record longer than max_message_bytes";
	else if ((mh.msg_flags & MSG_CTRUNC) ||
	    (uint32_t)nfds > conf->max_fds_per_message)
		why = "more descriptors than max_fds_per_message";
	else
		why = client_check(c, buf, (size_t)n, nfds, &t, &msg, &trailer,
		    &tlen, err, sizeof(err));
	if (why != NULL) {
		close_fds(fds, nfds);
		client_close(c, why);
		return;
	}
	client_dispatch(c, t->type, &msg, nfds > 0 ? fds[0] : -1, trailer, tlen);
}

/* Drop a client; why != NULL logs a protocol violation. */
static void
client_close(struct client *c, const char *why)
{
	struct outmsg *o;

	if (why != NULL)
		log_warnx("control: closing client %s: %s", c->desc, why);
	else
		log_debug("control: client %s disconnected", c->desc);
	job_client_gone(c, 0);
	job_ctl_forget(c);
	check_ctl_forget(c);
	if (c->bell != NULL)
		seg_unref(c->bell);
	c->bell = NULL;
	/* Emptied, not only released: its job's engine may hold it still. */
	segtab_clear(c->segs);
	segtab_unref(c->segs);
	while ((o = TAILQ_FIRST(&c->outq)) != NULL) {
		TAILQ_REMOVE(&c->outq, o, entry);
		free(o);
	}
	event_free(c->ev_read);
	event_free(c->ev_write);
	close(c->fd);
	TAILQ_REMOVE(&clients, c, entry);
	nclients--;
	free(c);
}
