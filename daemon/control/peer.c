/*
 * peer.c: the daemon's connections to the other daemons of the cluster.
 * Every pair of nodes keeps one control connection, opened by the node with
 * the lower index and kept alive with heartbeats; it carries job formation
 * and failure messages.  The same port accepts a job's data links, which
 * are handed to that job's engine (engine.c) after their first frame.
 * Messages to this node itself go through a local queue, never a shortcut,
 * so every message takes the same path.
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "transport/transport.h"

#define RETRY_MIN_MS	100
#define RETRY_MAX_MS	2000
#define INBOUND_MAX	256	/* bytes of a first frame: HELLO or DATA_HELLO */
#define INBOUND_PENDING_MAX 256	/* connections not yet identified, */
#define INBOUND_PENDING_NODE 4	/* and so many more per node: a job's
				   start has every peer dial at once */
#define INBOUND_AUTH_MS	2000	/* an honest peer proves itself in far less */
#define REFUSAL_BURST	50	/* refusal log lines, then ... */
#define REFUSAL_PER_S	10	/* ... this many a second */

enum peer_state { PEER_DOWN, PEER_CONNECTING, PEER_AUTH, PEER_WAIT_HELLO,
    PEER_UP };

static const char *peer_state_names[] = {
	"down", "connecting", "authenticating", "handshake", "up"
};

#define RTT_WINDOW	16		/* heartbeats a round trip floor spans */

struct peer {
	uint32_t		 index;
	const struct conf_node	*node;
	struct sockaddr_storage	 sa;
	socklen_t		 salen;
	enum peer_state		 state;
	struct bufferevent	*bev;
	struct event		*ev_retry;
	uint32_t		 retry_ms;
	time_t			 since;		/* wall clock of the last change */
	uint64_t		 last_rx_ns;
	int			 watched;	/* heartbeated (liveness.c) */
	uint64_t		 watched_ns;	/* since when */
	uint64_t		 suspect_ns;	/* a watcher found it silent */
	uint32_t		 suspect_by;	/* that watcher */
	uint32_t		 suspect_ms;	/* for so long */
	uint64_t		 rtt_ns;
	uint64_t		 rtt_win[RTT_WINDOW];	/* the last round trips */
	uint32_t		 rtt_count;
	uint64_t		 tx_bytes;
	uint64_t		 rx_bytes;
	uint64_t		 generation;	/* bumped when the connection goes */
	uint8_t			 nonce[AUTH_NONCE_LEN];	/* ours, connecting */
	char			 last_error[ERR_MAX];
};

/*
 * A connection accepted but not yet identified: it must authenticate, then
 * say what it is (HELLO or DATA_HELLO).  Nothing else is read.
 */
enum inbound_state { IN_AUTH_HELLO, IN_AUTH_RESPONSE, IN_FIRST };

struct inbound {
	TAILQ_ENTRY(inbound) entry;	/* oldest first */
	int		 fd;
	struct event	*ev;
	struct event	*ev_timeout;
	enum inbound_state state;
	uint32_t	 node;		/* claimed in AUTH_HELLO */
	uint8_t		 their_nonce[AUTH_NONCE_LEN];
	uint8_t		 our_nonce[AUTH_NONCE_LEN];
	uint8_t		 buf[WIRE_HDR_LEN + INBOUND_MAX];
	size_t		 have;
	char		 addr[64];
	int		 stranger;	/* not from a configured node's address */
};
TAILQ_HEAD(inbound_list, inbound);

struct selfmsg {
	TAILQ_ENTRY(selfmsg) entry;
	size_t		 len;
	uint8_t		 buf[];
};

static struct peer		**peers;	/* CONF_NODES_MAX: never moves */
static struct inbound_list	 inbound = TAILQ_HEAD_INITIALIZER(inbound);
static uint32_t			 inbound_pending;
static int			 listen_fds[CONF_LISTEN_MAX];
static struct event		*listen_evs[CONF_LISTEN_MAX];
static size_t			 nlisten;
static struct event		*heartbeat_ev;
static struct event		*self_ev;
static TAILQ_HEAD(, selfmsg)	 self_queue = TAILQ_HEAD_INITIALIZER(self_queue);

/*
 * The parts above take the control frames of their own types (jobs,
 * formation, the check), and one watcher (the jobs) hears of peers coming
 * and going: registered at start, before peer_init.
 */
#define FRAME_FIRST	PEER_JOIN
#define FRAME_LAST	PEER_CHECK_DONE
static peer_frame_fn frame_handlers[FRAME_LAST - FRAME_FIRST + 1];
static struct peer_watcher watcher;

void
peer_handle(uint16_t type, peer_frame_fn fn)
{
	if (type < FRAME_FIRST || type > FRAME_LAST)
		fatalx("peer_handle: type %u is not a job's or a check's", type);
	frame_handlers[type - FRAME_FIRST] = fn;
}

static peer_frame_fn
frame_handler(uint16_t type)
{
	return type >= FRAME_FIRST && type <= FRAME_LAST ?
	    frame_handlers[type - FRAME_FIRST] : NULL;
}

void
peer_watch(const struct peer_watcher *w)
{
	watcher = *w;
}

