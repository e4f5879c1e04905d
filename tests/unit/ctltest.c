/*
 * ctltest.c: control/ set up for a unit test (ctltest.h).
 */
#include <stdio.h>

#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "ctltest.h"

int	ctltest_status_changes;	/* control_status_changed's calls */

static void
status_changed(void)
{
	ctltest_status_changes++;
}

static json_t *
no_reload(char *err, size_t errlen)
{
	snprintf(err, errlen, "no reload in a unit test");
	return NULL;
}

static int
drop_send(struct client *c, uint16_t type, const void *msg,
    const void *trailer, size_t tlen)
{
	(void)c; (void)type; (void)msg; (void)trailer; (void)tlen;
	return 0;
}

static int
drop_reply(struct client *c, const char *text)
{
	(void)c; (void)text;
	return 0;
}

static void
drop_error(struct client *c, uint32_t code, uint16_t type, const char *text)
{
	(void)c; (void)code; (void)type; (void)text;
}

static void
drop_op_done(struct client *c, const struct op *op, uint64_t seq, int code,
    const char *text)
{
	(void)c; (void)op; (void)seq; (void)code; (void)text;
}

static int
sees_all(const struct client *c, uid_t uid)
{
	(void)c; (void)uid;
	return 1;
}

static void
drop_event(const char *event, const uid_t *owner, json_t *fields)
{
	(void)event; (void)owner;
	json_decref(fields);
}

/* control_init on a loop of the test's own, with the port given or none. */
void
ctltest_init(const struct config *settings, const struct client_port *port)
{
	static const struct client_port drop = { drop_send, drop_reply,
	    drop_error, drop_op_done, sees_all, drop_event };

	ctltest_status_changes = 0;
	control_init(event_base_new(), settings, &(struct control_hooks){
	    status_changed, no_reload });
	client_port_set(port != NULL ? port : &drop);
}

void
ctltest_end(void)
{
	event_base_free(ctl_base);
}
