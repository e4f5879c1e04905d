/*
 * command.c: mcclctl's commands on the daemon's side, one row each (the
 * client's rows are in tools/mcclctl.c).  A row names the command, says
 * whether only the privileged may run it, and gives its handler: one that
 * answers at once with a document, or one that starts an answer sent
 * later (a job asked of the other nodes, a check, a monitor's events).
 */
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "mccld.h"
#include "control/control.h"

/* An answer now: the document, or NULL with err set. */
typedef json_t	*(*ctl_now_fn)(struct client *, const char *, char *, size_t);
/* An answer later: 0 once started, -1 with err set. */
typedef int	 (*ctl_later_fn)(struct client *, const char *, char *, size_t);

struct ctl_command {
	uint32_t	 cmd;		/* CTL_* (ipc.h) */
	const char	*name;		/* as mcclctl spells it */
	int		 privileged;	/* client_privileged() only */
	ctl_later_fn	 later;		/* tried first, where there is one */
	ctl_now_fn	 now;		/* where later does not start */
};

static json_t *
ctl_status(struct client *c, const char *arg, char *err, size_t errlen)
{
	(void)arg, (void)err, (void)errlen;
	return control_status(c);
}

static json_t *
ctl_peers(struct client *c, const char *arg, char *err, size_t errlen)
{
	(void)c, (void)arg, (void)err, (void)errlen;
	return peer_ctl_list();
}

static json_t *
ctl_jobs(struct client *c, const char *arg, char *err, size_t errlen)
{
	(void)arg, (void)err, (void)errlen;
	return job_ctl_list(c);
}

static json_t *
ctl_failed(struct client *c, const char *arg, char *err, size_t errlen)
{
	(void)arg, (void)err, (void)errlen;
	return job_ctl_failed(c);
}

static json_t *
ctl_abort(struct client *c, const char *arg, char *err, size_t errlen)
{
	return job_ctl_abort(c, arg, err, errlen);
}

static json_t *
ctl_reload(struct client *c, const char *arg, char *err, size_t errlen)
{
	(void)c, (void)arg;
	return control_reload(err, errlen);
}

static json_t *
ctl_metrics(struct client *c, const char *arg, char *err, size_t errlen)
{
	(void)c, (void)arg, (void)err, (void)errlen;
	return metrics_ctl();
}

/* A job that runs here asks the other nodes first (job_ctl_query); one
 * that has ended may be among the failed jobs kept. */
static json_t *
ctl_job_ended(struct client *c, const char *arg, char *err, size_t errlen)
{
	return job_ctl_ended(c, arg, err, errlen);
}

/* A reply per event until the client leaves (monitor_event). */
static int
ctl_monitor(struct client *c, const char *arg, char *err, size_t errlen)
{
	(void)arg, (void)err, (void)errlen;
	c->monitor = 1;
	monitor_event("monitoring", &c->uid, json_object());
	return 0;
}

static const struct ctl_command commands[] = {
	{ CTL_STATUS,	"status",	0, NULL,	ctl_status },
	{ CTL_PEERS,	"peers",	0, NULL,	ctl_peers },
	{ CTL_JOBS,	"jobs",		0, NULL,	ctl_jobs },
	{ CTL_ABORT,	"abort",	1, NULL,	ctl_abort },
	{ CTL_RELOAD,	"reload",	1, NULL,	ctl_reload },
	{ CTL_METRICS,	"metrics",	1, NULL,	ctl_metrics },
	{ CTL_JOB,	"job",		0, job_ctl_query, ctl_job_ended },
	{ CTL_MONITOR,	"monitor",	0, ctl_monitor,	NULL },
	{ CTL_FAILED,	"failed",	0, NULL,	ctl_failed },
	{ CTL_CHECK,	"check",	1, check_ctl_start, NULL },
};
_Static_assert(sizeof(commands) / sizeof(commands[0]) == CTL_MAX,
    "a row for every mcclctl command");

static const struct ctl_command *
ctl_lookup(uint32_t cmd)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].cmd == cmd)
			return &commands[i];
	return NULL;
}

/* IPC_CTL: the command's answer, now or later, or an error naming why. */
void
control_command(struct client *c, const struct ipc_ctl *m,
    const uint8_t *trailer, size_t tlen)
{
	const struct ctl_command *row = ctl_lookup(m->cmd);
	char arg[JOB_NAME_MAX], err[ERR_MAX] = "";
	json_t *doc;
	char *text;

	snprintf(arg, sizeof(arg), "%.*s", (int)tlen, (const char *)trailer);
	if (row == NULL) {
		snprintf(err, sizeof(err), "unknown control command %u",
		    m->cmd);
		client_error(c, MCCL_ERR_INVALID_ARGUMENT, IPC_CTL, err);
		return;
	}
	if (row->privileged && !client_privileged(c)) {
		snprintf(err, sizeof(err), "%s is for root, the daemon's own "
		    "user and the admin group (admin_group in mccld.conf); "
		    "uid %u is none of them", row->name, (unsigned)c->uid);
		client_error(c, MCCL_ERR_PERMISSION, IPC_CTL, err);
		return;
	}
	if (row->later != NULL &&
	    row->later(c, arg, err, sizeof(err)) == 0)
		return;
	if ((doc = row->now != NULL ? row->now(c, arg, err, sizeof(err)) :
	    NULL) == NULL) {
		client_error(c, MCCL_ERR_INVALID_ARGUMENT, IPC_CTL, err);
		return;
	}
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (text == NULL)
		client_error(c, MCCL_ERR_NO_MEMORY, IPC_CTL, "out of memory");
	else
		client_reply(c, text);
	free(text);
}