static void	peer_connect(struct peer *);
static void	peer_down(struct peer *, const char *);
static int	peer_frame(struct peer *, const uint8_t *, size_t);
static int	peer_told_silent(const struct peer *,
		    const struct peer_silent *);

const char *
peer_name(uint32_t index)
{
	return index < conf->nnodes ? conf->nodes[index].name : "?";
}

int
peer_is_up(uint32_t index)
{
	return index == conf->node_index ||
	    (index < conf->nnodes && peers[index]->state == PEER_UP);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * A peer's shortest recent round trip: what the path itself takes, the
 * time either loop was busy left out (as TCP's and BBR's min RTT); 0: none.
 */
static uint64_t
peer_rtt_floor(const struct peer *p)
{
	uint32_t n = p->rtt_count < RTT_WINDOW ? p->rtt_count : RTT_WINDOW;
	uint64_t best = 0;

	for (uint32_t i = 0; i < n; i++)
		if (best == 0 || p->rtt_win[i] < best)
			best = p->rtt_win[i];
	return best;
}

/* The median over the peers up of their shortest recent round trips. */
uint64_t
peer_rtt_median_ns(void)
{
	uint64_t *v = calloc(conf->nnodes + 1, sizeof(*v)), mid;
	size_t n = 0;

	if (v == NULL)
		return 0;
	for (uint32_t i = 0; i < conf->nnodes; i++)
		if (i != conf->node_index && peers[i]->state == PEER_UP &&
		    peer_rtt_floor(peers[i]) > 0)
			v[n++] = peer_rtt_floor(peers[i]);
	qsort(v, n, sizeof(*v), cmp_u64);
	mid = n > 0 ? v[n / 2] : 0;
	free(v);
	return mid;
}

/* ---- sending ---- */

static void
self_cb(int fd, short events, void *arg)
{
	struct selfmsg *m;

	(void)fd;
	(void)events;
	(void)arg;
	while ((m = TAILQ_FIRST(&self_queue)) != NULL) {
		TAILQ_REMOVE(&self_queue, m, entry);
		if (peer_frame(peers[conf->node_index], m->buf, m->len) == -1)
			log_warnx("peer: message to self rejected");
		free(m);
	}
}

/* Send one control message to node index; -1 if it is not reachable. */
int
peer_send(uint32_t index, uint16_t type, const void *msg,
    const void *trailer, size_t trailer_len)
{
	static uint8_t buf[PEER_MSG_MAX];
	struct peer *p = peers[index];
	struct selfmsg *m;
	size_t len;

	if ((len = wire_encode(&peer_proto, type, msg, trailer, trailer_len, buf,
	    sizeof(buf))) == 0) {
		log_warnx("peer: cannot encode message %u to %s", type,
		    peer_name(index));
		return -1;
	}
	if (index == conf->node_index) {
		if ((m = malloc(sizeof(*m) + len)) == NULL)
			return -1;
		m->len = len;
		memcpy(m->buf, buf, len);
		TAILQ_INSERT_TAIL(&self_queue, m, entry);
		event_active(self_ev, EV_READ, 0);
		return 0;
	}
	if (p->state != PEER_UP && !(p->state == PEER_WAIT_HELLO &&
	    (type == PEER_HELLO || type == PEER_AUTH_RESPONSE)) &&
	    !(p->state == PEER_AUTH && type == PEER_AUTH_HELLO))
		return -1;
	p->tx_bytes += len;
	return bufferevent_write(p->bev, buf, len);
}

static void
peer_send_hello(struct peer *p)
{
	struct peer_hello h;

	memset(&h, 0, sizeof(h));
	h.version = PEER_VERSION;
	h.node_index = conf->node_index;
	h.nnodes = (uint32_t)conf->nnodes;
	h.cluster_hash = conf->cluster_hash;
	wire_strlcpy(h.node_name, conf->node_name, sizeof(h.node_name));
	peer_send(p->index, PEER_HELLO, &h, NULL, 0);
}

/* ---- state changes ---- */

static void
peer_set_state(struct peer *p, enum peer_state s)
{
	p->state = s;
	p->since = time(NULL);
}

static void
peer_up(struct peer *p)
{
	peer_set_state(p, PEER_UP);
	p->retry_ms = RETRY_MIN_MS;
	p->last_rx_ns = now_ns();
	p->suspect_ns = 0;
	/* Its jobs, if any, count from the next heartbeat. */
	p->watched = liveness_watches(conf->node_index, p->index,
	    (uint32_t)conf->nnodes, conf->heartbeat_mesh_max_nodes);
	p->watched_ns = p->last_rx_ns;
	p->last_error[0] = '\0';
	bufferevent_set_timeouts(p->bev, NULL, NULL);	/* heartbeats watch */
	log_info("peer: node %s (%s:%u) is up", p->node->name,
	    p->node->addr.host, p->node->addr.port);
	monitor_event("peer_up", NULL, json_pack("{s:s}", "peer",
	    p->node->name));
	if (watcher.up != NULL)
		watcher.up(p->index);
	control_status_changed();
}

static void
peer_schedule_retry(struct peer *p)
{
	struct timeval tv;

	if (p->index < conf->node_index || ctl_stopping)
		return;		/* the other side connects to us */
	tv.tv_sec = p->retry_ms / 1000;
	tv.tv_usec = (p->retry_ms % 1000) * 1000;
	evtimer_add(p->ev_retry, &tv);
	p->retry_ms = p->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS :
	    p->retry_ms * 2;
}

static void
peer_down(struct peer *p, const char *why)
{
	int was_up = p->state == PEER_UP;

	if (p->bev != NULL) {
		bufferevent_free(p->bev);
		p->bev = NULL;
	}
	p->generation++;
	wire_strlcpy(p->last_error, why, sizeof(p->last_error));
	peer_set_state(p, PEER_DOWN);
	if (was_up) {
		log_warnx("peer: node %s is down: %s", p->node->name, why);
		monitor_event("peer_down", NULL, json_pack("{s:s, s:s}", "peer",
		    p->node->name, "reason", why));
		if (watcher.down != NULL)
			watcher.down(p->index, why);
		control_status_changed();
	} else
		log_debug("peer: node %s: %s", p->node->name, why);
	peer_schedule_retry(p);
}

/* ---- receiving ---- */

static int
peer_check_hello(struct peer *p, const struct peer_hello *h, char *err,
    size_t errlen)
{
	if (h->nnodes != conf->nnodes ||
	    h->cluster_hash != conf->cluster_hash)
		snprintf(err, errlen, "its cluster configuration differs from "
		    "ours (%u nodes, hash %016llx)", h->nnodes,
		    (unsigned long long)h->cluster_hash);
	else if (h->node_index != p->index ||
	    strcmp(h->node_name, p->node->name) != 0)
		snprintf(err, errlen, "it says it is node %u \"%s\", expected "
		    "node %u \"%s\"", h->node_index, h->node_name, p->index,
		    p->node->name);
	else
		return 0;
	return -1;
}

/* We connected and sent AUTH_HELLO: check the acceptor's proof, give ours. */
static int
peer_challenged(struct peer *p, const struct peer_auth_challenge *c)
{
	struct peer_auth_response r;

	if (c->node != p->index || auth_check(c->mac, 'A', p->nonce, c->nonce,
	    p->index) == -1) {
		log_warnx("peer: node %s (%s:%u) failed authentication: it "
		    "does not hold our cluster key", p->node->name,
		    p->node->addr.host, p->node->addr.port);
		return -1;
	}
	auth_mac(r.mac, 'C', c->nonce, p->nonce, conf->node_index);
	peer_set_state(p, PEER_WAIT_HELLO);
	peer_send(p->index, PEER_AUTH_RESPONSE, &r, NULL, 0);
	peer_send_hello(p);
	return 0;
}

/* Dispatch one complete, not yet checked frame from p.  -1: close it. */
static int
peer_frame(struct peer *p, const uint8_t *buf, size_t len)
{
	union {
		struct peer_hello hello;
		struct peer_ping ping;
		struct peer_silent silent;
		struct peer_auth_challenge challenge;
		uint8_t raw[512];
	} msg;
	const struct wire_type *t;
	struct wire_hdr h;
	const uint8_t *trailer;
	size_t tlen;
	char err[ERR_MAX];

	if (wire_hdr_check(&peer_proto, buf, &h, &t, err, sizeof(err)) == -1 ||
	    wire_decode(t, buf + WIRE_HDR_LEN, len - WIRE_HDR_LEN, &msg,
	    &trailer, &tlen, err, sizeof(err)) == -1) {
		log_warnx("peer: node %s: %s", p->node->name, err);
		return -1;
	}
	p->last_rx_ns = now_ns();
	p->rx_bytes += len;
	if (p->state == PEER_AUTH)
		return h.type == PEER_AUTH_CHALLENGE ?
		    peer_challenged(p, &msg.challenge) : -1;
	switch (h.type) {
	case PEER_HELLO:
		if (p->state != PEER_WAIT_HELLO ||
		    peer_check_hello(p, &msg.hello, err, sizeof(err)) == -1) {
			log_warnx("peer: node %s: refusing HELLO: %s",
			    p->node->name, p->state != PEER_WAIT_HELLO ?
			    "unexpected" : err);
			return -1;
		}
		peer_up(p);
		return 0;
	case PEER_PING:
		return peer_send(p->index, PEER_PONG, &msg.ping, NULL, 0) == -1 ?
		    -1 : 0;
	case PEER_PONG:
		if (msg.ping.stamp_ns > now_ns())
			return 0;	/* not a stamp of ours */
		p->rtt_ns = now_ns() - msg.ping.stamp_ns;
		p->rtt_win[p->rtt_count++ % RTT_WINDOW] = p->rtt_ns;
		return 0;
	case PEER_SILENT:
		if (p->state != PEER_UP)
			break;
		return peer_told_silent(p, &msg.silent);
	default:
		if (frame_handler(h.type) == NULL ||
		    (p->state != PEER_UP && p->index != conf->node_index))
			break;
		return frame_handler(h.type)(p->index, h.type, &msg, trailer,
		    tlen) == -1 ? -1 : 0;
	}
	log_warnx("peer: node %s: %s not accepted on a control connection",
	    p->node->name, t->name);
	return -1;
}

static void
peer_read_cb(struct bufferevent *bev, void *arg)
{
	struct peer *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdrbuf[WIRE_HDR_LEN];
	uint64_t gen = p->generation;
	struct wire_hdr h;

	while (evbuffer_get_length(in) >= WIRE_HDR_LEN) {
		evbuffer_copyout(in, hdrbuf, WIRE_HDR_LEN);
		wire_hdr_decode(hdrbuf, &h);
		if (h.len > PEER_MSG_MAX - WIRE_HDR_LEN) {
			peer_down(p, "frame longer than the limit");
			return;
		}
		if (evbuffer_get_length(in) < WIRE_HDR_LEN + (size_t)h.len)
			return;
		if (peer_frame(p, evbuffer_pullup(in, WIRE_HDR_LEN + h.len),
		    WIRE_HDR_LEN + h.len) == -1) {
			peer_down(p, p->state == PEER_AUTH ? "authentication "
			    "failed" : "protocol error (see the log)");
			return;
		}
		if (gen != p->generation)
			return;		/* the handler dropped the connection */
		evbuffer_drain(in, WIRE_HDR_LEN + h.len);
	}
}

static void
peer_event_cb(struct bufferevent *bev, short events, void *arg)
{
	struct peer *p = arg;
	char why[ERR_MAX];

	(void)bev;
	if (events & BEV_EVENT_CONNECTED) {
		struct peer_auth_hello ah = { conf->node_index, { 0 } };

		dial_tune(bufferevent_getfd(p->bev));
		auth_nonce(p->nonce);
		memcpy(ah.nonce, p->nonce, sizeof(ah.nonce));
		peer_set_state(p, PEER_AUTH);
		peer_send(p->index, PEER_AUTH_HELLO, &ah, NULL, 0);
		return;
	}
	if (events & BEV_EVENT_TIMEOUT)
		snprintf(why, sizeof(why), "no answer within %u ms while %s "
		    "(a frozen node answers the TCP connect, nothing else)",
		    conf->connect_timeout_ms, peer_state_names[p->state]);
	else if (events & BEV_EVENT_EOF)
		snprintf(why, sizeof(why), "connection closed");
	else
		snprintf(why, sizeof(why), "connection error: %s",
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	peer_down(p, why);
}

static void
peer_attach(struct peer *p, int fd)
{
	p->bev = bufferevent_socket_new(ctl_base, fd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(p->bev, peer_read_cb, NULL, peer_event_cb, p);
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
}

static void
peer_connect(struct peer *p)
{
	struct timeval tv;

	peer_attach(p, -1);
	peer_set_state(p, PEER_CONNECTING);
	/* Connected, authenticated and greeted within the timeout, or down. */
	tv.tv_sec = conf->connect_timeout_ms / 1000;
	tv.tv_usec = (conf->connect_timeout_ms % 1000) * 1000;
	bufferevent_set_timeouts(p->bev, &tv, &tv);
	if (bufferevent_socket_connect(p->bev, (struct sockaddr *)&p->sa,
	    (int)p->salen) == -1)
		peer_down(p, "connect failed");
}

static void
peer_retry_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	peer_connect(arg);
}

/* ---- inbound connections ---- */

/*
 * Refusals on the peer port are logged at most REFUSAL_BURST at once and
 * REFUSAL_PER_S a second after, with a count of those left out: a flood
 * of strangers must not flood the log.
 */
static void
inbound_refused(const char *fmt, ...)
{
	static double tokens = REFUSAL_BURST;
	static uint64_t last_ns;
	static uint32_t dropped;
	uint64_t now = now_ns();
	char msg[ERR_MAX];
	va_list ap;

	tokens += (double)(now - last_ns) * REFUSAL_PER_S / 1e9;
	if (tokens > REFUSAL_BURST)
		tokens = REFUSAL_BURST;
	last_ns = now;
	if (tokens < 1) {
		dropped++;
		return;
	}
	tokens--;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (dropped > 0)
		log_warnx("peer: %s (and %u refusals not logged)", msg, dropped);
	else
		log_warnx("peer: %s", msg);
	dropped = 0;
}

static void
inbound_free(struct inbound *in, int close_fd)
{
	TAILQ_REMOVE(&inbound, in, entry);
	inbound_pending--;
	event_free(in->ev);
	event_free(in->ev_timeout);
	if (close_fd)
		close(in->fd);
	free(in);
}

static void
inbound_hello(struct inbound *in, const struct peer_hello *h)
{
	struct peer *p;
	char err[ERR_MAX];

	if (h->node_index >= conf->nnodes ||
	    h->node_index >= conf->node_index) {
		log_warnx("peer: %s: refusing HELLO from node index %u: only "
		    "nodes below %u connect to us", in->addr, h->node_index,
		    conf->node_index);
		inbound_free(in, 1);
		return;
	}
	p = peers[h->node_index];
	if (peer_check_hello(p, h, err, sizeof(err)) == -1) {
		log_warnx("peer: %s: refusing: %s", in->addr, err);
		inbound_free(in, 1);
		return;
	}
	if (p->state != PEER_DOWN)
		peer_down(p, "replaced by a new connection");
	dial_tune(in->fd);
	peer_attach(p, in->fd);
	inbound_free(in, 0);
	peer_set_state(p, PEER_WAIT_HELLO);
	peer_send_hello(p);
	peer_up(p);
}

static uint32_t
inbound_auth_ms(void)
{
	return conf->connect_timeout_ms < INBOUND_AUTH_MS ?
	    conf->connect_timeout_ms : INBOUND_AUTH_MS;
}

static void
inbound_deadline(struct inbound *in, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(in->ev_timeout, &tv);
}

static int
inbound_auth_hello(struct inbound *in, const struct peer_auth_hello *m)
{
	struct peer_auth_challenge c;

	if (m->node >= conf->nnodes || m->node == conf->node_index) {
		inbound_refused("%s: AUTH_HELLO claims node index %u",
		    in->addr, m->node);
		return -1;
	}
	in->node = m->node;
	memcpy(in->their_nonce, m->nonce, AUTH_NONCE_LEN);
	auth_nonce(in->our_nonce);
	c.node = conf->node_index;
	memcpy(c.nonce, in->our_nonce, AUTH_NONCE_LEN);
	auth_mac(c.mac, 'A', in->their_nonce, in->our_nonce, c.node);
	in->state = IN_AUTH_RESPONSE;
	return dial_frame_send(in->fd, PEER_AUTH_CHALLENGE, &c);
}

static int
inbound_auth_response(struct inbound *in, const struct peer_auth_response *m)
{
	if (auth_check(m->mac, 'C', in->our_nonce, in->their_nonce,
	    in->node) == -1) {
		inbound_refused("%s (says node %s) failed authentication: it "
		    "does not hold our cluster key", in->addr,
		    peer_name(in->node));
		return -1;
	}
	in->state = IN_FIRST;
	inbound_deadline(in, conf->connect_timeout_ms);
	return 0;
}

/* After authentication, the connection must be who it proved to be. */
static int
inbound_identity_ok(const struct inbound *in, uint32_t node)
{
	if (node == in->node)
		return 1;
	log_warnx("peer: %s authenticated as node %s but says it is node %u",
	    in->addr, peer_name(in->node), node);
	return 0;
}

/* One complete frame is in in->buf: act on it by the state we are in. */
static void
inbound_dispatch(struct inbound *in, const struct wire_hdr *h,
    const struct wire_type *t)
{
	union {
		struct peer_hello hello;
		struct peer_data_hello data;
		struct peer_auth_hello auth_hello;
		struct peer_auth_response auth_response;
	} msg;
	char err[ERR_MAX];
	int rc = -1;

	if (wire_decode(t, in->buf + WIRE_HDR_LEN, h->len, &msg, NULL, NULL,
	    err, sizeof(err)) == -1)
		inbound_refused("%s: %s", in->addr, err);
	else if (in->state == IN_AUTH_HELLO)
		rc = inbound_auth_hello(in, &msg.auth_hello);
	else if (in->state == IN_AUTH_RESPONSE)
		rc = inbound_auth_response(in, &msg.auth_response);
	else if (h->type == PEER_HELLO && inbound_identity_ok(in,
	    msg.hello.node_index)) {
		inbound_hello(in, &msg.hello);
		return;
	} else if (h->type == PEER_DATA_HELLO && inbound_identity_ok(in,
	    msg.data.node)) {
		dial_tune_data(in->fd);
		if (watcher.data_link != NULL)
			watcher.data_link(in->fd, &msg.data);
		else
			close(in->fd);
		inbound_free(in, 0);
		return;
	}
	if (rc == -1) {
		inbound_free(in, 1);
		return;
	}
	in->have = 0;
}

/* The frame types each state accepts. */
static int
inbound_expects(const struct inbound *in, uint16_t type)
{
	switch (in->state) {
	case IN_AUTH_HELLO: return type == PEER_AUTH_HELLO;
	case IN_AUTH_RESPONSE: return type == PEER_AUTH_RESPONSE;
	default: return type == PEER_HELLO || type == PEER_DATA_HELLO;
	}
}

/* Read exactly one frame, never past it: a data link's data follows. */
static void
inbound_read_cb(int fd, short events, void *arg)
{
	struct inbound *in = arg;
	const struct wire_type *t = NULL;
	struct wire_hdr h;
	char err[ERR_MAX];
	size_t want = WIRE_HDR_LEN;
	ssize_t n;

	(void)events;
	if (in->have >= WIRE_HDR_LEN) {
		wire_hdr_decode(in->buf, &h);
		want += h.len;
	}
	if ((n = recv(fd, in->buf + in->have, want - in->have, 0)) <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			inbound_free(in, 1);
		return;
	}
	in->have += (size_t)n;
	if (in->have < WIRE_HDR_LEN)
		return;
	if (wire_hdr_check(&peer_proto, in->buf, &h, &t, err, sizeof(err)) ==
	    -1 || !inbound_expects(in, h.type) || h.len > INBOUND_MAX) {
		inbound_refused("%s: refused: %s", in->addr, t == NULL ? err :
		    in->state == IN_AUTH_HELLO ? "it did not authenticate (no "
		    "cluster key there?)" : "unexpected message");
		inbound_free(in, 1);
		return;
	}
	if (in->have == WIRE_HDR_LEN + h.len)
		inbound_dispatch(in, &h, t);
}

static void
inbound_timeout_cb(int fd, short events, void *arg)
{
	struct inbound *in = arg;

	(void)fd;
	(void)events;
	if (in->state == IN_FIRST)
		inbound_refused("%s: no first frame within %u ms of "
		    "authenticating", in->addr, conf->connect_timeout_ms);
	else
		inbound_refused("%s: did not authenticate within %u ms",
		    in->addr, inbound_auth_ms());
	inbound_free(in, 1);
}

/* Pending connections from addr; whether addr is a configured node's. */
static uint32_t
inbound_from(const char *addr)
{
	struct inbound *in;
	uint32_t n = 0;

	TAILQ_FOREACH(in, &inbound, entry)
		n += strcmp(in->addr, addr) == 0;
	return n;
}

static int
same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		    ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return a->ss_family == AF_INET6 && memcmp(
	    &((const struct sockaddr_in6 *)a)->sin6_addr,
	    &((const struct sockaddr_in6 *)b)->sin6_addr,
	    sizeof(struct in6_addr)) == 0;
}

static int
is_node_address(const struct sockaddr_storage *ss)
{
	for (uint32_t i = 0; i < conf->nnodes; i++)
		if (i != conf->node_index && same_host(&peers[i]->sa, ss))
			return 1;
	return 0;
}

/*
 * The table of unidentified connections is full: drop the oldest of the
 * least deserving, strangers before configured nodes' addresses, the most
 * crowded source first.  An honest peer proves itself in milliseconds, so
 * a flood of idle connections ages out instead of locking peers out.
 */
static void
inbound_evict(void)
{
	struct inbound *in, *victim = NULL;
	uint32_t n, best = 0;

	TAILQ_FOREACH(in, &inbound, entry) {
		n = inbound_from(in->addr) + (in->stranger ? INBOUND_PENDING_MAX :
		    0);
		if (n > best) {
			best = n;
			victim = in;
		}
	}
	if (victim != NULL) {
		inbound_refused("%s: dropped unauthenticated after %u pending "
		    "connections", victim->addr, inbound_pending);
		inbound_free(victim, 1);
	}
}

static void
inbound_accept_cb(int lfd, short events, void *arg)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct inbound *in;
	int fd;

	(void)events;
	if ((fd = accept4(lfd, (struct sockaddr *)&ss, &len,
	    SOCK_NONBLOCK | SOCK_CLOEXEC)) == -1) {
		if (errno == EMFILE || errno == ENFILE)
			listener_pause(arg, "peer");
		return;
	}
	if ((in = calloc(1, sizeof(*in))) == NULL) {
		close(fd);
		return;
	}
	/* Strangers may not hold more than so many descriptors. */
	if (inbound_pending >= INBOUND_PENDING_MAX + INBOUND_PENDING_NODE *
	    conf->nnodes)
		inbound_evict();
	inbound_pending++;
	TAILQ_INSERT_TAIL(&inbound, in, entry);
	in->fd = fd;
	in->state = IN_AUTH_HELLO;
	getnameinfo((struct sockaddr *)&ss, len, in->addr, sizeof(in->addr),
	    NULL, 0, NI_NUMERICHOST);
	in->stranger = !is_node_address(&ss);
	in->ev = event_new(ctl_base, fd, EV_READ | EV_PERSIST, inbound_read_cb,
	    in);
	in->ev_timeout = evtimer_new(ctl_base, inbound_timeout_cb, in);
	event_add(in->ev, NULL);
	inbound_deadline(in, inbound_auth_ms());
}

