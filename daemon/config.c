/*
 * config.c: mccld's configuration, one JSON object read with jansson.  Every
 * key is optional, but unknown keys, wrong types and values out of range are
 * errors whose message names the key, so a typo never passes silently.  The
 * cluster is the ordered list "nodes"; config_cluster_hash() digests it so
 * that daemons refuse peers configured with a different list.
 *
 * config_load() and config_parse() treat *cfg as output only: they never
 * free what it held before, and leave it untouched when they fail, so a
 * reload can keep the running configuration on error.
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "mccld.h"
#include "spin.h"

#define CONF_FILE_MAX		(4 * 1024 * 1024)
#define CONF_DEFAULT_HOST	"127.0.0.1"
#define CHUNK_MIN		4096
#define CHUNK_MAX		(64ULL * 1024 * 1024)

#define CC_AUTO_FROM		"bbr"	/* a default "auto" steps away from */
#define CC_AUTO_TO		"cubic"	/* ... to this */
#define FNV64_OFFSET		0xcbf29ce484222325ULL
#define FNV64_PRIME		0x100000001b3ULL

/* Where messages come from: config_parse() text, or a file. */
struct pctx {
	const char	*where;		/* file name, or NULL */
	char		*err;
	size_t		 errlen;
	json_t		*nodes;		/* "nodes", until conf_finish */
};

/* What a reload does with a key that changed. */
enum conf_reload {
	RELOAD_RESTART,		/* nothing: the log says a restart applies it */
	RELOAD_APPLY,		/* applies it (the main thread reads it; the
				   engines take theirs by a hook) */
	RELOAD_OWN,		/* the daemon's reload handles it (nodes) */
};
/* A row's reload is its kind, and the hook (mccld.h, enum conf_hook) the
 * daemon runs once after a reload that changed the key:
 * RELOAD_APPLY | THEN(CONF_HOOK_HEARTBEAT). */
#define THEN(hook)	((unsigned)(hook) << 4)
#define RELOAD_KIND(r)	((r) & 0xfu)
#define RELOAD_HOOK(r)	((r) >> 4)

/*
 * One row per key, all there is to know of a setting: its parser (numbers:
 * conf_uint), its field in struct config, bounds and default (numbers, and
 * the enums behind some strings), what a reload does with it, and its
 * documentation.  Defaults, parsing, reload (config_apply), mccld -n
 * (config_show) and config/mccld.conf.keys (config_keys_file) all come
 * from here; a test checks mccld.conf(5) against it.
 */
struct conf_key {
	const char	*name;
	const char	*type;		/* as the documentation says it */
	int		(*parse)(struct pctx *, const struct conf_key *, json_t *,
			    struct config *);
	void		(*show)(const struct config *, FILE *);	/* or NULL */
	size_t		 offset;	/* the field in struct config */
	size_t		 size;		/* 0: none of its own (nodes) */
	uint64_t	 min, max;	/* numbers: inclusive bounds */
	int64_t		 dflt;		/* numbers and enums: the default */
	unsigned	 reload;	/* enum conf_reload | THEN(hook) */
	const char	*dflt_doc;	/* NULL: dflt, as a number */
	const char	*doc;
};

static void	conf_err(struct pctx *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

static void
conf_err(struct pctx *p, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (p->where != NULL)
		snprintf(p->err, p->errlen, "config: %s: %s", p->where, msg);
	else
		snprintf(p->err, p->errlen, "config: %s", msg);
}

static const char *
conf_json_type(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:	return "object";
	case JSON_ARRAY:	return "array";
	case JSON_STRING:	return "string";
	case JSON_INTEGER:	return "integer";
	case JSON_REAL:		return "real number";
	case JSON_TRUE:
	case JSON_FALSE:	return "boolean";
	case JSON_NULL:		return "null";
	}
	return "unknown";
}

