/*
 * crew.c: a job's helper threads, so that one operation can use several
 * cores: the lanes of a large allreduce (allreduce.c), a large one-node
 * reduction (engine.c).  The caller runs part 0 itself; parts 1..n-1 go to
 * threads that are started on first need and then sleep between tasks, so
 * a task costs a wake-up, not a thread's creation.  A part that fails can
 * stop the others: crew_stop sets a flag they test as they go and makes
 * crew_stop_fd readable for those asleep in poll.  crew_start runs every
 * part on the crew's threads and returns at once; crew_wait waits for them
 * (a node's memory passes beside the network, engine.c).
 */
#include <sys/eventfd.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/crew.h"

struct crew {
	pthread_mutex_t	 mtx;
	pthread_cond_t	 work;		/* a new task, or quit */
	pthread_cond_t	 done;		/* a part of the task ended */
	pthread_t	 th[CREW_MAX];
	unsigned	 nth;		/* threads started */
	uint64_t	 task;		/* number of the current task */
	unsigned	 nparts;	/* of the current task */
	unsigned	 running;	/* its parts on threads, not yet ended */
	void		(*fn)(void *, unsigned);
	void		*arg;
	void		(*async_fn)(void *, unsigned);	/* crew_start's */
	void		*async_arg;
	int		 quit;
	int		 stopped;	/* crew_stop, this task (atomic) */
	int		 stop_fd;	/* eventfd, readable once stopped */
};

struct crew_seat {
	struct crew	*c;
	unsigned	 part;		/* the part this thread runs, >= 1 */
	uint64_t	 seen;		/* the last task before it started */
};

static void *
crew_main(void *arg)
{
	struct crew_seat *seat = arg;
	struct crew *c = seat->c;
	unsigned part = seat->part;
	uint64_t seen = seat->seen;

	free(seat);
	pthread_mutex_lock(&c->mtx);
	for (;;) {
		while (!c->quit && c->task == seen)
			pthread_cond_wait(&c->work, &c->mtx);
		if (c->quit)
			break;
		seen = c->task;
		if (part >= c->nparts)		/* a task without this part */
			continue;
		pthread_mutex_unlock(&c->mtx);
		c->fn(c->arg, part);
		pthread_mutex_lock(&c->mtx);
		if (--c->running == 0)
			pthread_cond_signal(&c->done);
	}
	pthread_mutex_unlock(&c->mtx);
	return NULL;
}

struct crew *
crew_new(void)
{
	struct crew *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	if ((c->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->mtx, NULL);
	pthread_cond_init(&c->work, NULL);
	pthread_cond_init(&c->done, NULL);
	return c;
}

void
crew_free(struct crew *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mtx);
	c->quit = 1;
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->mtx);
	for (unsigned i = 0; i < c->nth; i++)
		pthread_join(c->th[i], NULL);
	pthread_mutex_destroy(&c->mtx);
	pthread_cond_destroy(&c->work);
	pthread_cond_destroy(&c->done);
	close(c->stop_fd);
	free(c);
}

/* Threads for parts 1..n-1; under mtx.  0: had them all; -1: not. */
static int
crew_staff(struct crew *c, unsigned n)
{
	struct crew_seat *seat;

	while (c->nth + 1 < n) {
		if ((seat = malloc(sizeof(*seat))) == NULL)
			return -1;
		*seat = (struct crew_seat){ c, c->nth + 1, c->task };
		if (pthread_create(&c->th[c->nth], NULL, crew_main, seat) != 0) {
			free(seat);
			return -1;
		}
		c->nth++;
	}
	return 0;
}

/* Hand parts 1..n-1 of fn to the threads; -1: too few threads. */
static int
crew_post(struct crew *c, unsigned n, void (*fn)(void *, unsigned), void *arg)
{
	uint64_t drain;

	pthread_mutex_lock(&c->mtx);
	if (crew_staff(c, n) == -1) {
		pthread_mutex_unlock(&c->mtx);
		return -1;
	}
	__atomic_store_n(&c->stopped, 0, __ATOMIC_RELAXED);
	while (read(c->stop_fd, &drain, sizeof(drain)) == -1 && errno == EINTR)
		;
	c->fn = fn;
	c->arg = arg;
	c->nparts = n;
	c->running = n - 1;
	c->task++;
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->mtx);
	return 0;
}

void
crew_wait(struct crew *c)
{
	pthread_mutex_lock(&c->mtx);
	while (c->running > 0)
		pthread_cond_wait(&c->done, &c->mtx);
	pthread_mutex_unlock(&c->mtx);
}

int
crew_run(struct crew *c, unsigned n, void (*fn)(void *, unsigned), void *arg)
{
	if (c == NULL || n == 0 || n > CREW_MAX + 1 ||
	    crew_post(c, n, fn, arg) == -1)
		return -1;
	fn(arg, 0);
	crew_wait(c);
	return 0;
}

/* crew_start's task: thread k runs the caller's part k - 1. */
static void
crew_async(void *arg, unsigned part)
{
	struct crew *c = arg;

	c->async_fn(c->async_arg, part - 1);
}

int
crew_start(struct crew *c, unsigned n, void (*fn)(void *, unsigned),
    void *arg)
{
	if (c == NULL || n == 0 || n > CREW_MAX)
		return -1;
	c->async_fn = fn;
	c->async_arg = arg;
	return crew_post(c, n + 1, crew_async, c);
}

void
crew_stop(struct crew *c)
{
	uint64_t one = 1;

	if (__atomic_exchange_n(&c->stopped, 1, __ATOMIC_RELEASE) == 0)
		while (write(c->stop_fd, &one, sizeof(one)) == -1 &&
		    errno == EINTR)
			;
}

int
crew_stopped(const struct crew *c)
{
	return __atomic_load_n(&c->stopped, __ATOMIC_ACQUIRE);
}

int
crew_stop_fd(const struct crew *c)
{
	return c->stop_fd;
}

/* Threads started so far, besides the caller's. */
unsigned
crew_size(struct crew *c)
{
	unsigned n;

	pthread_mutex_lock(&c->mtx);
	n = c->nth;
	pthread_mutex_unlock(&c->mtx);
	return n;
}
