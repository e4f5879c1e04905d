/*
 * test_config.c: unit tests of daemon/config.c: defaults, good files, the
 * shipped example, and one bad case per rule, each checking that the call
 * fails and that its message names the key or value at fault.
 *
 * Run from the top of the tree, or give the example file as argv[1].
 */
#include <check.h>
#include <sys/wait.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mccld.h"
#include "spin.h"

#ifndef EXAMPLE_CONF
#define EXAMPLE_CONF	"config/mccld.conf.example"
#endif

static const char *example_conf = EXAMPLE_CONF;

#define NODES3	"\"nodes\": [" \
	"{\"name\": \"a\", \"address\": \"10.0.0.1:7470\"}," \
	"{\"name\": \"b\", \"address\": \"10.0.0.2:7470\"}," \
	"{\"name\": \"c\", \"address\": \"[fd00::3]:7471\"}]"

static void
parse_ok(const char *text, struct config *c)
{
	char err[ERR_MAX] = "";
	int rc;

	rc = config_parse(text, strlen(text), c, err, sizeof(err));
	ck_assert_msg(rc == 0, "config_parse(%s) failed: %s", text, err);
}

/* Parsing must fail, say `want`, and leave *cfg alone. */
static void
parse_err(const char *text, const char *want)
{
	struct config c;
	char err[ERR_MAX] = "";
	int rc;

	memset(&c, 0xa5, sizeof(c));
	rc = config_parse(text, strlen(text), &c, err, sizeof(err));
	ck_assert_msg(rc == -1, "config_parse(%s) succeeded", text);
	ck_assert_msg(strstr(err, want) != NULL,
	    "config_parse(%s): message \"%s\" lacks \"%s\"", text, err, want);
	ck_assert_msg(strncmp(err, "config: ", 8) == 0, "message \"%s\"", err);
	ck_assert_uint_eq(((unsigned char *)&c)[0], 0xa5);
	ck_assert_uint_eq(((unsigned char *)&c)[sizeof(c) - 1], 0xa5);
}

static void
check_defaults(const struct config *c)
{
	char host[256] = "", sock[4096];

	gethostname(host, sizeof(host) - 1);
	default_socket_path(sock, sizeof(sock));
	ck_assert_str_eq(c->node_name, host);
	ck_assert_uint_eq(c->node_index, 0);
	ck_assert_str_eq(c->socket_path, sock);
	ck_assert_uint_eq(c->nnodes, 1);
	ck_assert_ptr_nonnull(c->nodes);
	ck_assert_str_eq(c->nodes[0].name, host);
	ck_assert_str_eq(c->nodes[0].addr.host, "127.0.0.1");
	ck_assert_uint_eq(c->nodes[0].addr.port, MCCLD_DEFAULT_PORT);
	ck_assert_uint_eq(c->nlisten, 1);
	ck_assert_str_eq(c->listen[0].host, "127.0.0.1");
	ck_assert_uint_eq(c->listen[0].port, MCCLD_DEFAULT_PORT);
	ck_assert_int_eq(c->log_level, LOG_INFO);
	ck_assert_uint_eq(c->init_timeout_ms, 30000);
	ck_assert_uint_eq(c->op_timeout_ms, 60000);
	ck_assert_uint_eq(c->connect_timeout_ms, 5000);
	ck_assert_uint_eq(c->heartbeat_interval_ms, 1000);
	ck_assert_uint_eq(c->heartbeat_timeout_ms, 5000);
	ck_assert_uint_eq(c->chunk_bytes, 1048576);
	ck_assert_int_eq(c->algo, ALGO_AUTO);
	ck_assert_int_eq(c->spin_us, SPIN_AUTO);
	ck_assert_uint_eq(c->streams_per_peer, STREAMS_AUTO);
	ck_assert_uint_eq(c->max_clients, 1024);
	ck_assert_uint_eq(c->max_segments, 64);
	ck_assert_uint_eq(c->max_segment_bytes, 64ULL << 30);
}

/* ---- defaults and good files ---- */

START_TEST(test_defaults)
{
	struct config c;
	char err[ERR_MAX];

	config_defaults(&c);
	check_defaults(&c);
	config_free(&c);
	ck_assert_ptr_null(c.nodes);
	ck_assert_uint_eq(c.nnodes, 0);

	parse_ok("{}", &c);
	check_defaults(&c);
	config_free(&c);

	ck_assert_int_eq(config_load(NULL, 0, &c, err, sizeof(err)), 0);
	check_defaults(&c);
	config_free(&c);
}
END_TEST