/* Copy a string known to fit. */
static void
conf_strcpy(char *dst, const char *src, size_t size)
{
	size_t len = strnlen(src, size - 1);

	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* The host name, truncated to fit; "localhost" if there is none. */
static void
conf_hostname(char *buf, size_t len)
{
	char host[256];

	if (gethostname(host, sizeof(host)) == -1 || host[0] == '\0')
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = '\0';
	conf_strcpy(buf, host, len);
}

static void	conf_scalars(struct config *);
static int	cc_usable(const char *, char *, size_t);

/* The cluster of one: this node on the loopback, default port. */
static int
conf_default_nodes(struct config *c)
{
	if ((c->nodes = calloc(1, sizeof(*c->nodes))) == NULL)
		return -1;
	c->nnodes = 1;
	conf_strcpy(c->nodes[0].name, c->node_name, sizeof(c->nodes[0].name));
	conf_strcpy(c->nodes[0].addr.host, CONF_DEFAULT_HOST,
	    sizeof(c->nodes[0].addr.host));
	c->nodes[0].addr.port = MCCLD_DEFAULT_PORT;
	return 0;
}

void
config_defaults(struct config *c)
{
	conf_scalars(c);
	conf_hostname(c->node_name, sizeof(c->node_name));
	default_socket_path(c->socket_path, sizeof(c->socket_path));
	if (conf_default_nodes(c) == -1)
		fatal("config_defaults");
	c->node_index = 0;
	c->cluster_hash = config_cluster_hash(c);
	c->listen[0] = c->nodes[0].addr;
	c->nlisten = 1;
}

/* One line of a sysctl file, as the kernel gives it; "?" if unreadable. */
static void
conf_sysctl_line(const char *path, char *buf, size_t size)
{
	FILE *f;

	snprintf(buf, size, "?");
	if ((f = fopen(path, "re")) == NULL)
		return;
	if (fgets(buf, (int)size, f) != NULL)
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/* Valid, but probably not what was meant: say so in the log. */
void
config_warnings(const struct config *c)
{
	char dflt[64], why[512];

	if (c->admin_group[0] != '\0' && getgrnam(c->admin_group) == NULL)
		log_warnx("config: admin_group \"%s\" does not exist: only root "
		    "may run mcclctl abort, reload and metrics",
		    c->admin_group);
	if (c->tcp_congestion[0] != '\0')
		return;
	conf_sysctl_line("/proc/sys/net/ipv4/tcp_congestion_control", dflt,
	    sizeof(dflt));
	if (strcmp(dflt, CC_AUTO_FROM) != 0)
		return;
	if (strcmp(c->data_cc, CC_AUTO_TO) == 0)
		log_info("config: the data links take %s, not the system's %s, "
		    "whose probe of the round trip stalls a job's ring for some "
		    "200 ms every 10 s (tcp_congestion \"system\" keeps %s)",
		    CC_AUTO_TO, CC_AUTO_FROM, CC_AUTO_FROM);
	else if (cc_usable(CC_AUTO_TO, why, sizeof(why)) == -1)
		log_warnx("config: the data links take the system's %s, whose "
		    "probe of the round trip stalls a job's ring for some 200 ms "
		    "every 10 s, since %s: add %s to that list (sysctl), or set "
		    "tcp_congestion \"system\" to keep %s",
		    CC_AUTO_FROM, why, CC_AUTO_TO, CC_AUTO_FROM);
}

void
config_free(struct config *c)
{
	free(c->nodes);
	c->nodes = NULL;
	c->nnodes = 0;
}

static void
fnv1a(uint64_t *h, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i < len; i++) {
		*h ^= p[i];
		*h *= FNV64_PRIME;
	}
}

/*
 * Per node, in order: name and host each with their NUL (so that no two
 * lists digest the same bytes), then the port big-endian, so that daemons
 * of any byte order agree.
 */
uint64_t
config_cluster_hash(const struct config *c)
{
	uint64_t h = FNV64_OFFSET;

	for (size_t i = 0; i < c->nnodes; i++) {
		const struct conf_node *n = &c->nodes[i];
		uint8_t port[2] = { (uint8_t)(n->addr.port >> 8),
		    (uint8_t)n->addr.port };

		fnv1a(&h, n->name, strlen(n->name) + 1);
		fnv1a(&h, n->addr.host, strlen(n->addr.host) + 1);
		fnv1a(&h, port, sizeof(port));
	}
	return h;
}

static int
addr_port(const char *s, const char *p, uint16_t *port, char *err,
    size_t errlen)
{
	unsigned long v = 0;
	size_t n = strlen(p);

	if (n == 0 || n > 5 || strspn(p, "0123456789") != n) {
		snprintf(err, errlen, "bad address \"%s\": port must be a "
		    "number from 1 to 65535", s);
		return -1;
	}
	v = strtoul(p, NULL, 10);
	if (v < 1 || v > 65535) {
		snprintf(err, errlen, "bad address \"%s\": port %lu is not "
		    "in 1..65535", s, v);
		return -1;
	}
	*port = (uint16_t)v;
	return 0;
}

/* "host:port" or "[v6]:port"; a bare IPv6 address is ambiguous and refused. */
int
config_parse_addr(const char *s, struct conf_addr *a, char *err, size_t errlen)
{
	const char *host, *colon, *end;
	size_t hostlen;

	if (s[0] == '[') {
		host = s + 1;
		if ((end = strchr(host, ']')) == NULL || end[1] != ':') {
			snprintf(err, errlen, "bad address \"%s\": expected "
			    "[address]:port", s);
			return -1;
		}
		colon = end + 1;
	} else {
		host = s;
		if ((colon = strrchr(s, ':')) == NULL) {
			snprintf(err, errlen, "bad address \"%s\": expected "
			    "host:port", s);
			return -1;
		}
		end = colon;
		if (memchr(s, ':', (size_t)(colon - s)) != NULL) {
			snprintf(err, errlen, "bad address \"%s\": an IPv6 "
			    "address must be in brackets: [address]:port", s);
			return -1;
		}
	}
	hostlen = (size_t)(end - host);
	if (hostlen == 0) {
		snprintf(err, errlen, "bad address \"%s\": empty host", s);
		return -1;
	}
	if (hostlen >= sizeof(a->host)) {
		snprintf(err, errlen, "bad address \"%.64s...\": host longer "
		    "than %zu bytes", s, sizeof(a->host) - 1);
		return -1;
	}
	for (size_t i = 0; i < hostlen; i++)
		if ((unsigned char)host[i] <= ' ' || host[i] == '[' ||
		    host[i] == ']' || host[i] == 0x7f) {
			snprintf(err, errlen, "bad address \"%s\": bad "
			    "character in host", s);
			return -1;
		}
	if (addr_port(s, colon + 1, &a->port, err, errlen) == -1)
		return -1;
	memcpy(a->host, host, hostlen);
	a->host[hostlen] = '\0';
	return 0;
}

void
default_socket_path(char *buf, size_t len)
{
	proto_default_socket(buf, len);
}

/* ---- one handler per key ---- */

static const char *
conf_string(struct pctx *p, const char *key, json_t *v)
{
	if (!json_is_string(v)) {
		conf_err(p, "key \"%s\": expected a string, got %s", key,
		    conf_json_type(v));
		return NULL;
	}
	return json_string_value(v);
}

static int
conf_name_ok(struct pctx *p, const char *key, const char *name)
{
	size_t len = strlen(name);

	if (len == 0) {
		conf_err(p, "key \"%s\": empty node name", key);
		return -1;
	}
	if (len >= NODE_NAME_MAX) {
		conf_err(p, "key \"%s\": node name \"%.32s...\" is longer "
		    "than %d bytes", key, name, NODE_NAME_MAX - 1);
		return -1;
	}
	return 0;
}

static int
conf_node(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	const char *s;

	if ((s = conf_string(p, k->name, v)) == NULL ||
	    conf_name_ok(p, k->name, s) == -1)
		return -1;
	conf_strcpy(c->node_name, s, sizeof(c->node_name));
	return 0;
}

/* A string that must fit in dst (size bytes) and not be empty. */
static int
conf_bounded(struct pctx *p, const char *key, json_t *v, char *dst,
    size_t size)
{
	const char *s;

	if ((s = conf_string(p, key, v)) == NULL)
		return -1;
	if (*s == '\0' || strlen(s) >= size) {
		conf_err(p, "key \"%s\": must be 1 to %zu bytes", key, size - 1);
		return -1;
	}
	conf_strcpy(dst, s, size);
	return 0;
}

static int
conf_key_file(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	return conf_bounded(p, k->name, v, c->key_file, sizeof(c->key_file));
}

static int
conf_metrics_listen(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	char err[ERR_MAX];
	const char *s;

	if ((s = conf_string(p, k->name, v)) == NULL)
		return -1;
	if (config_parse_addr(s, &c->metrics_listen, err, sizeof(err)) == -1) {
		conf_err(p, "key \"%s\": %s", k->name, err);
		return -1;
	}
	return 0;
}

static int
conf_metrics_token_file(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	return conf_bounded(p, k->name, v, c->metrics_token_file,
	    sizeof(c->metrics_token_file));
}

static int
conf_admin_group(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	return conf_bounded(p, k->name, v, c->admin_group,
	    sizeof(c->admin_group));
}

/*
 * Whether this daemon may give its TCP sockets congestion control name,
 * tried where it will be used: on a socket of this user and network
 * namespace.  0, or -1 with why.
 */
static int
cc_usable(const char *name, char *why, size_t whylen)
{
	char list[256];
	int fd, rc, saved;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 &&
	    (fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		snprintf(why, whylen, "cannot try \"%s\": socket: %s", name,
		    strerror(errno));
		return -1;
	}
	rc = setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, strlen(name));
	saved = errno;
	close(fd);
	if (rc == 0)
		return 0;
	if (saved == EPERM) {
		conf_sysctl_line("/proc/sys/net/ipv4/"
		    "tcp_allowed_congestion_control", list, sizeof(list));
		snprintf(why, whylen, "\"%s\" is not allowed to this user "
		    "(net.ipv4.tcp_allowed_congestion_control: %s)", name, list);
	} else if (saved == ENOENT) {
		conf_sysctl_line("/proc/sys/net/ipv4/"
		    "tcp_available_congestion_control", list, sizeof(list));
		snprintf(why, whylen, "\"%s\" is not available on this host "
		    "(net.ipv4.tcp_available_congestion_control: %s)", name,
		    list);
	} else
		snprintf(why, whylen, "\"%s\": %s", name, strerror(saved));
	return -1;
}

