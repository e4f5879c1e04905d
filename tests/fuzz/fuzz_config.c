/*
 * fuzz_config.c: libFuzzer target for daemon/config.c.  The input is the
 * text of a configuration file.  A configuration config_parse() accepts
 * must satisfy what the daemon relies on, and must come back unchanged
 * when written out as JSON and parsed again; a refused one must leave a
 * message and the output untouched.  Short inputs are also tried as one
 * "host:port" address (config_parse_addr), which must round-trip as well.
 */
#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "mccld.h"

#define ADDR_INPUT_MAX	512

static int
str_ok(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL && s[0] != '\0';
}

/* A host holds no blank, control character or bracket. */
static void
check_addr(const struct conf_addr *a)
{
	FUZZ_CHECK(str_ok(a->host, sizeof(a->host)));
	FUZZ_CHECK(a->port != 0);
	for (const char *p = a->host; *p != '\0'; p++)
		FUZZ_CHECK((unsigned char)*p > ' ' && *p != '[' && *p != ']' &&
		    *p != 0x7f);
}

/* Names and addresses are unique across the node list. */
static void
check_nodes(const struct config *c)
{
	for (size_t i = 0; i < c->nnodes; i++) {
		const struct conf_node *n = &c->nodes[i];

		FUZZ_CHECK(str_ok(n->name, sizeof(n->name)));
		check_addr(&n->addr);
		for (size_t j = 0; j < i; j++) {
			const struct conf_node *m = &c->nodes[j];

			FUZZ_CHECK(strcmp(m->name, n->name) != 0);
			FUZZ_CHECK(strcmp(m->addr.host, n->addr.host) != 0 ||
			    m->addr.port != n->addr.port);
		}
	}
}

/* What the daemon relies on in an accepted configuration. */
static void
check_config(const struct config *c)
{
	FUZZ_CHECK(c->nodes != NULL);
	FUZZ_CHECK(c->nnodes >= 1 && c->nnodes <= CONF_NODES_MAX);
	FUZZ_CHECK(c->node_index < c->nnodes);
	FUZZ_CHECK(str_ok(c->node_name, sizeof(c->node_name)));
	FUZZ_CHECK(strcmp(c->nodes[c->node_index].name, c->node_name) == 0);
	FUZZ_CHECK(str_ok(c->socket_path, sizeof(c->socket_path)));
	FUZZ_CHECK(c->nlisten >= 1 && c->nlisten <= CONF_LISTEN_MAX);
	for (size_t i = 0; i < c->nlisten; i++)
		check_addr(&c->listen[i]);
	check_nodes(c);
	FUZZ_CHECK(log_level_name(c->log_level) != NULL);
	FUZZ_CHECK(c->heartbeat_timeout_ms > c->heartbeat_interval_ms);
	FUZZ_CHECK(c->heartbeat_interval_ms > 0 && c->init_timeout_ms > 0 &&
	    c->op_timeout_ms > 0 && c->connect_timeout_ms > 0);
	FUZZ_CHECK(c->chunk_bytes >= 4096 && c->chunk_bytes <= 64ULL << 20);
	FUZZ_CHECK(c->max_clients > 0 && c->max_segments > 0);
	FUZZ_CHECK(c->max_segment_bytes > 0 &&
	    c->max_segment_bytes <= INT64_MAX);
	FUZZ_CHECK(memchr(c->key_file, '\0', sizeof(c->key_file)) != NULL);
	FUZZ_CHECK(memchr(c->admin_group, '\0', sizeof(c->admin_group)) !=
	    NULL);
	FUZZ_CHECK(config_cluster_hash(c) == config_cluster_hash(c));
}

/* "host:port", bracketed when the host has a colon (IPv6). */
static json_t *
addr_json(const struct conf_addr *a)
{
	return json_sprintf(strchr(a->host, ':') != NULL ? "[%s]:%u" :
	    "%s:%u", a->host, a->port);
}

static json_t *
nodes_json(const struct config *c)
{
	json_t *nodes = json_array();

	for (size_t i = 0; i < c->nnodes; i++)
		json_array_append_new(nodes, json_pack("{s:s, s:o}", "name",
		    c->nodes[i].name, "address", addr_json(&c->nodes[i].addr)));
	return nodes;
}

/* Every setting of c, explicitly: parsing it must give c back. */
static char *
config_json(const struct config *c)
{
	json_t *listen = json_array(), *doc;
	char *text;

	for (size_t i = 0; i < c->nlisten; i++)
		json_array_append_new(listen, addr_json(&c->listen[i]));
	doc = json_pack("{s:s, s:s, s:o, s:s, s:o, s:I, s:I, s:I, s:I, s:I, "
	    "s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "node", c->node_name, "socket", c->socket_path, "listen", listen,
	    "log_level", log_level_name(c->log_level), "nodes", nodes_json(c),
	    "init_timeout_ms", (json_int_t)c->init_timeout_ms,
	    "op_timeout_ms", (json_int_t)c->op_timeout_ms,
	    "connect_timeout_ms", (json_int_t)c->connect_timeout_ms,
	    "heartbeat_interval_ms", (json_int_t)c->heartbeat_interval_ms,
	    "heartbeat_timeout_ms", (json_int_t)c->heartbeat_timeout_ms,
	    "chunk_bytes", (json_int_t)c->chunk_bytes,
	    "max_clients", (json_int_t)c->max_clients,
	    "max_segments", (json_int_t)c->max_segments,
	    "max_segment_bytes", (json_int_t)c->max_segment_bytes,
	    "max_pending_ops", (json_int_t)c->max_pending_ops,
	    "max_connections_per_uid", (json_int_t)c->max_connections_per_uid,
	    "max_jobs_per_uid", (json_int_t)c->max_jobs_per_uid,
	    "max_message_bytes", (json_int_t)c->max_message_bytes,
	    "max_fds_per_message", (json_int_t)c->max_fds_per_message);
	if (doc == NULL)
		fuzz_fail(__FILE__, __LINE__, "cannot write the config as JSON");
	/* Optional strings: "" means unset, and is refused as a value. */
	if (c->key_file[0] != '\0')
		json_object_set_new(doc, "key_file", json_string(c->key_file));
	if (c->metrics_listen.port != 0)
		json_object_set_new(doc, "metrics_listen", json_sprintf(
		    strchr(c->metrics_listen.host, ':') ? "[%s]:%u" : "%s:%u",
		    c->metrics_listen.host, c->metrics_listen.port));
	if (c->admin_group[0] != '\0')
		json_object_set_new(doc, "admin_group",
		    json_string(c->admin_group));
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (text == NULL)
		abort();
	return text;
}