START_TEST(test_full)
{
	struct config c;

	parse_ok("{\"node\": \"b\", \"socket\": \"/var/run/x.sock\","
	    "\"listen\": [\"0.0.0.0:9000\", \"[::]:9001\"],"
	    "\"log_level\": \"debug\", " NODES3 ","
	    "\"init_timeout_ms\": 1, \"op_timeout_ms\": 4294967295,"
	    "\"connect_timeout_ms\": 3, \"heartbeat_interval_ms\": 4,"
	    "\"heartbeat_timeout_ms\": 5, \"chunk_bytes\": 4096,"
	    "\"max_clients\": 6, \"max_segments\": 7,"
	    "\"max_segment_bytes\": 1099511627776}", &c);
	ck_assert_str_eq(c.node_name, "b");
	ck_assert_uint_eq(c.node_index, 1);
	ck_assert_str_eq(c.socket_path, "/var/run/x.sock");
	ck_assert_uint_eq(c.nlisten, 2);
	ck_assert_str_eq(c.listen[0].host, "0.0.0.0");
	ck_assert_uint_eq(c.listen[0].port, 9000);
	ck_assert_str_eq(c.listen[1].host, "::");
	ck_assert_uint_eq(c.listen[1].port, 9001);
	ck_assert_int_eq(c.log_level, LOG_DEBUG);
	ck_assert_uint_eq(c.nnodes, 3);
	ck_assert_str_eq(c.nodes[0].name, "a");
	ck_assert_str_eq(c.nodes[0].addr.host, "10.0.0.1");
	ck_assert_uint_eq(c.nodes[0].addr.port, 7470);
	ck_assert_str_eq(c.nodes[2].name, "c");
	ck_assert_str_eq(c.nodes[2].addr.host, "fd00::3");
	ck_assert_uint_eq(c.nodes[2].addr.port, 7471);
	ck_assert_uint_eq(c.init_timeout_ms, 1);
	ck_assert_uint_eq(c.op_timeout_ms, 4294967295U);
	ck_assert_uint_eq(c.connect_timeout_ms, 3);
	ck_assert_uint_eq(c.heartbeat_interval_ms, 4);
	ck_assert_uint_eq(c.heartbeat_timeout_ms, 5);
	ck_assert_uint_eq(c.chunk_bytes, 4096);
	ck_assert_uint_eq(c.max_clients, 6);
	ck_assert_uint_eq(c.max_segments, 7);
	ck_assert_uint_eq(c.max_segment_bytes, 1ULL << 40);
	config_free(&c);

	/* Other levels, the chunk's upper bound. */
	parse_ok("{\"log_level\": \"error\", \"chunk_bytes\": 67108864}", &c);
	ck_assert_int_eq(c.log_level, LOG_ERR);
	ck_assert_uint_eq(c.chunk_bytes, 64 << 20);
	config_free(&c);
	parse_ok("{\"log_level\": \"warning\"}", &c);
	ck_assert_int_eq(c.log_level, LOG_WARNING);
	config_free(&c);
	parse_ok("{\"streams_per_peer\": 8}", &c);
	ck_assert_uint_eq(c.streams_per_peer, 8);
	config_free(&c);
	/* auto (test_form checks the lanes it gives) */
	parse_ok("{\"streams_per_peer\": \"auto\"}", &c);
	ck_assert_uint_eq(c.streams_per_peer, STREAMS_AUTO);
	config_free(&c);
	/* The spin: a number, its string, auto, never. */
	parse_ok("{\"spin_us\": 200}", &c);
	ck_assert_int_eq(c.spin_us, 200);
	config_free(&c);
	parse_ok("{\"spin_us\": \"35\"}", &c);
	ck_assert_int_eq(c.spin_us, 35);
	config_free(&c);
	parse_ok("{\"spin_us\": 0}", &c);
	ck_assert_int_eq(c.spin_us, 0);
	config_free(&c);
	parse_ok("{\"spin_us\": \"auto\"}", &c);
	ck_assert_int_eq(c.spin_us, SPIN_AUTO);
	config_free(&c);
	/* Every algorithm by its name. */
	for (int a = ALGO_AUTO; a <= ALGO_MAX; a++) {
		char text[64];

		snprintf(text, sizeof(text), "{\"algo\": \"%s\"}",
		    proto_algo_name(a));
		parse_ok(text, &c);
		ck_assert_int_eq(c.algo, a);
		config_free(&c);
	}
}
END_TEST

/* "node" and "listen" default from "nodes". */
START_TEST(test_node_defaults)
{
	char host[256] = "", text[1024];
	struct config c;

	parse_ok("{\"nodes\": [{\"name\": \"solo\", "
	    "\"address\": \"192.0.2.1:1\"}]}", &c);
	ck_assert_str_eq(c.node_name, "solo");
	ck_assert_uint_eq(c.node_index, 0);
	ck_assert_uint_eq(c.nlisten, 1);
	ck_assert_str_eq(c.listen[0].host, "192.0.2.1");
	ck_assert_uint_eq(c.listen[0].port, 1);
	config_free(&c);

	/* Several nodes and no "node": the host name picks one. */
	gethostname(host, sizeof(host) - 1);
	snprintf(text, sizeof(text), "{\"nodes\": ["
	    "{\"name\": \"other\", \"address\": \"192.0.2.1:7470\"},"
	    "{\"name\": \"%s\", \"address\": \"192.0.2.2:7471\"}]}", host);
	parse_ok(text, &c);
	ck_assert_str_eq(c.node_name, host);
	ck_assert_uint_eq(c.node_index, 1);
	ck_assert_str_eq(c.listen[0].host, "192.0.2.2");
	ck_assert_uint_eq(c.listen[0].port, 7471);
	config_free(&c);

	/* No "nodes": a cluster of one, named by "node". */
	parse_ok("{\"node\": \"me\"}", &c);
	ck_assert_str_eq(c.node_name, "me");
	ck_assert_uint_eq(c.nnodes, 1);
	ck_assert_str_eq(c.nodes[0].name, "me");
	ck_assert_str_eq(c.nodes[0].addr.host, "127.0.0.1");
	ck_assert_uint_eq(c.nodes[0].addr.port, MCCLD_DEFAULT_PORT);
	config_free(&c);

	/* A name of 63 bytes fits. */
	parse_ok("{\"node\": \"" "0123456789012345678901234567890123456789"
	    "01234567890123456789012\"}", &c);
	ck_assert_uint_eq(strlen(c.node_name), NODE_NAME_MAX - 1);
	config_free(&c);
}
END_TEST