/* "auto" is kept as "", the default; "system" and names as they are. */
static int
conf_tcp_congestion(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	char why[512];
	const char *s;

	if (conf_bounded(p, k->name, v, c->tcp_congestion,
	    sizeof(c->tcp_congestion)) == -1)
		return -1;
	s = c->tcp_congestion;
	if (strcmp(s, "auto") == 0) {
		c->tcp_congestion[0] = '\0';
		return 0;
	}
	if (strcmp(s, "system") == 0)
		return 0;
	if (strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(s)) {
		conf_err(p, "key \"%s\": \"%s\" is not a congestion control "
		    "name (lower-case letters, digits, _), auto or system",
		    k->name, s);
		return -1;
	}
	if (cc_usable(s, why, sizeof(why)) == -1) {
		conf_err(p, "key \"%s\": %s", k->name, why);
		return -1;
	}
	return 0;
}

/*
 * What the data links set: a name as configured; nothing (the system's)
 * for "system"; for auto, CC_AUTO_TO where the system's is CC_AUTO_FROM
 * and this daemon may set it, else nothing.
 */
static void
conf_data_cc(struct config *c)
{
	char dflt[64], why[512];

	c->data_cc[0] = '\0';
	if (strcmp(c->tcp_congestion, "system") == 0)
		return;
	if (c->tcp_congestion[0] != '\0') {
		conf_strcpy(c->data_cc, c->tcp_congestion, sizeof(c->data_cc));
		return;
	}
	conf_sysctl_line("/proc/sys/net/ipv4/tcp_congestion_control", dflt,
	    sizeof(dflt));
	if (strcmp(dflt, CC_AUTO_FROM) == 0 &&
	    cc_usable(CC_AUTO_TO, why, sizeof(why)) == 0)
		conf_strcpy(c->data_cc, CC_AUTO_TO, sizeof(c->data_cc));
}

static int
conf_socket(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	const char *s;
	size_t len;

	if ((s = conf_string(p, k->name, v)) == NULL)
		return -1;
	len = strlen(s);
	if (len == 0 || s[0] != '/') {
		conf_err(p, "key \"%s\": \"%s\" is not an absolute path",
		    k->name, s);
		return -1;
	}
	if (len >= sizeof(c->socket_path)) {
		conf_err(p, "key \"%s\": path of %zu bytes is too long for a "
		    "Unix socket (at most %zu)", k->name, len,
		    sizeof(c->socket_path) - 1);
		return -1;
	}
	conf_strcpy(c->socket_path, s, sizeof(c->socket_path));
	return 0;
}

static int
conf_listen(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	char aerr[ERR_MAX];
	size_t i, n;
	json_t *e;

	if (!json_is_array(v)) {
		conf_err(p, "key \"%s\": expected an array of \"host:port\" "
		    "strings, got %s", k->name, conf_json_type(v));
		return -1;
	}
	if ((n = json_array_size(v)) == 0 || n > CONF_LISTEN_MAX) {
		conf_err(p, "key \"%s\": %zu addresses, expected 1 to %d",
		    k->name, n, CONF_LISTEN_MAX);
		return -1;
	}
	json_array_foreach(v, i, e) {
		if (!json_is_string(e)) {
			conf_err(p, "key \"%s\", element %zu: expected a "
			    "string, got %s", k->name, i, conf_json_type(e));
			return -1;
		}
		if (config_parse_addr(json_string_value(e), &c->listen[i],
		    aerr, sizeof(aerr)) == -1) {
			conf_err(p, "key \"%s\": %s", k->name, aerr);
			return -1;
		}
	}
	c->nlisten = n;
	return 0;
}

static int
conf_log_level(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	const char *s;
	int level;

	if ((s = conf_string(p, k->name, v)) == NULL)
		return -1;
	if ((level = log_level_parse(s)) == -1) {
		conf_err(p, "key \"%s\": unknown level \"%.32s\" (expected "
		    "error, warning, info or debug)", k->name, s);
		return -1;
	}
	c->log_level = level;
	return 0;
}

static int
conf_algo(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	const char *s;
	int algo;

	if ((s = conf_string(p, k->name, v)) == NULL)
		return -1;
	if ((algo = proto_algo_parse(s)) == -1) {
		conf_err(p, "key \"%s\": unknown algorithm \"%.32s\" (expected "
		    ALGO_NAMES ")", k->name, s);
		return -1;
	}
	c->algo = algo;
	return 0;
}

/* "auto", or microseconds as a number or a string (spin.h). */
static int
conf_spin(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	char num[32], why[128];
	const char *s = num;

	if (json_is_integer(v))
		snprintf(num, sizeof(num), "%lld", (long long)
		    json_integer_value(v));
	else if ((s = conf_string(p, k->name, v)) == NULL)
		return -1;
	if (spin_parse(s, &c->spin_us, why, sizeof(why)) == -1) {
		conf_err(p, "key \"%s\": %s", k->name, why);
		return -1;
	}
	return 0;
}

/* "auto" (STREAMS_AUTO), or 1 to PEER_LANES_MAX links. */
static int
conf_streams(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	json_int_t n;

	if (json_is_string(v) && strcmp(json_string_value(v), "auto") == 0) {
		c->streams_per_peer = STREAMS_AUTO;
		return 0;
	}
	if (!json_is_integer(v)) {
		conf_err(p, "key \"%s\": expected \"auto\" or an integer from "
		    "1 to %d", k->name, PEER_LANES_MAX);
		return -1;
	}
	if ((n = json_integer_value(v)) < 1 || n > PEER_LANES_MAX) {
		conf_err(p, "key \"%s\": %lld is not in 1..%d", k->name,
		    (long long)n, PEER_LANES_MAX);
		return -1;
	}
	c->streams_per_peer = (uint32_t)n;
	return 0;
}

