/*
 * test_reload.c: a reload of the running settings (daemon/reload.c), from
 * a file the test rewrites: what applies runs the hooks its keys name,
 * nodes appended join (the cluster hash follows, the process is told),
 * nodes renamed or moved and restart-only keys keep their running values,
 * and an invalid file changes nothing.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mccld.h"
#include "testlib.h"

static char path[128];
static struct config running;
static int fired[CONF_HOOK_MAX];
static int grew_calls;
static uint32_t grew_from;

static void heartbeat(void) { fired[CONF_HOOK_HEARTBEAT]++; }
static void engines(void) { fired[CONF_HOOK_ENGINES]++; }
static void log_level(void) { fired[CONF_HOOK_LOG_LEVEL]++; }

static void (*const hooks[CONF_HOOK_MAX])(void) = {
	[CONF_HOOK_HEARTBEAT] = heartbeat,
	[CONF_HOOK_ENGINES] = engines,
	[CONF_HOOK_LOG_LEVEL] = log_level,
};

static void
grew(uint32_t old_n)
{
	grew_calls++;
	grew_from = old_n;
}

/* The settings file: node n0 of NODES (JSON), with EXTRA keys. */
static void
write_conf(const char *nodes, const char *extra)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fprintf(f, "{ \"node\": \"n0\", \"socket\": \"%s/s.sock\",\n"
	    "  \"nodes\": %s,\n  %s \"heartbeat_timeout_ms\": 1500 }\n", test_dir,
	    nodes, extra);
	ck_assert_int_eq(fclose(f), 0);
}

#define TWO	"[{\"name\": \"n0\", \"address\": \"127.0.0.1:20001\"}, " \
		"{\"name\": \"n1\", \"address\": \"127.0.0.1:20002\"}]"
#define THREE	"[{\"name\": \"n0\", \"address\": \"127.0.0.1:20001\"}, " \
		"{\"name\": \"n1\", \"address\": \"127.0.0.1:20002\"}, " \
		"{\"name\": \"n2\", \"address\": \"127.0.0.1:20003\"}]"
#define RENAMED	"[{\"name\": \"n0\", \"address\": \"127.0.0.1:20001\"}, " \
		"{\"name\": \"m1\", \"address\": \"127.0.0.1:20002\"}]"

static int
reload(char *err, size_t errlen)
{
	return config_reload(&running, path, 1, hooks, grew, err, errlen);
}

START_TEST(what_applies_runs_its_hooks)
{
	char err[ERR_MAX] = "";

	write_conf(TWO, "\"op_timeout_ms\": 2000, \"heartbeat_interval_ms\": "
	    "400,");
	ck_assert_msg(reload(err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(running.op_timeout_ms, 2000);
	ck_assert_uint_eq(running.heartbeat_interval_ms, 400);
	ck_assert_int_eq(fired[CONF_HOOK_ENGINES], 1);	/* once a reload */
	ck_assert_int_eq(fired[CONF_HOOK_HEARTBEAT], 1);
	ck_assert_int_eq(fired[CONF_HOOK_LOG_LEVEL], 0);
	ck_assert_int_eq(grew_calls, 0);
	/* the same file again: nothing changed, nothing runs */
	ck_assert_int_eq(reload(err, sizeof(err)), 0);
	ck_assert_int_eq(fired[CONF_HOOK_ENGINES], 1);
	ck_assert_int_eq(fired[CONF_HOOK_HEARTBEAT], 1);
}
END_TEST

START_TEST(nodes_appended_join)
{
	char err[ERR_MAX] = "";
	uint64_t before = running.cluster_hash;

	write_conf(THREE, "");
	ck_assert_msg(reload(err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(running.nnodes, 3);
	ck_assert_str_eq(running.nodes[2].name, "n2");
	ck_assert_uint_eq(running.nodes[2].addr.port, 20003);
	ck_assert_int_eq(grew_calls, 1);
	ck_assert_uint_eq(grew_from, 2);
	ck_assert_uint_ne(running.cluster_hash, before);
	ck_assert_uint_eq(running.cluster_hash, config_cluster_hash(&running));
}
END_TEST

START_TEST(nodes_renamed_wait_for_a_restart)
{
	char err[ERR_MAX] = "";
	uint64_t before = running.cluster_hash;

	write_conf(RENAMED, "");
	ck_assert_msg(reload(err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(running.nnodes, 2);
	ck_assert_str_eq(running.nodes[1].name, "n1");
	ck_assert_uint_eq(running.cluster_hash, before);
	ck_assert_int_eq(grew_calls, 0);
}
END_TEST

START_TEST(restart_keys_keep_their_running_values)
{
	char err[ERR_MAX] = "";
	uint64_t chunk = running.chunk_bytes;

	write_conf(TWO, "\"chunk_bytes\": 4194304, \"op_timeout_ms\": 3000,");
	ck_assert_msg(reload(err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(running.chunk_bytes, chunk);	/* restart only */
	ck_assert_uint_eq(running.op_timeout_ms, 3000);	/* applies */
}
END_TEST

START_TEST(an_invalid_file_changes_nothing)
{
	char err[ERR_MAX] = "";
	FILE *f;

	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "{ \"op_timeout_ms\": 5000, \"no_such_key\": 1 }\n");
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(reload(err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "no_such_key") != NULL, "%s", err);
	ck_assert_uint_eq(running.op_timeout_ms, 1000);
	ck_assert_int_eq(fired[CONF_HOOK_ENGINES], 0);
	unlink(path);			/* and a file that is gone */
	ck_assert_int_eq(reload(err, sizeof(err)), -1);
	ck_assert_uint_eq(running.nnodes, 2);
}
END_TEST

static void
setup(void)
{
	char err[ERR_MAX] = "";

	memset(fired, 0, sizeof(fired));
	grew_calls = 0;
	snprintf(path, sizeof(path), "%s/mccld.conf", test_dir);
	write_conf(TWO, "\"op_timeout_ms\": 1000,");
	if (config_load(path, 1, &running, err, sizeof(err)) == -1) {
		fprintf(stderr, "test_reload: %s\n", err);
		exit(1);
	}
}

static void
teardown(void)
{
	config_free(&running);
}

int
main(void)
{
	Suite *s = suite_create("reload");
	TCase *tc = tcase_create("reload");

	log_init(LOG_ERR, "test_reload");
	test_dir_fixture(tc, "test_reload");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, what_applies_runs_its_hooks);
	tcase_add_test(tc, nodes_appended_join);
	tcase_add_test(tc, nodes_renamed_wait_for_a_restart);
	tcase_add_test(tc, restart_keys_keep_their_running_values);
	tcase_add_test(tc, an_invalid_file_changes_nothing);
	suite_add_tcase(s, tc);
	return test_run(s);
}