/* ---- heartbeats (whom, and when one is dead: liveness.c) ---- */

/*
 * A watched peer fell silent: down here, and in the sparse overlay every
 * node is told, as most do not heartbeat it themselves.  Its silence
 * counts from when it was last heard or first watched, as the verdict's.
 */
static void
peer_silent(struct peer *p, uint64_t now)
{
	uint64_t since = p->last_rx_ns > p->watched_ns ? p->last_rx_ns :
	    p->watched_ns;
	struct peer_silent m = { p->index, (uint32_t)((now - since) /
	    1000000) };
	char why[ERR_MAX];

	snprintf(why, sizeof(why), "no heartbeat for %u ms", m.silent_ms);
	peer_down(p, why);
	if (!liveness_sparse((uint32_t)conf->nnodes,
	    conf->heartbeat_mesh_max_nodes))
		return;
	for (uint32_t i = 0; i < conf->nnodes; i++)
		if (i != conf->node_index && peers[i]->state == PEER_UP)
			peer_send(i, PEER_SILENT, &m, NULL, 0);
}

/* A watcher's report: ask the node ourselves; the heartbeats decide. */
static int
peer_told_silent(const struct peer *from, const struct peer_silent *m)
{
	struct peer_ping ping = { now_ns() };
	struct peer *p;

	if (m->node >= conf->nnodes)
		return -1;
	p = peers[m->node];
	if (m->node == conf->node_index || p->state != PEER_UP ||
	    p->suspect_ns != 0)
		return 0;
	p->suspect_ns = ping.stamp_ns;
	p->suspect_by = from->index;
	p->suspect_ms = m->silent_ms;
	log_info("peer: node %s has not heard from node %s for %u ms; asking "
	    "it", from->node->name, p->node->name, m->silent_ms);
	peer_send(p->index, PEER_PING, &ping, NULL, 0);
	return 0;
}