/* One element of "nodes": {"name": ..., "address": ...}, exactly. */
static int
conf_node_entry(struct pctx *p, const char *key, size_t i, json_t *e,
    struct conf_node *n)
{
	json_t *name, *addr, *v;
	const char *ek;
	char aerr[ERR_MAX];

	if (!json_is_object(e)) {
		conf_err(p, "key \"%s\", element %zu: expected an object, "
		    "got %s", key, i, conf_json_type(e));
		return -1;
	}
	json_object_foreach(e, ek, v) {
		if (strcmp(ek, "name") != 0 && strcmp(ek, "address") != 0 &&
		    strcmp(ek, "rdma") != 0) {
			conf_err(p, "key \"%s\", element %zu: unknown key "
			    "\"%s\"", key, i, ek);
			return -1;
		}
	}
	name = json_object_get(e, "name");
	addr = json_object_get(e, "address");
	if (name == NULL || addr == NULL) {
		conf_err(p, "key \"%s\", element %zu: missing \"%s\"", key, i,
		    name == NULL ? "name" : "address");
		return -1;
	}
	if (!json_is_string(name) || !json_is_string(addr)) {
		conf_err(p, "key \"%s\", element %zu: \"%s\": expected a "
		    "string, got %s", key, i, json_is_string(name) ?
		    "address" : "name", conf_json_type(json_is_string(name) ?
		    addr : name));
		return -1;
	}
	if (conf_name_ok(p, key, json_string_value(name)) == -1)
		return -1;
	conf_strcpy(n->name, json_string_value(name), sizeof(n->name));
	if (config_parse_addr(json_string_value(addr), &n->addr, aerr,
	    sizeof(aerr)) == -1) {
		conf_err(p, "key \"%s\": node \"%s\": %s", key, n->name, aerr);
		return -1;
	}
	return 0;
}

/* Names must be unique, and so must addresses: two nodes cannot share one. */
static int
conf_nodes_unique(struct pctx *p, const char *key, const struct config *c,
    size_t i)
{
	const struct conf_node *n = &c->nodes[i];

	for (size_t j = 0; j < i; j++) {
		const struct conf_node *m = &c->nodes[j];

		if (strcmp(m->name, n->name) == 0) {
			conf_err(p, "key \"%s\": duplicate node name \"%s\"",
			    key, n->name);
			return -1;
		}
		if (strcmp(m->addr.host, n->addr.host) == 0 &&
		    m->addr.port == n->addr.port) {
			conf_err(p, "key \"%s\": nodes \"%s\" and \"%s\" have "
			    "the same address", key, m->name, n->name);
			return -1;
		}
	}
	return 0;
}

static int
conf_nodes(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	size_t i, n;
	json_t *e;

	if (!json_is_array(v)) {
		conf_err(p, "key \"%s\": expected an array of objects, got %s",
		    k->name, conf_json_type(v));
		return -1;
	}
	if ((n = json_array_size(v)) == 0 || n > CONF_NODES_MAX) {
		conf_err(p, "key \"%s\": %zu nodes, expected 1 to %d",
		    k->name, n, CONF_NODES_MAX);
		return -1;
	}
	free(c->nodes);
	c->nnodes = 0;
	if ((c->nodes = calloc(n, sizeof(*c->nodes))) == NULL) {
		conf_err(p, "key \"%s\": out of memory", k->name);
		return -1;
	}
	json_array_foreach(v, i, e) {
		if (conf_node_entry(p, k->name, i, e, &c->nodes[i]) == -1 ||
		    conf_nodes_unique(p, k->name, c, i) == -1)
			return -1;
	}
	c->nnodes = n;
	p->nodes = v;		/* "rdma" names nodes: read once all are in */
	return 0;
}

/* "mlx5_0" or "mlx5_0:1": a device name and, optionally, its port. */
static int
conf_dev_ok(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
	    "VWXYZ0123456789_.-");
	char *end;
	unsigned long port;

	if (n == 0 || strlen(s) >= LINK_DEV_MAX)
		return 0;
	if (s[n] == '\0')
		return 1;
	if (s[n] != ':' || s[n + 1] < '1' || s[n + 1] > '9')
		return 0;
	port = strtoul(s + n + 1, &end, 10);
	return *end == '\0' && port <= 255;
}

static size_t
conf_node_index(const struct config *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nnodes; i++)
		if (strcmp(c->nodes[i].name, name) == 0)
			break;
	return i;
}

/*
 * Each node's "rdma": {"other node": "device[:port]", ...}, the device
 * that node reaches the other through.  This node's entry fills rdma_dev.
 */
static int
conf_rdma(struct pctx *p, struct config *c)
{
	const char *peer, *me = c->nodes[c->node_index].name;
	json_t *map, *dev;
	size_t i, q;

	for (i = 0; p->nodes != NULL && i < c->nnodes; i++) {
		if ((map = json_object_get(json_array_get(p->nodes, i),
		    "rdma")) == NULL)
			continue;
		if (!json_is_object(map)) {
			conf_err(p, "node \"%s\": \"rdma\": expected an object "
			    "of node names to devices, got %s",
			    c->nodes[i].name, conf_json_type(map));
			return -1;
		}
		json_object_foreach(map, peer, dev) {
			if ((q = conf_node_index(c, peer)) == c->nnodes ||
			    q == i) {
				conf_err(p, "node \"%s\": \"rdma\": \"%.64s\" "
				    "is %s", c->nodes[i].name, peer, q == i ?
				    "the node itself" : "not in \"nodes\"");
				return -1;
			}
			if (!json_is_string(dev) ||
			    !conf_dev_ok(json_string_value(dev))) {
				conf_err(p, "node \"%s\": \"rdma\": \"%s\": "
				    "expected a device name, \"mlx5_0\" or "
				    "\"mlx5_0:1\" (port), of under %d bytes",
				    c->nodes[i].name, peer, LINK_DEV_MAX);
				return -1;
			}
			if (strcmp(c->nodes[i].name, me) == 0)
				conf_strcpy(c->nodes[q].rdma_dev,
				    json_string_value(dev),
				    sizeof(c->nodes[q].rdma_dev));
		}
	}
	return 0;
}

static const char *const transport_names[] = { "auto", "tcp", "rdma" };

const char *
conf_transport_name(int t)
{
	return t >= 0 && t <= LINK_RDMA ? transport_names[t] :
	    "unknown";
}

static int
conf_transport(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	const char *s;

	if ((s = conf_string(p, k->name, v)) == NULL)
		return -1;
	for (int i = 0; i <= LINK_RDMA; i++)
		if (strcmp(s, transport_names[i]) == 0) {
			c->transport = i;
			return 0;
		}
	conf_err(p, "key \"%s\": unknown transport \"%.32s\" (expected "
	    "auto, tcp or rdma)", k->name, s);
	return -1;
}

