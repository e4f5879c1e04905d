/*
 * scrape.c: the metrics port (metrics_listen), HTTP/1.x GET /metrics for
 * Prometheus.  Anyone who can reach the port can connect, so it owns its
 * costs: at most metrics_max_connections at once (past it the listener
 * rests until one ends, and further connections wait in the kernel, not in
 * the daemon's descriptors), a request of at most SCRAPE_REQ_MAX bytes, and
 * one deadline (metrics_timeout_ms) for the request and the reply together.
 * With metrics_token_file set, a scrape must carry "Authorization: Bearer"
 * and the file's token; without it the port is an operator's, to be bound
 * where only operators reach it (mccld.conf(5)).
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>
#include <sodium.h>

#include "mccld.h"
#include "control/control.h"
#include "transport/transport.h"

#define SCRAPE_REQ_MAX	8192	/* a GET and its headers */

struct scrape_conn {
	TAILQ_ENTRY(scrape_conn) entry;
	int		 fd;
	struct event	*ev;		/* read, then write; and the deadline */
	struct evbuffer	*reply;		/* NULL while reading the request */
	uint64_t	 deadline_ns;	/* of request and reply together */
	size_t		 len;
	char		 req[SCRAPE_REQ_MAX + 1];
};

TAILQ_HEAD(scrape_list, scrape_conn);

static struct scrape_list conns = TAILQ_HEAD_INITIALIZER(conns);
static uint32_t		 nconns;
static int		 listen_fd = -1;
static struct event	*listen_ev;
static int		 listening;	/* listen_ev added */
static uint8_t		 token_hash[crypto_generichash_BYTES];
static int		 token_set;

static void	scrape_event_cb(int, short, void *);

static void
scrape_listen_on(int on)
{
	if (on == listening)
		return;
	if (on)
		event_add(listen_ev, NULL);
	else
		event_del(listen_ev);
	listening = on;
}

static void
scrape_close_conn(struct scrape_conn *c)
{
	TAILQ_REMOVE(&conns, c, entry);
	nconns--;
	event_free(c->ev);
	if (c->reply != NULL)
		evbuffer_free(c->reply);
	close(c->fd);
	free(c);
	if (nconns < conf->metrics_max_connections)
		scrape_listen_on(1);
}

/* Arm the connection's one event for want, until its deadline. */
static void
scrape_arm(struct scrape_conn *c, short want)
{
	uint64_t now = now_ns(), left = c->deadline_ns > now ?
	    c->deadline_ns - now : 0;
	struct timeval tv = { (time_t)(left / 1000000000),
	    (suseconds_t)(left % 1000000000 / 1000) };

	event_del(c->ev);
	event_assign(c->ev, ctl_base, c->fd, want | EV_PERSIST, scrape_event_cb,
	    c);
	event_add(c->ev, &tv);
}

static void
scrape_reply(struct scrape_conn *c, const char *status, const char *extra,
    struct evbuffer *body)
{
	size_t n = body != NULL ? evbuffer_get_length(body) : 0;

	c->reply = evbuffer_new();
	evbuffer_add_printf(c->reply, "HTTP/1.0 %s\r\nConnection: close\r\n"
	    "Content-Length: %zu\r\n%s\r\n", status, n, extra);
	if (body != NULL)
		evbuffer_add_buffer(c->reply, body);
	shutdown(c->fd, SHUT_RD);
	scrape_arm(c, EV_WRITE);
}

static void
scrape_error(struct scrape_conn *c, const char *status, const char *extra,
    const char *why)
{
	struct evbuffer *b = evbuffer_new();

	evbuffer_add_printf(b, "%s\n", why);
	scrape_reply(c, status, extra, b);
	evbuffer_free(b);
}

/* The request's header value of name (case-insensitive), or NULL. */
static const char *
scrape_header(char *req, const char *name)
{
	size_t n = strlen(name);

	for (char *l = strchr(req, '\n'); l != NULL; l = strchr(l, '\n')) {
		l++;
		if (strncasecmp(l, name, n) == 0 && l[n] == ':') {
			char *v = l + n + 1, *end = v + strcspn(v, "\r\n");

			*end = '\0';
			return v + strspn(v, " \t");
		}
	}
	return NULL;
}

/* With a token: "Bearer TOKEN", compared by hash in constant time. */
static int
scrape_authorized(char *req)
{
	uint8_t h[crypto_generichash_BYTES];
	const char *v;

	if (!token_set)
		return 1;
	if ((v = scrape_header(req, "Authorization")) == NULL ||
	    strncasecmp(v, "Bearer ", 7) != 0)
		return 0;
	v += 7;
	crypto_generichash(h, sizeof(h), (const uint8_t *)v, strlen(v), NULL, 0);
	return sodium_memcmp(h, token_hash, sizeof(h)) == 0;
}

static void
scrape_serve(struct scrape_conn *c)
{
	char method[8], path[64];
	struct evbuffer *b;
	json_t *samples;

	c->req[c->len] = '\0';
	if (sscanf(c->req, "%7s %63s HTTP/1.", method, path) != 2)
		return scrape_error(c, "400 Bad Request", "", "not an HTTP "
		    "request line");
	if (strcmp(method, "GET") != 0)
		return scrape_error(c, "405 Method Not Allowed",
		    "Allow: GET\r\n", "only GET is served here");
	if (strcmp(path, "/metrics") != 0 && strncmp(path, "/metrics?", 9))
		return scrape_error(c, "404 Not Found", "", "only /metrics is "
		    "served here");
	if (!scrape_authorized(c->req))
		return scrape_error(c, "401 Unauthorized",
		    "WWW-Authenticate: Bearer realm=\"mccld\"\r\n", "this port "
		    "needs the bearer token of metrics_token_file");
	b = evbuffer_new();
	samples = metrics_samples();
	metrics_text(b, samples);
	json_decref(samples);
	scrape_reply(c, "200 OK", "Content-Type: text/plain; version=0.0.4\r\n",
	    b);
	evbuffer_free(b);
}

