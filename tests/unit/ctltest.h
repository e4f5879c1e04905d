/*
 * ctltest.h: control/ set up for a unit test (ctltest.c): a loop of its
 * own, the test's settings, the process's hooks doing nothing, and the
 * clients' port the test gives, or one that drops what it is given.
 */
#ifndef MCCL_CTLTEST_H
#define MCCL_CTLTEST_H

struct config;
struct client_port;

extern int ctltest_status_changes;	/* the process told, so far */

void	 ctltest_init(const struct config *, const struct client_port *);
void	 ctltest_end(void);

#endif