START_TEST(test_example)
{
	char err[ERR_MAX] = "";
	struct config c;

	ck_assert_msg(config_load(example_conf, 1, &c, err, sizeof(err)) == 0,
	    "%s: %s", example_conf, err);
	ck_assert_uint_eq(c.nnodes, 3);
	ck_assert_uint_lt(c.node_index, c.nnodes);
	ck_assert_str_eq(c.nodes[c.node_index].name, c.node_name);
	for (size_t i = 0; i < c.nnodes; i++)
		ck_assert_int_eq(strncmp(c.nodes[i].addr.host, "198.1", 5), 0);
	ck_assert_uint_ge(c.nlisten, 1);
	config_free(&c);
}
END_TEST

/* ---- bad input ---- */

START_TEST(test_unknown_key)
{
	parse_err("{\"op_timout_ms\": 5}", "unknown key \"op_timout_ms\", did "
	    "you mean \"op_timeout_ms\"?");
	parse_err("{\"heartbeat_timeout\": 5}", "unknown key "
	    "\"heartbeat_timeout\", did you mean \"heartbeat_timeout_ms\"?");
	parse_err("{\"colour\": 5}", "unknown key \"colour\"");
	{	/* nothing near it: no guess */
		struct config c;
		char err[ERR_MAX] = "";

		ck_assert_int_eq(config_parse("{\"colour\": 5}", 13, &c, err,
		    sizeof(err)), -1);
		ck_assert_msg(strstr(err, "did you mean") == NULL, "%s", err);
	}
	parse_err("{\"nodes\": [{\"name\": \"a\", \"adress\": \"h:1\"}]}",
	    "unknown key \"adress\"");
	parse_err("{\"nodes\": [{\"name\": \"a\"}]}", "missing \"address\"");
	parse_err("{\"nodes\": [{\"address\": \"h:1\"}]}", "missing \"name\"");
}
END_TEST

static const struct {
	const char	*key;
	const char	*value;
	const char	*got;
} wrong_types[] = {
	{ "node", "1", "got integer" },
	{ "socket", "true", "got boolean" },
	{ "listen", "\"h:1\"", "got string" },
	{ "listen", "[1]", "got integer" },
	{ "log_level", "null", "got null" },
	{ "nodes", "{}", "got object" },
	{ "nodes", "[\"a\"]", "got string" },
	{ "nodes", "[{\"name\": 1, \"address\": \"h:1\"}]", "got integer" },
	{ "nodes", "[{\"name\": \"a\", \"address\": []}]", "got array" },
	{ "init_timeout_ms", "\"5\"", "got string" },
	{ "op_timeout_ms", "\"60000\"", "expected a positive integer, got string" },
	{ "connect_timeout_ms", "1.5", "got real" },
	{ "heartbeat_interval_ms", "[]", "got array" },
	{ "heartbeat_timeout_ms", "false", "got boolean" },
	{ "chunk_bytes", "{}", "got object" },
	{ "max_clients", "null", "got null" },
	{ "max_segments", "\"x\"", "got string" },
	{ "max_segment_bytes", "1e9", "got real" },
};

START_TEST(test_wrong_type)
{
	char text[256], want[128];

	snprintf(text, sizeof(text), "{\"%s\": %s}", wrong_types[_i].key,
	    wrong_types[_i].value);
	snprintf(want, sizeof(want), "key \"%s\"", wrong_types[_i].key);
	parse_err(text, want);
	parse_err(text, wrong_types[_i].got);
}
END_TEST

static const char *int_keys[] = {
	"init_timeout_ms", "op_timeout_ms", "connect_timeout_ms",
	"heartbeat_interval_ms", "heartbeat_timeout_ms", "max_clients",
	"max_segments", "chunk_bytes", "max_segment_bytes",
};

START_TEST(test_int_range)
{
	const char *key = int_keys[_i];
	char text[256], want[128];

	snprintf(want, sizeof(want), "key \"%s\"", key);
	snprintf(text, sizeof(text), "{\"%s\": 0}", key);
	parse_err(text, want);
	parse_err(text, "expected a positive integer, got 0");
	snprintf(text, sizeof(text), "{\"%s\": -5}", key);
	parse_err(text, want);
	if (strcmp(key, "max_segment_bytes") != 0) {
		snprintf(text, sizeof(text), "{\"%s\": 4294967296000}", key);
		parse_err(text, want);
	}
}
END_TEST

START_TEST(test_bounds)
{
	struct config c;

	parse_err("{\"op_timeout_ms\": 4294967296}", "key \"op_timeout_ms\"");
	parse_err("{\"chunk_bytes\": 4095}", "key \"chunk_bytes\"");
	parse_err("{\"chunk_bytes\": 67108865}", "key \"chunk_bytes\"");
	parse_err("{\"max_segment_bytes\": 99999999999999999999}", "line 1");
	parse_ok("{\"max_segment_bytes\": 9223372036854775807}", &c);
	ck_assert_uint_eq(c.max_segment_bytes, 9223372036854775807ULL);
	config_free(&c);
	parse_err("{\"log_level\": \"verbose\"}", "key \"log_level\"");
	parse_err("{\"log_level\": \"verbose\"}", "\"verbose\"");
	parse_err("{\"algo\": \"star\"}", "key \"algo\": unknown algorithm "
	    "\"star\" (expected auto, ring, doubling, rabenseifner, direct or "
	    "tree)");
	parse_err("{\"algo\": 2}", "key \"algo\"");
	parse_err("{\"spin_us\": -1}", "key \"spin_us\": \"-1\": expected "
	    "auto or microseconds from 0 to 100000");
	parse_err("{\"spin_us\": 100001}", "key \"spin_us\": \"100001\"");
	parse_err("{\"spin_us\": \"fast\"}", "key \"spin_us\": \"fast\"");
	parse_err("{\"spin_us\": 1.5}", "key \"spin_us\"");
	parse_err("{\"streams_per_peer\": 0}", "key \"streams_per_peer\": 0 "
	    "is not in 1..8");
	parse_err("{\"streams_per_peer\": \"many\"}", "key \"streams_per_peer\": "
	    "expected \"auto\" or an integer from 1 to 8");
	parse_err("{\"streams_per_peer\": 9}", "key \"streams_per_peer\": 9 "
	    "is not in 1..8");
}
END_TEST