/* The nodes of this node's jobs, which it heartbeats whatever the overlay. */
static uint8_t *
heartbeat_job_nodes(void)
{
	uint8_t *mark = calloc(conf->nnodes, 1);

	if (mark != NULL && watcher.mark_nodes != NULL)
		watcher.mark_nodes(mark, (uint32_t)conf->nnodes);
	return mark;
}

static void
heartbeat_cb(int fd, short events, void *arg)
{
	struct peer_ping ping = { now_ns() };
	uint64_t timeout = (uint64_t)conf->heartbeat_timeout_ms * 1000000;
	uint8_t *jobs = heartbeat_job_nodes();
	struct liveness_clock clock;
	char why[ERR_MAX];
	int watched;

	(void)fd;
	(void)events;
	(void)arg;
	for (uint32_t i = 0; i < conf->nnodes; i++) {
		struct peer *p = peers[i];

		if (i == conf->node_index || p->state != PEER_UP)
			continue;
		watched = liveness_watches(conf->node_index, i,
		    (uint32_t)conf->nnodes, conf->heartbeat_mesh_max_nodes) ||
		    (jobs != NULL && jobs[i]);
		if (watched && !p->watched)
			p->watched_ns = ping.stamp_ns;
		p->watched = watched;
		if (p->suspect_ns != 0 && p->last_rx_ns > p->suspect_ns) {
			log_info("peer: node %s answered; node %s's report "
			    "that it was silent is set aside", p->node->name,
			    peer_name(p->suspect_by));
			p->suspect_ns = 0;
		}
		clock = (struct liveness_clock){ p->last_rx_ns, p->watched_ns,
		    p->suspect_ns };
		switch (liveness_verdict(&clock, watched, ping.stamp_ns,
		    timeout)) {
		case LIVE_SILENT:
			peer_silent(p, ping.stamp_ns);
			break;
		case LIVE_UNANSWERED:
			snprintf(why, sizeof(why), "node %s heard nothing from "
			    "it for %u ms, nor this node for %llu ms since",
			    peer_name(p->suspect_by), p->suspect_ms,
			    (unsigned long long)(ping.stamp_ns -
			    p->suspect_ns) / 1000000);
			peer_down(p, why);
			break;
		case LIVE_PING:
			peer_send(i, PEER_PING, &ping, NULL, 0);
			break;
		case LIVE_QUIET:
			break;
		}
	}
	free(jobs);
}

