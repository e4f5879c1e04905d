/*
 * budget.h: memory the daemon holds for its users, counted per uid and in
 * all against two configured limits, for any thread (budget.c).  p2p.c
 * counts the messages it keeps for receives not yet posted; the engines
 * count their scratch buffers (struct scratch), which they give back when
 * their job is idle.
 */
#ifndef MCCL_BUDGET_H
#define MCCL_BUDGET_H

#include <sys/queue.h>
#include <sys/types.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct budget_uid {
	TAILQ_ENTRY(budget_uid) entry;
	uid_t		 uid;
	uint64_t	 bytes;
};

struct budget {
	const char	*what;		/* "messages not yet received" */
	const char	*uid_key;	/* the settings that bound it */
	const char	*total_key;
	pthread_mutex_t	 mtx;
	TAILQ_HEAD(, budget_uid) uids;	/* those holding bytes */
	uint64_t	 total;
	uint64_t	 uid_max, total_max;
};

#define BUDGET_INIT(b, what, uid_key, total_key) { (what), (uid_key), \
	(total_key), PTHREAD_MUTEX_INITIALIZER, \
	TAILQ_HEAD_INITIALIZER((b).uids), 0, UINT64_MAX, UINT64_MAX }

void	 budget_limits(struct budget *, uint64_t, uint64_t);
int	 budget_take(struct budget *, uid_t, uint64_t, const char *, char *,
	    size_t);
void	 budget_give(struct budget *, uid_t, uint64_t);
uint64_t budget_held(struct budget *, uid_t);

/* A buffer an engine keeps between operations, within its budget. */
struct scratch {
	uint8_t		*buf;
	size_t		 len;
	uid_t		 uid;
	const char	*node;		/* for errors */
};

extern struct budget	scratch_budget;

void	*scratch_get(struct scratch *, size_t, char *, size_t);
void	 scratch_release(struct scratch *);

#endif
