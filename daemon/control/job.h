/*
 * job.h: what the parts of a job's handling in the main thread share
 * (job.c: its life and failure; form.c: its formation; jobctl.c: what
 * mcclctl sees).  Nothing outside control/ includes it.
 */
#ifndef MCCL_CONTROL_JOB_H
#define MCCL_CONTROL_JOB_H

#include <sys/queue.h>
#include <sys/time.h>
#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "engine/engine.h"

enum job_state { JOB_FORMING, JOB_LINKING, JOB_READY, JOB_FAILED };

/*
 * A job on this node, as the main thread keeps it: its formation, its
 * local ranks' connections, its failure, and what mcclctl shows of its
 * operations.  What its threads read is comm, filled in by formation
 * (form.c) before the engine starts.
 */
struct job {
	TAILQ_ENTRY(job) entry;
	struct comm	 comm;		/* id, name, ranks, nodes, settings,
					   the data plane's state */
	enum job_state	 state;
	uint32_t	 timeout_ms;	/* formation */
	struct event	*ev_timeout;
	struct client	**clients;	/* by rank; NULL if not on this node */
	uint32_t	 nleft;		/* local ranks that have gone */
	uint32_t	 coordinator;	/* cluster node index */

	/* operations */
	uint64_t	 ops_completed;
	uint64_t	 op_slow_ns[2];	/* the slowest collective of the last
					   64, and of the 64 before (main
					   thread: mcclctl's "behind") */
	uint32_t	 op_slow_n;	/* collectives in this window */
	uint64_t	 wire_ops;	/* collectives on a 16-bit wire, */
	uint64_t	 wire_saved;	/* and the bytes it did not send */

	/* its failure */
	int		 code;		/* once failed */
	char		 err[ERR_MAX];
	time_t		 failed_at;
	uint64_t	 fail_seq;	/* the op that failed it here, if one */
	uint8_t		 fail_coll;	/* did (0: none) */
	int		 fail_told;	/* the ranks have IPC_JOB_FAILED */

	/* its end */
	int		 dying;		/* job_free: waiting for its threads */
	int		 stuck;		/* a thread of it is stuck in a client's
					   memory: the exit does not wait */
};

/* The job that holds a comm (an op's, say). */
static inline struct job *
job_of(struct comm *cm)
{
	return (struct job *)(void *)((char *)cm - offsetof(struct job, comm));
}

TAILQ_HEAD(job_list, job);
extern struct job_list jobs;		/* job.c: this node's */

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
uint32_t	 job_lanes_max(void);
void		 job_data_link(int, const struct peer_data_hello *);
struct check_peer;
void		 check_peer_of(uint32_t, struct check_peer *);
int		 coord_count(void);
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