/* "transport", and the per-node "rdma" maps: this node's entry only. */
START_TEST(test_transport)
{
	struct config c;

	parse_ok("{}", &c);
	ck_assert_int_eq(c.transport, LINK_ANY);
	config_free(&c);
	parse_ok("{\"transport\": \"rdma\"}", &c);
	ck_assert_int_eq(c.transport, LINK_RDMA);
	config_free(&c);
	parse_ok("{\"transport\": \"tcp\"}", &c);
	ck_assert_int_eq(c.transport, LINK_TCP);
	config_free(&c);
	parse_err("{\"transport\": \"ib\"}", "key \"transport\": unknown "
	    "transport \"ib\" (expected auto, tcp or rdma)");
	parse_ok("{\"node\": \"b\", \"nodes\": ["
	    "{\"name\": \"a\", \"address\": \"10.0.0.1:7470\", "
	    "\"rdma\": {\"b\": \"mlx5_9\"}},"
	    "{\"name\": \"b\", \"address\": \"10.0.0.2:7470\", "
	    "\"rdma\": {\"a\": \"mlx5_0\", \"c\": \"mlx5_1:2\"}},"
	    "{\"name\": \"c\", \"address\": \"10.0.0.3:7470\"}]}", &c);
	ck_assert_str_eq(c.nodes[0].rdma_dev, "mlx5_0");
	ck_assert_str_eq(c.nodes[1].rdma_dev, "");	/* a's map is a's */
	ck_assert_str_eq(c.nodes[2].rdma_dev, "mlx5_1:2");
	config_free(&c);
}
END_TEST

/* One line of a sysctl under /proc/sys/net/ipv4, blank-framed: " a b ". */
static int
sysctl_list(const char *name, char *buf, size_t size)
{
	char path[128], line[256] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", name);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	if (fgets(line, sizeof(line), f) == NULL)
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	snprintf(buf, size, " %s ", line);
	return 0;
}

/* Whether a sysctl's list under /proc/sys/net/ipv4 names word. */
static int
sysctl_has(const char *name, const char *word)
{
	char list[260], framed[64];

	snprintf(framed, sizeof(framed), " %s ", word);
	return sysctl_list(name, list, sizeof(list)) == 0 &&
	    strstr(list, framed) != NULL;
}

/* What "auto" resolves to here: cubic on a bbr system, if settable. */
static const char *
cc_auto_here(void)
{
	char dflt[64];

	if (sysctl_list("tcp_congestion_control", dflt, sizeof(dflt)) == -1 ||
	    strcmp(dflt, " bbr ") != 0)
		return "";
	return sysctl_has("tcp_allowed_congestion_control", "cubic") ||
	    (geteuid() == 0 &&
	    sysctl_has("tcp_available_congestion_control", "cubic")) ?
	    "cubic" : "";
}

START_TEST(test_tcp_congestion)
{
	struct config c;

	parse_ok("{}", &c);
	ck_assert_str_eq(c.tcp_congestion, "");
	ck_assert_str_eq(c.data_cc, cc_auto_here());
	config_free(&c);
	parse_ok("{\"tcp_congestion\": \"auto\"}", &c);
	ck_assert_str_eq(c.tcp_congestion, "");
	ck_assert_str_eq(c.data_cc, cc_auto_here());
	config_free(&c);
	parse_ok("{\"tcp_congestion\": \"system\"}", &c);
	ck_assert_str_eq(c.tcp_congestion, "system");
	ck_assert_str_eq(c.data_cc, "");
	config_free(&c);
	/* reno is built into every Linux kernel. */
	parse_ok("{\"tcp_congestion\": \"reno\"}", &c);
	ck_assert_str_eq(c.tcp_congestion, "reno");
	ck_assert_str_eq(c.data_cc, "reno");
	config_free(&c);
	parse_err("{\"tcp_congestion\": \"no_such_cc\"}", "key "
	    "\"tcp_congestion\": \"no_such_cc\" is not available on this host "
	    "(net.ipv4.tcp_available_congestion_control: ");
	parse_err("{\"tcp_congestion\": \"Reno\"}", "\"Reno\" is not a "
	    "congestion control name");
	parse_err("{\"tcp_congestion\": \"../x\"}", "is not a congestion "
	    "control name");
	parse_err("{\"tcp_congestion\": \"\"}", "key \"tcp_congestion\": "
	    "must be 1 to 15 bytes");
	parse_err("{\"tcp_congestion\": \"sixteen_letters_\"}", "must be 1 to "
	    "15 bytes");
	parse_err("{\"tcp_congestion\": 1}", "got integer");
}
END_TEST

