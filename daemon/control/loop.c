/*
 * loop.c: what the control plane runs on, given by the process once
 * before its loop starts (control_init): the main thread's event base, the
 * settings (the process keeps them; a reload changes them in place,
 * between events), and the process's calls control/ makes, as hooks.  The
 * bottom of control/: every other file of it may use this one.
 */
#include <event2/event.h>

#include "mccld.h"
#include "control/control.h"

const struct config	*conf;
struct event_base	*ctl_base;
uint64_t		 ctl_started_ns;
int			 ctl_stopping;
static struct control_hooks hooks;
static struct client_port port;	/* control.c's, from control_listen */

/*
 * Before anything else of control/: the loop it runs on, the settings it
 * reads (the process's own, which a reload changes in place between
 * events) and the process's calls it makes (hooks).
 */
void
control_init(struct event_base *base, const struct config *c,
    const struct control_hooks *h)
{
	ctl_base = base;
	conf = c;
	hooks = *h;
	ctl_started_ns = now_ns();
}

/* What the daemon does changed (peers, jobs, clients): say so above. */
void
control_status_changed(void)
{
	hooks.status_changed();
}

/* mcclctl reload: the process re-reads its settings. */
json_t *
control_reload(char *err, size_t errlen)
{
	return hooks.reload(err, errlen);
}

/*
 * The clients, as the parts of control/ below control.c reach them: by
 * the port control.c gives (control_listen), or a test's.
 */
void
client_port_set(const struct client_port *p)
{
	port = *p;
}

int
client_send(struct client *c, uint16_t type, const void *msg,
    const void *trailer, size_t tlen)
{
	return port.send(c, type, msg, trailer, tlen);
}

int
client_reply(struct client *c, const char *text)
{
	return port.reply(c, text);
}

void
client_error(struct client *c, uint32_t code, uint16_t request,
    const char *text)
{
	port.error(c, code, request, text);
}

void
client_op_done(struct client *c, const struct op *op, uint64_t seq, int code,
    const char *text)
{
	port.op_done(c, op, seq, code, text);
}

int
client_sees(const struct client *c, uid_t uid)
{
	return port.sees(c, uid);
}

void
monitor_event(const char *event, const uid_t *owner, json_t *fields)
{
	port.event(event, owner, fields);
}

static void
listener_resume_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	event_add(arg, NULL);
}

/*
 * accept() failed for want of descriptors: stop listening for a moment
 * rather than spin on a listener that stays readable, and say so once.
 */
void
listener_pause(struct event *ev, const char *what)
{
	struct timeval tv = { 0, 100000 };

	log_warn("%s: accept; pausing for 100 ms", what);
	event_del(ev);
	event_base_once(ctl_base, -1, EV_TIMEOUT, listener_resume_cb, ev, &tv);
}