static int
conf_uint(struct pctx *p, const struct conf_key *k, json_t *v,
    struct config *c)
{
	uint8_t *dst = (uint8_t *)c + k->offset;
	json_int_t n;

	if (!json_is_integer(v)) {
		conf_err(p, "key \"%s\": expected a positive integer, got %s",
		    k->name, conf_json_type(v));
		return -1;
	}
	n = json_integer_value(v);
	if (n <= 0) {
		conf_err(p, "key \"%s\": expected a positive integer, got %"
		    JSON_INTEGER_FORMAT, k->name, n);
		return -1;
	}
	if ((uint64_t)n < k->min || (uint64_t)n > k->max) {
		conf_err(p, "key \"%s\": %" JSON_INTEGER_FORMAT " is not in "
		    "%" PRIu64 "..%" PRIu64, k->name, n, k->min, k->max);
		return -1;
	}
	if (k->size == sizeof(uint32_t)) {
		uint32_t u = (uint32_t)n;

		memcpy(dst, &u, sizeof(u));
	} else {
		uint64_t u = (uint64_t)n;

		memcpy(dst, &u, sizeof(u));
	}
	return 0;
}

/* ---- how each special key shows its value (mccld -n) ---- */

static void
show_str(FILE *f, const char *s)
{
	fprintf(f, "%s", *s ? s : "(none)");
}

static void
show_addr(FILE *f, const struct conf_addr *a)
{
	fprintf(f, strchr(a->host, ':') != NULL ? "[%s]:%u" : "%s:%u",
	    a->host, a->port);
}

static void
show_node(const struct config *c, FILE *f)
{
	show_str(f, c->node_name);
}

static void
show_socket(const struct config *c, FILE *f)
{
	show_str(f, c->socket_path);
}

static void
show_listen(const struct config *c, FILE *f)
{
	for (size_t i = 0; i < c->nlisten; i++) {
		fprintf(f, i ? ", " : "");
		show_addr(f, &c->listen[i]);
	}
}

static void
show_nodes(const struct config *c, FILE *f)
{
	for (size_t i = 0; i < c->nnodes; i++) {
		fprintf(f, "%s%s ", i ? ", " : "", c->nodes[i].name);
		show_addr(f, &c->nodes[i].addr);
	}
}

static void
show_log_level(const struct config *c, FILE *f)
{
	fprintf(f, "%s", log_level_name(c->log_level));
}

static void
show_algo(const struct config *c, FILE *f)
{
	fprintf(f, "%s", proto_algo_name(c->algo));
}

static void
show_transport(const struct config *c, FILE *f)
{
	fprintf(f, "%s", conf_transport_name(c->transport));
}

static void
show_streams(const struct config *c, FILE *f)
{
	if (c->streams_per_peer == STREAMS_AUTO)
		fprintf(f, "auto");
	else
		fprintf(f, "%u", c->streams_per_peer);
}

static void
show_spin(const struct config *c, FILE *f)
{
	if (c->spin_us == SPIN_AUTO)
		fprintf(f, "auto");
	else
		fprintf(f, "%d", (int)c->spin_us);
}

static void
show_key_file(const struct config *c, FILE *f)
{
	show_str(f, c->key_file);
}

static void
show_metrics_token_file(const struct config *c, FILE *f)
{
	show_str(f, c->metrics_token_file);
}

static void
show_admin_group(const struct config *c, FILE *f)
{
	show_str(f, c->admin_group);
}

static void
show_tcp_congestion(const struct config *c, FILE *f)
{
	if (c->tcp_congestion[0] == '\0')
		fprintf(f, "auto (%s)", *c->data_cc ? c->data_cc :
		    "the system's");
	else
		fprintf(f, "%s", c->tcp_congestion);
}

static void
show_metrics_listen(const struct config *c, FILE *f)
{
	if (c->metrics_listen.port == 0)
		fprintf(f, "(none)");
	else
		show_addr(f, &c->metrics_listen);
}

/* ---- the keys ---- */

#define FIELD(m)	offsetof(struct config, m), \
			sizeof(((struct config *)0)->m)
#define NUM(n, m, lo, hi, d, rl, doc) \
	{ (n), "integer", conf_uint, NULL, FIELD(m), (lo), (hi), (d), (rl), \
	    NULL, (doc) }
#define SPECIAL(n, type, fn, m, d, rl, ddoc, doc) \
	{ (n), (type), conf_##fn, show_##fn, FIELD(m), 0, 0, (d), (rl), \
	    (ddoc), (doc) }

