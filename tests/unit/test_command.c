/*
 * test_command.c: mcclctl's commands on the daemon's side (control/
 * command.c): each command reaches its own handler with its argument and
 * its answer reaches the client; the privileged commands refuse everyone
 * else, naming why; an unknown command and a handler's error come back as
 * errors; a command answered later sends nothing now.  The handlers are
 * fakes that say who they are.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "testlib.h"

/* ---- fakes: the handlers, and the client's end ---- */

static char called[64];		/* the last handler run, and its argument */
static char called_arg[JOB_NAME_MAX + 8];
static int fail_handler;	/* handlers fail, saying so */
static int query_here;		/* job_ctl_query: the job runs here */
static int privileged;
static char replied[1024];
static uint32_t error_code;
static char error_text[ERR_MAX];
static char monitored[64];

static json_t *
answer(const char *who, const char *arg, char *err, size_t errlen)
{
	snprintf(called, sizeof(called), "%s", who);
	snprintf(called_arg, sizeof(called_arg), "%s", arg);
	if (fail_handler) {
		snprintf(err, errlen, "%s failed", who);
		return NULL;
	}
	return json_pack("{s:s}", "from", who);
}

json_t *control_status(const struct client *c)
{ (void)c; return answer("control_status", "", NULL, 0); }
json_t *peer_ctl_list(void) { return answer("peer_ctl_list", "", NULL, 0); }
json_t *job_ctl_list(const struct client *c)
{ (void)c; return answer("job_ctl_list", "", NULL, 0); }
json_t *job_ctl_failed(const struct client *c)
{ (void)c; return answer("job_ctl_failed", "", NULL, 0); }
json_t *metrics_ctl(void) { return answer("metrics_ctl", "", NULL, 0); }

json_t *
job_ctl_abort(const struct client *c, const char *arg, char *err,
    size_t errlen)
{
	(void)c;
	return answer("job_ctl_abort", arg, err, errlen);
}

json_t *
control_reload(char *err, size_t errlen)
{
	return answer("control_reload", "", err, errlen);
}

json_t *
job_ctl_ended(const struct client *c, const char *arg, char *err,
    size_t errlen)
{
	(void)c;
	return answer("job_ctl_ended", arg, err, errlen);
}

int
job_ctl_query(struct client *c, const char *arg, char *err, size_t errlen)
{
	(void)c;
	snprintf(called, sizeof(called), "job_ctl_query");
	snprintf(called_arg, sizeof(called_arg), "%s", arg);
	if (query_here)
		return 0;
	snprintf(err, errlen, "job %s does not run here", arg);
	return -1;
}

int
check_ctl_start(struct client *c, const char *arg, char *err, size_t errlen)
{
	(void)c;
	snprintf(called, sizeof(called), "check_ctl_start");
	snprintf(called_arg, sizeof(called_arg), "%s", arg);
	if (fail_handler) {
		snprintf(err, errlen, "check_ctl_start failed");
		return -1;
	}
	return 0;
}

void
monitor_event(const char *what, const uid_t *uid, json_t *o)
{
	(void)uid;
	snprintf(monitored, sizeof(monitored), "%s", what);
	json_decref(o);
}

int client_privileged(const struct client *c) { (void)c; return privileged; }

int
client_reply(struct client *c, const char *text)
{
	(void)c;
	snprintf(replied, sizeof(replied), "%s", text);
	return 0;
}

void
client_error(struct client *c, uint32_t code, uint16_t type, const char *text)
{
	(void)c;
	ck_assert_uint_eq(type, IPC_CTL);
	error_code = code;
	snprintf(error_text, sizeof(error_text), "%s", text);
}

/* ---- running a command ---- */

static struct client client = { .uid = 1000 };

static void
run(uint32_t cmd, const char *arg)
{
	struct ipc_ctl m = { cmd };

	called[0] = called_arg[0] = replied[0] = error_text[0] = '\0';
	monitored[0] = '\0';
	error_code = 0;
	control_command(&client, &m, (const uint8_t *)arg, strlen(arg));
}

/* Each command, its handler, and whether only the privileged may run it. */
static const struct {
	uint32_t	 cmd;
	const char	*handler;
	int		 privileged;
} rows[] = {
	{ CTL_STATUS,	"control_status",	0 },
	{ CTL_PEERS,	"peer_ctl_list",	0 },
	{ CTL_JOBS,	"job_ctl_list",		0 },
	{ CTL_ABORT,	"job_ctl_abort",	1 },
	{ CTL_RELOAD,	"control_reload",	1 },
	{ CTL_METRICS,	"metrics_ctl",		1 },
	{ CTL_FAILED,	"job_ctl_failed",	0 },
};