static void
check_same_addr(const struct conf_addr *a, const struct conf_addr *b)
{
	FUZZ_CHECK(strcmp(a->host, b->host) == 0 && a->port == b->port);
}

static void
check_same(const struct config *a, const struct config *b)
{
	FUZZ_CHECK(strcmp(a->node_name, b->node_name) == 0);
	FUZZ_CHECK(a->node_index == b->node_index);
	FUZZ_CHECK(strcmp(a->socket_path, b->socket_path) == 0);
	FUZZ_CHECK(a->nlisten == b->nlisten && a->nnodes == b->nnodes);
	for (size_t i = 0; i < a->nlisten; i++)
		check_same_addr(&a->listen[i], &b->listen[i]);
	for (size_t i = 0; i < a->nnodes; i++) {
		FUZZ_CHECK(strcmp(a->nodes[i].name, b->nodes[i].name) == 0);
		check_same_addr(&a->nodes[i].addr, &b->nodes[i].addr);
	}
	FUZZ_CHECK(a->log_level == b->log_level);
	FUZZ_CHECK(strcmp(a->key_file, b->key_file) == 0);
	FUZZ_CHECK(strcmp(a->admin_group, b->admin_group) == 0);
	FUZZ_CHECK(strcmp(a->metrics_listen.host, b->metrics_listen.host) == 0 &&
	    a->metrics_listen.port == b->metrics_listen.port);
	FUZZ_CHECK(a->init_timeout_ms == b->init_timeout_ms &&
	    a->op_timeout_ms == b->op_timeout_ms &&
	    a->connect_timeout_ms == b->connect_timeout_ms &&
	    a->heartbeat_interval_ms == b->heartbeat_interval_ms &&
	    a->heartbeat_timeout_ms == b->heartbeat_timeout_ms &&
	    a->chunk_bytes == b->chunk_bytes &&
	    a->max_clients == b->max_clients &&
	    a->max_segments == b->max_segments &&
	    a->max_segment_bytes == b->max_segment_bytes &&
	    a->max_pending_ops == b->max_pending_ops &&
	    a->max_connections_per_uid == b->max_connections_per_uid &&
	    a->max_jobs_per_uid == b->max_jobs_per_uid &&
	    a->max_message_bytes == b->max_message_bytes &&
	    a->max_fds_per_message == b->max_fds_per_message);
	FUZZ_CHECK(config_cluster_hash(a) == config_cluster_hash(b));
}

static void
check_roundtrip(const struct config *c)
{
	struct config again;
	char err[ERR_MAX] = "";
	char *text = config_json(c);

	if (config_parse(text, strlen(text), &again, err, sizeof(err)) != 0) {
		fprintf(stderr, "reparse of %s: %s\n", text, err);
		fuzz_fail(__FILE__, __LINE__, "written config does not parse");
	}
	check_same(c, &again);
	config_free(&again);
	free(text);
}

static void
fuzz_config(const uint8_t *data, size_t size)
{
	struct config cfg, before;
	char err[ERR_MAX] = "";

	memset(&cfg, 0xa5, sizeof(cfg));
	memcpy(&before, &cfg, sizeof(cfg));
	if (config_parse((const char *)data, size, &cfg, err,
	    sizeof(err)) == 0) {
		check_config(&cfg);
		check_roundtrip(&cfg);
		config_free(&cfg);
		return;
	}
	FUZZ_CHECK(err[0] != '\0');
	FUZZ_CHECK(memcmp(&cfg, &before, sizeof(cfg)) == 0);
}

/* An accepted address prints as "[host]:port" and parses back the same. */
static void
fuzz_addr(const uint8_t *data, size_t size)
{
	struct conf_addr a, b;
	char err[ERR_MAX] = "", again[LINK_HOST_MAX + 16];
	char *s;

	if (size > ADDR_INPUT_MAX || (s = malloc(size + 1)) == NULL)
		return;
	memcpy(s, data, size);
	s[size] = '\0';
	memset(&a, 0xa5, sizeof(a));
	if (config_parse_addr(s, &a, err, sizeof(err)) == 0) {
		check_addr(&a);
		snprintf(again, sizeof(again), "[%s]:%u", a.host, a.port);
		FUZZ_CHECK(config_parse_addr(again, &b, err, sizeof(err)) == 0);
		check_same_addr(&a, &b);
	} else
		FUZZ_CHECK(err[0] != '\0');
	free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_config(data, size);
	fuzz_addr(data, size);
	return 0;
}