/*
 * Reload: the new interval at once.  Every peer up counts as heard from
 * now, and is pinged now, so that a shorter timeout starts from a fresh
 * heartbeat instead of failing a peer that kept to the old interval.
 */
void
peer_heartbeat_reset(void)
{
	struct timeval tv;

	tv.tv_sec = conf->heartbeat_interval_ms / 1000;
	tv.tv_usec = (conf->heartbeat_interval_ms % 1000) * 1000;
	for (uint32_t i = 0; i < conf->nnodes; i++)
		if (i != conf->node_index && peers[i]->state == PEER_UP)
			peers[i]->last_rx_ns = now_ns();
	event_del(heartbeat_ev);
	event_add(heartbeat_ev, &tv);
	heartbeat_cb(-1, 0, NULL);
}

/* ---- set-up ---- */

static int
peer_listen_one(const struct conf_addr *a, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	if (dial_resolve(a, 1, &ss, &len, err, errlen) == -1)
		return -1;
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(fd, (struct sockaddr *)&ss, len) == -1 ||
	    listen(fd, SOMAXCONN) == -1) {
		snprintf(err, errlen, "listen on %s:%u: %s", a->host, a->port,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	listen_fds[nlisten] = fd;
	listen_evs[nlisten] = event_new(ctl_base, fd, EV_READ | EV_PERSIST,
	    inbound_accept_cb, event_self_cbarg());
	event_add(listen_evs[nlisten++], NULL);
	return 0;
}

static int
is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >>
		    24) == 127;
	return ss->ss_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(
	    &((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/*
 * Without a cluster key, only daemons of this host hold ours: listen on
 * loopback only, and say so.
 */
static int
peer_listen_all(char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;

	for (size_t i = 0; i < conf->nlisten; i++) {
		const struct conf_addr *a = &conf->listen[i];

		if (dial_resolve(a, 1, &ss, &len, err, errlen) == -1)
			return -1;
		if (auth_host_only() && !is_loopback(&ss)) {
			log_warnx("peer: no key_file: not listening on %s:%u; "
			    "with the host key, peers can only be on this host",
			    a->host, a->port);
			continue;
		}
		if (peer_listen_one(a, err, errlen) == -1)
			return -1;
	}
	return 0;
}

static int
peer_new(uint32_t i, char *err, size_t errlen)
{
	struct peer *p;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	p->index = i;
	p->node = &conf->nodes[i];
	p->retry_ms = RETRY_MIN_MS;
	p->ev_retry = evtimer_new(ctl_base, peer_retry_cb, p);
	peers[i] = p;
	if (i != conf->node_index && dial_resolve(&p->node->addr, 0, &p->sa,
	    &p->salen, err, errlen) == -1)
		return -1;
	return 0;
}

/*
 * The cluster grew (reload): conf->nodes now lists new nodes after the
 * old ones, whose indexes, peers and jobs stay as they are.  Connect to the
 * new nodes above us; those below connect to us.
 */
int
peer_add_nodes(uint32_t old_n, char *err, size_t errlen)
{
	for (uint32_t i = 0; i < old_n; i++)
		peers[i]->node = &conf->nodes[i];
	for (uint32_t i = old_n; i < conf->nnodes; i++) {
		if (peer_new(i, err, errlen) == -1)
			return -1;
		log_info("peer: node %s (%s:%u) joined the cluster",
		    conf->nodes[i].name, conf->nodes[i].addr.host,
		    conf->nodes[i].addr.port);
		if (i > conf->node_index)
			peer_connect(peers[i]);
	}
	return 0;
}

int
peer_init(char *err, size_t errlen)
{
	struct timeval tv;

	if ((peers = calloc(CONF_NODES_MAX, sizeof(*peers))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (uint32_t i = 0; i < conf->nnodes; i++)
		if (peer_new(i, err, errlen) == -1)
			return -1;
	peers[conf->node_index]->state = PEER_UP;
	self_ev = event_new(ctl_base, -1, 0, self_cb, NULL);
	if (peer_listen_all(err, errlen) == -1)
		return -1;
	for (uint32_t i = conf->node_index + 1; i < conf->nnodes; i++)
		peer_connect(peers[i]);
	heartbeat_ev = event_new(ctl_base, -1, EV_PERSIST, heartbeat_cb, NULL);
	tv.tv_sec = conf->heartbeat_interval_ms / 1000;
	tv.tv_usec = (conf->heartbeat_interval_ms % 1000) * 1000;
	event_add(heartbeat_ev, &tv);
	return 0;
}

void
peer_close(void)
{
	struct selfmsg *m;

	for (uint32_t i = 0; peers != NULL && i < conf->nnodes; i++) {
		if (peers[i] == NULL)
			continue;
		if (peers[i]->bev != NULL)
			bufferevent_free(peers[i]->bev);
		event_free(peers[i]->ev_retry);
		free(peers[i]);
	}
	free(peers);
	peers = NULL;
	for (size_t i = 0; i < nlisten; i++) {
		event_free(listen_evs[i]);
		close(listen_fds[i]);
	}
	nlisten = 0;
	while (!TAILQ_EMPTY(&inbound))
		inbound_free(TAILQ_FIRST(&inbound), 1);
	while ((m = TAILQ_FIRST(&self_queue)) != NULL) {
		TAILQ_REMOVE(&self_queue, m, entry);
		free(m);
	}
	if (self_ev != NULL)
		event_free(self_ev);
	if (heartbeat_ev != NULL)
		event_free(heartbeat_ev);
}

/* ---- what metrics.c shows ---- */

/* Node i's control connection and data links, as this node sees them;
 * -1 for this node itself. */
int
peer_stats(uint32_t i, struct peer_stats *st)
{
	if (i >= conf->nnodes || i == conf->node_index || peers[i] == NULL)
		return -1;
	*st = (struct peer_stats){ .name = peers[i]->node->name,
	    .up = peers[i]->state == PEER_UP, .rtt_ns = peers[i]->rtt_ns,
	    .ctl_tx = peers[i]->tx_bytes, .ctl_rx = peers[i]->rx_bytes,
	    .data_tx = data_bytes(i, DATA_SENT),
	    .data_rx = data_bytes(i, DATA_RECEIVED) };
	link_peer_info(i, st->transport, sizeof(st->transport), st->device,
	    sizeof(st->device));
	return 0;
}

/* ---- mcclctl ---- */

json_t *
peer_ctl_list(void)
{
	json_t *list = json_array();
	char addr[LINK_HOST_MAX + 8];

	for (uint32_t i = 0; i < conf->nnodes; i++) {
		const struct peer *p = peers[i];
		int self = i == conf->node_index;
		char tp[16], dev[LINK_DEV_MAX];

		snprintf(addr, sizeof(addr), "%s:%u", p->node->addr.host,
		    p->node->addr.port);
		link_peer_info(i, tp, sizeof(tp), dev, sizeof(dev));
		json_array_append_new(list, json_pack(
		    "{s:s, s:i, s:s, s:s, s:b, s:I, s:I, s:b, s:I, s:I, s:s, "
		    "s:s, s:s}",
		    "name", p->node->name, "index", (int)i,
		    "address", addr,
		    "state", self ? "self" : peer_state_names[p->state],
		    "self", self, "since", (json_int_t)p->since,
		    "rtt_us", (json_int_t)(p->rtt_ns / 1000),
		    "heartbeats", !self && p->watched,
		    "tx_bytes", (json_int_t)(p->tx_bytes + (self ? 0 :
		    data_bytes(i, DATA_SENT))),
		    "rx_bytes", (json_int_t)(p->rx_bytes + (self ? 0 :
		    data_bytes(i, DATA_RECEIVED))),
		    "last_error", p->last_error, "transport", tp,
		    "device", dev));
	}
	return json_pack("{s:o}", "peers", list);
}
