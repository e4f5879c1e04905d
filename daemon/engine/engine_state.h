/*
 * engine_state.h: a job's engine, as the engine's own files (engine.c,
 * subq.c, p2p.c) share it.  Nothing outside engine/ includes it: the
 * control plane sees struct engine only through engine.h's calls
 * (tests/ops/layers.sh checks).  Threads: the engine thread owns what is
 * not marked; the main thread reaches the rest under mtx.
 */
#ifndef MCCL_ENGINE_STATE_H
#define MCCL_ENGINE_STATE_H

#include "engine/engine.h"

struct crew;
struct xfer;

struct subq {				/* a local rank's ring, by local index */
	struct seg	*bell;		/* the doorbell segment (a reference) */
	struct ipc_doorbell *db;	/* in it */
	struct segtab	*segs;		/* its connection's (a reference) */
	uint32_t	 rank;
	uint64_t	 tail;		/* descriptors taken (engine) */
	uint64_t	 last_seq;	/* of the last one (engine) */
	uint64_t	 completed;	/* descriptors whose op ended (atomic) */
	int		 left;		/* the rank has left the job (atomic) */
};

struct engine {
	pthread_t	 thread;
	int		 running;	/* the thread was started */
	pthread_mutex_t	 mtx;		/* guards what the main thread reaches */
	pthread_cond_t	 cond;
	int		 quit;
	int		 exited;	/* engine_main returned */
	int		 aborted;	/* written atomically: duplex.c reads it */
	int		 stopped;	/* aborted, it ended its last op */
	int		 abort_fd;	/* eventfd: wakes the engine out of poll */
	uint32_t	*wait_word;	/* the ring futex it sleeps on */
	uint32_t	 kicks;		/* bumped by engine_wake and engine_quit
					   (atomic): the sleeping engine's
					   signal from the main thread */
	struct engine_tunables tun;	/* the settings it runs by (engine
					   thread) */
	struct engine_tunables tun_next;	/* a reload's, under mtx, */
	int		 tun_pending;	/* for it to take between ops */

	/* the submission rings (subq.c) */
	struct subq	*sq;		/* each local rank's, by local index */
	uint64_t	 ncoll;		/* collectives assembled */
	uint64_t	 sq_since_ns;	/* an op has waited for ranks since */
	struct op	*ahead;		/* taken while the op before it ran,
					   the next to run (subq_take_ahead) */

	/* the completion queue: ops done, for the main thread */
	struct op_list	 out;
	int		 out_quiet;	/* it holds ops the main thread was
					   not woken for (engine_lazy) */
	struct op	*current;	/* running now (engine_current) */

	/* the data links */
	int		*fds;		/* lane k's link from position p at
					   [k * nnodes + p], handed over by
					   the main thread (p < me) */
	struct link	**links;	/* the links, alike (engine thread) */
	int		 registers;	/* a link sends from registered memory */
	int		 link_state;	/* 0 pending, 1 up, -1 failed */
	int		 links_reported;	/* engine_collect told it */
	int		 link_code;
	char		 link_err[ERR_MAX];

	struct scratch	 tmp;		/* the node buffer: grown, given back
					   when idle (budget.h) */
	struct scratch	 tmp_alt;	/* the second, for an allreduce in the
					   ranks' own memory taken ahead while
					   another such op holds tmp, or the
					   reverse (op->alt_buf) */
	struct crew	*crew;		/* threads that run a large op's
					   parts beside this one (crew.c) */
	struct crew	*side;		/* a node's memory passes beside the
					   network (coll_segments) */
	void		(*op_ended)(struct comm *, struct op *);
					/* engine.c's end of an op, for one
					   that ends on the side crew */
};

/* an op on this node (coll.c), the one before it ended (pipeline.c), the
   node buffer given back (local.c): coll.h has the layers */
struct link_setup;
void		engine_link_setup(const struct comm *, uint32_t, int,
		    struct link_setup *);
int		coll_run(struct comm *, struct op *, struct xfer *);
void		coll_end_before(struct comm *, struct op *);
void		coll_tmp_release(struct comm *);

/* subq.c */
int		subq_attach(struct comm *, const struct engine_rank *, char *,
		    size_t);
void		subq_detach(struct comm *);
void		subq_sleep(struct comm *, uint32_t, uint64_t);
void		subq_wake(struct comm *);

#endif