static void
scrape_read(struct scrape_conn *c)
{
	ssize_t n = read(c->fd, c->req + c->len, SCRAPE_REQ_MAX - c->len);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		scrape_close_conn(c);
		return;
	}
	if (n < 0)
		return;
	c->len += (size_t)n;
	c->req[c->len] = '\0';
	if (strstr(c->req, "\r\n\r\n") != NULL || strstr(c->req, "\n\n"))
		scrape_serve(c);
	else if (c->len == SCRAPE_REQ_MAX)
		scrape_error(c, "431 Request Header Fields Too Large", "",
		    "a request is at most 8192 bytes");
}

static void
scrape_write(struct scrape_conn *c)
{
	if (evbuffer_write(c->reply, c->fd) < 0 && errno != EAGAIN &&
	    errno != EINTR) {
		scrape_close_conn(c);
		return;
	}
	if (evbuffer_get_length(c->reply) == 0)
		scrape_close_conn(c);
}

static void
scrape_event_cb(int fd, short events, void *arg)
{
	struct scrape_conn *c = arg;

	(void)fd;
	if (events & EV_TIMEOUT)
		scrape_close_conn(c);
	else if (c->reply == NULL)
		scrape_read(c);
	else
		scrape_write(c);
}

static void
scrape_accept_one(int fd)
{
	struct scrape_conn *c;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		log_warn("metrics: calloc");
		close(fd);
		return;
	}
	c->fd = fd;
	c->deadline_ns = now_ns() + conf->metrics_timeout_ms * 1000000ULL;
	c->ev = event_new(ctl_base, -1, 0, NULL, NULL);
	scrape_arm(c, EV_READ);
	TAILQ_INSERT_TAIL(&conns, c, entry);
	if (++nconns >= conf->metrics_max_connections)
		scrape_listen_on(0);
}

static void
scrape_accept_cb(int lfd, short events, void *arg)
{
	int fd;

	(void)events;
	(void)arg;
	while (listening && (fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK |
	    SOCK_CLOEXEC)) != -1)
		scrape_accept_one(fd);
	if (!listening)
		return;
	if (errno == EMFILE || errno == ENFILE)
		listener_pause(listen_ev, "metrics");	/* and back */
	else if (errno != EAGAIN && errno != EINTR &&
	    errno != ECONNABORTED)
		log_warn("metrics: accept");
}

/*
 * The token in the file at path (metrics_token_file), when set: its first
 * line, kept as a hash (mccld -n checks the file too).
 */
int
scrape_token_load(const char *path, char *err, size_t errlen)
{
	uint8_t buf[AUTH_SECRET_MAX + 1];
	size_t len;

	if (path[0] == '\0')
		return 0;
	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialize");
		return -1;
	}
	if (auth_secret_read("metrics_token_file", path, 16, buf, &len, err,
	    errlen) == -1)
		return -1;
	buf[len] = '\0';
	len = strcspn((const char *)buf, "\r\n");
	if (len < 16) {
		snprintf(err, errlen, "metrics_token_file %s: the token (its "
		    "first line) is shorter than 16 bytes", path);
		sodium_memzero(buf, sizeof(buf));
		return -1;
	}
	crypto_generichash(token_hash, sizeof(token_hash), buf, len, NULL, 0);
	sodium_memzero(buf, sizeof(buf));
	token_set = 1;
	return 0;
}

/* Serve /metrics on metrics_listen, when it is set. */
int
scrape_init(char *err, size_t errlen)
{
	const struct conf_addr *a = &conf->metrics_listen;
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;

	if (a->port == 0)
		return 0;
	if (scrape_token_load(conf->metrics_token_file, err, errlen) == -1)
		return -1;
	if (dial_resolve(a, 1, &ss, &len, err, errlen) == -1)
		return -1;
	if ((listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) == -1 || setsockopt(listen_fd, SOL_SOCKET,
	    SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(listen_fd, (struct sockaddr *)&ss, len) == -1 ||
	    listen(listen_fd, 64) == -1) {
		snprintf(err, errlen, "metrics_listen %s:%u: cannot listen: %s",
		    a->host, a->port, strerror(errno));
		if (listen_fd != -1)
			close(listen_fd);
		listen_fd = -1;
		return -1;
	}
	listen_ev = event_new(ctl_base, listen_fd, EV_READ | EV_PERSIST,
	    scrape_accept_cb, NULL);
	scrape_listen_on(1);
	log_info("metrics: serving http://%s:%u/metrics%s", a->host, a->port,
	    token_set ? " to scrapers with the token" : "");
	return 0;
}

void
scrape_close(void)
{
	while (!TAILQ_EMPTY(&conns))
		scrape_close_conn(TAILQ_FIRST(&conns));
	if (listen_ev != NULL) {
		scrape_listen_on(0);
		event_free(listen_ev);
		close(listen_fd);
	}
	listen_ev = NULL;
	listen_fd = -1;
	sodium_memzero(token_hash, sizeof(token_hash));
	token_set = 0;
}