static const struct conf_key conf_keys[] = {
	SPECIAL("node", "string", node, node_name, 0, RELOAD_RESTART,
	    "see meaning", "this node's name; must be in \"nodes\". Default: "
	    "the only node of \"nodes\", else the host name"),
	SPECIAL("socket", "string", socket, socket_path, 0, RELOAD_RESTART,
	    PROTO_SYSTEM_SOCKET, "absolute path of the Unix socket for "
	    "clients and mcclctl, at most 107 bytes (non-root: "
	    "$XDG_RUNTIME_DIR/mccl/mccld.sock or /tmp/mccl-<uid>/mccld.sock); "
	    "its directory must be the daemon user's (or root's), writable by "
	    "no one else"),
	SPECIAL("listen", "array of strings", listen, listen, 0, RELOAD_RESTART,
	    "this node's address", "\"host:port\" or \"[v6]:port\" addresses "
	    "to accept peer daemons on, 1 to 8"),
	SPECIAL("log_level", "string", log_level, log_level, LOG_INFO,
	    RELOAD_APPLY | THEN(CONF_HOOK_LOG_LEVEL), "info",
	    "error, warning, info or debug"),
	{ "nodes", "array of objects", conf_nodes, show_nodes, 0, 0, 0, 0, 0,
	    RELOAD_OWN, "one node, 127.0.0.1:7470", "the cluster in order, "
	    "{\"name\": string, \"address\": \"host:port\", \"rdma\": {\"other "
	    "node\": \"device[:port]\", ...} (optional: the RDMA device this "
	    "node reaches each other node through; a change needs a "
	    "restart)}; names and addresses unique, names under 64 bytes, 1 "
	    "to 1024 nodes; every daemon needs the same list; a reload "
	    "applies nodes added at the end" },
	NUM("init_timeout_ms", init_timeout_ms, 1, UINT32_MAX, 30000,
	    RELOAD_APPLY, "job formation timeout when the client gives none"),
	NUM("op_timeout_ms", op_timeout_ms, 1, UINT32_MAX, 60000,
	    RELOAD_APPLY | THEN(CONF_HOOK_ENGINES), "one operation's timeout "
	    "when the client gives none"),
	NUM("connect_timeout_ms", connect_timeout_ms, 1, UINT32_MAX, 5000,
	    RELOAD_APPLY | THEN(CONF_HOOK_ENGINES), "TCP connect and "
	    "data-link set-up (RDMA queue pairs included) to a peer"),
	NUM("heartbeat_interval_ms", heartbeat_interval_ms, 1, UINT32_MAX,
	    1000, RELOAD_APPLY | THEN(CONF_HOOK_HEARTBEAT),
	    "interval between pings to each peer"),
	NUM("heartbeat_timeout_ms", heartbeat_timeout_ms, 1, UINT32_MAX, 5000,
	    RELOAD_APPLY | THEN(CONF_HOOK_HEARTBEAT), "silence after which a "
	    "peer is dead; must exceed heartbeat_interval_ms"),
	NUM("heartbeat_mesh_max_nodes", heartbeat_mesh_max_nodes, 1, 1024, 64,
	    RELOAD_APPLY | THEN(CONF_HOOK_HEARTBEAT), "largest cluster in "
	    "which every node heartbeats every other; in a larger one each "
	    "node heartbeats those at ring distances 1, 2, 4, ... (2 log2 N of them) and the nodes of its "
	    "jobs, and the others on a report that one is silent"),
	SPECIAL("algo", "string", algo, algo, ALGO_AUTO,
	    RELOAD_APPLY | THEN(CONF_HOOK_ENGINES), "auto",
	    "allreduce algorithm when the client asks for none: auto (by a "
	    "cost model of size and node count), ring, doubling, rabenseifner "
	    "or direct"),
	SPECIAL("transport", "string", transport, transport, LINK_ANY,
	    RELOAD_APPLY | THEN(CONF_HOOK_ENGINES), "auto", "what carries a "
	    "job's data between nodes: auto (RDMA where both nodes have a "
	    "device for each other, else TCP), tcp or rdma (RDMA or the job "
	    "fails)"),
	SPECIAL("spin_us", "integer or string", spin, spin_us, SPIN_AUTO,
	    RELOAD_APPLY | THEN(CONF_HOOK_ENGINES), "auto", "microseconds an "
	    "engine spins for its next operation and on its links before it "
	    "sleeps, 0 to 100000, or auto (up to 50 while a CPU is idle)"),
	SPECIAL("streams_per_peer", "integer or string", streams,
	    streams_per_peer, STREAMS_AUTO, RELOAD_APPLY, "auto", "data links "
	    "(TCP connections or RDMA queue pairs) between two neighbours of a "
	    "job's ring for its collectives, 1 to 8, or auto (2 to 4, one per "
	    "four cores, and one per 2.5 Gbit/s of the link measured): large "
	    "ring allreduces run one ring per connection, "
	    "each on a thread, alternately in each direction; other pairs have "
	    "one; the coordinator's value applies to the job"),
	NUM("chunk_bytes", chunk_bytes, CHUNK_MIN, CHUNK_MAX, 1048576,
	    RELOAD_RESTART, "pipeline chunk of the ring algorithms, 4096 to "
	    "67108864"),
	NUM("max_clients", max_clients, 1, UINT32_MAX, 1024, RELOAD_APPLY,
	    "connections on the Unix socket"),
	NUM("max_segments", max_segments, 1, UINT32_MAX, 64, RELOAD_APPLY,
	    "shared-memory segments per client"),
	NUM("max_segment_bytes", max_segment_bytes, 1, INT64_MAX, 68719476736,
	    RELOAD_APPLY, "bytes of all segments of one client together (64 "
	    "GiB)"),
	NUM("max_pending_ops", max_pending_ops, 1, UINT32_MAX, 4096,
	    RELOAD_APPLY, "sends and receives one client may have submitted "
	    "and not yet seen answered"),
	NUM("max_connections_per_uid", max_connections_per_uid, 1, UINT32_MAX,
	    256, RELOAD_APPLY, "connections on the Unix socket from one user "
	    "id"),
	NUM("max_jobs_per_uid", max_jobs_per_uid, 1, UINT32_MAX, 64,
	    RELOAD_APPLY, "jobs of one user id on this node, forming or "
	    "running"),
	NUM("max_ranks_per_job", max_ranks_per_job, 1, PEER_RANKS_MAX, 65536,
	    RELOAD_APPLY, "ranks of one job, here and in the joins other "
	    "nodes send to this node as a job's coordinator (each rank costs "
	    "its coordinator 4 bytes while the job forms)"),
	NUM("max_forming_jobs_per_peer", max_forming_jobs_per_peer, 1,
	    UINT32_MAX, 256, RELOAD_APPLY, "jobs one node's joins may have "
	    "forming at this node as their coordinator; past it the node's "
	    "next job fails there, logged once"),
	NUM("max_init_timeout_ms", max_init_timeout_ms, 1000, UINT32_MAX,
	    3600000, RELOAD_APPLY, "the longest a job may take to form, "
	    "whatever timeout its client or another node asks (1 hour)"),
	NUM("failed_jobs_kept", failed_jobs_kept, 0, 1024, 16, RELOAD_APPLY,
	    "failed or aborted jobs of each user id kept, with their reason, "
	    "for mcclctl jobs --failed and mcclctl job (0 to 1024); the oldest "
	    "goes first"),
	NUM("max_reply_bytes_per_uid", max_reply_bytes_per_uid, 65536,
	    INT64_MAX, 16777216, RELOAD_APPLY, "bytes of replies the "
	    "connections of one user id may leave unread (>= 65536); past it "
	    "the daemon stops reading from the connection"),
	NUM("max_unreceived_bytes_per_uid", max_unreceived_bytes_per_uid, 1,
	    INT64_MAX, 4294967296, RELOAD_APPLY | THEN(CONF_HOOK_P2P_LIMITS),
	    "bytes of point-to-point messages sent, not yet received, kept "
	    "for one user id's jobs; a send past it fails"),
	NUM("max_unreceived_bytes", max_unreceived_bytes, 1, INT64_MAX,
	    17179869184, RELOAD_APPLY | THEN(CONF_HOOK_P2P_LIMITS),
	    "the same for all users together"),
	NUM("max_scratch_bytes_per_uid", max_scratch_bytes_per_uid, 1,
	    INT64_MAX, 4294967296, RELOAD_APPLY |
	    THEN(CONF_HOOK_SCRATCH_LIMITS), "bytes of the engines' working "
	    "buffers (a reduce's partial result on a node without the "
	    "root, allgather's and reduce_scatter's node buffers, alltoall's "
	    "packing) held for one user id's jobs; an operation past it fails "
	    "with MCCL_ERR_NO_MEMORY; given back after a second idle"),
	NUM("max_scratch_bytes", max_scratch_bytes, 1, INT64_MAX, 17179869184,
	    RELOAD_APPLY | THEN(CONF_HOOK_SCRATCH_LIMITS),
	    "the same for all users together"),
	SPECIAL("key_file", "string", key_file, key_file, 0, RELOAD_RESTART,
	    "(none)", "the cluster's shared secret (>= 32 bytes, the daemon "
	    "user's or root's, mode 0600); without it, peers authenticate "
	    "with the host key (host.key beside the socket, made on first "
	    "start) and the daemon listens on loopback only"),
	SPECIAL("admin_group", "string", admin_group, admin_group, 0,
	    RELOAD_APPLY, "(none)", "group whose members may run mcclctl "
	    "abort, reload, metrics and check and see every user's jobs, "
	    "besides root and the daemon's own user"),
	NUM("max_message_bytes", max_message_bytes, 1024, IPC_MSG_MAX, 262144,
	    RELOAD_APPLY, "largest record a client may send (1024 to "
	    "262144); a longer one closes the connection"),
	NUM("max_fds_per_message", max_fds_per_message, 1, 3, 1, RELOAD_APPLY,
	    "descriptors one client record may carry (1 to 3); more close "
	    "the connection"),
	SPECIAL("metrics_listen", "string", metrics_listen, metrics_listen, 0,
	    RELOAD_RESTART, "(none)", "host:port where the daemon serves "
	    "Prometheus metrics at /metrics over HTTP; off when unset. The "
	    "samples are the node's, every user's jobs counted: without "
	    "metrics_token_file it is an operator's port, to bind where only "
	    "operators reach (any local user reaches loopback)"),
	SPECIAL("metrics_token_file", "string", metrics_token_file,
	    metrics_token_file, 0, RELOAD_RESTART, "(none)", "a file (the "
	    "daemon user's or root's, mode 0600) whose first line, 16 bytes "
	    "or more, is the bearer token a scrape of metrics_listen must "
	    "send (Authorization: Bearer TOKEN; Prometheus: "
	    "authorization.credentials_file); others get 401"),
	NUM("metrics_max_connections", metrics_max_connections, 1, 1024, 16,
	    RELOAD_APPLY, "connections the metrics port serves at once; "
	    "further ones wait in the kernel's backlog, not in the daemon's "
	    "descriptors"),
	NUM("metrics_timeout_ms", metrics_timeout_ms, 100, 60000, 5000,
	    RELOAD_APPLY, "time a metrics connection has to send its request "
	    "(at most 8192 bytes) and read the reply; then it is closed"),
	SPECIAL("tcp_congestion", "string", tcp_congestion, tcp_congestion, 0,
	    RELOAD_RESTART, "auto", "TCP congestion control of the data "
	    "links: auto (cubic where the system's is bbr and the daemon may "
	    "set cubic, else the system's), system, or a name the kernel "
	    "offers the daemon's user (net.ipv4.tcp_allowed_congestion_control;"
	    " for root, tcp_available_congestion_control); a ring keeps every "
	    "link busy, and bbr's probe of the round trip, a few packets for "
	    "200 ms every 10 s, stalls the whole ring"),
};

