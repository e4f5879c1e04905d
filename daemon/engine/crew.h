/*
 * crew.h: a job's helper threads (crew.c), which run one task's parts at
 * once beside the engine thread that starts them.
 */
#ifndef MCCL_CREW_H
#define MCCL_CREW_H

#define CREW_MAX	7		/* threads besides the caller */
struct crew;
struct crew	*crew_new(void);
void		 crew_free(struct crew *);
int		 crew_start(struct crew *, unsigned,
		    void (*)(void *, unsigned), void *);
void		 crew_wait(struct crew *);
int		 crew_run(struct crew *, unsigned, void (*)(void *, unsigned),
		    void *);
void		 crew_stop(struct crew *);
int		 crew_stopped(const struct crew *);
int		 crew_stop_fd(const struct crew *);
unsigned	 crew_size(struct crew *);

#endif
