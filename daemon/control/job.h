/*
 * job.h: what the parts of a job's handling in the main thread share
 * (job.c: its life and failure; form.c: its formation; jobctl.c: what
 * mcclctl sees).  Nothing outside control/ includes it.
 */
#ifndef MCCL_CONTROL_JOB_H
#define MCCL_CONTROL_JOB_H

#include <stdint.h>
#include <sys/time.h>
#include <sys/types.h>

struct job;
struct op;
struct peer_formed;
struct peer_join;
struct peer_join_fail;
struct peer_job_query;

extern const char *job_state_names[];

/* job.c */
void		 ms_to_tv(uint32_t, struct timeval *);
uint32_t	 coordinator_of(uid_t, const char *);
struct job	*job_find_forming(uid_t, const char *);
struct job	*job_find_id(uint64_t);
void		 job_watch_start(void);
void		 job_fail(struct job *, int, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
void		 job_free(struct job *);
void		 job_fail_op(struct job *, const struct op *, int,
		    const char *);
void		 job_engine_cb(int, short, void *);
void		 op_finish(struct op *, int, const char *);
int		 job_spans(const struct job *, uint32_t);

/* form.c */
void		 job_send_join(struct job *);
int		 coord_join(uint32_t, const struct peer_join *,
		    const uint8_t *, size_t);
int		 job_recv_formed(const struct peer_formed *, const uint8_t *,
		    size_t);
void		 job_recv_join_fail(const struct peer_join_fail *,
		    const char *);
void		 coord_node_down(uint32_t);

#define OP_SLOW_WINDOW	64	/* collectives: see struct job's op_slow_ns */

/* jobctl.c */
int		 job_blame(struct job *, struct op *);
void		 job_blame_cancel(struct job *);
void		 job_ctl_remember(const struct job *);
void		 job_recv_query(uint32_t, const struct peer_job_query *);
int		 job_recv_info(uint32_t, const struct peer_job_query *,
		    const uint8_t *, size_t);

#endif