#define NKEYS	(sizeof(conf_keys) / sizeof(conf_keys[0]))

/* Every default of the table; the node list and what derives from it
 * come later (conf_finish). */
static void
conf_scalars(struct config *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < NKEYS; i++) {
		const struct conf_key *k = &conf_keys[i];
		uint8_t *dst = (uint8_t *)c + k->offset;

		if (k->size == sizeof(uint32_t)) {
			uint32_t u = (uint32_t)k->dflt;

			memcpy(dst, &u, sizeof(u));
		} else if (k->size == sizeof(uint64_t)) {
			uint64_t u = (uint64_t)k->dflt;

			memcpy(dst, &u, sizeof(u));
		}
	}
}

/* The running configuration takes what a reload may change now. */
static void
conf_apply_one(const struct conf_key *k, struct config *run,
    const struct config *nc)
{
	memcpy((uint8_t *)run + k->offset, (const uint8_t *)nc + k->offset,
	    k->size);
}

/*
 * A reload: apply to run, the daemon's configuration, every key of nc that
 * changed and that a reload applies; name, through restart(), each that
 * changed and needs a restart.  The node list is the caller's.  Returns
 * the hooks of the keys applied, a bit each (1 << enum conf_hook).
 */
unsigned
config_apply(struct config *run, const struct config *nc,
    void (*restart)(const char *))
{
	unsigned hooks = 0;

	for (size_t i = 0; i < NKEYS; i++) {
		const struct conf_key *k = &conf_keys[i];

		if (k->size == 0 || RELOAD_KIND(k->reload) == RELOAD_OWN ||
		    memcmp((const uint8_t *)run + k->offset,
		    (const uint8_t *)nc + k->offset, k->size) == 0)
			continue;
		if (RELOAD_KIND(k->reload) == RELOAD_RESTART) {
			restart(k->name);
			continue;
		}
		conf_apply_one(k, run, nc);
		if (RELOAD_HOOK(k->reload) != CONF_HOOK_NONE)
			hooks |= 1u << RELOAD_HOOK(k->reload);
	}
	return hooks;
}

static void
conf_show_value(const struct conf_key *k, const struct config *c, FILE *f)
{
	uint32_t u32;
	uint64_t u64;

	if (k->show != NULL)
		k->show(c, f);
	else if (k->size == sizeof(u32)) {
		memcpy(&u32, (const uint8_t *)c + k->offset, sizeof(u32));
		fprintf(f, "%" PRIu32, u32);
	} else {
		memcpy(&u64, (const uint8_t *)c + k->offset, sizeof(u64));
		fprintf(f, "%" PRIu64, u64);
	}
}

/* mccld -n: every key with the value in force. */
void
config_show(const struct config *c, FILE *f)
{
	for (size_t i = 0; i < NKEYS; i++) {
		fprintf(f, "%-28s ", conf_keys[i].name);
		conf_show_value(&conf_keys[i], c, f);
		fputc('\n', f);
	}
}

/* config/mccld.conf.keys, as mccld -k prints it. */
void
config_keys_file(FILE *f)
{
	char dflt[32];

	fprintf(f, "# Keys of mccld.conf (/etc/mccl/mccld.conf): one JSON "
	    "object, every key\n# optional; unknown keys and values of the "
	    "wrong type are errors.  Made by\n# mccld -k from the daemon's "
	    "table of keys (daemon/config.c).\n");
	fprintf(f, "# %-26s %-17s %-25s %s\n", "key", "type", "default",
	    "meaning");
	for (size_t i = 0; i < NKEYS; i++) {
		const struct conf_key *k = &conf_keys[i];

		snprintf(dflt, sizeof(dflt), "%" PRId64, k->dflt);
		fprintf(f, "%-28s %-17s %-25s %s\n", k->name, k->type,
		    k->dflt_doc != NULL ? k->dflt_doc : dflt, k->doc);
	}
}