/*
 * The first of the kernel's available algorithms that is not allowed; the
 * namespace's default is allowed to everyone whatever the list says.
 */
static int
cc_not_allowed(char *name, size_t size)
{
	char avail[260], allowed[260], dflt[64], word[64], *tok, *save;

	if (sysctl_list("tcp_available_congestion_control", avail,
	    sizeof(avail)) == -1 || sysctl_list(
	    "tcp_allowed_congestion_control", allowed, sizeof(allowed)) == -1 ||
	    sysctl_list("tcp_congestion_control", dflt, sizeof(dflt)) == -1)
		return 0;
	for (tok = strtok_r(avail, " ", &save); tok != NULL;
	    tok = strtok_r(NULL, " ", &save)) {
		snprintf(word, sizeof(word), " %s ", tok);
		if (strstr(allowed, word) == NULL && strcmp(dflt, word) != 0) {
			snprintf(name, size, "%s", tok);
			return 1;
		}
	}
	return 0;
}

/* As a user other than root, an algorithm the kernel keeps for root. */
START_TEST(test_tcp_congestion_not_allowed)
{
	char name[64], text[128];
	pid_t pid;
	int status;

	if (geteuid() != 0 || !cc_not_allowed(name, sizeof(name))) {
		printf("test_tcp_congestion_not_allowed: skipped: needs root "
		    "and an algorithm not in "
		    "net.ipv4.tcp_allowed_congestion_control\n");
		return;
	}
	snprintf(text, sizeof(text), "{\"tcp_congestion\": \"%s\"}", name);
	if ((pid = fork()) == 0) {
		if (setgid(65534) == -1 || setuid(65534) == -1)
			_exit(2);
		parse_err(text, "is not allowed to this user "
		    "(net.ipv4.tcp_allowed_congestion_control: ");
		_exit(0);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the unprivileged parse of %s did not fail as expected", text);
}
END_TEST

START_TEST(test_rdma_bad)
{
	static const struct {
		const char	*map, *want;
	} bad[] = {
		{ "[\"mlx5_0\"]", "node \"a\": \"rdma\": expected an object "
		    "of node names to devices, got array" },
		{ "{\"d\": \"mlx5_0\"}", "node \"a\": \"rdma\": \"d\" is not "
		    "in \"nodes\"" },
		{ "{\"a\": \"mlx5_0\"}", "node \"a\": \"rdma\": \"a\" is the "
		    "node itself" },
		{ "{\"b\": 1}", "node \"a\": \"rdma\": \"b\": expected a "
		    "device name" },
		{ "{\"b\": \"\"}", "\"b\": expected a device name" },
		{ "{\"b\": \"mlx 5\"}", "\"b\": expected a device name" },
		{ "{\"b\": \"mlx5_0:\"}", "\"b\": expected a device name" },
		{ "{\"b\": \"mlx5_0:0\"}", "\"b\": expected a device name" },
		{ "{\"b\": \"mlx5_0:256\"}", "\"b\": expected a device name" },
		{ "{\"b\": \"a_device_name_of_forty_bytes_long_x\"}",
		    "\"b\": expected a device name" },
	};
	char text[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "{\"node\": \"b\", \"nodes\": ["
		    "{\"name\": \"a\", \"address\": \"10.0.0.1:7470\", "
		    "\"rdma\": %s},"
		    "{\"name\": \"b\", \"address\": \"10.0.0.2:7470\"}]}",
		    bad[i].map);
		parse_err(text, bad[i].want);
	}
}
END_TEST

START_TEST(test_node_not_in_nodes)
{
	parse_err("{\"node\": \"x\", " NODES3 "}",
	    "config: node \"x\" is not in \"nodes\"");
	/* Several nodes, no "node", and none is this host. */
	parse_err("{\"nodes\": ["
	    "{\"name\": \"no-such-host-1\", \"address\": \"h:1\"},"
	    "{\"name\": \"no-such-host-2\", \"address\": \"h:2\"}]}",
	    "is not in \"nodes\"");
	parse_err("{\"node\": \"\"}", "key \"node\": empty");
	parse_err("{\"node\": \"0123456789012345678901234567890123456789"
	    "012345678901234567890123\"}", "key \"node\"");
}
END_TEST

START_TEST(test_nodes_bad)
{
	parse_err("{\"nodes\": ["
	    "{\"name\": \"a\", \"address\": \"h:1\"},"
	    "{\"name\": \"b\", \"address\": \"h:2\"},"
	    "{\"name\": \"a\", \"address\": \"h:3\"}]}",
	    "duplicate node name \"a\"");
	parse_err("{\"nodes\": ["
	    "{\"name\": \"a\", \"address\": \"h:1\"},"
	    "{\"name\": \"b\", \"address\": \"h:1\"}]}",
	    "same address");
	parse_err("{\"nodes\": []}", "key \"nodes\"");
	parse_err("{\"nodes\": [{\"name\": \"\", \"address\": \"h:1\"}]}",
	    "key \"nodes\": empty");
	parse_err("{\"nodes\": [{\"name\": \"a\", \"address\": \"h\"}]}",
	    "node \"a\": bad address \"h\"");
}
END_TEST

static const char *bad_addrs[] = {
	"x", "x:0", "x:70000", ":1", "[::1]", "[::1]5", "::1:5", "[]:5",
	"x:", "x:-1", "x:+1", "x: 1", "x:1a", "[::1:5", "a b:1", "",
};