START_TEST(each_command_runs_its_handler_and_answers)
{
	char want[128];

	privileged = 1;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		run(rows[i].cmd, "j1");
		ck_assert_str_eq(called, rows[i].handler);
		snprintf(want, sizeof(want), "{\"from\":\"%s\"}",
		    rows[i].handler);
		ck_assert_str_eq(replied, want);
		ck_assert_uint_eq(error_code, 0);
	}
	run(CTL_ABORT, "train-7");
	ck_assert_str_eq(called_arg, "train-7");
}
END_TEST

START_TEST(privileged_commands_refuse_the_others)
{
	privileged = 0;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		run(rows[i].cmd, "j1");
		if (!rows[i].privileged) {
			ck_assert_str_eq(called, rows[i].handler);
			continue;
		}
		ck_assert_str_eq(called, "");		/* never reached */
		ck_assert_str_eq(replied, "");
		ck_assert_uint_eq(error_code, MCCL_ERR_PERMISSION);
		ck_assert_msg(strstr(error_text, "is for root, the daemon's "
		    "own user and the admin group") != NULL && strstr(error_text,
		    "uid 1000 is none of them") != NULL, "%s", error_text);
	}
	run(CTL_CHECK, "");
	ck_assert_uint_eq(error_code, MCCL_ERR_PERMISSION);
	ck_assert_ptr_nonnull(strstr(error_text, "check is for root"));
	ck_assert_str_eq(called, "");
}
END_TEST

START_TEST(an_unknown_command_is_an_error)
{
	privileged = 1;
	run(0, "");
	ck_assert_uint_eq(error_code, MCCL_ERR_INVALID_ARGUMENT);
	ck_assert_str_eq(error_text, "unknown control command 0");
	run(CTL_MAX + 1, "");
	ck_assert_uint_eq(error_code, MCCL_ERR_INVALID_ARGUMENT);
	ck_assert_str_eq(called, "");
	ck_assert_str_eq(replied, "");
}
END_TEST

START_TEST(a_handlers_error_reaches_the_client)
{
	privileged = 1;
	fail_handler = 1;
	run(CTL_ABORT, "j1");
	ck_assert_uint_eq(error_code, MCCL_ERR_INVALID_ARGUMENT);
	ck_assert_str_eq(error_text, "job_ctl_abort failed");
	ck_assert_str_eq(replied, "");
	run(CTL_CHECK, "n1");		/* a later one with no answer now */
	ck_assert_uint_eq(error_code, MCCL_ERR_INVALID_ARGUMENT);
	ck_assert_str_eq(error_text, "check_ctl_start failed");
}
END_TEST

/* job: asked of the other nodes when it runs here (answered later);
 * else from the jobs that ended here. */
START_TEST(job_is_answered_later_or_from_the_ended)
{
	query_here = 1;
	run(CTL_JOB, "j9");
	ck_assert_str_eq(called, "job_ctl_query");
	ck_assert_str_eq(replied, "");
	ck_assert_uint_eq(error_code, 0);
	query_here = 0;
	run(CTL_JOB, "j9");
	ck_assert_str_eq(called, "job_ctl_ended");
	ck_assert_str_eq(called_arg, "j9");
	ck_assert_str_eq(replied, "{\"from\":\"job_ctl_ended\"}");
	privileged = 1;
	run(CTL_CHECK, "");
	ck_assert_str_eq(called, "check_ctl_start");
	ck_assert_str_eq(replied, "");
	ck_assert_uint_eq(error_code, 0);
}
END_TEST

START_TEST(monitor_makes_the_client_a_monitor)
{
	client.monitor = 0;
	run(CTL_MONITOR, "");
	ck_assert_int_eq(client.monitor, 1);
	ck_assert_str_eq(monitored, "monitoring");
	ck_assert_str_eq(replied, "");
	ck_assert_uint_eq(error_code, 0);
}
END_TEST

/* The argument is the trailer as given, cut to a job name's room. */
START_TEST(the_argument_is_cut_to_a_job_name)
{
	char longer[JOB_NAME_MAX + 20];

	privileged = 1;
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	run(CTL_ABORT, longer);
	ck_assert_uint_eq(strlen(called_arg), JOB_NAME_MAX - 1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("command");
	TCase *tc = tcase_create("command");

	log_init(LOG_ERR, "test_command");
	tcase_add_test(tc, each_command_runs_its_handler_and_answers);
	tcase_add_test(tc, privileged_commands_refuse_the_others);
	tcase_add_test(tc, an_unknown_command_is_an_error);
	tcase_add_test(tc, a_handlers_error_reaches_the_client);
	tcase_add_test(tc, job_is_answered_later_or_from_the_ended);
	tcase_add_test(tc, monitor_makes_the_client_a_monitor);
	tcase_add_test(tc, the_argument_is_cut_to_a_job_name);
	suite_add_tcase(s, tc);
	return test_run(s);
}