static const struct conf_key *
conf_key_lookup(const char *name)
{
	for (size_t i = 0; i < sizeof(conf_keys) / sizeof(conf_keys[0]); i++)
		if (strcmp(conf_keys[i].name, name) == 0)
			return &conf_keys[i];
	return NULL;
}

/* Edits (insert, delete, replace) from a to b, up to 64 bytes each. */
static size_t
edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[65];

	if (la > 64 || lb > 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

/* The key an unknown name most likely meant: ", did you mean ...?", or "". */
static void
conf_key_suggest(const char *name, char *buf, size_t len)
{
	const char *best = NULL;
	size_t d, min = SIZE_MAX;

	for (size_t i = 0; i < sizeof(conf_keys) / sizeof(conf_keys[0]); i++)
		if ((d = edit_distance(name, conf_keys[i].name)) < min) {
			min = d;
			best = conf_keys[i].name;
		}
	/* At most a third of the name wrong: closer than that is a typo. */
	if (best != NULL && min <= 3 && min * 3 <= strlen(name))
		snprintf(buf, len, ", did you mean \"%s\"?", best);
	else
		buf[0] = '\0';
}

/* Defaults that depend on other keys, then the checks across keys. */
static int
conf_finish(struct pctx *p, struct config *c)
{
	char path[4096];
	size_t i;

	if (c->node_name[0] == '\0' && c->nnodes == 1)
		conf_strcpy(c->node_name, c->nodes[0].name,
		    sizeof(c->node_name));
	else if (c->node_name[0] == '\0') {
		conf_hostname(path, sizeof(path));
		if (strlen(path) >= sizeof(c->node_name)) {
			conf_err(p, "host name \"%.32s...\" is too long for a "
			    "node name; set \"node\"", path);
			return -1;
		}
		conf_strcpy(c->node_name, path, sizeof(c->node_name));
	}
	if (c->nodes == NULL && conf_default_nodes(c) == -1) {
		conf_err(p, "out of memory");
		return -1;
	}
	for (i = 0; i < c->nnodes; i++)
		if (strcmp(c->nodes[i].name, c->node_name) == 0)
			break;
	if (i == c->nnodes) {
		conf_err(p, "node \"%s\" is not in \"nodes\"", c->node_name);
		return -1;
	}
	c->node_index = (uint32_t)i;
	c->cluster_hash = config_cluster_hash(c);
	if (conf_rdma(p, c) == -1)
		return -1;
	if (c->nlisten == 0) {
		c->listen[0] = c->nodes[i].addr;
		c->nlisten = 1;
	}
	if (c->heartbeat_timeout_ms <= c->heartbeat_interval_ms) {
		conf_err(p, "key \"heartbeat_timeout_ms\": %" PRIu32 " must be "
		    "greater than \"heartbeat_interval_ms\" (%" PRIu32 ")",
		    c->heartbeat_timeout_ms, c->heartbeat_interval_ms);
		return -1;
	}
	if (c->socket_path[0] == '\0') {
		default_socket_path(path, sizeof(path));
		if (strlen(path) >= sizeof(c->socket_path)) {
			conf_err(p, "default socket path \"%.32s...\" is too "
			    "long; set \"socket\"", path);
			return -1;
		}
		conf_strcpy(c->socket_path, path, sizeof(c->socket_path));
	}
	conf_data_cc(c);
	return 0;
}

static int
conf_parse(struct pctx *p, const char *text, size_t len, struct config *out)
{
	const struct conf_key *k;
	struct config c;
	json_error_t jerr;
	json_t *root, *v;
	const char *key;
	char hint[96];
	int rc = -1;

	conf_scalars(&c);
	if ((root = json_loadb(text, len, JSON_REJECT_DUPLICATES,
	    &jerr)) == NULL) {
		conf_err(p, "line %d, column %d: %s", jerr.line, jerr.column,
		    jerr.text);
		return -1;
	}
	if (!json_is_object(root)) {
		conf_err(p, "expected a JSON object, got %s",
		    conf_json_type(root));
		goto out;
	}
	json_object_foreach(root, key, v) {
		if ((k = conf_key_lookup(key)) == NULL) {
			conf_key_suggest(key, hint, sizeof(hint));
			conf_err(p, "unknown key \"%s\"%s", key, hint);
			goto out;
		}
		if (k->parse(p, k, v, &c) == -1)
			goto out;
	}
	if (conf_finish(p, &c) == -1)
		goto out;
	*out = c;
	rc = 0;
out:
	json_decref(root);
	if (rc == -1)
		config_free(&c);
	return rc;
}

int
config_parse(const char *text, size_t len, struct config *cfg, char *err,
    size_t errlen)
{
	struct pctx p = { NULL, err, errlen, NULL };

	return conf_parse(&p, text, len, cfg);
}

/* Read a whole file.  1: it does not exist and that is fine. */
static int
conf_read(struct pctx *p, int explicit_path, char **textp, size_t *lenp)
{
	char *text = NULL, *t;
	size_t len = 0, size = 0;
	ssize_t n;
	int fd;

	if ((fd = open(p->where, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT && !explicit_path)
			return 1;
		conf_err(p, "%s", strerror(errno));
		return -1;
	}
	for (;;) {
		if (len == size) {
			size = size == 0 ? 8192 : size * 2;
			if (size > CONF_FILE_MAX + 1)
				size = CONF_FILE_MAX + 1;
			if (len == size) {
				conf_err(p, "larger than %d bytes",
				    CONF_FILE_MAX);
				goto fail;
			}
			if ((t = realloc(text, size)) == NULL) {
				conf_err(p, "out of memory");
				goto fail;
			}
			text = t;
		}
		if ((n = read(fd, text + len, size - len)) == -1) {
			if (errno == EINTR)
				continue;
			conf_err(p, "read: %s", strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	*textp = text;
	*lenp = len;
	return 0;
fail:
	close(fd);
	free(text);
	return -1;
}

int
config_load(const char *path, int explicit_path, struct config *cfg,
    char *err, size_t errlen)
{
	struct pctx p = { path, err, errlen, NULL };
	char *text;
	size_t len;
	int rc;

	if (path == NULL) {
		config_defaults(cfg);
		return 0;
	}
	if ((rc = conf_read(&p, explicit_path, &text, &len)) == 1) {
		config_defaults(cfg);
		return 0;
	}
	if (rc == -1)
		return -1;
	rc = conf_parse(&p, text, len, cfg);
	free(text);
	return rc;
}