START_TEST(test_bad_addr)
{
	struct conf_addr a;
	char err[ERR_MAX] = "", text[256], want[128];

	ck_assert_int_eq(config_parse_addr(bad_addrs[_i], &a, err,
	    sizeof(err)), -1);
	snprintf(want, sizeof(want), "\"%s\"", bad_addrs[_i]);
	ck_assert_msg(strstr(err, want) != NULL, "%s", err);

	snprintf(text, sizeof(text), "{\"listen\": [\"%s\"]}", bad_addrs[_i]);
	parse_err(text, "key \"listen\"");
	snprintf(text, sizeof(text), "{\"nodes\": [{\"name\": \"n\", "
	    "\"address\": \"%s\"}]}", bad_addrs[_i]);
	parse_err(text, "key \"nodes\"");
}
END_TEST

START_TEST(test_good_addr)
{
	struct conf_addr a;
	char err[ERR_MAX] = "", longhost[LINK_HOST_MAX + 8];

	ck_assert_int_eq(config_parse_addr("[::1]:5", &a, err, sizeof(err)), 0);
	ck_assert_str_eq(a.host, "::1");
	ck_assert_uint_eq(a.port, 5);
	ck_assert_int_eq(config_parse_addr("host.example:65535", &a, err,
	    sizeof(err)), 0);
	ck_assert_str_eq(a.host, "host.example");
	ck_assert_uint_eq(a.port, 65535);
	ck_assert_int_eq(config_parse_addr("1.2.3.4:00001", &a, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(a.port, 1);

	/* The host must fit in LINK_HOST_MAX with its NUL. */
	memset(longhost, 'h', LINK_HOST_MAX - 1);
	strcpy(longhost + LINK_HOST_MAX - 1, ":1");
	ck_assert_int_eq(config_parse_addr(longhost, &a, err, sizeof(err)), 0);
	ck_assert_uint_eq(strlen(a.host), LINK_HOST_MAX - 1);
	memset(longhost, 'h', LINK_HOST_MAX);
	strcpy(longhost + LINK_HOST_MAX, ":1");
	ck_assert_int_eq(config_parse_addr(longhost, &a, err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_listen_bad)
{
	parse_err("{\"listen\": []}", "key \"listen\"");
	parse_err("{\"listen\": [\"h:1\", \"h:2\", \"h:3\", \"h:4\", \"h:5\","
	    "\"h:6\", \"h:7\", \"h:8\", \"h:9\"]}", "key \"listen\"");
}
END_TEST

START_TEST(test_socket_long)
{
	char text[512], path[200];
	struct config c;

	memset(path, 'p', sizeof(path));
	path[0] = '/';
	path[107] = '\0';		/* 107 bytes and the NUL: fits */
	snprintf(text, sizeof(text), "{\"socket\": \"%s\"}", path);
	parse_ok(text, &c);
	ck_assert_str_eq(c.socket_path, path);
	config_free(&c);
	path[107] = 'p';
	path[108] = '\0';		/* one too many */
	snprintf(text, sizeof(text), "{\"socket\": \"%s\"}", path);
	parse_err(text, "key \"socket\"");
	parse_err("{\"socket\": \"\"}", "key \"socket\"");
	/* Relative to whatever directory the daemon was started in: no. */
	parse_err("{\"socket\": \"run/mccld.sock\"}", "key \"socket\": "
	    "\"run/mccld.sock\" is not an absolute path");
}
END_TEST

/* The per-uid caps: their defaults, and each key read. */
START_TEST(test_uid_caps)
{
	struct config c;

	parse_ok("{}", &c);
	ck_assert_uint_eq(c.max_reply_bytes_per_uid, 16ULL << 20);
	ck_assert_uint_eq(c.max_unreceived_bytes_per_uid, 4ULL << 30);
	ck_assert_uint_eq(c.max_unreceived_bytes, 16ULL << 30);
	ck_assert_uint_eq(c.max_scratch_bytes_per_uid, 4ULL << 30);
	ck_assert_uint_eq(c.max_scratch_bytes, 16ULL << 30);
	config_free(&c);
	parse_ok("{\"max_reply_bytes_per_uid\": 65536, "
	    "\"max_unreceived_bytes_per_uid\": 1, "
	    "\"max_unreceived_bytes\": 1048576, "
	    "\"max_scratch_bytes_per_uid\": 2, "
	    "\"max_scratch_bytes\": 3}", &c);
	ck_assert_uint_eq(c.max_reply_bytes_per_uid, 65536);
	ck_assert_uint_eq(c.max_unreceived_bytes_per_uid, 1);
	ck_assert_uint_eq(c.max_unreceived_bytes, 1048576);
	ck_assert_uint_eq(c.max_scratch_bytes_per_uid, 2);
	ck_assert_uint_eq(c.max_scratch_bytes, 3);
	config_free(&c);
	parse_err("{\"max_scratch_bytes\": 0}", "key \"max_scratch_bytes\"");
	parse_err("{\"max_reply_bytes_per_uid\": 100}",
	    "key \"max_reply_bytes_per_uid\"");
}
END_TEST

/* What config_apply named as needing a restart. */
static char restart_keys[256];

static void
note_restart(const char *key)
{
	strncat(restart_keys, key, sizeof(restart_keys) - strlen(restart_keys) -
	    2);
	strcat(restart_keys, " ");
}

/* A reload applies what it may from the table, names the rest. */
START_TEST(test_apply)
{
	struct config run, nc, nc2;

	parse_ok("{\"op_timeout_ms\": 100, \"chunk_bytes\": 65536, "
	    "\"log_level\": \"info\", \"spin_us\": 5}", &run);
	parse_ok("{\"op_timeout_ms\": 200, \"chunk_bytes\": 131072, "
	    "\"log_level\": \"debug\", \"spin_us\": \"auto\", "
	    "\"admin_group\": \"wheel\", \"key_file\": \"/k\", "
	    "\"max_scratch_bytes\": 7}", &nc);
	restart_keys[0] = '\0';
	/* log_level, max_scratch_bytes, op_timeout_ms and spin_us changed:
	   their rows' hooks, the running engines' once for both */
	ck_assert_uint_eq(config_apply(&run, &nc, note_restart),
	    1u << CONF_HOOK_LOG_LEVEL | 1u << CONF_HOOK_SCRATCH_LIMITS |
	    1u << CONF_HOOK_ENGINES);
	ck_assert_uint_eq(run.op_timeout_ms, 200);
	ck_assert_int_eq(run.log_level, LOG_DEBUG);
	ck_assert_int_eq(run.spin_us, SPIN_AUTO);
	ck_assert_str_eq(run.admin_group, "wheel");
	ck_assert_uint_eq(run.max_scratch_bytes, 7);
	ck_assert_uint_eq(run.chunk_bytes, 65536);	/* kept */
	ck_assert_str_eq(run.key_file, "");		/* kept */
	ck_assert_str_eq(restart_keys, "chunk_bytes key_file ");
	restart_keys[0] = '\0';
	ck_assert_uint_eq(config_apply(&run, &run, note_restart), 0);
	ck_assert_str_eq(restart_keys, "");		/* nothing changed */
	/* run as it is now, but for two keys of two other hooks */
	parse_ok("{\"op_timeout_ms\": 200, \"chunk_bytes\": 65536, "
	    "\"log_level\": \"debug\", \"spin_us\": \"auto\", "
	    "\"admin_group\": \"wheel\", \"max_scratch_bytes\": 7, "
	    "\"heartbeat_mesh_max_nodes\": 4, "
	    "\"max_unreceived_bytes\": 1048576}", &nc2);
	ck_assert_uint_eq(config_apply(&run, &nc2, note_restart),
	    1u << CONF_HOOK_HEARTBEAT | 1u << CONF_HOOK_P2P_LIMITS);
	config_free(&nc2);
	config_free(&run);
	config_free(&nc);
}
END_TEST

START_TEST(test_heartbeat)
{
	struct config c;

	parse_err("{\"heartbeat_interval_ms\": 2000, "
	    "\"heartbeat_timeout_ms\": 2000}", "key \"heartbeat_timeout_ms\"");
	parse_err("{\"heartbeat_interval_ms\": 2000, "
	    "\"heartbeat_timeout_ms\": 1000}", "heartbeat_interval_ms");
	/* Against the other key's default. */
	parse_err("{\"heartbeat_interval_ms\": 5000}", "heartbeat_timeout_ms");
	parse_err("{\"heartbeat_timeout_ms\": 1000}", "heartbeat_timeout_ms");
	parse_ok("{\"heartbeat_timeout_ms\": 1001}", &c);
	config_free(&c);
}
END_TEST

START_TEST(test_syntax)
{
	parse_err("{\n  \"node\": \"a\",\n  \"socket\" \"/x\"\n}", "line 3");
	parse_err("{\"node\": \"a\",}", "line 1");
	parse_err("", "line");
	parse_err("{} {}", "line 1");
	parse_err("[]", "expected a JSON object, got array");
	parse_err("{\"node\": \"a\", \"node\": \"b\"}", "duplicate");
}
END_TEST

static char *
write_temp(const char *text)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/test_config.XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

START_TEST(test_load)
{
	const char *missing = "/nonexistent/mccl/mccld.conf";
	char err[ERR_MAX] = "", *path;
	struct config c;

	/* The default file may be missing; an explicit one may not. */
	ck_assert_int_eq(config_load(missing, 0, &c, err, sizeof(err)), 0);
	check_defaults(&c);
	config_free(&c);
	ck_assert_int_eq(config_load(missing, 1, &c, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, missing) != NULL, "%s", err);
	ck_assert_msg(strstr(err, strerror(ENOENT)) != NULL, "%s", err);

	/* Any other failure counts even for the default file. */
	ck_assert_int_eq(config_load("/", 0, &c, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "\"/\"") != NULL || strstr(err, "/:") != NULL,
	    "%s", err);

	path = write_temp("{\"node\": \"n1\", \"op_timeout_ms\": 7}");
	ck_assert_int_eq(config_load(path, 1, &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.node_name, "n1");
	ck_assert_uint_eq(c.op_timeout_ms, 7);
	config_free(&c);
	unlink(path);

	path = write_temp("{\"op_timeout_ms\": 0}");
	ck_assert_int_eq(config_load(path, 0, &c, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, path) != NULL, "%s", err);
	ck_assert_msg(strstr(err, "key \"op_timeout_ms\"") != NULL, "%s", err);
	unlink(path);

	path = write_temp("{\n\n   x");
	ck_assert_int_eq(config_load(path, 1, &c, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, path) != NULL, "%s", err);
	ck_assert_msg(strstr(err, "line 3") != NULL, "%s", err);
	unlink(path);
}
END_TEST

/* ---- cluster hash and socket path ---- */

START_TEST(test_hash)
{
	struct config a, b;
	const char *ab = "{\"node\": \"a\", \"nodes\": ["
	    "{\"name\": \"a\", \"address\": \"h1:7470\"},"
	    "{\"name\": \"b\", \"address\": \"h2:7470\"}]}";

	parse_ok(ab, &a);
	parse_ok(ab, &b);
	ck_assert_uint_eq(config_cluster_hash(&a), config_cluster_hash(&b));
	config_free(&b);

	/* Different settings of this node do not matter. */
	parse_ok("{\"node\": \"b\", \"op_timeout_ms\": 9, \"nodes\": ["
	    "{\"name\": \"a\", \"address\": \"h1:7470\"},"
	    "{\"name\": \"b\", \"address\": \"h2:7470\"}]}", &b);
	ck_assert_uint_eq(config_cluster_hash(&a), config_cluster_hash(&b));
	config_free(&b);

	/* Order matters. */
	parse_ok("{\"node\": \"a\", \"nodes\": ["
	    "{\"name\": \"b\", \"address\": \"h2:7470\"},"
	    "{\"name\": \"a\", \"address\": \"h1:7470\"}]}", &b);
	ck_assert_uint_ne(config_cluster_hash(&a), config_cluster_hash(&b));
	config_free(&b);

	/* A port matters. */
	parse_ok("{\"node\": \"a\", \"nodes\": ["
	    "{\"name\": \"a\", \"address\": \"h1:7470\"},"
	    "{\"name\": \"b\", \"address\": \"h2:7471\"}]}", &b);
	ck_assert_uint_ne(config_cluster_hash(&a), config_cluster_hash(&b));
	config_free(&b);

	/* So does a host, and where a name ends. */
	parse_ok("{\"node\": \"a\", \"nodes\": ["
	    "{\"name\": \"a\", \"address\": \"h1:7470\"},"
	    "{\"name\": \"b\", \"address\": \"h3:7470\"}]}", &b);
	ck_assert_uint_ne(config_cluster_hash(&a), config_cluster_hash(&b));
	config_free(&b);
	parse_ok("{\"node\": \"ah\", \"nodes\": ["
	    "{\"name\": \"ah\", \"address\": \"1:7470\"},"
	    "{\"name\": \"b\", \"address\": \"h2:7470\"}]}", &b);
	ck_assert_uint_ne(config_cluster_hash(&a), config_cluster_hash(&b));
	config_free(&b);
	config_free(&a);
}
END_TEST

static void
check_socket_nonroot(void)
{
	char buf[256], want[256];

	ck_assert_int_ne(geteuid(), 0);
	setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
	default_socket_path(buf, sizeof(buf));
	ck_assert_str_eq(buf, "/run/user/4242/mccl/mccld.sock");

	snprintf(want, sizeof(want), "/tmp/mccl-%u/mccld.sock",
	    (unsigned)geteuid());
	setenv("XDG_RUNTIME_DIR", "", 1);
	default_socket_path(buf, sizeof(buf));
	ck_assert_str_eq(buf, want);
	unsetenv("XDG_RUNTIME_DIR");
	default_socket_path(buf, sizeof(buf));
	ck_assert_str_eq(buf, want);
}

START_TEST(test_socket_path)
{
	char buf[256];

	if (geteuid() == 0) {
		/* root ignores XDG_RUNTIME_DIR */
		setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
		default_socket_path(buf, sizeof(buf));
		ck_assert_str_eq(buf, "/run/mccl/mccld.sock");
		unsetenv("XDG_RUNTIME_DIR");
		default_socket_path(buf, sizeof(buf));
		ck_assert_str_eq(buf, "/run/mccl/mccld.sock");

		/* And as a user, while we can come back. */
		ck_assert_int_eq(seteuid(65534), 0);
		check_socket_nonroot();
		ck_assert_int_eq(seteuid(0), 0);
	} else
		check_socket_nonroot();
}
END_TEST

static Suite *
config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc;

	tc = tcase_create("good");
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_node_defaults);
	tcase_add_test(tc, test_example);
	tcase_add_test(tc, test_good_addr);
	tcase_add_test(tc, test_load);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad");
	tcase_add_test(tc, test_unknown_key);
	tcase_add_loop_test(tc, test_wrong_type, 0,
	    sizeof(wrong_types) / sizeof(wrong_types[0]));
	tcase_add_loop_test(tc, test_int_range, 0,
	    sizeof(int_keys) / sizeof(int_keys[0]));
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_node_not_in_nodes);
	tcase_add_test(tc, test_transport);
	tcase_add_test(tc, test_tcp_congestion);
	tcase_add_test(tc, test_tcp_congestion_not_allowed);
	tcase_add_test(tc, test_rdma_bad);
	tcase_add_test(tc, test_nodes_bad);
	tcase_add_loop_test(tc, test_bad_addr, 0,
	    sizeof(bad_addrs) / sizeof(bad_addrs[0]));
	tcase_add_test(tc, test_listen_bad);
	tcase_add_test(tc, test_socket_long);
	tcase_add_test(tc, test_uid_caps);
	tcase_add_test(tc, test_apply);
	tcase_add_test(tc, test_heartbeat);
	tcase_add_test(tc, test_syntax);
	suite_add_tcase(s, tc);

	tc = tcase_create("hash");
	tcase_add_test(tc, test_hash);
	tcase_add_test(tc, test_socket_path);
	suite_add_tcase(s, tc);
	return s;
}

int
main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	if (argc > 1)
		example_conf = argv[1];
	sr = srunner_create(config_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
